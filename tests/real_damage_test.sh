#!/usr/bin/env bash
# onceflow real refuses a damaged, reset or foreign data directory, and stops on a full disk:
# exit 2 with one line on stderr naming the directory, never a fresh store, a stall or an
# abort, and nothing lost (a rerun on the repaired directory verifies). The full disk is a
# small tmpfs where this machine lets us mount one (root); elsewhere that case is covered by
# leveldb_store_test's injected write errors, and this test says so.
# Usage: real_damage_test.sh ONCEFLOW SOURCE_DIR
set -euo pipefail
onceflow=$1
src=$2
spec="$src/scenarios/real/keyed_aggregation.yaml"
other="$src/scenarios/real/retryable_request.yaml"
work=$(mktemp -d)
mounted=
cleanup() {
  [[ -n $mounted ]] && umount "$mounted" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
# The first run, paced to take 5 s, is killed 2 s in, well before the end: by then it has
# written more than the store's write buffer, so there are table files to damage.
messages=300000

# A data directory with a run's worth of committed data, killed partway.
"$onceflow" real "$spec" --data "$work/base" --messages "$messages" --rate 60000 --no-progress >/dev/null 2>&1 &
pid=$!
sleep 2
kill -9 "$pid" 2>/dev/null || fail "the first run ended before it could be killed"
wait "$pid" 2>/dev/null || true

# Runs onceflow real on a copy of the base directory changed by `$2`; expects exit 2 and one
# line on stderr that names the directory and contains `$3`.
refused() {
  local name=$1 change=$2 want=$3 spec_used=${4:-$spec}
  local dir="$work/$name"
  rm -rf "$dir"
  cp -r "$work/base" "$dir"
  (cd "$dir" && eval "$change")
  local rc=0
  timeout 60 "$onceflow" real "$spec_used" --data "$dir" --messages "$messages" --no-progress \
    >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  [[ $rc -eq 2 ]] || fail "$name: exit $rc, not 2: $(head -c 300 "$work/$name.err")"
  [[ $(wc -l <"$work/$name.err") -eq 1 ]] || fail "$name: not one line: $(cat "$work/$name.err")"
  grep -q "$dir" "$work/$name.err" || fail "$name: the line does not name $dir: $(cat "$work/$name.err")"
  grep -q -- "$want" "$work/$name.err" || fail "$name: no '$want' in: $(cat "$work/$name.err")"
  echo "ok: $name: $(cat "$work/$name.err")"
}
flip() {  # flips 64 bytes in the middle of file $1
  python3 - "$1" <<'PY'
import sys
f = sys.argv[1]
b = bytearray(open(f, "rb").read())
for i in range(len(b) // 2, min(len(b) // 2 + 64, len(b))):
    b[i] ^= 0xFF
open(f, "wb").write(b)
PY
}
export -f flip

refused reset 'rm store/CURRENT' "no CURRENT"
refused deleted 'rm -rf store' "deleted or reset"
refused table 'for f in store/*.ldb; do flip "$f"; done' "Corruption"
refused log 'for f in store/*.log; do flip "$f"; done' "Corruption"
refused pipeline 'true' "made for pipeline" "$other"
# Damage LevelDB cannot see: the newest log of a cleanly stopped directory cut to half reads
# as a crash in the middle of a write, and the commits after the cut would vanish silently.
# The commit point recorded at the stop, outside the store's files, tells.
"$onceflow" real "$spec" --data "$work/stopped" --messages "$messages" --rate 60000 --no-progress >/dev/null 2>&1 &
pid=$!
sleep 2
kill -TERM "$pid"
wait "$pid" || fail "a run stopped by SIGTERM did not exit 0"
cp -r "$work/stopped" "$work/base-stopped"
cut_newest_log='f=$(ls store/*.log | sort | tail -1); truncate -s $(( $(stat -c %s "$f") / 2 )) "$f"'
rm -rf "$work/base-kept"; mv "$work/base" "$work/base-kept"; mv "$work/base-stopped" "$work/base"
refused cut-log "$cut_newest_log" "behind its commit point"
rm -rf "$work/base"; mv "$work/base-kept" "$work/base"
# A first run killed while LevelDB made its store (its first manifest written, CURRENT not yet)
# left nothing that held a row: the next run makes the store again and verifies. Under a
# directory that held a store (its onceflow-data file says so), the same files are a reset.
mkdir -p "$work/unborn/store"
printf 'x' >"$work/unborn/store/MANIFEST-000001"
printf 'MANIFEST-000001\n' >"$work/unborn/store/000001.dbtmp"
"$onceflow" real "$spec" --data "$work/unborn" --messages 2000 --no-progress --verify >"$work/unborn.json" 2>"$work/unborn.err" \
  || fail "a store whose creation was cut short: $(cat "$work/unborn.err")"
grep -q '"verdict": "pass"' "$work/unborn.json" || fail "a store whose creation was cut short: $(cat "$work/unborn.json")"
echo "ok: a store whose creation was cut short is made again"
refused reborn 'rm -rf store && mkdir store && printf x >store/MANIFEST-000001' "deleted or reset"

# A full disk: the run stops with exit 2, and once there is room again it resumes.
if [[ $(id -u) -eq 0 ]] && mkdir -p "$work/small" && mount -t tmpfs -o size=3m tmpfs "$work/small" 2>/dev/null; then
  mounted="$work/small"
  rc=0
  timeout 120 "$onceflow" real "$spec" --data "$work/small/d" --messages 100000 --no-progress \
    >/dev/null 2>"$work/full.err" || rc=$?
  [[ $rc -eq 2 ]] || fail "full disk: exit $rc, not 2: $(cat "$work/full.err")"
  grep -q "No space left" "$work/full.err" || fail "full disk: $(cat "$work/full.err")"
  [[ $(wc -l <"$work/full.err") -eq 1 ]] || fail "full disk: not one line: $(cat "$work/full.err")"
  echo "ok: full disk: $(cat "$work/full.err")"
  mount -o remount,size=200m "$work/small"
  "$onceflow" real "$spec" --data "$work/small/d" --messages 100000 --no-progress --verify >"$work/full.json" \
    || fail "after freeing space: $(cat "$work/full.json")"
  grep -q '"verdict": "pass"' "$work/full.json" || fail "after freeing space: $(cat "$work/full.json")"
  echo "ok: after freeing space the run resumed and verified"
else
  echo "note: no tmpfs could be mounted here; the full disk is covered by leveldb_store_test alone"
fi

# The untouched base still verifies: nothing above harmed it.
"$onceflow" real "$spec" --data "$work/base" --messages "$messages" --no-progress --verify >"$work/base.json" \
  || fail "the base directory: $(cat "$work/base.json")"
echo "ok: the base directory resumes and verifies"
