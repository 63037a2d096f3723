#!/usr/bin/env bash
# onceflow real on a disk that stalls now and then (tests/slow_sync_preload.cc: every 100th
# synced write first waits 300 ms, longer than a call to a sink's target may take). An
# at-most-once sink's sends that get no answer in time are in doubt: the run counts them,
# never sends one twice, and ends (it once waited for them forever); an exactly-once
# pipeline resends what was not acknowledged and still verifies.
# Usage: real_slow_disk_test.sh ONCEFLOW SOURCE_DIR SLOW_SYNC_PRELOAD
set -euo pipefail
onceflow=$1
src=$2
preload=$3
[[ -f $preload ]] || { echo "FAIL: no preload library $preload"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export ONCEFLOW_SLOW_SYNC_EVERY=100 ONCEFLOW_SLOW_SYNC_MS=300
field() { python3 -c 'import json, sys; print(json.loads(sys.stdin.readline())[sys.argv[1]])' "$1" <"$work/$2.out"; }

# 1. The at-most-once sink: 4,000 messages, one synced append each, so about 40 stalls.
messages=4000
rc=0
LD_PRELOAD=$preload timeout 120 "$onceflow" real "$src/bench/pipelines/two_stage_at_most_once_sink.yaml" \
  --data "$work/amo" --messages "$messages" --no-progress --stats >"$work/amo.out" 2>"$work/amo.err" || rc=$?
[[ $rc -eq 0 ]] || fail "at most once: exit $rc (124: it never ended): $(tail -2 "$work/amo.err")"
[[ $(field drained amo) == True ]] || fail "at most once: the run did not drain: $(cat "$work/amo.out")"
in_doubt=$(field amo_in_doubt amo)
dropped=$(field amo_dropped amo)
delivered=$(field delivered amo)
# The stalls must have shown: else this test checked nothing.
((in_doubt > 0)) || fail "at most once: no send was in doubt, so the stalls never reached a send: $(cat "$work/amo.out")"
((delivered <= messages)) || fail "at most once: $delivered of $messages messages reached the target (a send went twice)"
((delivered + dropped + in_doubt >= messages)) ||
  fail "at most once: $delivered delivered, $dropped dropped, $in_doubt in doubt: some of $messages went uncounted"
echo "at most once: $delivered delivered, $dropped dropped, $in_doubt in doubt, of $messages"

# 2. Exactly once on the same disk: every output once, state as the reference's.
rc=0
LD_PRELOAD=$preload timeout 300 "$onceflow" real "$src/scenarios/real/keyed_aggregation.yaml" --data "$work/eo" \
  --messages 20000 --no-progress --verify >"$work/eo.out" 2>"$work/eo.err" || rc=$?
[[ $rc -eq 0 ]] || fail "exactly once: exit $rc: $(tail -3 "$work/eo.err") $(head -c 600 "$work/eo.out")"
echo "exactly once: verified"
echo "PASS"
