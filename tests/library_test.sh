#!/usr/bin/env bash
# The scenario library as CI explores it: every scenario in its own mode and under --swarm;
# every ordinary scenario passes every seed, and every demonstration of a known-bad design
# fails on some seed (in its own mode). Usage: library_test.sh ONCEFLOW SOURCE_DIR [SEEDS]
set -uo pipefail
onceflow=$1
src=$2
seeds=${3:-20}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 1
"$onceflow" list --json >"$tmp/list.json" || { echo "FAIL: onceflow list"; exit 1; }
mapfile -t rows < <(python3 -c '
import json, sys
for s in json.load(open(sys.argv[1]))["scenarios"]:
    print(s["path"], "demonstration" if s["demonstrates_failure"] else "ordinary")' "$tmp/list.json")
[[ ${#rows[@]} -gt 10 ]] || fail "the library lists only ${#rows[@]} scenarios"
for row in "${rows[@]}"; do
  read -r path kind <<<"$row"
  for mode in own swarm; do
    flag=()
    [[ $mode == swarm ]] && flag=(--swarm)
    out="$tmp/$(basename "$path" .yaml)-$mode.json"
    "$onceflow" explore "$path" --seeds "$seeds" --jobs 2 --json "${flag[@]}" >"$out"
    rc=$?
    failed=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["failed"])' "$out" 2>/dev/null || echo "?")
    if [[ $kind == ordinary ]]; then
      [[ $rc -eq 0 && $failed == 0 ]] || fail "$path ($mode): $failed of $seeds seeds failed (exit $rc)"
    elif [[ $mode == own ]]; then
      [[ $rc -eq 0 && $failed != 0 && $failed != "?" ]] || fail "$path (a demonstration) did not fail as expected in $seeds seeds (exit $rc)"
    fi
    echo "$path ($mode, $kind): $failed of $seeds failed"
  done
done
# Seeds that once caught an engine bug pass on every change.
while read -r path seed; do
  "$onceflow" run "$path" --seed "$seed" >/dev/null || fail "$path: regression seed $seed fails"
done < <(python3 -c '
import json, sys
for s in json.load(open(sys.argv[1]))["scenarios"]:
    for seed in s["regression_seeds"]:
        print(s["path"], seed)' "$tmp/list.json")
# Every probe reached somewhere in the library, with the release run's 20 seeds a scenario and
# mode; fewer (as under the sanitizers) explore too little to ask it of them.
if ((seeds < 20)); then
  echo "library_test: probe coverage not checked with $seeds seeds (the release run checks it)"
  echo "library_test: $failures failures"
  [[ $failures -eq 0 ]]
  exit
fi
"$onceflow" list --probes --json >"$tmp/probes.json"
missing=$(python3 - "$tmp" <<'PY'
import json, os, sys
tmp = sys.argv[1]
every = {p["name"] for p in json.load(open(os.path.join(tmp, "probes.json")))["probes"]}
hit = set()
for name in os.listdir(tmp):
    if name.endswith(".json") and name not in ("probes.json", "list.json"):
        effects = json.load(open(os.path.join(tmp, name))).get("effects", {})
        hit |= set(effects.get("probes_hit", {}))
print(" ".join(sorted(every - hit)))
PY
)
[[ -z $missing ]] || fail "probes the library never reached: $missing"
echo "library_test: $failures failures"
[[ $failures -eq 0 ]]
