#!/usr/bin/env bash
# onceflow's developer entry point: installs what is missing, builds, and runs things.
#
#   tools/dev.sh demo    install, build, run the headline fault-injection exploration
#   tools/dev.sh test    install, build, run the whole test suite (release, then ASan+UBSan)
#   tools/dev.sh build   install and build only
#   tools/dev.sh deps    install the Debian packages only (idempotent)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  cmake ninja-build g++ pkg-config ccache
  libboost-context-dev librapidcheck-dev libgtest-dev libgmock-dev libbenchmark-dev
  libfmt-dev libjemalloc-dev libleveldb-dev libsnappy-dev librdkafka-dev libyaml-cpp-dev libcli11-dev nlohmann-json3-dev
  postgresql libpq-dev
  libcpp-httplib-dev curl prometheus clickhouse-server zookeeper
  chromium fonts-dejavu-core kcat
  clang libclang-rt-14-dev
)
JOBS=$(nproc 2>/dev/null || echo 2)

deps() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# build DIR [cmake options...]
build() {
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  cmake --build "$dir" -j "$JOBS"
}

run_tests() {
  local dir=$1
  shift
  # RapidCheck budgets are set in tests/CMakeLists.txt; no test depends on wall-clock time.
  ctest --test-dir "$dir" -j "$JOBS" --output-on-failure --timeout 1800 "$@"
}

case "${1:-}" in
  deps) deps ;;
  build) deps && build build -DCMAKE_BUILD_TYPE=Release ;;
  demo)
    deps
    build build -DCMAKE_BUILD_TYPE=Release
    ./build/cli/onceflow explore scenarios/retryable_request.yaml --seeds 1200 --jobs "$JOBS"
    ;;
  test)
    deps
    build build -DCMAKE_BUILD_TYPE=Release
    run_tests build
    # The same suite under AddressSanitizer and UndefinedBehaviorSanitizer, built by clang
    # with libFuzzer's coverage, so that the pass also runs fuzz_run: a bounded fuzz search
    # over the input readers (fuzz/). The slow label (onceflow mutants) runs in the release
    # pass only: it is the same code.
    build build-clang-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DONCEFLOW_SANITIZE=ON \
      -DONCEFLOW_FUZZ=ON -DONCEFLOW_BENCH=OFF
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 run_tests build-clang-asan -LE slow
    ;;
  *)
    sed -n '2,8p' "$0" >&2
    exit 2
    ;;
esac
