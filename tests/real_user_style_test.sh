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
  input=(--messages "$messages")
  # A session closes after 30 ms of event time without a word of its key: unpaced, 16 keys'
  # words come microseconds apart and no session ever closes (0 outputs, nothing to verify).
  # 400 keys at 10,000 inputs a second put 40 ms between a key's words.
  [[ $pipeline == session_window ]] && input=(--messages $((messages / 2)) --keys 400 --rate 10000)
  # Three lives killed at 0.3, 0.6 and 0.9 s, then one to the end with --verify.
  for at in 0.3 0.6 0.9; do
    "$onceflow" real "$spec" --data "$data" "${input[@]}" --no-progress >/dev/null 2>"$work/life.log" &
    pid=$!
    sleep "$at"
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  set +e
  "$onceflow" real "$spec" --data "$data" "${input[@]}" --no-progress --verify >"$work/verify.json" 2>"$work/last.log"
  rc=$?
  set -e
  [[ $rc == 0 ]] || fail "$pipeline: --verify after kill -9 exited $rc: $(grep -B2 -A2 '"fail"' "$work/verify.json" | head -12) $(tail -3 "$work/last.log")"
  inputs=$(grep -o '"inputs": [0-9]*' "$work/verify.json" | awk '{ print $2 }')
  [[ $inputs == "${input[1]}" ]] || fail "$pipeline: --verify counted $inputs inputs, not ${input[1]}"
  # A run whose sinks got nothing verifies nothing of them.
  outputs=$(grep -o '"outputs": [0-9]*' "$work/verify.json" | head -1 | awk '{ print $2 }')
  [[ $outputs -gt 0 ]] || fail "$pipeline: no output to verify"
  echo "$pipeline: ${input[1]} inputs, $outputs outputs, three kills, --verify passes"
done

echo "ok"
