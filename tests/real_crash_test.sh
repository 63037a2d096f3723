#!/usr/bin/env bash
# onceflow real survives kill -9 and SIGTERM: a pipeline of scenarios/real/ with queue sources
# is killed with SIGKILL in the first 200 ms of a fresh data directory, then at random moments
# of later lives, then interrupted by two signals, then killed while a spec with other
# partition counts repartitions it, then killed again while finishing (once 90% of the
# outputs are in, repartitioned back), then stopped with SIGTERM, which drains the pipeline;
# each time it is restarted on the same --data. A last run with --verify
# must find no loss, no duplicate and state equal to the reference.
# Usage: real_crash_test.sh ONCEFLOW SOURCE_DIR SPEC [MESSAGES] [RANDOM_KILLS] [leveldb|postgresql]
# (SPEC relative to SOURCE_DIR; every input must give one output, as in the library's.) With
# postgresql, the store is a PostgreSQL server of the test's own (tests/pg_server.sh), and
# the server itself is restarted once mid-run (commits under way become ambiguous). The
# producer is paced (--rate 8000 a second) so that the kill moments fall inside a life however
# fast the engine has become.
set -euo pipefail
onceflow=$1
src=$2
spec="$src/$3"
messages=${4:-30000}
random_kills=${5:-4}
backend=${6:-leveldb}
work=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true
  [[ $backend == postgresql ]] && pg_stop "$work"
  rm -rf "$work"
}
trap cleanup EXIT
if [[ $backend == postgresql ]]; then
  source "$src/tests/pg_server.sh"
  pg_start "$work"
  store=(--store "$PG_CONNINFO password=secret123")  # trust ignores it; no output may show it
  resume="the same --store"
else
  store=(--data "$work/data")
  resume="--data"
fi
fail() { echo "FAIL: $*"; exit 1; }
RANDOM=$((42 + ${#spec}))  # random kill moments, but the same on every run of the test
life=0

# Starts a life in the background (with the spec $1, else the test's); its progress lines go
# to $work/life-N.log every 50 ms.
start() {
  life=$((life + 1))
  "$onceflow" real "${1:-$spec}" "${store[@]}" --messages "$messages" --rate 8000 --progress-every 50ms >"$work/life-$life.out" \
    2>"$work/life-$life.log" &
  pid=$!
}
alive() { kill -0 "$pid" 2>/dev/null; }
# The outputs in all lives, as the last progress line of this life says.
outputs() { grep -o 'outputs [0-9]*' "$work/life-$life.log" | tail -1 | awk '{ print $2 + 0 }'; }
# Waits until this life reports at least $1 outputs (fails after two minutes).
wait_for_outputs() {
  for _ in $(seq 2400); do
    [[ $(outputs) -ge $1 ]] && return
    alive || fail "life $life ended early: $(tail -3 "$work/life-$life.log")"
    sleep 0.05
  done
  fail "life $life did not reach $1 outputs in two minutes"
}
kill_now() {
  alive || fail "life $life ended before it could be killed: $(tail -3 "$work/life-$life.log")"
  kill -"$1" "$pid"
  local rc=0
  wait "$pid" 2>/dev/null || rc=$?
  pid=
  last_outputs=$(outputs || true)  # none before the first progress line
  last_outputs=${last_outputs:-0}
  echo "life $life: $1 at $last_outputs outputs (exit $rc)"
  last_rc=$rc
}

# 1: within the first 200 ms of a fresh directory.
start
sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.3f", 0.02 + (r % 180) / 1000 }')"
kill_now KILL
[[ $last_rc -eq 137 ]] || fail "the first life did not die of SIGKILL"

# 2..: at random moments of lives that are making progress.
for ((i = 1; i <= random_kills; i++)); do
  start
  wait_for_outputs $((messages * i / (2 * (random_kills + 2))))
  sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.3f", (r % 500) / 1000 }')"
  kill_now KILL
done

# The database restarted under a running life (postgresql only): its commits under way fail or
# become ambiguous, its transactions are lost; it goes on once the server is back.
if [[ $backend == postgresql ]]; then
  start
  wait_for_outputs $(( $(outputs) + messages / 20 ))
  pg_restart "$work"
  echo "life $life: the database restarted at $(outputs) outputs"
  wait_for_outputs $(( $(outputs) + messages / 20 ))
  kill_now KILL
fi

# Two signals: the second ends the run at once, before the drain the first began is done;
# exit 0, resumable.
start
wait_for_outputs $((messages * (random_kills + 1) / (2 * (random_kills + 2))))
kill -TERM "$pid"
sleep 0.05
kill_now INT
[[ $last_rc -eq 0 ]] || fail "a second signal did not end the run gracefully (exit $last_rc)"
grep -q "interrupted on signal 2 before the pipeline was stopped; run again with $resume" "$work/life-$life.log" ||
  fail "two signals: $(tail -2 "$work/life-$life.log")"

# Repartitioned: a life whose spec gives every computation 2N+1 partitions and every queue
# sink N+1 repartitions the running pipeline (a drain, the rows moved, the new layout
# stored) and is killed after more outputs; the lives after it, with the test's spec,
# repartition back.
respec="$work/repartitioned.yaml"
python3 - "$spec" "$respec" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
text = re.sub(r"(?m)^(    partitions: )(\d+)$", lambda m: m.group(1) + str(2 * int(m.group(2)) + 1), text)
text = re.sub(r"(?m)^(  \w+: \{type: (?:async|sync)_queue,.*partitions: )(\d+)", lambda m: m.group(1) + str(int(m.group(2)) + 1), text)
open(sys.argv[2], "w").write(text)
PY
cmp -s "$spec" "$respec" && fail "no partition count to change in $spec"
start "$respec"
wait_for_outputs $((messages * (random_kills + 3) / (2 * (random_kills + 3))))
grep -q "repartitioning .* partitions (a drain first)" "$work/life-$life.log" ||
  fail "the repartitioned spec did not repartition: $(head -3 "$work/life-$life.log")"
kill_now KILL

# SIGTERM: a graceful stop, a drain (the pipeline stops with nothing in flight), exit 0; the
# next run sets the pipeline working again.
start
wait_for_outputs 1
kill_now TERM
[[ $last_rc -eq 0 ]] || fail "SIGTERM did not stop the run gracefully (exit $last_rc)"
grep -q "stopped on signal 15, nothing in flight; run again with $resume" "$work/life-$life.log" ||
  fail "SIGTERM: the pipeline was not drained and stopped: $(tail -2 "$work/life-$life.log")"

# While finishing. The drain above takes in every input written before it, and when an earlier
# life had written them all, every output: then nothing is left to finish, and this life only
# sets the pipeline working again and completes it (exit 0), before any kill could land.
# The life must end by itself with exit 0: $1 names the moment in the failure, $2 is said if so.
ends_clean() {
  local rc=0
  wait "$pid" 2>/dev/null || rc=$?
  pid=
  [[ $rc -eq 0 ]] || fail "life $life, $1, exited $rc: $(tail -3 "$work/life-$life.log")"
  echo "life $life: $2"
}
start
if [[ $last_outputs -lt $messages ]]; then
  wait_for_outputs $((messages * 8 / 10))
  sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.3f", (r % 100) / 1000 }')"
  if alive; then
    kill_now KILL
  else
    # The last fifth can take less than the pause before the kill (here 10,000 outputs in
    # 30 ms): then the life completed first, which must be a clean exit with every output.
    ends_clean "finishing, before the kill" "completed (exit 0) before the kill landed"
  fi
else
  ends_clean "with every output in" "nothing left to finish, completed (exit 0)"
fi

"$onceflow" real "$spec" "${store[@]}" --messages "$messages" --no-progress --verify >"$work/verify.json" \
  2>"$work/verify.log" || fail "the final run failed: $(cat "$work/verify.json" "$work/verify.log")"
python3 - "$work/verify.json" "$messages" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
want = int(sys.argv[2])
assert v["verdict"] == "pass", v
assert v["inputs"] == want, f"inputs {v['inputs']} != {want}"
assert v["duplicates"] == 0 and v["lost"] == 0, v
assert v["outputs"] == want, f"outputs {v['outputs']} != {want}"
for check in v["checks"]:  # timers, assertions: n/a for a pipeline without them
    assert check["verdict"] == "pass" or (check["name"] in ("timers", "assertions") and check["verdict"] == "n/a"), check
print(f"ok: {want} inputs, {v['outputs']} outputs, no duplicates, no loss, state equal to the reference")
PY
# A store made for one pipeline refuses another (postgresql: the same database).
if [[ $backend == postgresql ]]; then
  other="$src/scenarios/real/keyed_aggregation.yaml"
  [[ $other -ef $spec ]] && other="$src/scenarios/real/retryable_request.yaml"
  rc=0
  "$onceflow" real "$other" "${store[@]}" --messages 10 --no-progress >"$work/other.out" 2>"$work/other.err" || rc=$?
  [[ $rc -eq 2 && $(wc -l <"$work/other.err") -eq 1 ]] && grep -q "was made for pipeline" "$work/other.err" ||
    fail "another pipeline on the same database: exit $rc: $(cat "$work/other.err")"
  grep -q "secret123" "$work"/life-*.log "$work/other.err" && fail "an output shows the password"
  echo "ok: another pipeline's spec is refused: $(cat "$work/other.err")"
fi
