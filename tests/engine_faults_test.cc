// Engine-level fault kinds, each shown to have its effect on a running pipeline.
#include <gtest/gtest.h>

#include <set>

#include <algorithm>

#include "core/builtin.h"
#include "tests/test_support.h"
#include "core/reference.h"
#include "core/controller.h"
#include "faults/injector.h"
#include "simulated/pipeline_run.h"
#include "simulated/pipeline_world.h"

namespace onceflow::simulated {
namespace {

ComputationRegistry registry() { return testing::builtin_registry(); }

PipelineSpec keyed_aggregation() { return testing::library_pipeline("keyed_aggregation"); }

class Fenced final : public EngineObserver {
 public:
  void job_fenced(const JobId&, LeaseId) override { ++count; }
  int count = 0;
};

// A keyed-aggregation deployment with one scripted engine-level fault.
struct Fixture {
  explicit Fixture(faults::Fault fault) : reg(registry()), world(keyed_aggregation(), reg, options()) {
    world.start();
    hooks = faults::PipelineHooks{[this](const std::string& state) { world.set_pipeline_state(state); },
                          [this](const std::string& node) { return world.target_faults(node); }};
    injector = std::make_unique<faults::FaultInjector>(world.world(), &world.store_data(), &hooks);
    injector->schedule(faults::FaultPlan{{fault}, fault.at_us + fault.duration_us + 1});
  }
  PipelineWorldOptions options() {
    PipelineWorldOptions o;
    o.observer = &fenced;
    return o;
  }
  bool drains() { return world.run_until_drained(60 * kSeconds); }
  bool matches_reference() {
    const PipelineResult expected = run_reference(world.spec(), reg, world.inputs());
    const PipelineResult got = world.result();
    return got.sinks == expected.sinks && got.tables == expected.tables;
  }

  Fenced fenced;
  ComputationRegistry reg;
  PipelineWorld world;
  faults::PipelineHooks hooks;
  std::unique_ptr<faults::FaultInjector> injector;
};

using testing::fault;

TEST(EngineFaultsTest, LostLeasePingsLetLeasesRunOutAndTheirJobsAreFenced) {
  Fixture fx(fault(faults::FaultKind::kLeasePingLoss, 300 * kMillis, 3 * kSeconds));
  fx.world.world().run_until(3 * kSeconds);
  EXPECT_GT(fx.fenced.count, 0);
  size_t expired = 0;
  for (const auto& [id, lease] : fx.world.store_data().leases()) expired += lease.state == LeaseState::kExpired;
  EXPECT_GT(expired, 0u);
  ASSERT_TRUE(fx.drains());
  EXPECT_TRUE(fx.matches_reference());
}

TEST(EngineFaultsTest, ForcedLeaseExpiryFencesEveryJobAndTheyAreReplaced) {
  Fixture fx(fault(faults::FaultKind::kLeaseExpiry, 500 * kMillis, 0));
  fx.world.world().run_until(1 * kSeconds);
  EXPECT_GE(fx.fenced.count, 5);  // each job with work learned it at its next commit
  EXPECT_FALSE(fx.world.store_data().rejections().empty());
  ASSERT_TRUE(fx.drains());
  EXPECT_TRUE(fx.matches_reference());
}

TEST(EngineFaultsTest, SinkErrorsDelayDeliveryButLoseAndDuplicateNothing) {
  Fixture fx(fault(faults::FaultKind::kSinkErrors, 200 * kMillis, 1 * kSeconds, "target-counts_out", 1.0));
  fx.world.world().run_until(1 * kSeconds);
  const auto* log = fx.world.target_faults("target-counts_out");
  ASSERT_NE(log, nullptr);
  EXPECT_GT(log->errors, 0u);
  ASSERT_TRUE(fx.drains());
  EXPECT_TRUE(fx.matches_reference());
}

TEST(EngineFaultsTest, DedupWindowEvictionLetsAResendThroughAsADuplicate) {
  // The target forgets its seqNo state while its acknowledgements are being lost, so the
  // outbox's resends are appended again: exactly-once degrades to at-least-once.
  Fixture fx(fault(faults::FaultKind::kLostReplies, 200 * kMillis, 600 * kMillis, "target-counts_out", 1.0));
  faults::Fault evict = fault(faults::FaultKind::kDedupEviction, 500 * kMillis, 0, "target-counts_out");
  fx.injector->schedule(faults::FaultPlan{{evict}, 900 * kMillis});
  ASSERT_TRUE(fx.drains());
  const PipelineResult expected = run_reference(fx.world.spec(), fx.reg, fx.world.inputs());
  const PipelineResult result = fx.world.result();
  const auto& got = result.sinks.at("counts_out");
  EXPECT_GT(got.size(), expected.sinks.at("counts_out").size());
  for (const auto& item : expected.sinks.at("counts_out")) {
    EXPECT_TRUE(std::find(got.begin(), got.end(), item) != got.end()) << "lost " << item.second;
  }
}

TEST(EngineFaultsTest, PipelinePauseAndStopHaltEveryJobUntilStartedAgain) {
  for (faults::FaultKind kind : {faults::FaultKind::kPipelinePause, faults::FaultKind::kPipelineStop}) {
    Fixture fx(fault(kind, 300 * kMillis, 1 * kSeconds));
    fx.world.world().run_until(900 * kMillis);
    // Halted: no job is assigned, and no job commits meanwhile (every job Lease has ended:
    // an epoch names its job's Lease; the controller's and the workers' own stay).
    auto& data = fx.world.store_data();
    const Micros now = fx.world.world().now();
    std::set<LeaseId> own;  // the controllers' and the workers' own Leases
    for (const auto& c : data.commit_log()) {
      for (LeaseId lease : c.prerequisites) {
        if (data.lease_state(lease, now) == LeaseState::kActive) own.insert(lease);
      }
    }
    EXPECT_TRUE(data.read_range(tables::kController, kJobKeyPrefix, "job0", data.last_version(), 10).empty());
    size_t commits_before = data.commit_log().size();
    fx.world.world().run_until(1'200 * kMillis);
    size_t job_commits = 0;
    for (size_t i = commits_before; i < data.commit_log().size(); ++i) {
      for (LeaseId lease : data.commit_log()[i].prerequisites) job_commits += own.count(lease) == 0;
    }
    EXPECT_EQ(job_commits, 0u) << faults::fault_kind_name(kind);
    EXPECT_LE(own.size(), 4u) << "one controller and three workers hold Leases of their own";
    ASSERT_TRUE(fx.drains()) << faults::fault_kind_name(kind);
    EXPECT_TRUE(fx.matches_reference()) << faults::fault_kind_name(kind);
  }
}

}  // namespace
}  // namespace onceflow::simulated

namespace onceflow::simulated {
namespace {

TEST(EngineFaultsTest, PermanentSinkRejectionsFailTheSinkJobWhichIsReplacedAndLosesNothing) {
  Fixture fx(fault(faults::FaultKind::kSinkRejects, 200 * kMillis, 800 * kMillis, "target-counts_out", 0.5));
  const size_t leases_before = fx.world.store_data().leases().size();
  ASSERT_TRUE(fx.drains());
  EXPECT_GT(fx.world.target_faults("target-counts_out")->rejections, 0u);
  EXPECT_GT(fx.world.store_data().leases().size(), leases_before);  // failed sink jobs replaced
  EXPECT_TRUE(fx.matches_reference());
}

TEST(EngineFaultsTest, ASpareWorkerJoiningAndLeavingRebalancesTheJobs) {
  ComputationRegistry reg = registry();
  PipelineWorldOptions options;
  options.spare_workers = 1;
  PipelineWorld world(keyed_aggregation(), reg, options);
  world.start();
  faults::PipelineHooks hooks{[&](const std::string& s) { world.set_pipeline_state(s); },
                      [&](const std::string& n) { return world.target_faults(n); }};
  faults::FaultInjector injector(world.world(), &world.store_data(), &hooks);
  injector.schedule(faults::FaultPlan{{fault(faults::FaultKind::kRebalance, 500 * kMillis, 3 * kSeconds, "worker-spare-1")}, 4 * kSeconds});
  world.world().run_until(2 * kSeconds);
  EXPECT_TRUE(world.world().is_up(world.world().find("worker-spare-1")));
  size_t aborted_while_joined = 0;
  for (const auto& [id, lease] : world.store_data().leases()) aborted_while_joined += lease.state == LeaseState::kAborted;
  EXPECT_GT(aborted_while_joined, 0u);  // jobs moved to the newcomer, their old Leases aborted
  world.world().run_until(4 * kSeconds);
  EXPECT_FALSE(world.world().is_up(world.world().find("worker-spare-1")));
  ASSERT_TRUE(world.run_until_drained(60 * kSeconds));
  const PipelineResult expected = run_reference(world.spec(), reg, world.inputs());
  EXPECT_EQ(world.result().sinks, expected.sinks);
}

}  // namespace
}  // namespace onceflow::simulated
