#!/usr/bin/env bash
# onceflow real's http sink against a real HTTP receiver (tests/http_receiver.py), under kill -9
# and resume, with a receiver that answers 503 to every 7th request:
# 1. a receiver that keeps one request per Idempotency-Key holds every output exactly once:
#    one line per expected output, each key's counts complete (1..n), none twice, although
#    the kills made the sink send some again (the receiver saw repeats);
# 2. one that keeps every request holds every output at least once: duplicates only (each a
#    repeat of the same id with the same body), never a loss;
# 3. a receiver that refuses (400) stops the run with exit 2, naming the message; the outbox
#    keeps it, and a run against a receiver that takes it delivers everything;
# 4. no receiver at all: the run stops (exit 2, one line) after --sink-timeout, and the next
#    run, with a receiver back, delivers everything.
# Usage: real_http_sink_test.sh ONCEFLOW SOURCE_DIR [MESSAGES]
set -euo pipefail
onceflow=$1
src=$2
messages=${3:-6000}
work=$(mktemp -d)
pid=
receiver=
cleanup() {
  [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true
  [[ -n $receiver ]] && kill "$receiver" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
source "$src/tests/real_lives.sh"
fail() { echo "FAIL: $*"; exit 1; }
RANDOM=7

# start_receiver NAME [flags]: a receiver logging to $work/NAME.log; sets $spec to a copy of
# the library's spec that posts to it.
start_receiver() {
  local name=$1
  shift
  [[ -n $receiver ]] && kill "$receiver" 2>/dev/null && wait "$receiver" 2>/dev/null || true
  rm -f "$work/port"
  python3 "$src/tests/http_receiver.py" "$work/port" "$work/$name.log" "$@" &
  receiver=$!
  for _ in $(seq 100); do [[ -s $work/port ]] && break; sleep 0.05; done
  [[ -s $work/port ]] || fail "the receiver did not start"
  spec="$work/$name.yaml"
  sed "s#http://127.0.0.1:8088/counts#http://127.0.0.1:$(cat "$work/port")/counts#" \
    "$src/scenarios/real/http_delivery.yaml" >"$spec"
  grep -q "127.0.0.1:$(cat "$work/port")" "$spec" || fail "the spec's url was not replaced"
}
received() {
  local n
  n=$(grep -c '"kept": true' "$1" 2>/dev/null) || true
  echo "${n:-0}"
}

# check LOG exactly|at_least: what the receiver holds against what the run's history expects.
check() {
  python3 - "$1" "$2" "$work/verify.json" "$messages" <<'PY'
import collections, json, re, sys
log, mode, verify, messages = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3])), int(sys.argv[4])
assert verify["verdict"] == "pass", verify
sink = verify["sinks"]["counts_out"]
assert sink["verdict"] == "n/a" and sink["expected"] == messages, sink
requests = [json.loads(l) for l in open(log)]
lines = [r for r in requests if r["kept"]]
repeats = len(requests) - len(lines)
by_id = collections.defaultdict(list)
for l in lines:
    assert re.fullmatch(r"[0-9a-f]{16}", l["id"]), l
    by_id[l["id"]].append(l)
assert len(by_id) == messages, f"{len(by_id)} distinct ids held, {messages} expected: lost {messages - len(by_id)}"
for i, same in by_id.items():
    assert all(s["body"] == same[0]["body"] and s["key"] == same[0]["key"] for s in same), f"id {i} with two bodies: {same}"
counts = collections.defaultdict(set)
for i, same in by_id.items():
    m = re.fullmatch(r"key=(\d+) count=(\d+)", same[0]["body"])
    assert m and m.group(1) == same[0]["key"], same[0]
    counts[int(m.group(1))].add(int(m.group(2)))
for k, got in counts.items():
    assert got == set(range(1, len(got) + 1)), f"key {k}: counts {sorted(got)[:10]}... have gaps"
dup = len(lines) - len(by_id)
if mode == "exactly":
    assert dup == 0, f"{dup} duplicates at a receiver that keeps one per Idempotency-Key"
print(f"ok: {len(requests)} requests, {len(lines)} kept, {repeats} repeats dropped by their Idempotency-Key, "
      f"{len(by_id)} distinct outputs of {messages}, {dup} duplicates, none lost")
PY
}

echo "1. a receiver that honours Idempotency-Key, kill -9 three times"
start_receiver dedup --dedup --fail-every 7
lives "$spec" "$work/data1" 3 "received $work/dedup.log" 6000
check "$work/dedup.log" exactly
grep -q '"kept": false' "$work/dedup.log" || fail "no request was sent twice: the kills had no effect to check"

echo "2. a receiver that keeps every request, kill -9 three times"
start_receiver all --fail-every 7
lives "$spec" "$work/data2" 3 "received $work/all.log" 6000
check "$work/all.log" at_least

echo "3. a receiver that refuses"
start_receiver refused --refuse
rc=0
"$onceflow" real "$spec" --data "$work/data3" --messages 50 --no-progress >"$work/refused.out" 2>"$work/refused.err" || rc=$?
[[ $rc -eq 2 ]] || fail "a refusing receiver: exit $rc: $(cat "$work/refused.err")"
grep -q "refuses message [0-9a-f]\{16\} (key [0-9]*, \"key=[0-9]* count=1\") (answered 400: bad payload); the sink stops rather than skip it" \
  "$work/refused.err" || fail "the refusal is not named: $(cat "$work/refused.err")"
echo "ok: $(tail -1 "$work/refused.err")"
start_receiver after --dedup
messages=50
"$onceflow" real "$spec" --data "$work/data3" --messages 50 --no-progress --verify >"$work/verify.json" 2>"$work/verify.err" ||
  fail "the run after the refusal failed: $(cat "$work/verify.err")"
check "$work/after.log" exactly

echo "4. no receiver: the run stops after --sink-timeout, and resumes once one answers"
kill "$receiver" 2>/dev/null && wait "$receiver" 2>/dev/null || true
receiver=
rc=0
"$onceflow" real "$spec" --data "$work/data5" --messages 20 --no-progress --sink-timeout 2s >/dev/null 2>"$work/down.err" || rc=$?
[[ $rc -eq 2 && $(wc -l <"$work/down.err") -eq 1 ]] &&
  grep -q "sink counts_out: http://127.0.0.1:[0-9]*/counts has not answered for 2 s (could not connect); the store is consistent: run again with --data .* once it is back"     "$work/down.err" || fail "no receiver: exit $rc: $(cat "$work/down.err")"
echo "ok: $(cat "$work/down.err")"
start_receiver back --dedup
messages=20
"$onceflow" real "$spec" --data "$work/data5" --messages 20 --no-progress --verify >"$work/verify.json" 2>"$work/verify.err" ||
  fail "the run after the receiver came back failed: $(cat "$work/verify.err")"
check "$work/back.log" exactly

# A spec the real http sink cannot run is refused at load, naming the key.
bad="$work/bad.yaml"
sed 's#, url: "[^"]*"##' "$src/scenarios/real/http_delivery.yaml" >"$bad"
rc=0
"$onceflow" real "$bad" --data "$work/data4" --messages 10 --no-progress 2>"$work/bad.err" || rc=$?
[[ $rc -eq 2 ]] && grep -q "sinks.counts_out.url: an http sink needs the receiver's URL" "$work/bad.err" ||
  fail "a sink without url: exit $rc: $(cat "$work/bad.err")"
echo "ok: $(cat "$work/bad.err")"
