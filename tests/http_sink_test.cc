// The http sink (seed: "How connectors affect guarantees"): at least once, POSTs outside the
// epoch with an Idempotency-Key carrying the MessageId. A receiver that honours the key
// makes it exactly once; one that ignores it shows duplicates under faults, and no loss.
#include <gtest/gtest.h>

#include <string>

#include "tests/scenario_runs.h"

namespace onceflow {
namespace {

using testing::options_of;
using testing::run_seeds;
using testing::Tally;

TEST(HttpSinkTest, AReceiverThatHonoursTheKeyGetsEachMessageOnce) {
  const Tally t = run_seeds(options_of("http_honours_key.yaml"), 25);
  EXPECT_EQ(t.passed, 25);
}

TEST(HttpSinkTest, AReceiverThatIgnoresTheKeyGetsDuplicatesButLosesNothing) {
  simulated::PipelineRunOptions o = options_of("http_ignores_key.yaml");
  EXPECT_EQ(run_seeds(o, 25).passed, 25);  // at least once holds
  o.sink_guarantees["counts_http"] = checkers::Guarantee::kExactlyOnce;
  const Tally strict = run_seeds(o, 25);
  EXPECT_GT(strict.duplicated, 0) << "no duplicate in 25 seeds under faults";
  EXPECT_EQ(strict.lost, 0);
}

TEST(HttpSinkTest, WithoutFaultsEvenAnIgnoringReceiverGetsEachMessageOnce) {
  simulated::PipelineRunOptions o = options_of("http_ignores_key.yaml");
  o.swarm = false;
  o.scripted = {};
  o.fault_point_probability = 0;
  o.sink_guarantees["counts_http"] = checkers::Guarantee::kExactlyOnce;
  EXPECT_EQ(run_seeds(o, 3).passed, 3);
}

}  // namespace
}  // namespace onceflow
