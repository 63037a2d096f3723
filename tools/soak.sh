#!/usr/bin/env bash
# A longer run of every RapidCheck property than ctest gives them (docs/testing.md).
#   tools/soak.sh [PIPELINE_CASES]   default 20000; model properties get ten times as many
# Builds first (release, build/). Each binary gets a fresh RapidCheck seed; a failure stops
# the soak and its output carries the replay command and the RC_PARAMS reproduce string.
set -euo pipefail
cd "$(dirname "$0")/.."
cases=${1:-20000}
bash tools/dev.sh build >/dev/null
run() {
  local budget=$1 binary=$2
  echo "== $binary: max_success=$budget"
  RC_PARAMS="max_success=$budget" "$binary" --gtest_brief=1
}
for t in store_model_test dedup_model_test message_id_props_test outbox_props_test; do
  run $((cases * 10)) "build/tests/$t"
done
run "$cases" build/tests/pipeline_props_test
echo "soak passed"
