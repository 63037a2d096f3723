// The built-in pipelines run by the engine in the simulator, against the reference result.
#include <gtest/gtest.h>

#include "core/builtin.h"
#include "tests/test_support.h"
#include "core/reference.h"
#include "faults/injector.h"
#include "simulated/pipeline_world.h"

#include <cstdlib>
#include <map>
#include <set>

namespace onceflow::simulated {
namespace {

PipelineSpec load(const std::string& name) { return testing::library_pipeline(name); }

ComputationRegistry registry() { return testing::builtin_registry(); }

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
}  // namespace onceflow::simulated

namespace onceflow::simulated {
namespace {

class CountingObserver final : public EngineObserver {
 public:
  void job_fenced(const JobId& job, LeaseId) override { fenced.push_back(job.str()); }
  std::vector<std::string> fenced;
};

class PipelineFaultTest : public ::testing::TestWithParam<std::string> {};

// Every worker crashes once with an epoch transaction built and not yet committed; then
// worker-2 freezes for three Lease TTLs while it holds jobs and comes back as a zombie.
TEST_P(PipelineFaultTest, CrashedWorkersAndAZombieStillGiveTheReference) {
  const ComputationRegistry reg = registry();
  CountingObserver observer;
  std::set<std::string> crashed;
  std::map<std::string, int> crashes;
  PipelineWorld* world = nullptr;
  PipelineWorldOptions options;
  options.seed = 11;
  options.observer = &observer;
  if (const char* bug = std::getenv("ONCEFLOW_TEST_BUG")) options.bugs.enable(bug);  // for checking the test
  // Each worker crashes twice: once with its epoch built but not committed, once right
  // after a commit returned (before outbox delivery and before a swift job acknowledges).
  options.fault_point_policy = [&](const std::string& node, std::string_view point) -> std::optional<PointCrash> {
    if (node.rfind("worker-", 0) != 0 || world->world().now() < 150 * kMillis) return std::nullopt;
    int& n = crashes[node];
    const bool fire = (n == 0 && point == "epoch.before_commit") || (n == 1 && point == "epoch.after_commit");
    if (fire) {
      ++n;
      crashed.insert(node);
    }
    if (!fire) return std::nullopt;
    return PointCrash{options.fault_point_restart_us};
  };
  PipelineWorld w(load(GetParam()), reg, options);
  world = &w;
  w.start();
  faults::FaultInjector injector(w.world(), &w.store_data());
  const Micros ttl = w.spec().lease_ttl_us;
  const faults::Fault pause = testing::fault(faults::FaultKind::kPause, 1'200 * kMillis, 3 * ttl, "worker-2");
  injector.schedule(faults::FaultPlan{{pause}, pause.at_us + pause.duration_us});

  // Past the zombie's return, so that it gets to try its commits.
  w.world().run_until(pause.at_us + pause.duration_us + ttl);
  ASSERT_TRUE(w.run_until_drained(120 * kSeconds)) << "not drained by 120s";
  EXPECT_EQ(crashed, (std::set<std::string>{"worker-1", "worker-2", "worker-3"}));
  for (const auto& [node, n] : crashes) EXPECT_EQ(n, 2) << node;
  const PipelineResult expected = run_reference(w.spec(), reg, w.inputs());
  const PipelineResult got = w.result();
  EXPECT_EQ(got.sinks, expected.sinks) << "got:\n" << describe(got) << "expected:\n" << describe(expected);
  EXPECT_EQ(got.tables, expected.tables) << "got:\n" << describe(got) << "expected:\n" << describe(expected);
  // The zombie tried to commit under its ended Lease, and the store said no.
  EXPECT_FALSE(observer.fenced.empty());
  ASSERT_FALSE(w.store_data().rejections().empty());
  bool after_resume = false;
  for (const auto& r : w.store_data().rejections()) after_resume |= r.store_time >= pause.at_us + pause.duration_us;
  EXPECT_TRUE(after_resume) << "no commit was rejected after the zombie resumed";
}

INSTANTIATE_TEST_SUITE_P(Builtin, PipelineFaultTest,
                         ::testing::Values("retryable_request", "keyed_aggregation", "three_stage"));

}  // namespace
}  // namespace onceflow::simulated
