#!/usr/bin/env bash
# onceflow real --metrics-port: the metrics a running process serves are in Prometheus' text
# format (promtool check metrics), Debian's real Prometheus scrapes them while the pipeline
# runs, and they move as the run does: epochs committed, messages in and out, each queue
# source partition's lag, the commit latency histogram, the pipeline's state.
# Usage: real_metrics_test.sh ONCEFLOW SOURCE_DIR
set -euo pipefail
onceflow=$1
src=$2
work=$(mktemp -d)
pid=
prom=
cleanup() {
  [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true
  [[ -n $prom ]] && kill -9 "$prom" 2>/dev/null && wait "$prom" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v promtool >/dev/null && command -v prometheus >/dev/null || fail "prometheus is not installed (tools/dev.sh deps)"

"$onceflow" real "$src/scenarios/real/keyed_aggregation.yaml" --data "$work/data" --messages 2000000 --rate 20000 \
  --no-progress --metrics-port 0 --metrics-address 127.0.0.1 >"$work/run.out" 2>"$work/run.err" &
pid=$!
for _ in $(seq 200); do grep -q "metrics at" "$work/run.err" && break; sleep 0.05; done
url=$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$work/run.err") || fail "no metrics address: $(cat "$work/run.err")"
port=${url#http://127.0.0.1:}
port=${port%/metrics}
sleep 2
curl -sf "$url" >"$work/first.txt" || fail "GET $url failed"
promtool check metrics <"$work/first.txt" >"$work/promtool.txt" 2>&1 || fail "promtool: $(cat "$work/promtool.txt")"
echo "ok: promtool check metrics passes ($(grep -vc '^#' "$work/first.txt") samples)"

# A second process asking for the same port is refused: two pipelines' figures never share one.
rc=0
"$onceflow" real "$src/scenarios/real/keyed_aggregation.yaml" --data "$work/data2" --messages 10 --no-progress \
  --metrics-port "$port" --metrics-address 127.0.0.1 >/dev/null 2>"$work/taken.err" || rc=$?
[[ $rc -eq 2 ]] && grep -q "cannot listen on 127.0.0.1:$port" "$work/taken.err" || fail "a taken port: exit $rc: $(cat "$work/taken.err")"
echo "ok: $(cat "$work/taken.err")"

# Debian's Prometheus scrapes it every half second.
prom_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$work/prometheus.yml" <<YML
global: {scrape_interval: 500ms, evaluation_interval: 500ms}
scrape_configs:
  - job_name: onceflow
    static_configs: [{targets: ["127.0.0.1:$port"]}]
YML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" >"$work/prometheus.log" 2>&1 &
prom=$!
query() { curl -sf "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1"; }
for _ in $(seq 120); do
  [[ $(query 'up{job="onceflow"}' 2>/dev/null | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2>/dev/null) == 1 ]] && break
  kill -0 "$prom" 2>/dev/null || fail "prometheus ended: $(tail -3 "$work/prometheus.log")"
  sleep 0.25
done
sleep 3
for q in 'sum(rate(onceflow_sink_messages_total[2s]))' 'sum(onceflow_epochs_committed_total{kind="computation"})' \
         'count(onceflow_source_lag_messages{source="events"})' 'onceflow_pipeline_state{state="working"}' \
         'histogram_quantile(0.99, sum(rate(onceflow_epoch_commit_seconds_bucket[2s])) by (le))'; do
  value=$(query "$q" | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "none")')
  echo "prometheus: $q = $value"
  python3 -c "import sys; v=sys.argv[1]; sys.exit(0 if v not in ('none','NaN') and float(v) > 0 else 1)" "$value" ||
    fail "prometheus has no positive value for $q"
done
[[ $(query 'count(onceflow_source_lag_messages{source="events"})' | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["result"][0]["value"][1])') == 2 ]] ||
  fail "the lag is not reported per partition (2)"
# Series that exist from the first scrape: the version, each sink partition's undelivered
# outbox, and counters of what has not happened (yet), at 0.
value() { query "$1" | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "none")'; }
[[ $(value 'count(onceflow_build_info{version=~"[0-9]+[.][0-9]+[.][0-9]+"} == 1)') == 1 ]] || fail "no onceflow_build_info"
[[ $(value 'count(onceflow_sink_outbox_undelivered_messages{sink="counts_out"} >= 0)') == 2 ]] ||
  fail "the undelivered outbox is not reported per sink partition (2)"
[[ $(value 'count(onceflow_leases_lost_total)') == 3 && $(value 'count(onceflow_delivery_retries_total)') == 1 ]] ||
  fail "counters with no events yet are missing"
echo "prometheus: onceflow_build_info, onceflow_sink_outbox_undelivered_messages per partition, zero counters present"

# The counters move: messages in and out, epochs, and the Leases' renewals.
curl -sf "$url" >"$work/second.txt"
python3 - "$work/first.txt" "$work/second.txt" <<'PY'
import re, sys
def samples(path):
    out = {}
    for line in open(path):
        if line.startswith("#"): continue
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out
a, b = samples(sys.argv[1]), samples(sys.argv[2])
for name in ("onceflow_sink_messages_total", "onceflow_source_messages_total", "onceflow_epochs_committed_total",
             "onceflow_lease_renewals_total"):
    before = sum(v for k, v in a.items() if k.split("{")[0] == name)
    after = sum(v for k, v in b.items() if k.split("{")[0] == name)
    assert after > before > 0, f"{name}: {before} then {after}"
    print(f"ok: {name} {before:.0f} -> {after:.0f}")
PY
kill -TERM "$pid"
wait "$pid" || fail "the run did not stop cleanly"
pid=
grep -q "stopped on signal 15" "$work/run.err" || fail "no stop: $(tail -2 "$work/run.err")"
echo "ok: stopped"
