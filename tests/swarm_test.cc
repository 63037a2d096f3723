#include "faults/swarm.h"

#include <gtest/gtest.h>

#include <set>

namespace onceflow::faults {
namespace {

SwarmOptions options() {
  SwarmOptions o;
  o.start_us = 1'000;
  o.heal_at_us = 5 * kSeconds;
  o.nodes = {"a", "b", "c"};
  o.store_node = "store";
  return o;
}

TEST(SwarmTest, SameSeedSameMixAndPlan) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    Xoshiro256StarStar r1(seed), r2(seed);
    SwarmMix m1, m2;
    const FaultPlan p1 = generate_swarm(r1, options(), &m1);
    const FaultPlan p2 = generate_swarm(r2, options(), &m2);
    EXPECT_EQ(m1.describe(), m2.describe());
    EXPECT_EQ(p1.describe(), p2.describe());
  }
}

TEST(SwarmTest, MixesVaryAcrossSeedsAndPlansEndBeforeTheHeal) {
  std::set<std::string> mixes;
  std::set<FaultKind> kinds_seen;
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    Xoshiro256StarStar rng(seed);
    SwarmMix mix;
    const FaultPlan plan = generate_swarm(rng, options(), &mix);
    mixes.insert(mix.describe());
    ASSERT_FALSE(plan.faults.empty());
    for (const Fault& f : plan.faults) {
      kinds_seen.insert(f.kind);
      EXPECT_GE(f.at_us, 1'000);
      EXPECT_LE(f.at_us + f.duration_us, plan.heal_at_us) << f.describe();
      if (fault_needs_peer(f.kind)) {
        EXPECT_NE(f.node, f.peer);
      }
    }
  }
  EXPECT_GT(mixes.size(), 90u);
  EXPECT_EQ(kinds_seen.size(), std::size(kAllKernelFaultKinds));
}

TEST(SwarmTest, KindNamesRoundTrip) {
  for (FaultKind kind : kAllKernelFaultKinds) {
    EXPECT_EQ(parse_fault_kind(fault_kind_name(kind)), kind);
  }
  EXPECT_FALSE(parse_fault_kind("meteor").has_value());
}

}  // namespace
}  // namespace onceflow::faults
