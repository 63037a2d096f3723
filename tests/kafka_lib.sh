# Shared by the Kafka shell tests: a work directory and the processes to end with it, fail(),
# and kcat (the test skips, exit 77, where kcat is missing, except under CI).
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
kcat=$(command -v kcat || true)
if [[ -z $kcat ]]; then
  if [[ ${CI:-} == true ]]; then fail "kcat is not installed"; fi
  echo "SKIP: kcat is not installed"; exit 77
fi
