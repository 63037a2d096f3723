// A property for a pipeline of your own computations: one call in a RapidCheck property.
// RapidCheck draws workloads and fault plans, the simulator runs the pipeline, the checkers
// judge it; a failure names the `onceflow run` command (run it with own_onceflow, which knows
// LongestWord) and the RC_PARAMS string that replay the smallest failing case.
#include <gtest/gtest.h>

#include "longest_word.h"
#include "testing/testing.h"

namespace {

const onceflow::ComputationRegistry& registry() {
  static const onceflow::ComputationRegistry r = [] {
    onceflow::ComputationRegistry out;
    example::register_longest_word(out);
    return out;
  }();
  return r;
}

ONCEFLOW_PROP(LongestWordPipeline, KeepsExactlyOnceUnderFaults, ()) {
  onceflow::testing::check_under_faults(EXAMPLE_DIR "/pipeline.yaml", registry());
}

}  // namespace
