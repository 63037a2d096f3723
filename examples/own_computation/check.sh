#!/usr/bin/env bash
# The example program runs its own pipeline through the same command line.
set -u
bin=$1
dir=$2
"$bin" explore "$dir/scenario.yaml" --seeds 20 --jobs 2 || { echo "FAIL: explore"; exit 1; }
"$bin" run "$dir/scenario.yaml" --seed 3 --json | grep -q '"verdict": "pass"' || { echo "FAIL: run"; exit 1; }
# The built-in onceflow does not know the computation: a one-line error and exit code 2.
builtin="$(dirname "$bin")/../../cli/onceflow"
if [ -x "$builtin" ]; then
  "$builtin" run "$dir/scenario.yaml" 2> /tmp/own_onceflow_err.$$
  rc=$?
  [ "$rc" -eq 2 ] || { echo "FAIL: the built-in binary exited $rc on an unknown computation"; exit 1; }
  grep -q "'LongestWord' is not registered" /tmp/own_onceflow_err.$$ || { echo "FAIL: unclear error"; exit 1; }
  rm -f /tmp/own_onceflow_err.$$
fi
echo "example: all checks passed"
