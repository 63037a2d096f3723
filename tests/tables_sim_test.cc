// Static Table and service log connectors (seed: "How connectors affect guarantees"): the
// static table source deduplicated by read ranges, the arrival-order table sink's frontier
// (a partly covered replay writes only its tail), the delivery callback after the external
// and the pipeline commit, and the service log, exactly once per cycle.
#include <gtest/gtest.h>

#include "core/engine.h"
#include "sim/static_table.h"
#include "tests/scenario_runs.h"

namespace onceflow::sim {
namespace {

using testing::options_of;
using testing::run_seeds;
using testing::Tally;

TEST(StaticTableTest, APartlyCoveredReplayWritesOnlyItsTail) {
  World::Options options;
  options.seed = 5;
  World world(options);
  TargetLog table;
  StaticTableProgress progress;
  TargetFaults faults;
  world.start(world.add_node(sink_target_node("out"), static_table_master_boot(table, progress, faults)));
  const NodeIndex client = world.add_node("client", [](NodeContext&) { return nullptr; });
  world.start(client);
  SinkSpec spec;
  spec.name = "out";
  auto rows = [](uint64_t from, uint64_t to) { return testing::outbox_rows(from, to); };
  std::vector<uint64_t> held;
  world.runtime(client).spawn("test", [&] {
    SimStaticTableSink sink(world.network_endpoint(client), spec, 100 * kMillis);
    for (const auto& batch : {rows(1, 4), rows(3, 7), rows(1, 7), rows(8, 8)}) {
      auto r = sink.deliver("sink/out/1", 1, batch);
      held.push_back(r ? *r : 0);
    }
  });
  world.run_until(10 * kSeconds);
  EXPECT_EQ(held, (std::vector<uint64_t>{4, 7, 7, 8}));
  ASSERT_EQ(table.appended.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(table.appended[i].message.id, i + 1);
  EXPECT_EQ(progress.frontier.at(1), 8u);
  EXPECT_EQ(progress.partial_replays, 1u);  // 3..7: 3 and 4 covered, 5..7 written
  EXPECT_EQ(progress.covered_rows, 2u + 7u);
}

TEST(StaticTableScenarioTest, SourceAndSinkAreExactlyOnceUnderFaults) {
  const Tally t = run_seeds(options_of("static_table.yaml"), 20);
  EXPECT_EQ(t.passed, 20) << testing::first_failure(t);
}

TEST(ServiceLogScenarioTest, EveryCycleDeliversEveryRowOnce) {
  simulated::PipelineRunOptions o = options_of("service_log.yaml");
  const Tally t = run_seeds(o, 20);
  EXPECT_EQ(t.passed, 20) << testing::first_failure(t);
  o.seed = 1;
  o.swarm = false;
  o.scripted = {};
  const auto run = simulated::run_pipeline(o, testing::shared_registry());
  ASSERT_TRUE(run.outcome.passed);
  EXPECT_EQ(run.history.sink_outputs.at("entries").size(), 3u * static_cast<size_t>(o.workload.messages));
  std::set<uint64_t> ids;
  for (const auto& d : run.history.deliveries) ids.insert(d.message.id);
  EXPECT_EQ(ids.size(), 3u * static_cast<size_t>(o.workload.messages));  // a row's id names its cycle
}

TEST(DeliveryCallbackTest, ACallbackBeforeTheAcknowledgingCommitIsCaught) {
  simulated::PipelineRunOptions o = options_of("static_table.yaml");
  o.bugs.callback_before_commit = true;
  o.seed = 1;
  const auto run = simulated::run_pipeline(o, testing::shared_registry()).outcome;
  bool caught = false;
  for (const auto& v : run.verdicts) caught = caught || (v.check == "delivery-callback" && !v.passed);
  EXPECT_TRUE(caught);
}

}  // namespace
}  // namespace onceflow::sim
