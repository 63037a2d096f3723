#!/usr/bin/env bash
# Your command line on your pipeline, and the stock onceflow's one-line refusal of it.
# Usage: check.sh MY_ONCEFLOW ONCEFLOW DIR
set -u
mine=$1
stock=$2
dir=$3
"$mine" explore "$dir/scenario.yaml" --seeds 20 --jobs 2 || { echo "FAIL: explore"; exit 1; }
"$mine" run "$dir/scenario.yaml" --seed 3 --json | grep -q '"verdict": "pass"' || { echo "FAIL: run"; exit 1; }
# The stock onceflow does not know this project's computations: a one-line error, exit code 2.
err=$("$stock" run "$dir/scenario.yaml" 2>&1 >/dev/null)
rc=$?
[ "$rc" -eq 2 ] || { echo "FAIL: the stock onceflow exited $rc on an unknown computation"; exit 1; }
case "$err" in
  *"is not registered in this program"*) ;;
  *) echo "FAIL: unclear error: $err"; exit 1 ;;
esac
echo "check.sh: all checks passed"
