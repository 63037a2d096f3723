#!/usr/bin/env bash
# Computations as users write them (core/user_style.h) under `onceflow real`, unpaced: their
# outputs depend on the order and time the engine chose, which --verify must accept because it
# holds the run to its own committed history. Each pipeline is killed with SIGKILL at three
# moments, resumed, and verified (real_verify_test shows that the same --verify fails on a
# lost output, on state the history does not give and on a history row gone).
# Usage: real_user_style_test.sh ONCEFLOW SOURCE_DIR [MESSAGES]
set -euo pipefail
onceflow=$1
src=$2
messages=${3:-50000}
work=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for pipeline in longest_so_far running_max session_window lottery escalation order_payment_join; do
  spec="$src/scenarios/pipelines/$pipeline.yaml"
  data="$work/$pipeline"
  # Three lives killed at 0.3, 0.6 and 0.9 s, then one to the end with --verify.
  for at in 0.3 0.6 0.9; do
    "$onceflow" real "$spec" --data "$data" --messages "$messages" --no-progress >/dev/null 2>"$work/life.log" &
    pid=$!
    sleep "$at"
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  set +e
  "$onceflow" real "$spec" --data "$data" --messages "$messages" --no-progress --verify >"$work/verify.json" 2>"$work/last.log"
  rc=$?
  set -e
  [[ $rc == 0 ]] || fail "$pipeline: --verify after kill -9 exited $rc: $(grep -B2 -A2 '"fail"' "$work/verify.json" | head -12) $(tail -3 "$work/last.log")"
  inputs=$(grep -o '"inputs": [0-9]*' "$work/verify.json" | awk '{ print $2 }')
  [[ $inputs == "$messages" ]] || fail "$pipeline: --verify counted $inputs inputs, not $messages"
  echo "$pipeline: $messages inputs, three kills, --verify passes"
done

echo "ok"
