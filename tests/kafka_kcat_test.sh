#!/usr/bin/env bash
# kcat (Debian) writes the input topic and reads the output topic of a running pipeline on
# librdkafka's mock cluster, which runs in its own process (onceflow kafka-mock); then the
# pipeline stops on SIGTERM and a --verify run finds every count exactly once.
# Usage: kafka_kcat_test.sh ONCEFLOW SOURCE_DIR
set -euo pipefail
onceflow=$1
src=$2
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
kcat=$(command -v kcat || command -v kafkacat || true)
if [[ -z $kcat ]]; then
  if [[ ${CI:-} == true ]]; then fail "kcat is not installed (tools/dev.sh deps installs it)"; fi
  echo "SKIP: kcat is not installed"; exit 77
fi

"$onceflow" kafka-mock --brokers 3 --topic events:2 --topic counts:2 >"$work/mock.out" 2>"$work/mock.err" &
pids+=($!)
for _ in $(seq 100); do [[ -s $work/mock.out ]] && break; sleep 0.1; done
brokers=$(head -1 "$work/mock.out")
[[ -n $brokers ]] || fail "kafka-mock printed no bootstrap servers: $(cat "$work/mock.err")"
echo "mock cluster at $brokers"

count() {  # records in the counts topic now
  timeout 20 "$kcat" -b "$brokers" -C -t counts -e -q -X isolation.level=read_committed | wc -l
}
wait_for() {  # wait_for N: until the counts topic holds N records
  for _ in $(seq 300); do
    [[ $(count) -ge $1 ]] && return 0
    sleep 0.2
  done
  fail "the counts topic has $(count) records, wanted $1"
}

for i in $(seq 1 200); do echo "$((i % 9)):first$i"; done | "$kcat" -b "$brokers" -P -t events -K:
"$onceflow" real "$src/scenarios/real/kafka_aggregation.yaml" --kafka "$brokers" --data "$work/data" \
  --no-progress >"$work/run.out" 2>"$work/run.err" &
run=$!
pids+=($run)
wait_for 200
echo "the running pipeline wrote 200 counts"
# The pipeline is running: kcat writes more input and reads the new output.
for i in $(seq 1 100); do echo "$((i % 9)):second$i"; done | "$kcat" -b "$brokers" -P -t events -K:
wait_for 300
"$kcat" -b "$brokers" -C -t counts -e -q -f '%k %s\n' -X isolation.level=read_committed >"$work/counts.txt"
grep -q '^3 key=3 count=' "$work/counts.txt" || fail "kcat read no count for key 3: $(head -3 "$work/counts.txt")"
kill -TERM "$run"
wait "$run" || fail "the pipeline did not stop cleanly on SIGTERM: $(cat "$work/run.err")"
grep -q "stopped on signal 15" "$work/run.err" || fail "no graceful stop message: $(cat "$work/run.err")"

"$onceflow" real "$src/scenarios/real/kafka_aggregation.yaml" --kafka "$brokers" --data "$work/data" --no-progress \
  --verify >"$work/verify.json" 2>"$work/verify.err" || fail "verify failed: $(cat "$work/verify.json" "$work/verify.err")"
grep -q '"verdict": "pass"' "$work/verify.json" || fail "not verified: $(cat "$work/verify.json")"
grep -q '"inputs": 300' "$work/verify.json" || fail "inputs: $(grep inputs "$work/verify.json")"
[[ $(count) -eq 300 ]] || fail "the counts topic has $(count) records after the rerun, wanted 300"
# --verify while kcat is still writing the input topic: it verifies what the sources' committed
# epochs read and counts the rest as not yet read, never as lost (it once said "lost 500").
(for i in $(seq 1 500); do echo "$((i % 9)):third$i"; sleep 0.004; done | "$kcat" -b "$brokers" -P -t events -K:) &
writer=$!
pids+=($writer)
sleep 0.3
"$onceflow" real "$src/scenarios/real/kafka_aggregation.yaml" --kafka "$brokers" --data "$work/data" --no-progress \
  --verify >"$work/growing.json" 2>"$work/growing.err" ||
  fail "verify of a growing topic failed: $(head -40 "$work/growing.json") $(tail -3 "$work/growing.err")"
wait "$writer"
grep -q '"verdict": "pass"' "$work/growing.json" || fail "growing topic not verified: $(head -40 "$work/growing.json")"
echo "ok: kcat wrote 300 inputs and read 300 counts, each exactly once; a growing topic verified up to what was read \
($(grep -o '"kafka_inputs_not_yet_read": [0-9]*' "$work/growing.json"))"
