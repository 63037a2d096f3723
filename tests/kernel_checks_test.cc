#include "checkers/kernel_checks.h"

#include <gtest/gtest.h>

namespace onceflow::checkers {
namespace {

// Two accounts, one client that made one transfer of 5 from a to b, under lease 1.
KernelHistory good_history() {
  KernelHistory h;
  h.initial_balance = 100;
  h.accounts = {"a", "b"};
  h.balances = {{"a", 95}, {"b", 105}};
  h.log = {{"c1", 0, "a", "b", 5}};
  h.progress = {{"c1", 1}};
  h.target = {{"c1", 1}};
  h.commits = {{10, 1'000, {1}}};
  h.leases = {{1, {500, 2'000}}};
  h.resolutions = {{"c1", 10, true}, {"c1", 11, false}};
  h.heal_at_us = 5'000;
  h.liveness_bound_us = 10'000;
  h.drained_at_us = 1'000;
  return h;
}

TEST(KernelChecksTest, AGoodHistoryPassesEveryCheck) {
  for (const auto& v : run_kernel_checks(good_history())) EXPECT_TRUE(v.passed) << v.check << ": " << v.detail;
}

TEST(KernelChecksTest, ConservationFailsWhenMoneyAppears) {
  KernelHistory h = good_history();
  h.balances["b"] += 1;
  EXPECT_FALSE(ConservationCheck().check(h).passed);
}

TEST(KernelChecksTest, ConservationCountsParkedMoneyAndMissesNoAccount) {
  // Account b closed by c1: its balance parked, its row gone. Still conserved.
  KernelHistory parked = good_history();
  parked.balances.erase("b");
  parked.parked = {{"b", 105}};
  EXPECT_TRUE(ConservationCheck().check(parked).passed);
  // An account that vanished with its money is caught, though the rest sums right per account.
  KernelHistory vanished = good_history();
  vanished.balances = {{"a", 100}};
  EXPECT_FALSE(ConservationCheck().check(vanished).passed);
  // A closed account resurrected by a write that missed the delete: its money twice.
  KernelHistory resurrected = good_history();
  resurrected.parked = {{"b", 105}};
  EXPECT_FALSE(ConservationCheck().check(resurrected).passed);
}

TEST(KernelChecksTest, LedgerFailsOnADuplicateOrAMissingTransfer) {
  KernelHistory dup = good_history();
  dup.log.push_back(dup.log[0]);
  EXPECT_FALSE(LedgerCheck().check(dup).passed);
  KernelHistory gap = good_history();
  gap.progress["c1"] = 2;
  EXPECT_FALSE(LedgerCheck().check(gap).passed);
  KernelHistory applied_twice = good_history();
  applied_twice.balances = {{"a", 90}, {"b", 110}};
  EXPECT_FALSE(LedgerCheck().check(applied_twice).passed);
}

TEST(KernelChecksTest, ResolutionFailsWhenTheClientBelievesOtherwise) {
  KernelHistory h = good_history();
  h.resolutions = {{"c1", 10, false}};
  EXPECT_FALSE(AmbiguityResolutionCheck().check(h).passed);
  h.resolutions = {{"c1", 11, true}};
  EXPECT_FALSE(AmbiguityResolutionCheck().check(h).passed);
}

TEST(KernelChecksTest, FencingFailsForACommitAfterItsLeaseEnded) {
  KernelHistory h = good_history();
  h.commits[0].store_time_us = 2'001;
  const Verdict v = LeaseFencingCheck().check(h);
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.detail.find("tx 10"), std::string::npos);
  h.commits[0].prerequisites = {99};
  EXPECT_FALSE(LeaseFencingCheck().check(h).passed);
}

TEST(KernelChecksTest, LivenessFailsWhenNotDrainedInTime) {
  KernelHistory h = good_history();
  h.drained_at_us = -1;
  h.progress["c1"] = 0;
  const Verdict v = KernelLivenessCheck().check(h);
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.detail.find("c1=0/1"), std::string::npos);
  h.drained_at_us = 15'001;
  EXPECT_FALSE(KernelLivenessCheck().check(h).passed);
}

}  // namespace
}  // namespace onceflow::checkers

namespace onceflow::checkers {
namespace {

TEST(DeterminismCheckTest, EqualHashesPassAndDifferentOnesFail) {
  EXPECT_TRUE(DeterminismCheck().check(7, 0xabc, 0xabc, "onceflow replay x --seed 7").passed);
  const Verdict v = DeterminismCheck().check(7, 0xabc, 0xabd, "onceflow replay x --seed 7");
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.detail.find("0000000000000abc"), std::string::npos);
  EXPECT_NE(v.detail.find("replay: onceflow replay x --seed 7"), std::string::npos);
}

}  // namespace
}  // namespace onceflow::checkers
