// The http sink (seed: "How connectors affect guarantees"): at least once, POSTs outside the
// epoch with an Idempotency-Key carrying the MessageId. A receiver that honours the key
// makes it exactly once; one that ignores it shows duplicates under faults, and no loss.
#include <gtest/gtest.h>

#include <string>

#include "cli/scenario.h"
#include "tests/test_support.h"
#include "faults/pipeline_run.h"

namespace onceflow {
namespace {

const ComputationRegistry& registry() {
  static const ComputationRegistry r = testing::builtin_registry();
  return r;
}

faults::PipelineRunOptions options_of(const std::string& scenario) {
  auto s = cli::load_scenario(std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/" + scenario);
  EXPECT_TRUE(s.has_value()) << s.error().message();
  return s->pipeline;
}

struct Tally {
  int passed = 0, duplicated = 0, lost = 0;
};

Tally run_seeds(faults::PipelineRunOptions o, int seeds) {
  Tally t;
  for (int seed = 1; seed <= seeds; ++seed) {
    o.seed = static_cast<uint64_t>(seed);
    const auto run = faults::run_pipeline(o, registry()).outcome;
    t.passed += run.passed ? 1 : 0;
    for (const auto& v : run.verdicts) {
      if (v.passed) continue;
      if (v.detail.find("extra") != std::string::npos) ++t.duplicated;
      if (v.detail.find("missing") != std::string::npos) ++t.lost;
    }
  }
  return t;
}

TEST(HttpSinkTest, AReceiverThatHonoursTheKeyGetsEachMessageOnce) {
  const Tally t = run_seeds(options_of("http_honours_key.yaml"), 25);
  EXPECT_EQ(t.passed, 25);
}

TEST(HttpSinkTest, AReceiverThatIgnoresTheKeyGetsDuplicatesButLosesNothing) {
  faults::PipelineRunOptions o = options_of("http_ignores_key.yaml");
  EXPECT_EQ(run_seeds(o, 25).passed, 25);  // at least once holds
  o.sink_guarantees["counts_http"] = checkers::Guarantee::kExactlyOnce;
  const Tally strict = run_seeds(o, 25);
  EXPECT_GT(strict.duplicated, 0) << "no duplicate in 25 seeds under faults";
  EXPECT_EQ(strict.lost, 0);
}

TEST(HttpSinkTest, WithoutFaultsEvenAnIgnoringReceiverGetsEachMessageOnce) {
  faults::PipelineRunOptions o = options_of("http_ignores_key.yaml");
  o.swarm = false;
  o.scripted = {};
  o.fault_point_probability = 0;
  o.sink_guarantees["counts_http"] = checkers::Guarantee::kExactlyOnce;
  EXPECT_EQ(run_seeds(o, 3).passed, 3);
}

}  // namespace
}  // namespace onceflow
