#!/usr/bin/env bash
# onceflow explain writes a self-contained page; headless Chromium opens it with no network
# and the page's script draws the timeline (it sets data-rendered on <body> when done).
# Usage: explain_test.sh ONCEFLOW SOURCE_DIR
set -euo pipefail
onceflow=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

chromium=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $chromium ]]; then
  if [[ ${CI:-} == true ]]; then echo "FAIL: chromium is not installed (tools/dev.sh deps installs it)"; exit 1; fi
  echo "SKIP: chromium is not installed"; exit 77
fi

fail() { echo "FAIL: $*"; exit 1; }

# Renders PAGE in headless Chromium (no network: a proxy that does not exist) and prints
# the DOM after the scripts ran.
render() {
  timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$work/profile" --proxy-server=127.0.0.1:9 --virtual-time-budget=10000 \
    --dump-dom "file://$1" 2>"$work/chromium.log"
}

# A run that fails: a bug switch makes the sink deliver before its commit.
set +e
"$onceflow" explain "$src/scenarios/keyed_aggregation.yaml" --seed 1 --bug deliver-before-commit --html "$work/fail.html" >"$work/out.txt"
rc=$?
set -e
[[ $rc == 1 ]] || fail "explain of a failing run exited $rc, expected 1: $(cat "$work/out.txt")"
[[ -s $work/fail.html ]] || fail "no page written"
if grep -Eq '(src|href)="https?:' "$work/fail.html"; then fail "the page loads something from the network"; fi

render "$work/fail.html" >"$work/fail.dom"
rendered=$(grep -o 'data-rendered="[^"]*"' "$work/fail.dom" || true)
[[ -n $rendered ]] || fail "the page's script did not draw the timeline: $(tail -5 "$work/chromium.log")"
echo "failing run: $rendered"
for what in lease epoch fault delivery violating; do
  [[ $rendered =~ (^|[\" ])$what:[1-9] ]] || fail "the timeline has no '$what' marks: $rendered"
done
grep -q 'class="delivery violating"' "$work/fail.dom" || fail "no violating delivery is highlighted"
grep -q '<td class="fail">FAIL</td>' "$work/fail.dom" || fail "the page does not list the failed check"
grep -q '<span class="fail">FAIL</span>' "$work/fail.dom" || fail "the page's summary does not say FAIL"

# A run that passes: nothing is highlighted.
"$onceflow" explain "$src/scenarios/keyed_aggregation.yaml" --seed 1 --html "$work/pass.html" >/dev/null \
  || fail "explain of a passing run did not exit 0"
render "$work/pass.html" >"$work/pass.dom"
rendered=$(grep -o 'data-rendered="[^"]*"' "$work/pass.dom" || true)
echo "passing run: $rendered"
[[ $rendered =~ lease:[1-9] ]] || fail "the passing run's timeline was not drawn: $rendered"
[[ ! $rendered =~ violating ]] || fail "a passing run highlights messages: $rendered"
if grep -q '<td class="fail">FAIL</td>' "$work/pass.dom"; then fail "a passing run lists a failed check"; fi

# Bad input: a kernel scenario and a missing scenario are usage errors.
set +e
"$onceflow" explain "$src/scenarios/kernel_bank.yaml" --seed 1 --html "$work/k.html" 2>"$work/err"; rc=$?
set -e
[[ $rc == 2 ]] || fail "a kernel scenario gave exit $rc, expected 2"
set +e
"$onceflow" explain "$work/no-such.yaml" --seed 1 --html "$work/m.html" 2>"$work/err"; rc=$?
set -e
[[ $rc == 2 ]] || fail "a missing scenario gave exit $rc, expected 2"
[[ $(wc -l <"$work/err") == 1 ]] || fail "a missing scenario gave more than one line: $(cat "$work/err")"
echo "ok"
