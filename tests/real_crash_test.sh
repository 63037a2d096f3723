#!/usr/bin/env bash
# onceflow real survives kill -9: the run is killed with SIGKILL at random moments (at least
# five times) while it processes 100,000 input messages, restarted on the same --data each
# time, and then --verify must report no loss and no duplicate in the LevelDB-backed sink and
# state. Usage: real_crash_test.sh ONCEFLOW SOURCE_DIR [MESSAGES] [KILLS]
set -euo pipefail
onceflow=$1
src=$2
messages=${3:-100000}
kills=${4:-5}
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
spec="$src/scenarios/real/keyed_aggregation.yaml"
fail() { echo "FAIL: $*"; exit 1; }

RANDOM=42  # the kill moments are random but the same on every run of the test
for ((i = 1; i <= kills; i++)); do
  "$onceflow" real "$spec" --data "$data" --messages "$messages" --no-progress >"$data/run-$i.log" 2>&1 &
  pid=$!
  # Between 1 s and 4 s into this life.
  sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 1 + (r % 3000) / 1000 }')"
  kill -0 "$pid" 2>/dev/null || fail "run $i ended before it could be killed: $(cat "$data/run-$i.log")"
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
  echo "killed run $i"
done

"$onceflow" real "$spec" --data "$data" --messages "$messages" --no-progress --verify >"$data/verify.json" \
  || fail "the final run failed: $(cat "$data/verify.json")"
cat "$data/verify.json"
python3 - "$data/verify.json" "$messages" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
want = int(sys.argv[2])
assert v["verdict"] == "pass", v
assert v["inputs"] == want, f"inputs {v['inputs']} != {want}"
assert v["duplicates"] == 0 and v["lost"] == 0, v
assert v["outputs"] == want, f"outputs {v['outputs']} != {want}"
print(f"ok: {want} inputs, {v['outputs']} outputs, no duplicates, no loss")
PY
