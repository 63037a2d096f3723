// explore --guided's search (cli/guided.h) without running anything: what it keeps, what its
// mutants may hold, that it is deterministic; and the coverage curve the reports print.
#include "cli/guided.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/explore.h"
#include "cli/scenario.h"

namespace onceflow::cli {
namespace {

Scenario keyed_aggregation() {
  auto s = load_scenario(std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/keyed_aggregation.yaml");
  EXPECT_TRUE(s.has_value());
  return *s;
}

// A report as a run of the keyed aggregation would send it, with `features` reached.
GuidedReport report(const GuidedInput& in, std::vector<std::string> features) {
  GuidedReport r;
  r.summary.seed = in.seed;
  r.summary.passed = true;
  r.summary.features = std::move(features);
  faults::SwarmOptions& space = r.space.emplace();
  space.start_us = 100 * kMillis;
  space.heal_at_us = 4 * kSeconds;
  space.nodes = {"worker-1", "worker-2", "controller-1", "target-counts_out"};
  space.store_node = "store";
  space.kinds = {faults::FaultKind::kCrash, faults::FaultKind::kLostReplies, faults::FaultKind::kDelay};
  space.sink_targets = {"target-counts_out"};
  if (in.fresh) {
    faults::Fault f;
    f.kind = faults::FaultKind::kCrash;
    f.node = "worker-1";
    f.at_us = kSeconds;
    f.duration_us = 200 * kMillis;
    r.plan.faults = {f};
    r.plan.heal_at_us = space.heal_at_us;
    r.knobs = {{"epoch_period", 50 * kMillis}};
  }
  r.point_hits = {{"worker-2", "epoch.after_commit", 2 * kSeconds}};
  return r;
}

// Runs a search over `batches` batches of 8 with fake reports: run i reaches "common" and,
// every third run, a feature of its own. Returns every input's description.
std::vector<std::string> search(uint64_t first_seed, int batches, GuidedSearch* out = nullptr) {
  GuidedSearch g(keyed_aggregation(), true, first_seed);
  std::vector<std::string> seen;
  for (int b = 0; b < batches; ++b) {
    for (const GuidedInput& in : g.next_batch(8)) {
      std::vector<std::string> features = {"probe common"};
      if (g.runs() % 3 == 0) features.push_back("probe rare-" + std::to_string(g.runs()));
      seen.push_back(std::to_string(in.seed) + (in.fresh ? " fresh" : " mutant of " + std::to_string(in.parent) + ": " + in.mutation));
      g.add(in, report(in, features));
    }
  }
  if (out != nullptr) *out = g;
  return seen;
}

TEST(GuidedSearchTest, TheFirstBatchIsFreshSeedsInOrderThenMostRunsAreMutants) {
  GuidedSearch g(keyed_aggregation(), true, 7);
  const auto first = g.next_batch(8);
  ASSERT_EQ(first.size(), 8u);
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_TRUE(first[i].fresh);
    EXPECT_EQ(first[i].seed, 7 + i);
  }
  search(7, 12, &g);
  EXPECT_EQ(g.runs(), 96u);
  EXPECT_GT(g.runs() - g.fresh_runs(), g.fresh_runs()) << "mutants should be most of the runs";
  EXPECT_GT(g.fresh_runs(), 8u) << "fresh seeds go on after the first batch";
}

TEST(GuidedSearchTest, OnlyRunsThatReachedSomethingNewJoinTheCorpus) {
  GuidedSearch g(keyed_aggregation(), true, 1);
  search(1, 6, &g);
  // Runs 0, 3, 6, ... reach a feature of their own (run 0 "probe common" too); no other run
  // reaches anything new.
  const uint64_t own = (g.runs() + 2) / 3;
  EXPECT_EQ(g.corpus_size(), own);
  EXPECT_EQ(g.features(), 1 + own);
}

TEST(GuidedSearchTest, TheSameSearchGivesTheSameRunsAndAnotherSeedOthers) {
  EXPECT_EQ(search(1, 8), search(1, 8));
  EXPECT_NE(search(1, 8), search(2, 8));
}

TEST(GuidedSearchTest, MutantsStayInTheFaultWindowAndTheirScenarioRunsThem) {
  GuidedSearch g(keyed_aggregation(), true, 1);
  search(1, 20, &g);
  size_t mutants = 0;
  for (uint64_t run = 0; run < g.runs(); ++run) {
    const GuidedInput& in = g.input(run);
    if (in.fresh) continue;
    ++mutants;
    EXPECT_GE(in.parent, 0);
    EXPECT_LT(static_cast<uint64_t>(in.parent), run);
    EXPECT_FALSE(in.mutation.empty());
    EXPECT_GE(in.workload.keys, 1);
    EXPECT_GE(in.workload.interval_us, 1);
    for (const faults::Fault& f : in.plan.faults) {
      EXPECT_GE(f.at_us, 100 * kMillis) << f.describe();
      EXPECT_LT(f.at_us, 4 * kSeconds) << f.describe();
      EXPECT_LE(f.at_us + f.duration_us, 4 * kSeconds) << f.describe();
    }
    for (size_t i = 1; i < in.plan.faults.size(); ++i) EXPECT_LE(in.plan.faults[i - 1].at_us, in.plan.faults[i].at_us);
    const Scenario s = g.scenario_for(in);
    EXPECT_FALSE(s.swarm);
    EXPECT_FALSE(g.swarm_for(in));
    EXPECT_EQ(s.pipeline.knobs, in.knobs);
    EXPECT_EQ(s.pipeline.scripted.faults.size(), in.plan.faults.size());
    EXPECT_EQ(s.pipeline.workload.keys, in.workload.keys);
    EXPECT_TRUE(s.pipeline.fault_points_when_scripted) << "a swarm scenario's mutants keep its fault points";
  }
  EXPECT_GT(mutants, 100u);
}

TEST(CoverageCurveTest, CountsNewFeaturesPerShareOfTheRuns) {
  CoverageCurve c;
  for (int run = 0; run < 20; ++run) {
    std::vector<std::string> f = {"a"};
    if (run < 10) f.push_back("b" + std::to_string(run));  // something new in each of the first ten
    c.add(feature_hashes(f));
  }
  EXPECT_EQ(c.features(), 11u);
  const std::vector<size_t> tenths = c.new_per_share(10);
  EXPECT_EQ(tenths, (std::vector<size_t>{3, 2, 2, 2, 2, 0, 0, 0, 0, 0}));
  const std::string line = c.line();
  EXPECT_NE(line.find("coverage: 11 features after 20 runs"), std::string::npos) << line;
  EXPECT_NE(line.find("(3 2 2 2 2 0 0 0 0 0)"), std::string::npos) << line;
  EXPECT_NE(line.find("the last found nothing new"), std::string::npos) << line;
  EXPECT_EQ(c.json()["features"], 11);
  EXPECT_EQ(CoverageCurve().line(), "");
}

// A seed in explore's report: its first failure, and, when the user's function may not be what
// it committed (re-execution failed) and delivery or state failed beside it, the re-execution's
// failure to read first, naming them, without its replay line.
TEST(ExploreSummaryTest, ReadFirstIsTheReexecutionWhenTheOthersMayFollowFromIt) {
  using checkers::Verdict;
  simulated::RunOutcome r;
  r.verdicts = {Verdict::fail("delivery", "unexpected: message 1 — replay: x replay s --seed 1"),
                Verdict::fail("state", "started from"), Verdict::pass("consumption"),
                Verdict::fail("re-execution", "computation C committed message 1 — replay: x replay s --seed 1"),
                Verdict::fail("my check", "mine")};
  SeedSummary s = parse_summary(summary_json(r));
  EXPECT_EQ(s.first_failure, "delivery: unexpected: message 1 — replay: x replay s --seed 1");
  EXPECT_TRUE(s.read_first.starts_with("re-execution: computation C committed message 1; the delivery, state failures "
                                       "may follow from it ("))
      << s.read_first;
  EXPECT_EQ(s.read_first.find("replay"), std::string::npos) << s.read_first;
  // An engine's lost write: re-execution holds; and re-execution failing alone.
  r.verdicts = {Verdict::fail("delivery", "lost-write: 1 of 2"), Verdict::pass("re-execution")};
  EXPECT_EQ(parse_summary(summary_json(r)).read_first, "");
  r.verdicts = {Verdict::fail("fencing", "late"), Verdict::fail("re-execution", "committed")};
  EXPECT_EQ(parse_summary(summary_json(r)).read_first, "");
  // The function read another key's row: state names the cause, re-execution an effect.
  r.verdicts = {Verdict::fail("delivery", "unexpected"),
                Verdict::fail("state", fmt::format("started from key 2 ({}, which ...)", checkers::kReadAnotherKeysRow)),
                Verdict::fail("re-execution", "committed")};
  EXPECT_TRUE(parse_summary(summary_json(r)).read_first.starts_with("state: started from key 2"))
      << parse_summary(summary_json(r)).read_first;
  EXPECT_TRUE(checkers::read_first(r.verdicts).starts_with("state: ")) << checkers::read_first(r.verdicts);
}

}  // namespace
}  // namespace onceflow::cli
