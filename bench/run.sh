#!/usr/bin/env bash
# Every benchmark, side by side in one run, as one JSON object on stdout (docs/BENCHMARKS.md).
#   bench/run.sh [--quick]
# Builds the release tree first (tools/dev.sh build). Progress goes to stderr. --quick uses
# small sizes, for checking the script, not for figures.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
case "${1:-}" in
  "") ;;
  --quick) quick=1 ;;
  *) echo "bench/run.sh: unknown option '$1' (usage: bench/run.sh [--quick])" >&2; exit 2 ;;
esac
size() { if ((quick)); then echo "$2"; else echo "$1"; fi; }  # size FULL QUICK

bash tools/dev.sh build >&2
onceflow=build/cli/onceflow
tmp=$(mktemp -d)
source tests/pg_server.sh
pg_started=0
trap '((pg_started)) && pg_stop "$tmp"; rm -rf "$tmp"' EXIT
say() { echo "bench: $*" >&2; }

say "scheduler micro-benchmarks"
build/bench/scheduler_bench --benchmark_filter='BM_PingPongEvents|BM_FiberSwitch' --benchmark_format=json \
  --benchmark_repetitions="$(size 3 1)" --benchmark_report_aggregates_only=true >"$tmp/scheduler.json" 2>/dev/null

say "headline exploration"
"$onceflow" explore scenarios/retryable_request.yaml --seeds "$(size 200 20)" --jobs 1 --json >"$tmp/headline.json"

say "rare bugs: guided against unguided exploration (bench/rare_bugs.sh)"
bash bench/rare_bugs.sh "$onceflow" "$(size 20 1)" "$(size 300 30)" >"$tmp/rare_bugs.json"

say "the headline on a slower clock"
"$onceflow" explore bench/scenarios/retryable_request_slow.yaml --seeds "$(size 50 5)" --jobs 1 --json >"$tmp/slow.json"

# A keyed aggregation with N messages over P partitions, one seed, no faults.
scaling_run() {  # scaling_run NAME MESSAGES PARTITIONS
  local name=$1 messages=$2 partitions=$3
  sed -e "s/partitions: [0-9]*/partitions: $partitions/g" scenarios/pipelines/keyed_aggregation.yaml >"$tmp/$name.pipeline.yaml"
  cat >"$tmp/$name.yaml" <<EOF
name: $name
kind: pipeline
pipeline: $tmp/$name.pipeline.yaml
topology: {workers: 3}
workload: {messages: $messages, keys: 64, interval: 1ms}
faults: {swarm: false}
liveness_bound: 600s
EOF
  "$onceflow" explore "$tmp/$name.yaml" --seeds 1 --first-seed 1 --no-swarm --json >"$tmp/$name.json"
}
say "simulator scaling in messages"
for n in 1000 10000 $(size 100000 ""); do scaling_run "messages-$n" "$n" 2; done
say "simulator scaling in partitions"
for p in 1 8 64; do scaling_run "partitions-$p" "$(size 10000 2000)" "$p"; done

say "input dedup over a long run: $(size 1000000 20000) messages over 10,000 keys, swarm faults"
size 1000000 20000 >"$tmp/dedup_long.messages"
sed -e "s/messages: 1000000/messages: $(size 1000000 20000)/" bench/scenarios/dedup_long.yaml >"$tmp/dedup_long.yaml"
sed -i "s|pipeline: ../../scenarios/|pipeline: $PWD/scenarios/|" "$tmp/dedup_long.yaml"
"$onceflow" run "$tmp/dedup_long.yaml" --seed 1 --json >"$tmp/dedup_long.json"

messages=$(size 200000 3000)
# A run of 200,000 messages takes a second or two, and this machine's speed drifts by 20-30%
# from one minute to the next: the exactly-once and at-least-once pipelines and the
# hand-written program run in turns, and the run of median rate stands for each.
rounds=$(size 5 1)
say "engine on LevelDB and the same computation by hand, $rounds rounds in turns"
for round in $(seq "$rounds"); do
  for mode in exactly_once at_least_once; do
    "$onceflow" real "bench/pipelines/two_stage_$mode.yaml" --data "$tmp/data-$mode" --messages "$messages" \
      --no-progress --stats >"$tmp/real-$mode-$round.json"
    rm -rf "$tmp/data-$mode"
  done
  # The same exactly-once run without recording its committed history (what --verify needs).
  "$onceflow" real bench/pipelines/two_stage_exactly_once.yaml --data "$tmp/data-nohistory" --messages "$messages" \
    --no-history --no-progress --stats >"$tmp/real-no_history-$round.json"
  rm -rf "$tmp/data-nohistory"
  build/bench/handwritten_bench "$tmp/handwritten" "$messages" 16 2000 >"$tmp/handwritten-$round.json"
  rm -rf "$tmp/handwritten"
done
# The median run of each becomes NAME.json; every round's rate, in the order run, rounds.json.
python3 - "$tmp" "$rounds" <<'PY'
import json, os, shutil, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
def rate(path):
    r = json.load(open(path))
    return r["messages"] / r["wall_s"] if "wall_s" in r else r["msgs_per_s"]
rates = {}
for name in ("real-exactly_once", "real-at_least_once", "real-no_history", "handwritten"):
    rates[name] = [round(rate(os.path.join(tmp, f"{name}-{i}.json"))) for i in range(1, rounds + 1)]
    median = sorted(range(rounds), key=lambda i: rates[name][i])[rounds // 2]
    shutil.copy(os.path.join(tmp, f"{name}-{median + 1}.json"), os.path.join(tmp, f"{name}.json"))
json.dump(rates, open(os.path.join(tmp, "rounds.json"), "w"))
PY
# The at-most-once sink sends each message alone, one synced append each: 30,000 of them.
"$onceflow" real bench/pipelines/two_stage_at_most_once_sink.yaml --data "$tmp/data-amo" --messages "$(size 30000 3000)" \
  --no-progress --stats >"$tmp/real-at_most_once_sink.json"
rm -rf "$tmp/data-amo"
say "latency at half the exactly-once rate"
half=$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(max(1, round(r["msgs_per_s"] / 2)))' \
  "$tmp/real-exactly_once.json")
"$onceflow" real bench/pipelines/two_stage_exactly_once.yaml --data "$tmp/data-half" --messages "$(size 100000 2000)" \
  --rate "$half" --no-progress --stats >"$tmp/real-half.json"
rm -rf "$tmp/data-half"
say "peak memory: $(size 1000000 30000) messages against $(size 100000 3000)"
for n in $(size 100000 3000) $(size 1000000 30000); do
  /usr/bin/time -f '%M' -o "$tmp/rss-$n" "$onceflow" real bench/pipelines/two_stage_exactly_once.yaml \
    --data "$tmp/data-rss" --messages "$n" --no-progress >/dev/null
  rm -rf "$tmp/data-rss"
done
echo "$(size 100000 3000) $(size 1000000 30000)" >"$tmp/rss-sizes"
say "recovery: kill -9, $(size 1024 16) MB of state added, restart to the first committed epoch"
pipeline=bench/pipelines/two_stage_exactly_once.yaml
"$onceflow" real "$pipeline" --data "$tmp/data-recovery" --messages "$(size 200000 20000)" --rate "$(size 20000 5000)" \
  --no-progress &  # paced, so that the kill comes mid-run
killed=$!
sleep "$(size 4 1)"
kill -9 "$killed"
{ wait "$killed" || true; } 2>/dev/null  # the shell's "Killed" notice is expected
build/bench/state_fill "$tmp/data-recovery" "$pipeline" "$(size 1024 16)" >"$tmp/state-fill.json"
"$onceflow" real "$pipeline" --data "$tmp/data-recovery" --messages "$(size 200000 20000)" --no-progress --stats \
  >"$tmp/recovery.json"
rm -rf "$tmp/data-recovery"
# A stop under load: an unpaced run with far more input than it gets through, SIGTERM after
# 2 s; from the signal to the process's exit ("stopped", nothing in flight), three times.
# The same for the README's keyed aggregation (scenarios/real/), whose sink stage lags the
# others under unpaced load: what is in flight between them is drained before "stopped", and
# its max_in_flight (backpressure) bounds that, however late the signal comes (8 s in too).
say "stop under load: SIGTERM 2 s (and 8 s) into an unpaced run, three times (two pipelines)"
for round in 1 2 3; do
  for stop in stop stop-keyed stop-keyed-late; do
    pipeline=bench/pipelines/two_stage_exactly_once.yaml
    [[ $stop == stop-keyed* ]] && pipeline=scenarios/real/keyed_aggregation.yaml
    "$onceflow" real "$pipeline" --data "$tmp/data-stop" --messages "$(size 2000000 200000)" \
      --no-progress --stats >"$tmp/$stop-$round.json" &
    running=$!
    # (--quick's small runs may end before the signal: the kill then finds nothing.)
    if [[ $stop == stop-keyed-late ]]; then sleep "$(size 8 1)"; else sleep "$(size 2 1)"; fi
    signalled=$(date +%s%N)
    kill -TERM "$running" 2>/dev/null || ((quick))
    wait "$running"
    echo "$(( ($(date +%s%N) - signalled) / 1000000 ))" >"$tmp/$stop-$round.ms"
    rm -rf "$tmp/data-stop"
  done
done
# Raw synced WriteBatch writes of the exactly-once run's average commit.
read -r batches entries value_bytes < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
writes = max(1, s["writes"])
print(min(s["commits"], 20000), max(1, round(writes / s["commits"])), max(1, round(s["bytes"] / writes)))' "$tmp/real-exactly_once.json")
build/bench/leveldb_raw_bench "$tmp/raw-leveldb" "$batches" "$entries" "$value_bytes" >"$tmp/leveldb.json"

say "the two-stage pipeline on PostgreSQL (a server of its own), against raw transactions of its commits' size"
pg_start "$tmp"
pg_started=1
"$onceflow" real bench/pipelines/two_stage_exactly_once.yaml --store "$PG_CONNINFO" --messages "$(size 30000 2000)" \
  --no-progress --stats >"$tmp/real-postgresql.json"
read -r transactions entries value_bytes < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
writes = max(1, s["writes"])
print(min(s["commits"], 2000), max(1, round(writes / s["commits"])), max(1, round(s["bytes"] / writes)))' "$tmp/real-postgresql.json")
build/bench/pg_raw_bench "$PG_CONNINFO" "$transactions" "$entries" "$value_bytes" >"$tmp/pg-raw.json"

say "the two-stage pipeline on PostgreSQL in separate processes: a controller and 1, 2, 4 workers"
for n in 1 2 4; do
  psql -q "$PG_CONNINFO" -c "CREATE DATABASE processes_$n" >/dev/null
  conninfo="$PG_CONNINFO dbname=processes_$n"  # the later dbname wins
  for w in $(seq "$n"); do
    "$onceflow" real bench/pipelines/two_stage_exactly_once.yaml --store "$conninfo" --role worker --name "worker-$w" \
      --no-progress --stats >"$tmp/processes-$n-worker-$w.json" &
  done
  "$onceflow" real bench/pipelines/two_stage_exactly_once.yaml --store "$conninfo" --role controller --name controller \
    --messages "$(size 30000 2000)" --no-progress --stats >"$tmp/processes-$n-controller.json"
  wait  # the workers end once the controller has stopped the drained pipeline
done

say "kafka sinks against raw librdkafka producers (mock cluster)"
build/bench/kafka_bench "$(size 200000 4000)" 256 256 "$(size 5 1)" >"$tmp/kafka.json"

say "Kafka -> Counter -> Kafka against a hand-written consume-transform-produce loop (mock cluster)"
# Per mode, a fresh mock cluster whose input topic is written first (neither side is timed
# writing it); the pipeline (its wall time, start-up included) and the loop (from its first
# record) each read all of it, with transactions (or flushed batches) of 256.
for mode in eos alo; do
  pipeline=scenarios/real/kafka_aggregation.yaml
  [[ $mode == alo ]] && pipeline=scenarios/real/kafka_aggregation_alo.yaml
  "$onceflow" kafka-mock --brokers 1 --topic events:2 --topic counts:2 --topic counts_alo:2 --topic loop_out:2 \
    >"$tmp/mock.out" 2>/dev/null &
  mock=$!
  for _ in $(seq 100); do [[ -s $tmp/mock.out ]] && break; sleep 0.1; done
  brokers=$(head -1 "$tmp/mock.out")
  build/bench/kafka_loop_bench preload "$brokers" events "$(size 100000 3000)" 64
  "$onceflow" real "$pipeline" --kafka "$brokers" --data "$tmp/data-kafka-$mode" --verify --stats --no-progress \
    2>/dev/null >"$tmp/kafka-e2e-$mode.json"
  rm -rf "$tmp/data-kafka-$mode"
  build/bench/kafka_loop_bench "$mode" "$brokers" events loop_out "$(size 100000 3000)" 256 >"$tmp/kafka-loop-$mode.json"
  kill "$mock"
  wait "$mock" 2>/dev/null || true
done

python3 - "$tmp" "$quick" <<'PY'
import json, os, sys
tmp, quick = sys.argv[1], sys.argv[2] == "1"
load = lambda name: json.load(open(os.path.join(tmp, name)))

runs = load("scheduler.json")["benchmarks"]
def bench(prefix):  # the median of the repetitions, or the one run
    mine = [b for b in runs if b["name"].startswith(prefix)]
    return next((b for b in mine if b.get("aggregate_name") == "median"), mine[0])
ping = bench("BM_PingPongEvents")
switch = bench("BM_FiberSwitch")

head = load("headline.json")
wall_s = head["wall_ms"] / 1e3
out = {
    "quick": quick,
    "sim_events_per_s": round(ping["events_per_s"]),
    "fiber_switch_ns": round(switch["s_per_switch"] * 1e9, 1),
    "headline_seeds": head["seeds"],
    "headline_seeds_per_s": round(head["seeds"] / wall_s, 2),
    "headline_speedup_vs_real_time": round(head["sim_time_us_total"] / 1e6 / wall_s, 1),
    "headline_peak_rss_mb": round(head["peak_rss_mb"], 1),
    "headline_events_per_seed": round(head["events_total"] / head["seeds"]),
}
out["rare_bugs"] = load("rare_bugs.json")
slow = load("slow.json")
slow_wall_s = slow["wall_ms"] / 1e3
out.update({
    "slow_clock_seeds_per_s": round(slow["seeds"] / slow_wall_s, 2),
    "slow_clock_speedup_vs_real_time": round(slow["sim_time_us_total"] / 1e6 / slow_wall_s, 1),
    "slow_clock_simulated_s_per_seed": round(slow["sim_time_us_total"] / 1e6 / slow["seeds"], 1),
    "headline_simulated_s_per_seed": round(head["sim_time_us_total"] / 1e6 / head["seeds"], 1),
})
scaling = {}
for name in sorted(os.listdir(tmp)):
    if (name.startswith("messages-") or name.startswith("partitions-")) and name.endswith(".json"):
        r = load(name)
        scaling[name[:-5]] = {"wall_ms": round(r["wall_ms"], 1), "events": r["events_total"]}
out["sim_scaling"] = scaling
m1, m10 = scaling.get("messages-1000"), scaling.get("messages-10000")
m100 = scaling.get("messages-100000")
if m1 and m10:
    out["sim_cost_ratio_10k_over_1k"] = round(m10["wall_ms"] / m1["wall_ms"], 2)
if m10 and m100:
    out["sim_cost_ratio_100k_over_10k"] = round(m100["wall_ms"] / m10["wall_ms"], 2)

d = load("dedup_long.json")
out.update({
    "dedup_long_verdict": d["verdict"],
    "dedup_long_messages": int(open(os.path.join(tmp, "dedup_long.messages")).read()),
    "dedup_long_keys": 10000,
    "dedup_rows_at_end": d["observed"]["dedup rows at end"],
    "dedup_entries_at_end": d["observed"]["dedup entries at end"],
    "dedup_entries_max": d["observed"]["dedup entries max"],
})

real = {mode: load(f"real-{mode}.json") for mode in ("exactly_once", "at_least_once", "at_most_once_sink", "no_history")}
rate = {mode: r["messages"] / r["wall_s"] for mode, r in real.items()}
lv = load("leveldb.json")
eo = real["exactly_once"]
hw = load("handwritten.json")
half = load("real-half.json")
small, large = open(os.path.join(tmp, "rss-sizes")).read().split()
rss = {n: int(open(os.path.join(tmp, f"rss-{n}")).read().split()[-1]) for n in (small, large)}
out.update({
    "real_eos_messages": eo["messages"],
    "real_eos_msgs_per_s": round(rate["exactly_once"]),
    "handwritten_msgs_per_s": round(hw["msgs_per_s"]),
    "eos_over_handwritten": round(rate["exactly_once"] / hw["msgs_per_s"], 3),
    "latency_at_msgs_per_s": round(half["messages"] / half["wall_s"]),
    "latency_p50_ms": half["latency_p50_ms"],
    "latency_p99_ms": half["latency_p99_ms"],
    "peak_rss_mb": {small: round(rss[small] / 1024, 1), large: round(rss[large] / 1024, 1)},
    "peak_rss_large_over_small": round(rss[large] / rss[small], 2),
    "recovery_state_mb": round(load("state-fill.json")["bytes"] / 2**20),
    "recovery_first_epoch_ms": load("recovery.json")["first_epoch_ms"],
    # From SIGTERM to the process's exit, stopped, in three runs under load.
    "stop_after_signal_ms": sorted(int(open(os.path.join(tmp, f"stop-{r}.ms")).read()) for r in (1, 2, 3)),
    "stop_delivered_before_exit": [load(f"stop-{r}.json")["delivered"] for r in (1, 2, 3)],
    "stop_keyed_aggregation_ms": sorted(int(open(os.path.join(tmp, f"stop-keyed-{r}.ms")).read()) for r in (1, 2, 3)),
    "stop_keyed_aggregation_late_ms": sorted(int(open(os.path.join(tmp, f"stop-keyed-late-{r}.ms")).read()) for r in (1, 2, 3)),
})
for mode, r in real.items():
    out[f"{mode}_writes_per_message"] = round(r["writes"] / r["messages"], 1)
    out[f"{mode}_bytes_per_message"] = round(r["bytes"] / r["messages"])
out["handwritten_bytes_per_message"] = hw["bytes_per_message"]
rounds = load("rounds.json")  # every round's rate, in the order run
out.update({
    "rounds": len(rounds["handwritten"]),
    "real_eos_runs_msgs_per_s": rounds["real-exactly_once"],
    "alo_runs_msgs_per_s": rounds["real-at_least_once"],
    "no_history_runs_msgs_per_s": rounds["real-no_history"],
    "handwritten_runs_msgs_per_s": rounds["handwritten"],
})
out.update({
    "alo_msgs_per_s": round(rate["at_least_once"]),
    "amo_sink_msgs_per_s": round(rate["at_most_once_sink"]),
    "amo_sink_in_doubt": real["at_most_once_sink"]["amo_in_doubt"],  # sends unanswered in time
    "eos_over_alo": round(rate["exactly_once"] / rate["at_least_once"], 3),
    # What recording the committed history (for --verify) costs: the exactly-once rate with it
    # over the rate without it, and the bytes it adds per message.
    "history_rate_ratio": round(rate["exactly_once"] / rate["no_history"], 3),
    "history_bytes_per_message": round((eo["bytes"] - real["no_history"]["bytes"]) / eo["messages"]),
    "eos_commits_per_s": round(eo["commits"] / eo["wall_s"], 1),
    "eos_writes_per_commit": round(eo["writes"] / eo["commits"], 1),
    "raw_leveldb_synced_batches_per_s": lv["batches_per_s"],
    "eos_over_raw_leveldb": round(eo["commits"] / eo["wall_s"] / lv["batches_per_s"], 3),
})
pg, pg_raw = load("real-postgresql.json"), load("pg-raw.json")
pg_commits_per_s = pg["commits"] / pg["wall_s"]
out.update({
    "postgresql_eos_msgs_per_s": round(pg["messages"] / pg["wall_s"]),
    "postgresql_commits_per_s": round(pg_commits_per_s, 1),
    "postgresql_writes_per_commit": round(pg["writes"] / max(1, pg["commits"]), 1),
    "raw_postgresql_transactions_per_s": pg_raw["transactions_per_s"],
    "postgresql_eos_over_raw_transactions": round(pg_commits_per_s / pg_raw["transactions_per_s"], 3),
})
for n in (1, 2, 4):
    # Messages over the controller's wall time (from its start to the pipeline drained and
    # stopped); commits of every process over that time, against the raw transactions above.
    c = load(f"processes-{n}-controller.json")
    commits = c["commits"] + sum(load(f"processes-{n}-worker-{w}.json")["commits"] for w in range(1, n + 1))
    out[f"postgresql_{n}_worker_processes_msgs_per_s"] = round(c["messages"] / c["wall_s"])
    out[f"postgresql_{n}_worker_processes_commits_per_s"] = round(commits / c["wall_s"], 1)
    out[f"postgresql_{n}_worker_processes_over_raw_transactions"] = round(commits / c["wall_s"] / pg_raw["transactions_per_s"], 3)
k = load("kafka.json")
out.update({
    "kafka_eos_sink_msgs_per_s": k["kafka_eos_sink_msgs_per_s"],
    "kafka_raw_txn_producer_msgs_per_s": k["raw_txn_producer_msgs_per_s"],
    "kafka_eos_over_raw_txn_producer": k["eos_over_raw_txn_median"],
    "kafka_eos_sink_mock_path_msgs_per_s": k["kafka_eos_sink_mock_path_msgs_per_s"],
    "kafka_eos_mock_path_over_raw_txn_producer": k["eos_mock_path_over_raw_txn_median"],
    "kafka_alo_sink_msgs_per_s": k["kafka_alo_sink_msgs_per_s"],
    "kafka_raw_idempotent_producer_msgs_per_s": k["raw_idempotent_producer_msgs_per_s"],
    "kafka_alo_over_raw_idempotent_producer": k["alo_over_raw_idempotent_median"],
    "kafka_transaction_messages": k["transaction_messages"],
})
for mode in ("eos", "alo"):
    # --verify prints one document, the run's --stats inside it.
    e2e, loop = load(f"kafka-e2e-{mode}.json")["stats"], load(f"kafka-loop-{mode}.json")
    assert e2e["delivered"] == loop["messages"], (e2e, loop)
    out[f"kafka_e2e_{mode}_msgs_per_s"] = round(e2e["delivered"] / e2e["wall_s"])
    out[f"kafka_loop_{mode}_msgs_per_s"] = round(loop["msgs_per_s"])
    out[f"kafka_e2e_{mode}_over_loop"] = round(e2e["delivered"] / e2e["wall_s"] / loop["msgs_per_s"], 3)
print(json.dumps(out, indent=2))
PY
