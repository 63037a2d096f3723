// The built-in pipelines run by the engine in the simulator, against the reference result.
#include <gtest/gtest.h>

#include "core/builtin.h"
#include "core/reference.h"
#include "faults/pipeline_world.h"

namespace onceflow::faults {
namespace {

PipelineSpec load(const std::string& name) {
  auto spec = load_pipeline_spec(std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/pipelines/" + name + ".yaml");
  EXPECT_TRUE(spec.has_value()) << spec.error().message();
  return *spec;
}

ComputationRegistry registry() {
  ComputationRegistry r;
  builtin::register_all(r);
  return r;
}

std::string describe(const PipelineResult& r) {
  std::string out;
  for (const auto& [sink, messages] : r.sinks) out += sink + ": " + std::to_string(messages.size()) + " messages\n";
  for (const auto& [table, rows] : r.tables) out += table + ": " + std::to_string(rows.size()) + " rows\n";
  return out;
}

class PipelineTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PipelineTest, FaultlessRunMatchesTheReference) {
  const ComputationRegistry reg = registry();
  PipelineWorldOptions options;
  options.seed = 3;
  PipelineWorld w(load(GetParam()), reg, options);
  w.start();
  ASSERT_TRUE(w.run_until_drained(60 * kSeconds)) << "not drained by 60s";
  const PipelineResult expected = run_reference(w.spec(), reg, w.inputs());
  const PipelineResult got = w.result();
  EXPECT_EQ(got.sinks, expected.sinks) << "got:\n" << describe(got) << "expected:\n" << describe(expected);
  EXPECT_EQ(got.tables, expected.tables) << "got:\n" << describe(got) << "expected:\n" << describe(expected);
  EXPECT_FALSE(expected.sinks.empty() && expected.tables.empty());
}

INSTANTIATE_TEST_SUITE_P(Builtin, PipelineTest,
                         ::testing::Values("retryable_request", "keyed_aggregation", "three_stage"));

}  // namespace
}  // namespace onceflow::faults
