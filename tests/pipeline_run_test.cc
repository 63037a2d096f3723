// Pipeline scenarios end to end: seeded runs under swarm faults, checked by every checker.
#include "faults/pipeline_run.h"

#include <gtest/gtest.h>

#include "checkers/pipeline_checks.h"
#include "cli/scenario.h"
#include "core/builtin.h"
#include "tests/test_support.h"

namespace onceflow::faults {
namespace {

ComputationRegistry registry() { return testing::builtin_registry(); }

PipelineRunOptions scenario(const std::string& name) {
  auto s = cli::load_scenario(std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/" + name + ".yaml");
  EXPECT_TRUE(s.has_value()) << s.error().message();
  return s->pipeline;
}

std::string failures(const RunOutcome& r) {
  std::string out;
  for (const auto& v : r.verdicts) {
    if (!v.passed) out += v.check + ": " + v.detail + "\n";
  }
  return out;
}

class PipelineRunTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PipelineRunTest, SwarmSeedsKeepEveryGuarantee) {
  const ComputationRegistry reg = registry();
  PipelineRunOptions o = scenario(GetParam());
  for (uint64_t seed = 1; seed <= 15; ++seed) {
    o.seed = seed;
    const RunOutcome r = run_pipeline(o, reg).outcome;
    EXPECT_TRUE(r.passed) << GetParam() << " seed " << seed << "\n" << failures(r);
    EXPECT_EQ(r.verdicts.size(), checkers::all_pipeline_checkers().size());
  }
}

TEST_P(PipelineRunTest, SameSeedSameTraceHash) {
  const ComputationRegistry reg = registry();
  PipelineRunOptions o = scenario(GetParam());
  o.seed = 5;
  EXPECT_EQ(run_pipeline(o, reg).outcome.trace_hash, run_pipeline(o, reg).outcome.trace_hash);
  const uint64_t five = run_pipeline(o, reg).outcome.trace_hash;
  o.seed = 6;
  EXPECT_NE(run_pipeline(o, reg).outcome.trace_hash, five);
}

INSTANTIATE_TEST_SUITE_P(Library, PipelineRunTest,
                         ::testing::Values("retryable_request", "keyed_aggregation", "three_stage"));

// Regression: a swift job whose bounded read was filled with rows it was acknowledging
// published a replay watermark past older rows it had not seen, so a downstream
// input_messages table dropped rows a recomputation still needed (exactly-once broke).
TEST(PipelineRunRegressionTest, TruncatedSwiftReadDoesNotAdvanceTheReplayWatermark) {
  const ComputationRegistry reg = registry();
  PipelineRunOptions o = scenario("three_stage");
  o.seed = 130;
  const RunOutcome r = run_pipeline(o, reg).outcome;
  EXPECT_TRUE(r.passed) << failures(r);
}

}  // namespace
}  // namespace onceflow::faults

namespace onceflow::faults {
namespace {

// Regressions from pipeline pause/stop faults: a delayed "stopped" overtook a later
// "running" (now sequence-numbered), the controller acknowledged a state before persisting
// it, and a request handled while a restarted controller booted was overwritten by the boot.
TEST(PipelineRunRegressionTest, PipelineStateRequestsSurviveReorderingCrashesAndBoot) {
  const ComputationRegistry reg = registry();
  for (const auto& [name, seed] : std::vector<std::pair<std::string, uint64_t>>{
           {"keyed_aggregation", 48}, {"keyed_aggregation", 136}, {"three_stage", 20}, {"three_stage", 123},
           {"retryable_request", 123}}) {
    PipelineRunOptions o = scenario(name);
    o.seed = seed;
    const RunOutcome r = run_pipeline(o, reg).outcome;
    EXPECT_TRUE(r.passed) << name << " seed " << seed << "\n" << failures(r);
  }
}

}  // namespace
}  // namespace onceflow::faults
