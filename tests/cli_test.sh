#!/usr/bin/env bash
# End-to-end checks of the onceflow binary: exit codes, determinism across processes, JSON.
# Usage: cli_test.sh ONCEFLOW_BINARY SOURCE_DIR
set -uo pipefail
bin=$1
src=$2
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
expect_rc() {  # expect_rc WANT command...
  local want=$1
  shift
  "$@" >/dev/null 2>&1
  local got=$?
  [ "$got" -eq "$want" ] || fail "exit $got (wanted $want): $*"
}

bank="$src/scenarios/kernel_bank.yaml"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The same seed in two processes gives the same trace_hash; another seed does not.
h1=$("$bin" run "$bank" --seed 11 --json | sed -n 's/.*"trace_hash": "\(.*\)".*/\1/p')
h2=$("$bin" run "$bank" --seed 11 --json | sed -n 's/.*"trace_hash": "\(.*\)".*/\1/p')
h3=$("$bin" run "$bank" --seed 12 --json | sed -n 's/.*"trace_hash": "\(.*\)".*/\1/p')
[ -n "$h1" ] && [ "$h1" = "$h2" ] || fail "same seed, different hashes: '$h1' '$h2'"
[ "$h1" != "$h3" ] || fail "seeds 11 and 12 gave the same hash"

# explore with worker processes agrees with explore without them.
"$bin" explore "$bank" --seeds 40 --json > "$tmp/one.json" || fail "explore -j1 failed"
"$bin" explore "$bank" --seeds 40 --jobs 2 --json > "$tmp/two.json" || fail "explore -j2 failed"
grep -q '"passed": 40' "$tmp/one.json" || fail "explore -j1 did not pass 40 seeds"
e1=$(grep '"events_total"' "$tmp/one.json")
e2=$(grep '"events_total"' "$tmp/two.json")
[ "$e1" = "$e2" ] || fail "event totals differ between -j1 and -j2: $e1 / $e2"

# --trace writes the trace; replay prints it.
"$bin" run "$bank" --seed 3 --trace "$tmp/trace.txt" >/dev/null || fail "run --trace failed"
[ "$(wc -l < "$tmp/trace.txt")" -gt 100 ] || fail "trace file is nearly empty"
"$bin" replay "$bank" --seed 3 > "$tmp/replay.txt" || fail "replay failed"
grep -q "fault plan" "$tmp/replay.txt" || fail "replay printed no fault plan"
# replay's filters: only the lines that hold every one given; bad ones exit 2.
"$bin" replay "$bank" --seed 3 --node store --from 100ms --to 2s --grep 'client-[13]$' > "$tmp/filtered.txt" ||
  fail "a filtered replay failed"
python3 - "$tmp/replay.txt" "$tmp/filtered.txt" <<'PY' || fail "replay filters: $(grep '^trace' "$tmp/filtered.txt")"
import re, sys
def lines(path):
    text = open(path).read().split("\n")
    start = next(i for i, l in enumerate(text) if l.startswith("trace ("))
    return text[start], [l for l in text[start + 1:] if re.match(r"^ *\d+\.\d{6}s ", l)]
_, every = lines(sys.argv[1])
head, shown = lines(sys.argv[2])
want = [l for l in every if l.split()[1] == "store" and 100000 <= round(float(l.split()[0][:-1]) * 1e6) <= 2000000
        and re.search(r"client-[13]$", l)]
assert want, "the filter should match some lines of this seed"
assert shown == want, (len(shown), len(want))
assert head.startswith(f"trace ({len(want)} of {len(every)} lines: --node store --from 0.100000s --to 2.000000s"), head
PY
# Leases in the trace: started for a job on a worker, ended with why, a fenced commit with its Lease.
"$bin" replay "$src/scenarios/retryable_request.yaml" --seed 1 --grep 'lease [0-9]+' > "$tmp/leases.txt"
for pattern in 'controller +starts lease [0-9]+ for computation/RequestProcessor/[0-9] on worker-[0-9]' \
  'lease [0-9]+ of [a-z]+/[A-Za-z_]+/[0-9] ended: aborted' \
  'fenced: its commit under lease [0-9]+ was refused \(the Lease is (expired|aborted)\)'; do
  grep -Eq "$pattern" "$tmp/leases.txt" || fail "no trace line like '$pattern'"
done
expect_rc 2 "$bin" replay "$bank" --seed 3 --grep '('            # not a regular expression
expect_rc 2 "$bin" replay "$bank" --seed 3 --id NOTHEX
expect_rc 2 "$bin" replay "$bank" --seed 3 --from 2s --to 1s
expect_rc 2 "$bin" replay "$bank" --seed 3 --from 5parsecs
# An epoch given up (its reads failed under a store outage) is a trace line with its cause.
"$bin" replay "$src/scenarios/retryable_request.yaml" --seed 2 --grep "gives up epoch" >"$tmp/gaveup.txt"
grep -Eq "lease [0-9]+ gives up epoch [0-9]+: (its reads failed|its commit conflicted|the store was unavailable)" \
  "$tmp/gaveup.txt" || fail "no epoch given up with its cause: $(head -3 "$tmp/gaveup.txt")"
# explore's probes: only those the scenario can reach count as never reached.
"$bin" explore "$src/scenarios/retryable_request.yaml" --seeds 2 --json >"$tmp/reach.json"
python3 - "$tmp/reach.json" <<'PY' || fail "probes out of reach: $(head -c 300 "$tmp/reach.json")"
import json, sys
e = json.load(open(sys.argv[1]))["effects"]
out = set(e["probes_out_of_reach"])
assert {"amo.queue_full", "kafka.marker_skip", "controller.repartitioned"} <= out, out
assert not out & set(e["probes_never_hit"]), out & set(e["probes_never_hit"])
assert "timer.fired" not in out, out  # RequestProcessor retries by timer
PY
# A node or job the run does not have is an error naming the nodes there are, not "0 lines".
err=$("$bin" replay "$bank" --seed 3 --node worker-9 2>&1)
[ $? -eq 2 ] && grep -q "no such node in this run (nodes: .*store" <<<"$err" || fail "--node worker-9: $err"
expect_rc 2 "$bin" replay "$src/scenarios/retryable_request.yaml" --seed 1 --job computation/Nope/0
# --key: the lines of one key's messages, from the source's commit to the target's answers; the
# target's lines carry each message's key and payload prefix. A key no message has is an error.
lw="$src/docs/walkthroughs/lost_write.yaml"
"$bin" replay "$lw" --seed 2 --bug new-seqno-on-resend --key 12 > "$tmp/key.txt" && fail "the lost write passed"
python3 - "$tmp/key.txt" <<'PY' || fail "replay --key 12: $(grep '^trace' "$tmp/key.txt")"
import re, sys
text = open(sys.argv[1]).read()
head = re.search(r"^trace \((\d+) of (\d+) lines: --key 12\):$", text, re.M)
assert head and 0 < int(head.group(1)) < int(head.group(2)), head
lines = [l for l in text.split("\n")[text.split("\n").index(head.group(0)) + 1:] if re.match(r"^ *\d+\.\d{6}s ", l)]
targets = [l for l in lines if " target-counts_out " in l]
assert targets and all('(key 12, "key=12 count=' in l for l in targets), targets[:3]
assert any(" drops repeat " in l for l in targets) and any(" appends " in l for l in targets)
assert any("source/events/" in l and " commits tx " in l for l in lines)  # the inputs' commits
assert not any("(key " in l and "(key 12," not in l for l in lines)
PY
# An at-most-once sink's drops and sends in doubt name the message with its key and payload.
"$bin" replay "$src/scenarios/clickhouse_at_most_once_queue.yaml" --seed 1 --grep 'dropped|in doubt' > "$tmp/amo.txt"
grep -Eq 'sink counts_ch dropped [0-9a-f]{16} \(key [0-9]+, "key=[0-9]+ count=[0-9]+"\): queue full' "$tmp/amo.txt" &&
  grep -Eq 'sink counts_ch: [0-9a-f]{16} \(key [0-9]+, "key=[0-9]+ count=[0-9]+"\) in doubt' "$tmp/amo.txt" ||
  fail "at-most-once drops without key and payload: $(grep -m2 'sink counts_ch' "$tmp/amo.txt")"
err=$("$bin" replay "$lw" --seed 2 --bug new-seqno-on-resend --key 99 2>&1 >/dev/null)
[ $? -eq 2 ] && grep -q "^onceflow: --key 99: no message of this run has that key" <<<"$err" || fail "--key 99: $err"

# Bad input: one line on stderr, exit 2.
expect_rc 2 "$bin" run "$tmp/missing.yaml"
expect_rc 2 "$bin" explore "$bank" --no-such-option
expect_rc 2 "$bin"
expect_rc 2 "$bin" explore "$bank" --seeds 0
printf 'name: x\nkind: kernel\nworkload: {clients: zero}\n' > "$tmp/bad.yaml"
expect_rc 2 "$bin" run "$tmp/bad.yaml"
lines=$("$bin" run "$tmp/bad.yaml" 2>&1 >/dev/null | wc -l)
[ "$lines" -eq 1 ] || fail "bad scenario printed $lines lines, wanted 1"
expect_rc 0 "$bin" --help
expect_rc 0 "$bin" explore --help
# A failing seed's replay line names the binary as it was invoked (a user's own binary, which
# registers the user's computations, prints its own name), once.
"$bin" explore "$src/scenarios/target_reshard.yaml" --seeds 1 --bug reshard-watches-widest > "$tmp/failing.txt"
grep -qF "    replay: $bin replay $src/scenarios/target_reshard.yaml --seed 1 --bug reshard-watches-widest" "$tmp/failing.txt" \
  || fail "replay line: $(grep replay "$tmp/failing.txt")"
[ "$(grep -c 'replay' "$tmp/failing.txt")" -eq 1 ] || fail "the replay command is printed more than once"
# --stop-on-first-failure starts no round of seeds once one failed.
"$bin" explore "$src/scenarios/target_reshard.yaml" --seeds 100 --bug reshard-watches-widest --stop-on-first-failure \
  --jobs 1 > "$tmp/stopped.txt"
grep -q "4 failed (stopped at the first failure, 4 of 100 seeds run)" "$tmp/stopped.txt" \
  || fail "--stop-on-first-failure: $(head -1 "$tmp/stopped.txt")"
# explore over a folder explores every scenario in it; a demonstration that fails is as
# expected: exit 0, and its JUnit test case passes.
mkdir -p "$tmp/lib" "$tmp/empty"
for f in kernel_bank http_ignores_key_exactly_once; do
  sed "s#pipeline: #pipeline: $src/scenarios/#" "$src/scenarios/$f.yaml" >"$tmp/lib/$f.yaml"
done
cp "$src/scenarios/pipelines/http_sink.yaml" "$tmp/lib/"  # a pipeline spec beside them is passed over
expect_rc 0 "$bin" explore "$tmp/lib" --seeds 6 --jobs 2 --junit "$tmp/lib.xml"
"$bin" explore "$tmp/lib" --seeds 6 --json >"$tmp/lib.json"
python3 - "$tmp/lib.json" "$tmp/lib.xml" <<'PY' || fail "explore over a folder: JSON or JUnit"
import json, sys, xml.etree.ElementTree as ET
j = json.load(open(sys.argv[1]))
assert j["explored"] == 2 and j["as_expected"] == 2, j
demo = [s for s in j["scenarios"] if s["demonstrates_failure"]][0]
assert demo["outcome"] == "failed as expected" and demo["as_expected"] and demo["failed"] > 0, demo
assert all(s["unmet_requirement"] is None for s in j["scenarios"]), j
cases = ET.parse(sys.argv[2]).getroot().findall("./testsuite/testcase")
assert len(cases) == 2 and all(c.find("failure") is None for c in cases), [c.attrib for c in cases]
assert any("seeds 1-6" in c.get("name") for c in cases)
PY
# A failing scenario: a JUnit failure with the check, the detail and the replay command.
expect_rc 1 "$bin" explore "$src/scenarios/target_reshard.yaml" --seeds 2 --bug reshard-watches-widest --junit "$tmp/failing.xml"
python3 - "$tmp/failing.xml" "$bin replay $src/scenarios/target_reshard.yaml --seed 1 --bug reshard-watches-widest" <<'PY' ||
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert root.get("failures") == "1", root.attrib
failure = root.find("./testsuite/testcase/failure")
assert "2 of 2 seeds failed" in failure.get("message"), failure.attrib
assert "replay: " + sys.argv[2] in failure.text, failure.text
PY
  fail "the JUnit report of a failing scenario"
expect_rc 2 "$bin" explore "$bank" --junit "$tmp/no/such/dir/report.xml"
expect_rc 2 "$bin" explore "$tmp/empty"
expect_rc 2 "$bin" explore "$bank" --time-budget soon
# --time-budget explores until the budget is spent and says how many seeds ran.
"$bin" explore "$bank" --time-budget 2s --jobs 2 --json >"$tmp/budget.json"
python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j["stopped_by"] == "time budget" and j["seeds"] > 8, j["seeds"]' \
  "$tmp/budget.json" || fail "--time-budget 2s: $(head -c 300 "$tmp/budget.json")"
# A budget over a slow and a fast scenario is shared by seeds: each round goes to the one that
# ran fewer, so they end within a round (8 seeds with 2 jobs) of each other, however the
# machine's load varied (a split of the time by measured cost gave 112 and 536 under load).
"$bin" explore "$src/scenarios/retryable_request.yaml" "$bank" --time-budget 6s --jobs 2 --json >"$tmp/shared.json"
python3 - "$tmp/shared.json" <<'PY' || fail "--time-budget shared by seeds: $(head -c 400 "$tmp/shared.json")"
import json, sys
s = {x["scenario"].rsplit("/", 1)[-1]: (x["seeds"], x["stopped_by"]) for x in json.load(open(sys.argv[1]))["scenarios"]}
(slow, why_slow), (fast, why_fast) = s["retryable_request.yaml"], s["kernel_bank.yaml"]  # ~50 ms and ~4 ms a seed
assert slow >= 8 and abs(slow - fast) <= 8 and why_slow == why_fast == "time budget", s
PY
# CI: the seeds from the environment, named in the first line; a bad value is exit 2.
ONCEFLOW_SEED=7 ONCEFLOW_SEEDS=2 "$bin" explore "$bank" >"$tmp/envseed.txt"
grep -q "^explore .*: 2 seeds from 7 (ONCEFLOW_SEED=7 ONCEFLOW_SEEDS=2)" "$tmp/envseed.txt" ||
  fail "ONCEFLOW_SEED in explore: $(head -1 "$tmp/envseed.txt")"
out=$(ONCEFLOW_SEED=7 "$bin" explore "$bank" --first-seed 3 --seeds 1)
grep -q "1 seeds from 3 (.* faults)" <<<"$out" && ! grep -q "ONCEFLOW_SEED" <<<"$out" ||
  fail "--first-seed did not win over ONCEFLOW_SEED: $(head -1 <<<"$out")"
expect_rc 2 env ONCEFLOW_SEED=seven "$bin" explore "$bank"
# --continuous: fresh seeds until the budget ends; a new failure written as a scenario that
# replays it (exit 1 when anything failed); no --json with it.
rm -rf "$tmp/failures"
"$bin" explore "$src/scenarios/target_reshard.yaml" --continuous --time-budget 3s --bug reshard-watches-widest \
  --failures-dir "$tmp/failures" >"$tmp/continuous.txt"
rc=$?
[ "$rc" -eq 1 ] || fail "--continuous with a bug exited $rc"
line=$(grep -o "replay: $bin run $tmp/failures/[^ ]* --seed [0-9]* --bug reshard-watches-widest" "$tmp/continuous.txt" | head -1)
[ -n "$line" ] || fail "--continuous: no replay line: $(head -5 "$tmp/continuous.txt")"
expect_rc 1 ${line#replay: }
grep -q "seeds from [0-9]* (rerun this stream with ONCEFLOW_SEED=" "$tmp/continuous.txt" || fail "--continuous first line"
expect_rc 0 "$bin" explore "$bank" --continuous --time-budget 1s --failures-dir "$tmp/failures-none"
expect_rc 2 "$bin" explore "$bank" --continuous --json
# --guided: the same command gives the same runs, whatever the worker processes; every failing
# run is written as a scenario file whose replay line fails the same check, and shrink works on
# it; the summary shows the coverage over the runs; no --continuous with it.
sc="$src/scenarios/swift_chain.yaml"
for j in 1 2; do
  "$bin" explore "$sc" --guided --seeds 40 --jobs $j --bug dedup-cleanup-ignores-backlog --failures-dir "$tmp/guided$j" \
    --json >"$tmp/guided$j.json"
  [ $? -eq 1 ] || fail "explore --guided with a bug (-j$j) did not exit 1"
done
python3 - "$tmp/guided1.json" "$tmp/guided2.json" <<'PY' || fail "explore --guided: -j1 and -j2 differ, or the report lacks its parts"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
key = lambda j: ([(f["run"], f["seed"], f["mutation"], f["failure"].split(" — replay")[0]) for f in j["failing_seeds"]],
                 j["events_total"], j["coverage"], j["guided"]["corpus"])
assert key(a) == key(b), (key(a)[1:], key(b)[1:])
assert a["guided"]["mutants"] > 0 and a["guided"]["fresh_seeds"] > 0 and a["coverage"]["features"] > 50, a["guided"]
assert any(f["mutant_of_run"] for f in a["failing_seeds"]), "no mutant failed"
PY
mutant=$(python3 -c "import json,sys; print(next(f['replay'] for f in json.load(open(sys.argv[1]))['failing_seeds'] if f['mutant_of_run']))" "$tmp/guided1.json")
[[ $mutant == "$bin run $tmp/guided1/"*" --bug dedup-cleanup-ignores-backlog" ]] || fail "--guided replay line: $mutant"
${mutant} --json >"$tmp/mutant.json"
[ $? -eq 1 ] || fail "a guided failure's replay did not fail: $mutant"
python3 - "$tmp/guided1.json" "$tmp/mutant.json" <<'PY' || fail "the replay of a guided failure fails otherwise than the run it replays"
import json, sys
listed = next(f for f in json.load(open(sys.argv[1]))["failing_seeds"] if f["mutant_of_run"])
v = json.load(open(sys.argv[2]))["violations"][0]
assert listed["failure"].split(" — replay")[0] == v["check"] + ": " + v["detail"].split(" — replay")[0], (listed["failure"], v)
PY
file=$(awk '{print $3}' <<<"$mutant")
seed=$(awk '{print $5}' <<<"$mutant")
"$bin" shrink "$file" --seed "$seed" --bug dedup-cleanup-ignores-backlog --out "$tmp/guided-shrunk.yaml" >/dev/null 2>&1
[ $? -eq 1 ] || fail "shrink on a guided failure's file did not exit 1"
out=$("$bin" explore "$src/scenarios/keyed_aggregation.yaml" --guided --seeds 16 --failures-dir "$tmp/none" 2>&1)
[ $? -eq 0 ] || fail "explore --guided without a bug: $(tail -3 <<<"$out")"
grep -q "^explore .*keyed_aggregation.yaml --guided: 16 runs (.* fresh seeds from 1 (swarm faults), .* mutants of a corpus of .* runs), 16 passed, 0 failed" <<<"$out" ||
  fail "explore --guided's first line: $(head -1 <<<"$out")"
grep -q "coverage: [0-9]* features after 16 runs; new ones in each tenth of the runs: " <<<"$out" || fail "no coverage line"
[ ! -e "$tmp/none" ] || fail "explore --guided wrote failures where none failed"
expect_rc 2 "$bin" explore "$bank" --guided --continuous
# The engine's bug switches, listed with the checks that must catch them.
grep -qE "^no-lease-prerequisite +epochs commit without the Lease as prerequisite \(caught by fencing\)$" <<<"$("$bin" list --bugs)" || fail "list --bugs"
# list finds the scenario library from any directory.
# (Output is captured before grep -q reads it: under pipefail, a writer cut off by grep's early
# exit would fail the pipeline.)
grep -q "retryable_request.yaml" <<<"$(cd "$tmp" && "$bin" list)" || fail "list outside the repository found no library"
# CLI conventions: --version, help COMMAND, an unknown command named, defaults shown.
grep -qE '^onceflow [0-9]+\.[0-9]+\.[0-9]+$' <<<"$("$bin" --version)" || fail "--version: $("$bin" --version 2>&1)"
grep -q -- "--seeds" <<<"$("$bin" help explore)" || fail "help explore did not show explore's options"
expect_rc 0 "$bin" help
expect_rc 2 "$bin" help nosuch
expect_rc 2 "$bin" foo
msg=$("$bin" foo 2>&1 >/dev/null)
[[ $msg == "onceflow: unknown command 'foo' (commands: run, explore, "* ]] || fail "unknown command: $msg"
# An option the command lacks is named, not its value taken for a scenario's path.
msg=$("$bin" explore "$src/scenarios/keyed_aggregation.yaml" --seed 100 2>&1 >/dev/null)
[[ $msg == "onceflow: explore: unknown option '--seed' "* ]] || fail "unknown option: $msg"
grep -q -- "--seeds.*100" <<<"$("$bin" explore --help)" || fail "explore --help does not show --seeds' default"
grep -q -- "--seed.*1" <<<"$("$bin" run --help)" || fail "run --help does not show --seed's default"

# onceflow real: a small run ends by itself, verifies, and resumes to the same answer.
real_spec="$src/scenarios/real/keyed_aggregation.yaml"
"$bin" real "$real_spec" --data "$tmp/real" --messages 500 --no-progress --verify > "$tmp/real.json" \
  || fail "onceflow real --verify failed: $(cat "$tmp/real.json")"
grep -q '"verdict": "pass"' "$tmp/real.json" || fail "onceflow real did not verify"
grep -q '"inputs": 500' "$tmp/real.json" || fail "onceflow real did not read back 500 inputs"
"$bin" real "$real_spec" --data "$tmp/real" --messages 500 --no-progress --verify > "$tmp/real2.json" \
  || fail "a rerun on the same --data failed"
grep -q '"outputs": 500' "$tmp/real2.json" || fail "a rerun changed the outputs: $(cat "$tmp/real2.json")"
# --rate paces the producer; --stats gives the rate and the latency of every output.
start=$(date +%s%N)
"$bin" real "$real_spec" --data "$tmp/rated" --messages 600 --rate 400 --no-progress --stats > "$tmp/rated.json" \
  || fail "onceflow real --rate failed: $(cat "$tmp/rated.json")"
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$elapsed_ms" -ge 1400 ] || fail "--rate 400 wrote 600 inputs in $elapsed_ms ms"
python3 - "$tmp/rated.json" <<'PY' || fail "--stats: $(cat "$tmp/rated.json")"
import json, sys
v = json.load(open(sys.argv[1]))
assert v["latency_samples"] == 600, v
assert 0 < v["latency_p50_ms"] <= v["latency_p99_ms"] < 10000, v
assert 0 < v["msgs_per_s"] <= 450, v
assert 0 < v["first_epoch_ms"] < v["wall_s"] * 1000, v
PY
# --stats with --verify: one JSON document (the figures inside the verdict), and --verify says
# how far it got on stderr unless --no-progress.
"$bin" real "$real_spec" --data "$tmp/both" --messages 300 --stats --verify >"$tmp/both.json" 2>"$tmp/both.err" ||
  fail "--stats --verify: $(cat "$tmp/both.err")"
python3 - "$tmp/both.json" <<'PY' || fail "--stats --verify is not one document: $(head -c 300 "$tmp/both.json")"
import json, sys
v = json.load(open(sys.argv[1]))  # one document, or this raises
assert v["verdict"] == "pass" and v["stats"]["latency_samples"] == 300, v
PY
grep -q "^onceflow real --verify: .* re-executing the committed history" "$tmp/both.err" ||
  fail "--verify showed no progress: $(cat "$tmp/both.err")"
# A file of the other kind is named as such.
grep -q "a pipeline spec, not a scenario file" <<<"$("$bin" run "$real_spec" 2>&1)" || fail "run given a spec"
expect_rc 2 "$bin" run "$real_spec"
err=$("$bin" real "$src/scenarios/user_lottery.yaml" --data "$tmp/z" 2>&1)
grep -q "a scenario file, not a pipeline spec.*its pipeline is [^ ]*scenarios/pipelines/[a-z_]*\.yaml$" <<<"$err" || fail "real given a scenario: $err"
expect_rc 2 "$bin" real "$real_spec" --data "$tmp/y" --rate -5
# --bug: a switch it knows (a simulated component's are refused: a real run has none), else one line.
grep -q "unknown bug switch 'no-such-bug' (known: .*no-input-dedup" <<<"$("$bin" real "$real_spec" --data "$tmp/y" --bug no-such-bug 2>&1)" ||
  fail "real --bug no-such-bug"
expect_rc 2 "$bin" real "$real_spec" --data "$tmp/y" --bug no-such-bug
expect_rc 2 "$bin" real "$real_spec" --data "$tmp/y" --bug store-delete-not-a-write
expect_rc 2 "$bin" real "$real_spec" --data "$tmp/y" --bug kafka-init-keeps-epoch
[[ ! -e $tmp/y ]] || fail "a refused real run made its data directory"
expect_rc 2 "$bin" real "$real_spec"                      # --data (or --store) is required
expect_rc 2 "$bin" real "$real_spec" --data "$tmp/both" --store "host=$tmp/nothing"   # not both
expect_rc 2 "$bin" real "$real_spec" --store "host=$tmp/nothing dbname=x connect_timeout=2"  # no server there
# A worker's process verifies nothing (it ends when the pipeline stops): --verify is refused.
grep -q "^onceflow: --verify is a controller's" <<<"$("$bin" real "$real_spec" --store "host=$tmp/nothing" --role worker \
  --verify 2>&1)" || fail "real --role worker --verify"
expect_rc 2 "$bin" real "$real_spec" --store "host=$tmp/nothing" --role worker --verify
lines=$("$bin" real "$real_spec" --store "host=$tmp/nothing dbname=x" 2>&1 >/dev/null | wc -l)
[ "$lines" -eq 1 ] || fail "an unreachable --store gave $lines lines"
# Roles: several processes share a PostgreSQL store; LevelDB and --workers belong to --role all.
expect_rc 2 "$bin" real "$real_spec" --store "host=$tmp/nothing" --role leader              # no such role
expect_rc 2 "$bin" real "$real_spec" --data "$tmp/roles" --role worker                       # LevelDB: one process
expect_rc 2 "$bin" real "$real_spec" --store "host=$tmp/nothing" --role worker --workers 3   # fibers of --role all
expect_rc 2 "$bin" real "$real_spec" --data "$tmp/roles" --name worker-1                     # --name needs a role
expect_rc 2 "$bin" real "$real_spec" --store "host=$tmp/nothing" --role worker --name "a b"  # no spaces
[ ! -e "$tmp/roles" ] || fail "a refused --role made a data directory"
expect_rc 2 "$bin" real "$tmp/missing.yaml" --data "$tmp/x"
expect_rc 2 "$bin" real "$real_spec" --data "$tmp/y" --workers 0
expect_rc 2 "$bin" real "$real_spec" --data "$tmp/y" --drain-timeout 2h
expect_rc 2 "$bin" real "$real_spec" --data "$tmp/y" --drain-timeout soon
printf 'name: k\nsources:\n  s: {type: kafka, partitions: 1, output_stream: x}\nsinks:\n  o: {type: sync_queue, input_stream: x}\n' > "$tmp/kafka.yaml"
lines=$("$bin" real "$tmp/kafka.yaml" --data "$tmp/z" 2>&1 >/dev/null | wc -l)
expect_rc 2 "$bin" real "$tmp/kafka.yaml" --data "$tmp/z"
[ "$lines" -eq 1 ] || fail "an unsupported source printed $lines lines, wanted 1"

# Pipelines: the same seed gives the same hash across processes; --bug is caught.
rr="$src/scenarios/keyed_aggregation.yaml"
p1=$("$bin" run "$rr" --seed 4 --json | sed -n 's/.*"trace_hash": "\(.*\)".*/\1/p')
p2=$("$bin" run "$rr" --seed 4 --json | sed -n 's/.*"trace_hash": "\(.*\)".*/\1/p')
[ -n "$p1" ] && [ "$p1" = "$p2" ] || fail "pipeline: same seed, different hashes: '$p1' '$p2'"
expect_rc 2 "$bin" run "$rr" --bug no-such-bug
"$bin" explore "$rr" --seeds 20 --bug new-seqno-on-resend --json > "$tmp/bugs.json"
bad=$(sed -n 's/.*"seed": \([0-9]*\).*/\1/p' "$tmp/bugs.json" | head -1)
[ -n "$bad" ] || fail "new-seqno-on-resend was not caught in 20 seeds"
expect_rc 1 "$bin" run "$rr" --seed "$bad" --bug new-seqno-on-resend
"$bin" run "$rr" --seed "$bad" --bug new-seqno-on-resend --json > "$tmp/bug.json"
grep -q '"trace_excerpt"' "$tmp/bug.json" || fail "a failing run has no trace excerpt"
grep -q 'target-counts_out' "$tmp/bug.json" || fail "the excerpt does not show what the target did"

# shrink: a failing run with a bug switch becomes a smaller scenario failing the same check.
"$bin" shrink "$rr" --seed "$bad" --bug new-seqno-on-resend --out "$tmp/shrunk.yaml" > "$tmp/shrink.txt"
[ $? -eq 1 ] || fail "shrink did not exit 1"
check=$(sed -n 's/.*: fails \([a-z-]*\)$/\1/p' "$tmp/shrink.txt")
grep -Eq "faults ([0-9]+) -> ([0-9]+), workload ([0-9]+) -> ([0-9]+)" "$tmp/shrink.txt" || fail "shrink printed no summary"
read -r fb fa wb wa < <(sed -n 's/.*faults \([0-9]*\) -> \([0-9]*\), workload \([0-9]*\) -> \([0-9]*\).*/\1 \2 \3 \4/p' "$tmp/shrink.txt")
[ "$fa" -lt "$fb" ] || [ "$wa" -lt "$wb" ] || fail "shrink reduced neither faults ($fb -> $fa) nor workload ($wb -> $wa)"
"$bin" run "$tmp/shrunk.yaml" --seed "$bad" --bug new-seqno-on-resend > "$tmp/shrunk_run.txt"
[ $? -eq 1 ] || fail "the shrunk scenario does not fail"
grep -Eq "^  $check +FAIL" "$tmp/shrunk_run.txt" || fail "the shrunk scenario does not fail $check"
expect_rc 2 "$bin" shrink "$rr" --seed 1 --out "$tmp/nothing.yaml"   # a passing seed: nothing to shrink
# A crash at a fault point that the failure needs is written down as a scripted point_crash
# (keyed_aggregation seed 3: worker-1 crashing before a commit),
# the random fault points are off, and durations carry their units.
"$bin" shrink "$src/scenarios/keyed_aggregation.yaml" --seed 3 --bug new-seqno-on-resend --out "$tmp/points.yaml" \
  > "$tmp/points.txt"
grep -q "crashes at fault points: scripted as point_crash faults" "$tmp/points.txt" || fail "shrink: $(cat "$tmp/points.txt")"
grep -Eq "kind: point_crash, node: worker-[0-9]+, point: epoch\.[a-z_]+, at: [0-9]+\.[0-9]{6}s, for: 0\.300000s" "$tmp/points.yaml" ||
  fail "the shrunk plan names no point_crash: $(grep -A5 'plan:' "$tmp/points.yaml")"
grep -q "fault_points: false" "$tmp/points.yaml" || fail "the shrunk scenario keeps random fault points"
grep -q "heal_at: [0-9]*\.[0-9]\{6\}s$" "$tmp/points.yaml" || fail "heal_at without its unit: $(grep heal_at "$tmp/points.yaml")"
grep -Eq "(at|for): [0-9]+," "$tmp/points.yaml" && fail "a duration without its unit: $(grep -A5 'plan:' "$tmp/points.yaml")"
"$bin" run "$tmp/points.yaml" --seed 3 --bug new-seqno-on-resend > "$tmp/points_run.txt"
[ $? -eq 1 ] && grep -q "effect: point_crash 1 crashes at the fault point" "$tmp/points_run.txt" ||
  fail "the shrunk point_crash scenario: $(head -12 "$tmp/points_run.txt")"
# The excerpt printed with a failure: the lines naming the failing ids, and the faults around
# them (here the crash at the fault point).
sed -n '/trace excerpt/,$p' "$tmp/points_run.txt" > "$tmp/points_excerpt.txt"
grep -q "fault point epoch\.[a-z_]* fires: crash" "$tmp/points_excerpt.txt" ||
  fail "the excerpt shows no crash at the fault point: $(head -5 "$tmp/points_excerpt.txt")"
# A ClickHouse duplicate: the excerpt has the blocks that carried the duplicated id.
"$bin" run "$src/scenarios/clickhouse_short_window.yaml" --seed 20 > "$tmp/ch.txt"
dup=$(grep -o 'duplicate: message [0-9a-f]\{16\}' "$tmp/ch.txt" | head -1 | awk '{ print $3 }')
[ -n "$dup" ] || fail "clickhouse_short_window seed 20 names no duplicated id: $(grep FAIL "$tmp/ch.txt" | head -2)"
sed -n '/trace excerpt/,$p' "$tmp/ch.txt" > "$tmp/ch_excerpt.txt"
grep -q "inserts a block of .*\[.*$dup" "$tmp/ch_excerpt.txt" ||
  fail "the excerpt shows no ClickHouse block with $dup"
# A point_crash needs a known point and an engine process.
printf 'name: p\nkind: pipeline\npipeline: %s\nfaults:\n  swarm: false\n  plan:\n    - {kind: point_crash, node: worker-1, point: nowhere, at: 1s}\n' \
  "$src/scenarios/pipelines/keyed_aggregation.yaml" > "$tmp/badpoint.yaml"
expect_rc 2 "$bin" run "$tmp/badpoint.yaml" --seed 1
sed 's/node: worker-1, point: nowhere/node: store, point: epoch.before_commit/' "$tmp/badpoint.yaml" > "$tmp/badnode.yaml"
expect_rc 2 "$bin" run "$tmp/badnode.yaml" --seed 1

# list --json names every scenario with its guarantees and fault kinds.
"$bin" list --scenarios "$src/scenarios" --json > "$tmp/list.json" || fail "list failed"
for key in '"path"' '"name"' '"guarantees"' '"fault_kinds"' '"demonstrates_failure"'; do
  grep -q "$key" "$tmp/list.json" || fail "list --json lacks $key"
done
[ "$(grep -c '"path"' "$tmp/list.json")" -eq "$(ls "$src"/scenarios/*.yaml | wc -l)" ] || fail "list missed a scenario"

# Checking the checks: a fault kind made inert (scheduled, doing nothing) is reported as
# without effect, and --require-effects turns that into a failure; so does a probe required
# but never reached.
headline="$src/scenarios/retryable_request.yaml"
expect_rc 0 "$bin" explore "$headline" --seeds 30 --jobs 2 --require-effects
expect_rc 1 "$bin" explore "$headline" --seeds 30 --jobs 2 --require-effects --inert-fault crash
"$bin" explore "$headline" --seeds 30 --jobs 2 --require-effects --inert-fault crash --json >"$tmp/unmet.json"
grep -q '"unmet_requirement": "fault kinds with no effect in any seed: crash"' "$tmp/unmet.json" ||
  fail "unmet_requirement in --json"
grep -q "fault kind crash .* no effect" <<<"$("$bin" explore "$headline" --seeds 30 --jobs 2 --inert-fault crash 2>&1)" ||
  fail "an inert crash injector went unreported"
expect_rc 1 "$bin" explore "$src/scenarios/keyed_aggregation.yaml" --seeds 5 --require-probes
"$bin" list --probes --json | python3 -c 'import json, sys; assert len(json.load(sys.stdin)["probes"]) >= 40' ||
  fail "list --probes lists fewer than 40 probes"

# Numbers out of range exit 2 with one line naming the option, never clamped or wrapped.
for args in "--seeds -1" "--seeds 99999999999999999999" "--seeds 0" "--jobs 100000" "--first-seed -3"; do
  # shellcheck disable=SC2086
  "$bin" explore "$bank" $args >/dev/null 2>"$tmp/err.txt"
  rc=$?
  [ "$rc" -eq 2 ] && [ "$(wc -l < "$tmp/err.txt")" -eq 1 ] && grep -q -- "${args%% *}" "$tmp/err.txt" ||
    fail "explore $args: exit $rc, stderr: $(head -c 200 "$tmp/err.txt")"
done
for args in "--seed -1" "--seed 1e23" "--seed 18446744073709551616"; do
  # shellcheck disable=SC2086
  expect_rc 2 "$bin" run "$bank" $args
done
for n in -5 3000000000 4294967306; do
  expect_rc 2 "$bin" real "$src/scenarios/pipelines/keyed_aggregation.yaml" --data "$tmp/real-bad" --messages "$n"
done
[ ! -e "$tmp/real-bad" ] || fail "a refused onceflow real created its data directory"

# The first SIGINT stops the built-in producer at once: what was not yet written stays
# unwritten (it once kept writing all of --messages while the pipeline drained), and a rerun
# resumes.
"$bin" real "$src/scenarios/pipelines/keyed_aggregation.yaml" --data "$tmp/real-sigint" --messages 2000000 \
  --progress-every 200ms >/dev/null 2>"$tmp/sigint.log" &
pid=$!
sleep 1.5
kill -INT "$pid"
wait "$pid"
rc=$?
written=$(grep -o 'in [0-9]*/2000000' "$tmp/sigint.log" | tail -1 | sed 's|in \([0-9]*\)/.*|\1|')
[ "$rc" -eq 0 ] && [ -n "$written" ] && [ "$written" -lt 2000000 ] && grep -q "stopped on signal 2" "$tmp/sigint.log" ||
  fail "SIGINT under load: exit $rc, $written of 2000000 written: $(tail -2 "$tmp/sigint.log")"
# One signal sent twice at once (`timeout` signals its command and then its process group)
# is one request: a stop with nothing in flight, not the second signal's interruption.
"$bin" real "$src/scenarios/pipelines/keyed_aggregation.yaml" --data "$tmp/real-twice" --messages 2000000 \
  --no-progress >/dev/null 2>"$tmp/twice.log" &
pid=$!
sleep 1.5
kill -TERM "$pid"; kill -TERM "$pid"
wait "$pid"
rc=$?
[ "$rc" -eq 0 ] && grep -q "stopped on signal 15, nothing in flight" "$tmp/twice.log" ||
  fail "one SIGTERM sent twice at once: exit $rc: $(tail -2 "$tmp/twice.log")"
# Asked to --verify, a run that a signal stopped before it drained was not verified: exit 3,
# not 0, which a script waiting for a verdict would take as a pass; the next run resumes it.
"$bin" real "$src/scenarios/pipelines/keyed_aggregation.yaml" --data "$tmp/real-unverified" --messages 2000000 \
  --no-progress --verify >"$tmp/unverified.json" 2>"$tmp/unverified.log" &
pid=$!
sleep 1.5
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 3 ] && grep -q "stopped on signal 15" "$tmp/unverified.log" &&
  grep -q -- "--verify: not verified, the run ended before it drained (exit 3)" "$tmp/unverified.log" ||
  fail "--verify stopped by SIGTERM: exit $rc: $(tail -2 "$tmp/unverified.log")"
# Its progress lines (a fresh directory, one output per input) never say more was delivered
# this run than the targets hold, nor more than went in (30 of 31 lines once did).
python3 - "$tmp/sigint.log" <<'PY' || fail "progress lines disagree: $(grep -m3 'delivered' "$tmp/sigint.log")"
import re, sys
lines = [l for l in open(sys.argv[1]).read().replace("\r", "\n").splitlines() if "delivered" in l]
assert lines, "no progress line"
for l in lines:
    m = re.search(r"in (\d+)/\d+, outputs (\d+) in all, delivered (\d+) this run", l)
    assert m, l
    produced, outputs, delivered = map(int, m.groups())
    assert delivered <= outputs <= produced, l
PY

# SIGHUP stops as SIGINT and SIGTERM do, and so does a signal in the first 100 ms, before the
# spec is read or the store is open (both once killed the process with no message).
for sig in HUP TERM; do
  "$bin" real "$src/scenarios/pipelines/keyed_aggregation.yaml" --data "$tmp/real-$sig" --messages 100000 \
    >/dev/null 2>"$tmp/sig.log" &
  pid=$!
  # As early as can be caught: once the process catches SIGTERM (its SigCgt mask in /proc), for
  # a sanitizer build or a loaded machine may take more than 100 ms to reach main(); a signal
  # before that kills any program. Only once it runs onceflow (its comm, the binary's name cut
  # to 15 characters): before the exec, the forked child is this script's bash, whose mask
  # (bash catches SIGTERM) says nothing about onceflow, and which a SIGTERM ends with 143 (a
  # CI run once failed so).
  for _ in $(seq 500); do
    # comm first: a mask read after it comes from onceflow too.
    comm=$(cat "/proc/$pid/comm" 2>/dev/null)
    mask=$(awk '/^SigCgt:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
    [ "$comm" = "$(basename "$bin" | cut -c1-15)" ] && [ -n "$mask" ] && (( (16#$mask >> 14) & 1 )) && break
    sleep 0.01
  done
  [ "$sig" = HUP ] && sleep 0.5
  kill -"$sig" "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" -eq 0 ] && grep -q "stopped on signal\|interrupted on signal" "$tmp/sig.log" ||
    fail "SIG$sig: exit $rc: $(tail -2 "$tmp/sig.log")"
done

# A check with nothing to check says n/a in run's table, as in --json and explore.
"$bin" run "$src/scenarios/keyed_aggregation.yaml" --seed 1 >"$tmp/na.txt"
grep -Eq '^  timers +n/a +no timers' "$tmp/na.txt" || fail "run shows no n/a for timers: $(grep timers "$tmp/na.txt")"

# An empty path to write to is refused (it once wrote nothing and exited 0).
for args in "run $src/scenarios/keyed_aggregation.yaml --trace" "explore $src/scenarios/keyed_aggregation.yaml --seeds 1 --junit"; do
  # shellcheck disable=SC2086
  "$bin" $args '' >/dev/null 2>"$tmp/err.txt"
  rc=$?
  [ "$rc" -eq 2 ] && grep -q "an empty path" "$tmp/err.txt" || fail "$args '': exit $rc, $(head -c 200 "$tmp/err.txt")"
done

# A function and its spec that disagree (RequestProcessor sets timers; the spec declares no
# timer_streams): one line naming the computation and the call, exit 2, in the simulator and
# in onceflow real (which once aborted on an assertion).
sed '/timer_streams:/,+1d' "$src/scenarios/pipelines/retryable_request.yaml" >"$tmp/no_timers.yaml"
sed "s|pipeline: pipelines/retryable_request.yaml|pipeline: $tmp/no_timers.yaml|" "$src/scenarios/retryable_request.yaml" \
  >"$tmp/no_timers_scenario.yaml"
"$bin" run "$tmp/no_timers_scenario.yaml" --seed 1 >/dev/null 2>"$tmp/err.txt"
rc=$?
[ "$rc" -eq 2 ] && grep -q "computation RequestProcessor: sets a timer, but its spec declares no timer_streams" "$tmp/err.txt" ||
  fail "run of a spec without the timer_streams its function uses: exit $rc, $(head -c 300 "$tmp/err.txt")"
"$bin" real "$tmp/no_timers.yaml" --data "$tmp/real-no-timers" --messages 200 --no-progress >/dev/null 2>"$tmp/err.txt"
rc=$?
[ "$rc" -eq 2 ] && grep -q "computation RequestProcessor: sets a timer" "$tmp/err.txt" ||
  fail "real of a spec without the timer_streams its function uses: exit $rc, $(head -c 300 "$tmp/err.txt")"

if [ "$failures" -eq 0 ]; then echo "cli_test: all checks passed"; fi
exit "$failures"
