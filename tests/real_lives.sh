# Sourced by the tests of onceflow real's sinks (after setting onceflow, messages, work and a
# fail function; pid holds the running life for the test's cleanup):
#   lives SPEC DATA KILLS COUNT RATE
# runs KILLS lives of `onceflow real SPEC --data DATA`, paced at RATE inputs a second, each
# killed with SIGKILL at a random moment once the shell command COUNT prints at least its share
# of $messages (what the sink's target holds), then a last life that runs to the end with
# --verify (its JSON in $work/verify.json, its stderr in $work/verify.err).
lives() {
  local spec=$1 data=$2 kills=$3 count=$4 rate=$5 i want
  for ((i = 1; i <= kills; i++)); do
    "$onceflow" real "$spec" --data "$data" --messages "$messages" --rate "$rate" --no-progress >/dev/null \
      2>"$work/life.err" &
    pid=$!
    want=$((messages * i / (kills + 2)))
    for _ in $(seq 1200); do
      [[ $($count) -ge $want ]] && break
      kill -0 "$pid" 2>/dev/null || fail "life $i ended early: $(tail -3 "$work/life.err")"
      sleep 0.05
    done
    sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.3f", (r % 300) / 1000 }')"
    # A life whose target lagged behind its input may have run to the end meanwhile: not
    # killed then (a test that counts the lives cut says so).
    if kill -9 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null || true
      echo "  life $i: killed with $($count) held"
    else
      wait "$pid" 2>/dev/null || true
      echo "  life $i: ended by itself before its kill, with $($count) held"
    fi
    pid=
  done
  "$onceflow" real "$spec" --data "$data" --messages "$messages" --no-progress --verify >"$work/verify.json" \
    2>"$work/verify.err" || fail "the last run failed: $(cat "$work/verify.json" "$work/verify.err")"
}
