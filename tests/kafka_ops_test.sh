#!/usr/bin/env bash
# onceflow real with Kafka when the cluster is not what it should be, on librdkafka's mock
# cluster (onceflow kafka-mock, in a process of its own):
# - a source topic with more partitions than the spec names is refused (exit 2, both counts);
# - a data directory run against a new, empty cluster is refused (exit 2), never waited on;
# - a Kafka source's lag: ctl status --kafka asks the cluster for the topic's end, and a
#   running process's metrics gauge it;
# - brokers that go away: the progress line says so, the run stops (exit 2) after
#   --kafka-timeout, and once they are back a rerun resumes and verifies (nothing lost; on the
#   mock, the records of the transaction the outage aborted may be read twice);
# - librdkafka settings come from --kafka-config and the spec, and no secret (a password
#   setting, a user:password in the broker string) appears in any output.
# Usage: kafka_ops_test.sh ONCEFLOW SOURCE_DIR
set -euo pipefail
onceflow=$1
src=$2
spec="$src/scenarios/real/kafka_aggregation.yaml"
source "$(dirname "$0")/kafka_lib.sh"

# Starts a mock cluster with topics "$@"; sets $brokers and $mock.
mock() {
  local out="$work/mock-$RANDOM"
  "$onceflow" kafka-mock "${@/#/--topic=}" >"$out.out" 2>"$out.err" &
  mock=$!
  pids+=("$mock")
  for _ in $(seq 100); do [[ -s $out.out ]] && break; sleep 0.1; done
  brokers=$(head -1 "$out.out")
  [[ -n $brokers ]] || fail "kafka-mock printed no bootstrap servers: $(cat "$out.err")"
}
feed() {  # writes $1 records to topic events
  awk -v n="$1" 'BEGIN { for (i = 1; i <= n; i++) printf "%d:w%d\n", i % 97, i }' | "$kcat" -b "$brokers" -P -t events -K:
}
expect_exit() {  # expect_exit CODE NAME COMMAND...: runs it, output in $work/NAME.{out,err}
  local want=$1 name=$2
  shift 2
  local rc=0
  "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  [[ $rc -eq $want ]] || fail "$name: exit $rc, not $want: $(tail -c 600 "$work/$name.err") $(tail -c 1500 "$work/$name.out")"
}
# verified NAME COMMAND...: a --verify run of the 20,000 inputs fed in step 3: nothing lost,
# state equal to the reference. The verdict (exit 1) may fail on duplicates only: librdkafka
# 2.0's mock serves the records of a transaction an outage aborted to read_committed readers
# (docs/real.md); a broker hides them. Writes a note on them to $work/NAME.note.
verified() {
  local name=$1 rc=0
  shift
  "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  [[ $rc -eq 0 || $rc -eq 1 ]] || fail "$name: exit $rc: $(tail -c 600 "$work/$name.err")"
  python3 - "$work/$name.out" >"$work/$name.note" <<'PY' || fail "$name: $(cat "$work/$name.out")"
import json, sys
v = json.load(open(sys.argv[1]))
assert v["inputs"] == 20000 and v["lost"] == 0, v
assert all(c["verdict"] == "pass" for c in v["checks"] if c["name"] == "state"), v
assert v["verdict"] == "pass" or v["duplicates"] > 0, v
if v["duplicates"]:
    print(f" ({v['duplicates']} records of an aborted transaction, visible on the mock only)", end="")
PY
}

# 1. A source topic with more partitions than the spec names.
mock events:4 counts:2
expect_exit 2 partitions timeout 60 "$onceflow" real "$spec" --kafka "$brokers" --data "$work/p" --no-progress
grep -q "has 4 partitions" "$work/partitions.err" && grep -q "names 2" "$work/partitions.err" \
  || fail "partitions: $(cat "$work/partitions.err")"
echo "ok: partitions: $(grep onceflow: "$work/partitions.err")"
kill "$mock"

# 2. A data directory against a new, empty cluster.
mock events:2 counts:2
feed 5000
expect_exit 0 first timeout 120 "$onceflow" real "$spec" --kafka "$brokers" --data "$work/d" --no-progress --verify
# ctl status of the stopped run: a Kafka source's lag is the topic's end (the cluster's, with
# --kafka) less what committed epochs read; without --kafka, or when no broker answers, the
# status says why it is unknown.
feed 700
"$onceflow" ctl status "$spec" --data "$work/d" --kafka "$brokers" --json >"$work/lag.json" 2>"$work/lag.err" ||
  fail "ctl status --kafka: $(cat "$work/lag.err")"
python3 - "$work/lag.json" <<'PY' || fail "ctl status --kafka: $(cat "$work/lag.json")"
import json, sys
rows = [r for r in json.load(open(sys.argv[1]))["sources"] if r["source"] == "events"]
assert len(rows) == 2 and all(r["lag"] == r["written"] - r["read"] for r in rows), rows
assert sum(r["read"] for r in rows) == 5000 and sum(r["lag"] for r in rows) == 700, rows
PY
"$onceflow" ctl status "$spec" --data "$work/d" >"$work/nolag.out" 2>&1 || fail "ctl status: $(cat "$work/nolag.out")"
grep -q "source events partition 0: [0-9]* read (lag unknown: the topic's end is the cluster's: give --kafka BROKERS)" \
  "$work/nolag.out" || fail "ctl status without --kafka: $(cat "$work/nolag.out")"
"$onceflow" ctl status "$spec" --data "$work/d" --kafka 127.0.0.1:1 --json >"$work/gone.json" 2>"$work/gone.err" ||
  fail "ctl status with no broker: $(cat "$work/gone.err")"
python3 -c 'import json,sys; r=[r for r in json.load(open(sys.argv[1]))["sources"] if r["source"] == "events"]; assert all(x["lag_unknown"] and "lag" not in x for x in r), r' \
  "$work/gone.json" || fail "ctl status with no broker: $(cat "$work/gone.json")"
echo "ok: ctl status: lag $(python3 -c 'import json,sys; print([r["lag"] for r in json.load(open(sys.argv[1]))["sources"]])' "$work/lag.json") from the cluster; without it: $(grep -o 'lag unknown: [^)]*' "$work/nolag.out" | head -1)"
# The lag gauge of a running process: both partitions, down to 0 once it read the 700.
"$onceflow" real "$spec" --kafka "$brokers" --data "$work/d" --no-progress --metrics-port 0 --metrics-address 127.0.0.1 \
  >"$work/gauge.out" 2>"$work/gauge.err" &
run=$!
pids+=("$run")
for _ in $(seq 200); do grep -q "metrics at" "$work/gauge.err" && break; sleep 0.05; done
url=$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$work/gauge.err") || fail "no metrics address: $(cat "$work/gauge.err")"
lags=""
for _ in $(seq 150); do
  lags=$(curl -sf "$url" | grep '^onceflow_source_lag_messages{source="events"' || true)
  [[ $(wc -l <<<"$lags") -eq 2 && $(awk '{ s += $2 } END { print s }' <<<"$lags") == 0 ]] && break
  sleep 0.2
done
[[ $(wc -l <<<"$lags") -eq 2 && $(awk '{ s += $2 } END { print s }' <<<"$lags") == 0 ]] ||
  fail "the Kafka source's lag gauge: '$lags' $(tail -3 "$work/gauge.err")"
kill -TERM "$run"
for _ in $(seq 300); do kill -0 "$run" 2>/dev/null || break; sleep 0.1; done
wait "$run" || fail "SIGTERM: exit $? $(tail -3 "$work/gauge.err")"
echo "ok: metrics: $(tr '\n' ' ' <<<"$lags")"
kill "$mock"
mock events:2 counts:2
expect_exit 2 empty timeout 60 "$onceflow" real "$spec" --kafka "$brokers" --data "$work/d" --no-progress --verify
grep -q "not the cluster" "$work/empty.err" || fail "empty cluster: $(cat "$work/empty.err")"
echo "ok: empty cluster: $(grep onceflow: "$work/empty.err")"
kill "$mock"

# 3. Brokers that go away, and come back.
mock events:2 counts:2
feed 20000
"$onceflow" real "$spec" --kafka "$brokers" --data "$work/lost" --kafka-timeout 4s --progress-every 500ms \
  >"$work/lost.out" 2>"$work/lost.err" &
run=$!
pids+=("$run")
for _ in $(seq 100); do grep -q "delivered [1-9]" "$work/lost.err" && break; sleep 0.2; done
kill -USR1 "$mock"  # every broker down
rc=0
for _ in $(seq 300); do kill -0 "$run" 2>/dev/null || break; sleep 0.1; done
wait "$run" || rc=$?
[[ $rc -eq 2 ]] || fail "lost brokers: exit $rc, not 2: $(tail -5 "$work/lost.err")"
grep -q "kafka unreachable for" "$work/lost.err" || fail "the progress line never said the brokers were gone"
grep -q "no broker answered" "$work/lost.err" || fail "lost brokers: $(tail -3 "$work/lost.err")"
echo "ok: lost brokers: $(grep 'onceflow:' "$work/lost.err" | tail -1)"
kill -USR2 "$mock"  # back
verified back timeout 180 "$onceflow" real "$spec" --kafka "$brokers" --data "$work/lost" --no-progress --verify
echo "ok: back: the rerun resumed, nothing lost, state equal to the reference$(cat "$work/back.note")"

# 4. Settings, and secrets kept out of every message.
printf '# a comment\nclient.id = onceflow-ops-test\n' >"$work/good.properties"
verified settings timeout 120 "$onceflow" real "$spec" --kafka "$brokers" --data "$work/lost" \
  --kafka-config "$work/good.properties" --no-progress --verify
printf 'no.such.setting=1\n' >"$work/unknown.properties"
expect_exit 2 unknown "$onceflow" real "$spec" --kafka "$brokers" --data "$work/s1" --kafka-config "$work/unknown.properties"
grep -q "no.such.setting" "$work/unknown.err" || fail "an unknown setting: $(cat "$work/unknown.err")"
printf 'security.protocol=SASL_PLAINTEXT\nsasl.mechanisms=PLAIN\nsasl.username=alice\nsasl.password=Pw-in-a-file-7731\n' \
  >"$work/secret.properties"
expect_exit 2 secret timeout 60 "$onceflow" real "$spec" --kafka "alice:Pw-in-the-brokers-5521@$brokers" \
  --data "$work/s2" --kafka-config "$work/secret.properties" --kafka-timeout 3s --progress-every 200ms
cat >"$work/secret.yaml" <<EOF
$(cat "$spec")
kafka:
  ssl.key.password: Pw-in-the-spec-9090
EOF
expect_exit 2 bad_secret_setting timeout 60 "$onceflow" real "$work/secret.yaml" --kafka "$brokers" --data "$work/s3" --kafka-timeout 3s \
  --kafka-config "$work/secret.properties"
for leak in Pw-in-a-file-7731 Pw-in-the-brokers-5521 Pw-in-the-spec-9090; do
  if grep -l -- "$leak" "$work"/*.out "$work"/*.err; then fail "a secret ($leak) was printed"; fi
done
echo "ok: secrets: none printed ($(grep onceflow: "$work/secret.err" | tail -1))"
