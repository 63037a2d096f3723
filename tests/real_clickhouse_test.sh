#!/usr/bin/env bash
# onceflow real's ClickHouse sinks against a real ClickHouse server (Debian's 18.16, with a
# ZooKeeper of its own: tests/clickhouse_server.sh), under kill -9 and resume, each ending with
# a --verify that reads the table back:
# 1. exactly_once into a ReplicatedMergeTree table: every output once (the server dropped the
#    batches sent again after the kills: its log says how many);
# 2. exactly_once into a plain MergeTree table: accepted with the warning that it degrades to
#    at-least-once; every output there, duplicates only;
# 3. at_least_once and at_most_once (both strategies) sinks under kill -9: verified as such,
#    at-most-once tables holding no row twice, what they lack counted in doubt (one table's
#    name, counts-amo, is no bare SQL identifier);
# 4. the target validated when a writer session starts: a Distributed table, an engine outside
#    the MergeTree family, a missing table or column stop the run (exit 2, one line naming it),
#    and so does a url where no server answers (at once);
#    a dedup window shorter than replay_horizon gives the seed's structured warning (the
#    table's own SETTINGS window when it has one, else the server's default);
#    a url with a user and password (HTTP Basic) writes as that user, and a wrong password
#    stops the run with one line that does not show it;
# 5. the sharded exactly_once sink over shard_hosts, two servers (a second one, with its
#    ZooKeeper, started for it), ReplicatedMergeTree on each, kill -9 twice: every output once
#    across the shards, each key on one shard only, both shards written; the same data
#    directory with one shard is refused (exit 2).
# Usage: real_clickhouse_test.sh ONCEFLOW SOURCE_DIR [MESSAGES]
set -euo pipefail
onceflow=$1
src=$2
messages=${3:-20000}
work=$(mktemp -d)
pid=
source "$src/tests/clickhouse_server.sh"
source "$src/tests/real_lives.sh"
cleanup() {
  [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true
  ch_stop "$work"
  ch_stop "$work/s2"
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
RANDOM=11
started=$(date +%s.%N)
ch_start "$work"
echo "clickhouse $(ch_query 'SELECT version()') at $CH_HTTP (started in $(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s)"
columns="message_id String, key UInt64, payload String"
# replicated TABLE [SETTINGS ...]
replicated() { ch_query "CREATE TABLE $1 ($columns) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/$1', '{replica}') ORDER BY message_id ${2:-}" >/dev/null; }
replicated counts_rep
ch_query "CREATE TABLE counts_plain ($columns) ENGINE = MergeTree() ORDER BY message_id" >/dev/null
ch_query "CREATE TABLE counts_alo ($columns) ENGINE = MergeTree() ORDER BY message_id" >/dev/null
ch_query "CREATE TABLE \`counts-amo\` ($columns) ENGINE = MergeTree() ORDER BY message_id" >/dev/null
ch_query "CREATE TABLE counts_amo_q ($columns) ENGINE = MergeTree() ORDER BY message_id" >/dev/null
ch_query "CREATE TABLE counts_dist ($columns) ENGINE = Distributed(onceflow_test, default, counts_rep)" >/dev/null
ch_query "CREATE TABLE counts_auth ($columns) ENGINE = MergeTree() ORDER BY message_id" >/dev/null
ch_query "CREATE TABLE counts_log ($columns) ENGINE = Log" >/dev/null
ch_query "CREATE TABLE counts_nocol (message_id String, key UInt64) ENGINE = MergeTree() ORDER BY message_id" >/dev/null
ch_query "CREATE TABLE counts_narrow (message_id String, key UInt8, payload String) ENGINE = MergeTree() ORDER BY message_id" >/dev/null

# spec NAME TABLE [key: value ...]: the library's spec writing TABLE on this server.
spec() {
  local name=$1 table=$2
  shift 2
  python3 - "$src/scenarios/real/clickhouse_aggregation.yaml" "$work/$name.yaml" "$CH_HTTP" "$table" "$@" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
text = text.replace('url: "http://127.0.0.1:8123"', f'url: "{sys.argv[3]}"').replace("table: counts\n", f"table: {sys.argv[4]}\n")
for setting in sys.argv[5:]:
    key = setting.split(":")[0]
    if re.search(rf"(?m)^    {key}:", text):
        text = re.sub(rf"(?m)^    {key}:.*$", f"    {setting}", text)
    else:
        text += f"    {setting}\n"
open(sys.argv[2], "w").write(text)
PY
  echo "$work/$name.yaml"
}
rows() { ch_query "SELECT count() FROM $1"; }


# verified GUARANTEE DUPLICATES(none|some|any) [KILLS]: the last --verify against what the sink
# promises; at most once: nothing lost, what is missing in doubt, and KILLS lives cut short.
verified() {
  python3 - "$work/verify.json" "$messages" "$1" "$2" "${3:-0}" <<'PY' || fail "the last run's stderr: $(tail -5 "$work/verify.err")"
import json, sys
v, messages, guarantee, dups = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3], sys.argv[4]
sink = v["sinks"]["counts_out"]
assert v["verdict"] == "pass", v
assert sink["guarantee"] == guarantee, sink
assert sink["expected"] == messages, sink
if guarantee != "at_most_once":
    assert sink["lost"] == 0, sink
if dups == "none":
    assert sink["duplicates"] == 0, sink
if guarantee == "at_most_once":
    assert sink["lost"] == 0 and sink["lives_cut"] == int(sys.argv[5]), sink
    assert sink["in_doubt"] == sink["expected"] - sink["outputs"], sink
print(f"  verify: pass, {guarantee}: {sink['outputs']} rows for {sink['expected']} outputs, "
      f"{sink['duplicates']} duplicates, {sink['lost']} lost, {sink.get('in_doubt', 0)} in doubt")
PY
}

echo "1. exactly_once into ReplicatedMergeTree, kill -9 three times"
lives "$(spec eo counts_rep)" "$work/d1" 3 "rows counts_rep" 10000
verified exactly_once none
[[ $(ch_query "SELECT count() = uniqExact(message_id) AND count() = $messages FROM counts_rep") == 1 ]] ||
  fail "counts_rep: $(ch_query 'SELECT count(), uniqExact(message_id) FROM counts_rep')"
dropped=$(grep -c "already exists; ignoring it" "$work/ch/server.log" || true)
echo "  the server dropped $dropped repeated blocks"
[[ $dropped -gt 0 ]] || fail "no batch was sent twice: the kills had no effect to check"

echo "2. exactly_once into a plain MergeTree, kill -9 three times"
lives "$(spec plain counts_plain)" "$work/d2" 3 "rows counts_plain" 10000
grep -q "warning ClickHouseTargetDoesNotDeduplicate: Database=default Table=counts_plain Engine=MergeTree Guarantee=at_least_once" \
  "$work/verify.err" "$work/life.err" || fail "no degradation warning: $(cat "$work/life.err")"
verified at_least_once any

echo "3. at_least_once, and at_most_once with and without its strategy, under kill -9"
lives "$(spec alo counts_alo 'delivery_guarantee: at_least_once')" "$work/d3" 2 "rows counts_alo" 10000
verified at_least_once any
lives "$(spec amo counts-amo 'delivery_guarantee: at_most_once')" "$work/d4" 2 "rows \`counts-amo\`" 10000
verified at_most_once none 2
amo_q=$(spec amoq counts_amo_q 'delivery_guarantee: at_most_once' 'at_most_once_strategy: {enabled: true}')
# Its queue is in memory, where a kill loses what it held (thousands: one INSERT per message
# is slower than the input), so the table may never reach a second life's mark: killed once.
lives "$amo_q" "$work/d5" 1 "rows counts_amo_q" 10000
verified at_most_once none 1
for table in '`counts-amo`' counts_amo_q; do  # the server's table itself: no row twice
  [[ $(ch_query "SELECT count() = uniqExact(message_id) FROM $table") == 1 ]] ||
    fail "$table holds a row twice: $(ch_query "SELECT count(), uniqExact(message_id) FROM $table")"
done
# With no life killed, nothing may be missing: rows taken from the table behind the run's back
# are losses, which --verify reports (exit 1).
ch_query "CREATE TABLE counts_amo_clean ($columns) ENGINE = MergeTree() ORDER BY message_id" >/dev/null
amo_clean=$(spec amoc counts_amo_clean 'delivery_guarantee: at_most_once')
lives "$amo_clean" "$work/d_amo_clean" 0 : 10000
verified at_most_once none 0
ch_query "ALTER TABLE counts_amo_clean DELETE WHERE key = 3" >/dev/null
for _ in $(seq 100); do [[ $(ch_query "SELECT count() FROM counts_amo_clean WHERE key = 3") == 0 ]] && break; sleep 0.1; done
rc=0
"$onceflow" real "$amo_clean" --data "$work/d_amo_clean" --messages "$messages" --no-progress --verify >"$work/verify.json" \
  2>"$work/verify.err" || rc=$?
python3 - "$work/verify.json" "$rc" <<'PY' || fail "rows deleted from an at-most-once table: $(cat "$work/verify.json" "$work/verify.err")"
import json, sys
v, rc = json.load(open(sys.argv[1])), int(sys.argv[2])
sink = v["sinks"]["counts_out"]
assert rc == 1 and v["verdict"] == "fail" and sink["lost"] > 0 and sink["in_doubt"] == 0, (rc, sink)
print(f"  ok: {sink['lost']} rows deleted behind a run that lost no life: --verify fails (lost {sink['lost']})")
PY

echo "4. targets refused, and the dedup window warning"
refused() {
  local table=$1 want=$2 rc=0
  "$onceflow" real "$(spec "bad_$table" "$table")" --data "$work/bad_$table" --messages 20 --no-progress \
    >/dev/null 2>"$work/refused.err" || rc=$?
  [[ $rc -eq 2 && $(wc -l <"$work/refused.err") -eq 1 ]] && grep -q "$want" "$work/refused.err" ||
    fail "table $table: exit $rc: $(cat "$work/refused.err")"
  echo "  ok: $(cat "$work/refused.err")"
}
refused counts_dist "default.counts_dist is a Distributed table"
refused counts_log "default.counts_log has engine Log, outside the MergeTree family"
refused no_such_table "has no table default.no_such_table"
refused counts_nocol "default.counts_nocol has no column payload"
refused counts_narrow "default.counts_narrow has column key of type UInt8, not UInt64"
rc=0
sed "s#$CH_HTTP#http://127.0.0.1:1#" "$(spec nowhere counts_rep)" >"$work/nowhere2.yaml"
"$onceflow" real "$work/nowhere2.yaml" --data "$work/nowhere" --messages 20 --no-progress >/dev/null 2>"$work/nowhere.err" || rc=$?
[[ $rc -eq 2 ]] && grep -q "sinks.counts_out: ClickHouse at http://127.0.0.1:1 does not answer (GET /ping)" "$work/nowhere.err" ||
  fail "a server that does not answer: exit $rc: $(cat "$work/nowhere.err")"
echo "  ok: $(cat "$work/nowhere.err")"
host=${CH_HTTP#http://}
sed "s#$CH_HTTP#http://writer:s3cr:et@p@$host#" "$(spec auth_plain counts_auth 'delivery_guarantee: at_least_once')" >"$work/auth.yaml"
"$onceflow" real "$work/auth.yaml" --data "$work/auth" --messages 200 --no-progress --verify >"$work/verify.json" \
  2>"$work/auth.err" || fail "as writer: $(cat "$work/auth.err")"
[[ $(rows counts_auth) -ge 200 ]] || fail "as writer: $(rows counts_auth) rows"
sed "s#s3cr:et@p@#hunter2@#" "$work/auth.yaml" >"$work/wrong.yaml"
rc=0
"$onceflow" real "$work/wrong.yaml" --data "$work/wrong" --messages 20 --no-progress >/dev/null 2>"$work/wrong.err" || rc=$?
[[ $rc -eq 2 && $(wc -l <"$work/wrong.err") -eq 1 ]] && grep -q "http://writer:\*\*\*@.*Wrong password for user writer" "$work/wrong.err" &&
  ! grep -q hunter2 "$work/wrong.err" || fail "a wrong password: exit $rc: $(cat "$work/wrong.err")"
echo "  ok: as writer (HTTP Basic), $(rows counts_auth) rows verified; a wrong password: $(cat "$work/wrong.err")"
replicated counts_window
"$onceflow" real "$(spec window counts_window 'replay_horizon: 2592000s')" --data "$work/d6" --messages 20 --no-progress \
  >/dev/null 2>"$work/window.err" || fail "the window run failed: $(cat "$work/window.err")"
grep -q "warning ClickHouseDedupWindowShorterThanReplayHorizon: Database=default Table=counts_window DedupWindowSetting=replicated_deduplication_window_seconds ReplayHorizon=2592000.000000s DedupWindow=604800.000000s" \
  "$work/window.err" || fail "no window warning: $(cat "$work/window.err")"
echo "  ok: $(grep warning "$work/window.err")"
# A table's own window, shorter or longer than the server's (7 days), is the one judged.
replicated counts_window_short "SETTINGS replicated_deduplication_window_seconds = 3600"
replicated counts_window_long "SETTINGS replicated_deduplication_window_seconds = 2592000"
"$onceflow" real "$(spec window_short counts_window_short 'replay_horizon: 7200s')" --data "$work/d8" --messages 20 \
  --no-progress >/dev/null 2>"$work/window.err" || fail "the short window run failed: $(cat "$work/window.err")"
grep -q "warning ClickHouseDedupWindowShorterThanReplayHorizon: Database=default Table=counts_window_short .*ReplayHorizon=7200.000000s DedupWindow=3600.000000s" \
  "$work/window.err" || fail "no warning of the table's own window: $(cat "$work/window.err")"
"$onceflow" real "$(spec window_long counts_window_long 'replay_horizon: 2592000s')" --data "$work/d9" --messages 20 \
  --no-progress >/dev/null 2>"$work/window.err" || fail "the long window run failed: $(cat "$work/window.err")"
! grep -q "warning ClickHouseDedupWindow" "$work/window.err" || fail "a table whose own window is long enough warned: $(cat "$work/window.err")"
echo "  ok: a table's own SETTINGS window judged (3600 s warned against 7200 s; 30 days not warned against 30 days)"

echo "5. the sharded exactly_once sink over two servers, kill -9 twice"
first=$CH_HTTP
ch_start "$work/s2"
second=$CH_HTTP
CH_HTTP=$first
echo "  a second server at $second"
on() { CH_HTTP=$1 ch_query "$2"; }
for server in "$first" "$second"; do
  CH_HTTP=$server replicated counts_shard
done
CH_HTTP=$first
python3 - "$(spec shard counts_shard)" "$work/sharded.yaml" "$first" "$second" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
text, n = re.subn(r'(?m)^    url: .*$', f'    shard_hosts: ["{sys.argv[3]}", "{sys.argv[4]}"]', text)
assert n == 1, text
open(sys.argv[2], "w").write(text)
PY
sharded_rows() { echo $(($(on "$first" "SELECT count() FROM counts_shard") + $(on "$second" "SELECT count() FROM counts_shard"))); }
lives "$work/sharded.yaml" "$work/d7" 2 sharded_rows 10000
verified exactly_once none
a=$(on "$first" "SELECT count() FROM counts_shard")
b=$(on "$second" "SELECT count() FROM counts_shard")
[[ $((a + b)) -eq $messages && $a -gt 0 && $b -gt 0 ]] || fail "the shards hold $a and $b rows, $messages expected in all"
on "$first" "SELECT DISTINCT key FROM counts_shard" | sort >"$work/keys1"
on "$second" "SELECT DISTINCT key FROM counts_shard" | sort >"$work/keys2"
[[ -z $(comm -12 "$work/keys1" "$work/keys2") ]] || fail "keys on both shards: $(comm -12 "$work/keys1" "$work/keys2" | head -3)"
for server in "$first" "$second"; do
  [[ $(on "$server" "SELECT count() = uniqExact(message_id) FROM counts_shard") == 1 ]] || fail "duplicates on $server"
done
dropped=$(($(grep -c "already exists; ignoring it" "$work/ch/server.log" || true) + $(grep -c "already exists; ignoring it" "$work/s2/ch/server.log" || true)))
[[ $dropped -gt 0 ]] || fail "no sharded batch was sent twice: the kills had no effect to check"
echo "  ok: $a + $b rows on the two shards, each key on one, each output once; the servers dropped $dropped repeated blocks"
# Another number of shards would send a batch sent again to other shards: the directory is refused.
sed "s|shard_hosts: .*|shard_hosts: [\"$first\"]|" "$work/sharded.yaml" >"$work/one_shard.yaml"
rc=0
"$onceflow" real "$work/one_shard.yaml" --data "$work/d7" --messages "$messages" --no-progress >/dev/null 2>"$work/shards.err" || rc=$?
[[ $rc -eq 2 && $(wc -l <"$work/shards.err") -eq 1 ]] && grep -q "was made for pipeline" "$work/shards.err" ||
  fail "one shard where two were: exit $rc: $(cat "$work/shards.err")"
echo "  ok: one shard where two were is refused: $(cut -c1-100 "$work/shards.err")..."
