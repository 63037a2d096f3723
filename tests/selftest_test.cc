// Determinism of the whole kernel: the 5-node bank workload (RPCs and store transactions)
// under swarm faults, run twice per seed.
#include "simulated/selftest.h"

#include <gtest/gtest.h>

#include <set>

namespace onceflow::simulated {
namespace {

TEST(SelftestTest, SameSeedGivesTheSameTraceHash) {
  for (uint64_t seed : {1u, 7u, 42u}) {
    SelftestOptions options;
    options.seed = seed;
    const RunOutcome a = run_kernel_selftest(options);
    const RunOutcome b = run_kernel_selftest(options);
    EXPECT_EQ(a.trace_hash, b.trace_hash) << "seed " << seed;
    EXPECT_EQ(a.events, b.events) << "seed " << seed;
    EXPECT_EQ(a.fault_mix, b.fault_mix) << "seed " << seed;
    EXPECT_GT(a.events, 1000u);  // a real workload ran
  }
}

TEST(SelftestTest, TwentySeedsGiveTwentyDifferentRuns) {
  std::set<uint64_t> hashes;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SelftestOptions options;
    options.seed = seed;
    hashes.insert(run_kernel_selftest(options).trace_hash);
  }
  EXPECT_EQ(hashes.size(), 20u);
}

TEST(SelftestTest, SeedsWithoutFaultsDifferToo) {
  SelftestOptions a, b;
  a.swarm = b.swarm = false;
  a.seed = 1;
  b.seed = 2;
  EXPECT_NE(run_kernel_selftest(a).trace_hash, run_kernel_selftest(b).trace_hash);
}

TEST(SelftestTest, KeepingTraceLinesDoesNotChangeTheHash) {
  SelftestOptions quiet, verbose;
  quiet.seed = verbose.seed = 5;
  verbose.trace_keep_lines = 1'000'000;
  const RunOutcome q = run_kernel_selftest(quiet);
  const RunOutcome v = run_kernel_selftest(verbose);
  EXPECT_EQ(q.trace_hash, v.trace_hash);
  EXPECT_TRUE(q.trace.empty());
  EXPECT_GT(v.trace.size(), 100u);
}

TEST(SelftestTest, EveryCheckPassesUnderSwarmFaults) {
  uint64_t fenced = 0, ambiguous = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    SelftestOptions options;
    options.seed = seed;
    const RunOutcome r = run_kernel_selftest(options);
    for (const auto& v : r.verdicts) {
      EXPECT_TRUE(v.passed) << "seed " << seed << " " << v.check << ": " << v.detail;
    }
    fenced += r.observed.at("fenced");
    ambiguous += r.observed.at("ambiguous");
  }
  // The faults did bite: zombies were fenced and commits were ambiguous.
  EXPECT_GT(fenced, 0u);
  EXPECT_GT(ambiguous, 0u);
}

}  // namespace
}  // namespace onceflow::simulated
