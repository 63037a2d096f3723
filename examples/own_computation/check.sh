#!/usr/bin/env bash
# Your command line on your pipeline, and the stock onceflow's one-line refusal of it.
# Usage: check.sh MY_ONCEFLOW ONCEFLOW DIR
set -u
mine=$1
stock=$2
dir=$3
out=$("$mine" explore "$dir/scenario.yaml" --seeds 20 --jobs 2 --require-sometimes) || { echo "$out"; echo "FAIL: explore"; exit 1; }
# Your assertions are counted over the seeds, and your fault point fired on some of them.
grep -q "a longer word replaces a shorter one .* sometimes" <<<"$out" || { echo "$out"; echo "FAIL: no assertion table"; exit 1; }
grep -Eq "^  buggify +[0-9]+ +[1-9][0-9]* user fault points fired" <<<"$out" || { echo "$out"; echo "FAIL: buggify never fired"; exit 1; }
grep -Eq "^  each key keeps its longest word +20 +0 +0$" <<<"$out" || { echo "$out"; echo "FAIL: your check is not in the table"; exit 1; }
# Your bug switch, caught by your check on a seed that passes without it.
out=$("$mine" mutants --max-seeds 20 --jobs 2) || { echo "$out"; echo "FAIL: mutants"; exit 1; }
grep -Eq "^shorter-wins +caught +each key keeps its longest word" <<<"$out" || { echo "$out"; echo "FAIL: shorter-wins not caught"; exit 1; }
# A function that depends on more than its input and state: re-execution names it.
grep -Eq "^cache-outlives-epoch +caught +re-execution" <<<"$out" || { echo "$out"; echo "FAIL: cache-outlives-epoch not caught by re-execution"; exit 1; }
grep -q "no-lease-prerequisite" <<<"$out" && { echo "FAIL: mutants ran the engine's switches unasked"; exit 1; }
# A harmless switch (the same state through more writes) must stay green on every seed.
grep -Eq "^rewrite-unchanged +held " <<<"$out" || { echo "$out"; echo "FAIL: rewrite-unchanged did not hold"; exit 1; }
grep -q "2 of 2 bug switches caught.*; 1 of 1 harmless switches held" <<<"$out" || { echo "$out"; echo "FAIL: mutants summary"; exit 1; }
# explore says to read a failing seed's re-execution first, with what may follow from it.
out=$("$mine" explore "$dir/scenario.yaml" --seeds 10 --jobs 2 --bug cache-outlives-epoch)
grep -Eq "^    read first: re-execution: computation LongestWord .*; the delivery(, state)? failures may follow" <<<"$out" ||
  { echo "$out"; echo "FAIL: explore does not show the re-execution first"; exit 1; }
# Your program's errors start with its own name.
err=$("$mine" explore "$dir/no-such.yaml" 2>&1 >/dev/null)
[[ $err == "$(basename "$mine"): "*"no-such.yaml"* ]] || { echo "FAIL: error line: $err"; exit 1; }
# Your scenarios and switches, not the library's unless asked.
list=$("$mine" list)
grep -q "scenario.yaml" <<<"$list" && ! grep -q "retryable_request" <<<"$list" || { echo "$list"; echo "FAIL: list"; exit 1; }
grep -q "retryable_request" <<<"$("$mine" list --library)" || { echo "FAIL: list --library"; exit 1; }
grep -q "^shorter-wins" <<<"$("$mine" list --bugs)" || { echo "FAIL: list --bugs"; exit 1; }
"$mine" run "$dir/scenario.yaml" --seed 3 --bug shorter-wins >/dev/null && { echo "FAIL: --bug shorter-wins passed"; exit 1; }
"$mine" run "$dir/scenario.yaml" --seed 3 --json | grep -q '"verdict": "pass"' || { echo "FAIL: run"; exit 1; }
# A real run too (LevelDB, wall clock): --verify holds it to the engine's checks and to yours,
# which fails with the switch on while the engine's pass.
real=$(mktemp -d)
trap 'rm -rf "$real"' EXIT
"$mine" real "$dir/pipeline.yaml" --data "$real/good" --messages 2000 --verify --no-progress >"$real/good.json" 2>"$real/good.log" ||
  { cat "$real/good.json" "$real/good.log"; echo "FAIL: real --verify"; exit 1; }
"$mine" real "$dir/pipeline.yaml" --data "$real/bad" --messages 2000 --verify --no-progress --bug shorter-wins \
  >"$real/bad.json" 2>"$real/bad.log" && { echo "FAIL: real --verify --bug shorter-wins passed"; exit 1; }
python3 - "$real/bad.json" <<'PY' || { cat "$real/bad.json" "$real/bad.log"; echo "FAIL: real --bug shorter-wins"; exit 1; }
import json, sys
v = json.load(open(sys.argv[1]))
failed = [c["name"] for c in v["checks"] if c["verdict"] == "fail"]
sys.exit(0 if v["verdict"] == "fail" and v.get("bug") == "shorter-wins" and failed == ["each key keeps its longest word"] else 1)
PY
# The stock onceflow does not know this project's computations: a one-line error, exit code 2.
err=$("$stock" run "$dir/scenario.yaml" 2>&1 >/dev/null)
rc=$?
[ "$rc" -eq 2 ] || { echo "FAIL: the stock onceflow exited $rc on an unknown computation"; exit 1; }
case "$err" in
  *"is not registered in this program"*) ;;
  *) echo "FAIL: unclear error: $err"; exit 1 ;;
esac
echo "check.sh: all checks passed"
