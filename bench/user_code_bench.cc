// What the assertions of core/user_code.h cost a computation outside a simulation: with no run
// listening (a unit test, your own main), and in a real run, which counts every evaluation
// (real/user_code_counts.h). The loop body is a stand-in for the work they sit in.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "core/user_code.h"
#include "real/user_code_counts.h"

namespace {

uint64_t work(uint64_t x) { return x * 0x9e3779b97f4a7c15ULL + 1; }

void BM_Baseline(benchmark::State& state) {
  uint64_t x = 1;
  for (auto _ : state) {
    x = work(x);
    benchmark::DoNotOptimize(x);
  }
}

template <bool kListening>
void BM_AlwaysAndSometimes(benchmark::State& state) {
  onceflow::real::UserCodeCounts counts;
  const onceflow::user_code::HooksScope hooks(kListening ? &counts : nullptr);
  const onceflow::UserCall call{"Bench", "computation/Bench/0", 1, 1, 1, false, 0, 1, nullptr, false};
  const onceflow::user_code::CallScope scope(call);
  uint64_t x = 1;
  for (auto _ : state) {
    x = work(x);
    ONCEFLOW_ALWAYS(x != 0, "bench: never zero", "x is zero");
    ONCEFLOW_SOMETIMES((x & 7) == 0, "bench: a multiple of eight");
    benchmark::DoNotOptimize(x);
  }
}

void BM_Buggify(benchmark::State& state) {
  onceflow::real::UserCodeCounts counts;
  const onceflow::user_code::HooksScope hooks(&counts);
  const onceflow::UserCall call{"Bench", "computation/Bench/0", 1, 1, 1, false, 0, 1, nullptr, false};
  const onceflow::user_code::CallScope scope(call);
  uint64_t x = 1;
  for (auto _ : state) {
    x = work(x);
    if (ONCEFLOW_BUGGIFY("bench: a slow path")) x = 0;
    benchmark::DoNotOptimize(x);
  }
}

BENCHMARK(BM_Baseline);
BENCHMARK_TEMPLATE(BM_AlwaysAndSometimes, false)->Name("BM_AlwaysAndSometimes/no_run");
BENCHMARK_TEMPLATE(BM_AlwaysAndSometimes, true)->Name("BM_AlwaysAndSometimes/real_run");
BENCHMARK(BM_Buggify)->Name("BM_Buggify/real_run");

}  // namespace

BENCHMARK_MAIN();
