// Tests of your pipeline: a RapidCheck property under generated faults, and the scenario file
// explored at the seeds from the environment (ONCEFLOW_SEED, ONCEFLOW_SEEDS). A failure names
// the failing seed, the command that reruns it in this test and the command that replays its
// trace with this very binary, which test_main makes serve onceflow's command line too.
#include <onceflow/testing/testing.h>

#include "my_computations.h"

namespace {

const onceflow::ComputationRegistry& registry() {
  static const onceflow::ComputationRegistry r = [] {
    onceflow::ComputationRegistry out;
    my::register_my_computations(out);
    return out;
  }();
  return r;
}

ONCEFLOW_PROP(MyPipeline, KeepsExactlyOnceUnderFaults, ()) {
  onceflow::testing::check_under_faults(PIPELINE_DIR "/pipeline.yaml", registry());
}

TEST(MyPipeline, ScenarioHolds) {
  EXPECT_TRUE(onceflow::testing::explore_scenario(PIPELINE_DIR "/scenario.yaml", registry(), 10));
}

// What a failure looks like: the same property with a deliberate engine bug. Disabled; run it
// with --gtest_also_run_disabled_tests --gtest_filter=MyPipeline.DISABLED_FailsWithAnEngineBug.
ONCEFLOW_PROP(MyPipeline, DISABLED_FailsWithAnEngineBug, ()) {
  onceflow::testing::FaultOptions options;
  (void)options.bugs.enable("no-lease-prerequisite");
  options.bug_name = "no-lease-prerequisite";
  onceflow::testing::check_under_faults(PIPELINE_DIR "/pipeline.yaml", registry(), options);
}

}  // namespace

int main(int argc, char** argv) { return onceflow::testing::test_main(argc, argv, registry()); }
