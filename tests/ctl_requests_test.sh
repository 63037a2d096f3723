#!/usr/bin/env bash
# onceflow ctl's requests to a running deployment, through its PostgreSQL store: two
# controllers' processes (one leads, one stands by) and three workers' run the keyed
# aggregation, paced (500 inputs a second of 100,000) so that it is still producing while the
# test operates it, however loaded the machine:
# 1. pause: the jobs end and the sources read nothing more; a repartition of a paused
#    pipeline is refused (exit 2, the controller's reason); resume: it works again;
# 2. repartition Counter=3 counts_out=3 while it runs: answered, drained, moved, working
#    again with the new counts (ctl status and the jobs say so); set epoch_period=50ms: a new
#    layout version, no drain; mistakes (an unknown name, an unknown setting, a count out of
#    range, a name twice, no argument) refused at once with one line, exit 2, nothing stored;
#    a count or setting already in force stores nothing and says so;
# 3. the leading controller is killed (kill -9): the standby takes over, and ctl stop is
#    applied by it; every process ends by itself ("stopped by an operator's request");
# 4. with no process running, a request is withdrawn after --timeout (exit 1) and ctl status
#    lists it nowhere as open;
# 5. a run started again resumes it (back to the spec's counts) and --verify finds every
#    input's output exactly once, state equal to the reference.
# 6. under load, a pipeline of its own in a database of its own: 16 jobs at 4,000 inputs a
#    second hold every connection its process may open (an eighth of the server's 40); a
#    repartition asked while it runs is taken and answered (a user's probe found it refused
#    as "the pipeline has no layout yet (it never started)": the operator's read of the
#    layout found every connection busy), and the run verifies.
# Usage: ctl_requests_test.sh ONCEFLOW SOURCE_DIR [MESSAGES]
set -euo pipefail
onceflow=$1
src=$2
messages=${3:-100000}
spec="$src/scenarios/real/keyed_aggregation.yaml"
work=$(mktemp -d)
declare -A pid
source "$src/tests/pg_server.sh"
cleanup() {
  for p in "${pid[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  pg_stop "$work"
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$work"/*.log; do
    echo "--- ${f##*/}"
    # what became of the operator's requests (a log with none must not end the dump: pipefail)
    { grep -E "request [0-9]+|gives back|still asks" "$f" || true; } | tail -n 12
    tail -n 3 "$f"
  done
  exit 1
}
pg_start "$work"
ctl() {
  local verb=$1
  shift
  "$onceflow" ctl "$verb" "$spec" "$@" --store "$PG_CONNINFO"
}
# status: ctl status --json into $work/status.json (while the processes start, ctl says their
# store is not made yet: it is asked again).
status() {
  for _ in $(seq 100); do
    ctl status --json --rates-over 0 >"$work/status.json" 2>"$work/status.err" && return
    grep -q "holds no onceflow store\|holds no store of a pipeline" "$work/status.err" || break
    sleep 0.1
  done
  fail "ctl status: $(cat "$work/status.err")"
}
# field EXPR: a Python expression over the status JSON `s`.
field() { python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print($1)" "$work/status.json"; }
# expect_refused RC PATTERN ARGS...: ctl ARGS exits RC with one line on stderr matching PATTERN.
expect_refused() {
  local want=$1 pattern=$2 rc=0
  shift 2
  ctl "$@" >"$work/out" 2>"$work/err" || rc=$?
  [[ $rc -eq $want && $(wc -l <"$work/err") -eq 1 ]] && grep -q "$pattern" "$work/err" ||
    fail "ctl $*: exit $rc, wanted $want and '$pattern': $(cat "$work/err" "$work/out")"
  echo "ok: ctl $* -> exit $rc: $(cat "$work/err")"
}

expect_refused 2 "holds no onceflow store" pause
start() {
  local opts=()
  [[ $2 == controller ]] && opts=(--messages "$messages" --rate 500)
  "$onceflow" real "$spec" --store "$PG_CONNINFO" --role "$2" --name "$1" "${opts[@]}" \
    --progress-every 200ms >"$work/$1.out" 2>"$work/$1.log" &
  pid[$1]=$!
}
for c in controller-1 controller-2; do start $c controller; done
for w in worker-1 worker-2 worker-3; do start $w worker; done
for _ in $(seq 300); do
  status
  [[ $(field 's["state"] == "working" and sum(x["read"] for x in s["sources"]) > 2000') == True ]] && break
  sleep 0.1
done
[[ $(field 's["state"]') == working ]] || fail "the pipeline did not start working"

# 1. pause, a refused repartition, resume.
ctl pause >"$work/out" 2>"$work/err" || fail "ctl pause: $(cat "$work/out" "$work/err")"
grep -q "^request [0-9]* 'pause': controller-[12] answered paused" "$work/out" || fail "ctl pause said: $(cat "$work/out")"
for _ in $(seq 200); do
  status
  [[ $(field 'all(j["worker"] is None for j in s["jobs"])') == True ]] && break
  sleep 0.1
done
[[ $(field 's["state"]') == paused ]] || fail "paused: the state is $(field 's["state"]')"
[[ $(field 'all(j["worker"] is None for j in s["jobs"])') == True ]] || fail "paused, jobs still assigned: $(field 's["jobs"]')"
read_before=$(field 'sum(x["read"] for x in s["sources"])')
sleep 1
status
[[ $(field 'sum(x["read"] for x in s["sources"])') -eq $read_before ]] || fail "paused, the sources went on reading"
echo "ok: paused: no job assigned, the sources at $read_before for a second"
expect_refused 2 "refused 'repartition Counter=3': the pipeline is paused" repartition Counter=3
ctl resume >"$work/out" 2>"$work/err" || fail "ctl resume: $(cat "$work/out" "$work/err")"
grep -q "answered working" "$work/out" || fail "ctl resume said: $(cat "$work/out")"
for _ in $(seq 200); do
  status
  [[ $(field 'sum(x["read"] for x in s["sources"])') -gt $read_before ]] && break
  sleep 0.1
done
[[ $(field 'sum(x["read"] for x in s["sources"])') -gt $read_before ]] || fail "resumed, the sources read nothing"
echo "ok: resumed: the sources read again"

# 2. repartition and set while it runs; mistakes refused at once.
version=$(field 's["layout_version"]')
ctl repartition Counter=3 counts_out=3 >"$work/out" 2>"$work/err" || fail "ctl repartition: $(cat "$work/out" "$work/err")"
grep -q "^repartitioned: layout version [0-9]*, Counter=3 counts_out=3; the pipeline is working, 8 of 8 jobs running" "$work/out" ||
  fail "ctl repartition said: $(cat "$work/out")"
status
[[ $(field 's["partitions"]["Counter"], s["partitions"]["counts_out"], s["layout_version"] > '"$version") == "3 3 True" ]] ||
  fail "repartitioned: $(field 's["partitions"], s["layout_version"]')"
for _ in $(seq 200); do
  status
  [[ $(field 'len([j for j in s["jobs"] if j["lease_state"] == "active"])') -eq 8 ]] && break
  sleep 0.1
done
[[ $(field 'len([j for j in s["jobs"] if j["lease_state"] == "active"])') -eq 8 ]] ||
  fail "after the repartition, not 8 jobs at work: $(field 's["jobs"]')"
echo "ok: $(tail -1 "$work/out"); 8 jobs at work"
version=$(field 's["layout_version"]')
ctl set epoch_period=50ms >"$work/out" 2>"$work/err" || fail "ctl set: $(cat "$work/out" "$work/err")"
grep -q "answered layout version $((version + 1))" "$work/out" || fail "ctl set said: $(cat "$work/out")"
echo "ok: $(cat "$work/out")"
status
[[ $(field 's["settings"]["epoch_period"]') == 50ms ]] || fail "ctl status shows the settings $(field 's["settings"]')"
status
requests=$(field 'max(r["id"] for r in s["requests"])')
expect_refused 2 "no computation or queue sink 'Nope'\|Nope" repartition Nope=3
expect_refused 2 "epoch_perod" set epoch_perod=50ms
expect_refused 2 "Counter" repartition Counter=0
expect_refused 2 "Counter is named twice" repartition Counter=4 Counter=5
for same in "repartition Counter=3" "set epoch_period=50ms"; do
  # shellcheck disable=SC2086
  ctl $same >"$work/out" 2>"$work/err" || fail "ctl $same: $(cat "$work/out" "$work/err")"
  grep -q "^nothing to change: ${same#* } in force already$" "$work/out" || fail "ctl $same said: $(cat "$work/out")"
done
echo "ok: a repartition and a setting already in force change nothing"
rc=0
ctl repartition >/dev/null 2>"$work/err" || rc=$?
[[ $rc -eq 2 ]] || fail "ctl repartition without NAME=COUNT: exit $rc"
status
[[ $(field 'max(r["id"] for r in s["requests"])') -eq $requests ]] || fail "a refused mistake was stored: $(field 's["requests"]')"

# 3. the leader killed; the standby takes over and applies the stop.
lead=$(field 's["leader"]["node"]')
[[ $lead == controller-[12] ]] || fail "no leader: $lead"
other=controller-1
[[ $lead == controller-1 ]] && other=controller-2
kill -9 "${pid[$lead]}"
wait "${pid[$lead]}" 2>/dev/null || true
unset "pid[$lead]"
ctl stop >"$work/out" 2>"$work/err" || fail "ctl stop: $(cat "$work/out" "$work/err")"
grep -q "'stop': $other answered draining" "$work/out" && grep -q "^stopped: nothing in flight" "$work/out" ||
  fail "ctl stop said: $(cat "$work/out")"
echo "ok: $lead killed; $(head -1 "$work/out"); $(tail -1 "$work/out")"
for name in "$other" worker-1 worker-2 worker-3; do
  for _ in $(seq 300); do kill -0 "${pid[$name]}" 2>/dev/null || break; sleep 0.1; done
  kill -0 "${pid[$name]}" 2>/dev/null && fail "$name did not end after the stop"
  rc=0
  wait "${pid[$name]}" || rc=$?
  [[ $rc -eq 0 ]] || fail "$name exited $rc"
  unset "pid[$name]"
done
grep -q "stopped by an operator's request" "$work/$other.log" || fail "$other: $(tail -1 "$work/$other.log")"
grep -q "the pipeline was stopped; this worker's process ends" "$work/worker-1.log" || fail "worker-1: $(tail -1 "$work/worker-1.log")"
status
[[ $(field 's["state"]') == stopped ]] || fail "after the stop: $(field 's["state"]')"
echo "ok: every process ended by itself"

# 4. nobody to answer.
expect_refused 1 "no controller took request [0-9]* ('pause') in 2s" pause --timeout 2s
status
[[ $(field '[r["id"] for r in s["requests"] if r["state"] in ("pending", "taken")]') == "[]" ]] ||
  fail "a withdrawn request is still open: $(field 's["requests"]')"

# 5. a run started again resumes it and verifies.
"$onceflow" real "$spec" --store "$PG_CONNINFO" --messages "$messages" --verify --no-progress >"$work/verify.json" \
  2>"$work/verify.log" || fail "the resumed run: $(tail -3 "$work/verify.log")"
[[ -s $work/verify.json ]] || fail "the resumed run ended without a verdict: $(tail -3 "$work/verify.log")"
python3 - "$work/verify.json" "$messages" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
assert v["verdict"] == "pass" and v["inputs"] == int(sys.argv[2]) and v["lost"] == 0 and v["duplicates"] == 0, v
print(f"ok: resumed and verified: {v['inputs']} inputs, {v['outputs']} outputs, no loss, no duplicate")
PY

# 6. a repartition under load.
loaded_spec="$work/loaded.yaml"
sed -e 's/^name: .*/name: loaded-aggregation/' -e 's/partitions: 2}$/partitions: 4}/' -e 's/^    partitions: 2$/    partitions: 8/' \
  "$spec" >"$loaded_spec"
grep -q "partitions: 8" "$loaded_spec" || fail "the loaded spec: $(cat "$loaded_spec")"
pg_as "$(pg_bin)/psql" "$PG_CONNINFO" -q -c "CREATE DATABASE loaded" || fail "CREATE DATABASE loaded"
# A server of 40 connections: the process may open 5, fewer than its jobs.
pg_as "$(pg_bin)/psql" "$PG_CONNINFO" -q -c "ALTER SYSTEM SET max_connections = 40" || fail "ALTER SYSTEM"
pg_restart "$work"
loaded="${PG_CONNINFO/dbname=postgres/dbname=loaded}"
"$onceflow" real "$loaded_spec" --store "$loaded" --messages 60000 --rate 4000 --verify --no-progress \
  >"$work/loaded.json" 2>"$work/loaded.log" &
pid[loaded]=$!
loaded_working=no
for _ in $(seq 300); do
  "$onceflow" ctl status "$loaded_spec" --store "$loaded" --json >"$work/loaded_status.json" 2>/dev/null &&
    [[ $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['state'])" "$work/loaded_status.json") == working ]] &&
    loaded_working=yes && break
  sleep 0.1
done
[[ $loaded_working == yes ]] || fail "the loaded pipeline never worked: $(tail -3 "$work/loaded.log")"
sleep 2  # its jobs at full speed
"$onceflow" ctl repartition "$loaded_spec" Counter=5 --store "$loaded" --no-wait >"$work/out" 2>"$work/err" ||
  fail "ctl repartition under load: $(cat "$work/out" "$work/err")"
grep -q "answered layout version 1" "$work/out" || fail "ctl repartition under load said: $(cat "$work/out")"
for _ in $(seq 1800); do kill -0 "${pid[loaded]}" 2>/dev/null || break; sleep 0.1; done
kill -0 "${pid[loaded]}" 2>/dev/null && fail "the loaded run did not end in 3 minutes: $(tail -3 "$work/loaded.log")"
rc=0
wait "${pid[loaded]}" || rc=$?
unset "pid[loaded]"
[[ $rc -eq 0 ]] || fail "the loaded run exited $rc: $(tail -3 "$work/loaded.log")"
python3 - "$work/loaded.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
assert v["verdict"] == "pass" and v["lost"] == 0 and v["duplicates"] == 0, v
print(f"ok: repartitioned under load and verified: {v['inputs']} inputs, {v['outputs']} outputs")
PY
