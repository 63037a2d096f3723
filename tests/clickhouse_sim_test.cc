// The simulated ClickHouse (sim/clickhouse.h) and Flow's ClickHouse sinks: target
// validation at session start, the structured warnings, the finite dedup window, and each
// sink's guarantee under swarm faults. A dedup window shorter than replay_horizon warns and,
// under faults, duplicates; a long one does neither.
#include <gtest/gtest.h>

#include <functional>

#include "sim/clickhouse.h"
#include "tests/scenario_runs.h"

namespace onceflow::sim {
namespace {

using testing::options_of;
using testing::run_seeds;
using testing::Tally;

class Warnings final : public EngineObserver {
 public:
  void warning(const std::string& name, const std::vector<std::pair<std::string, std::string>>& attrs) override {
    seen.push_back({name, attrs});
  }
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> seen;
};

class ClickHouseTest : public ::testing::Test {
 protected:
  void start(ClickHouseTargetConfig config) {
    World::Options options;
    options.seed = 3;
    world_ = std::make_unique<World>(options);
    data_.config = std::move(config);
    spec_.name = "ch";
    spec_.type = SinkType::kClickHouse;
    spec_.table = "events";
    spec_.replay_horizon_us = 30 * kSeconds;
    world_->start(world_->add_node(sink_target_node("ch"), clickhouse_boot(table_, data_, faults_)));
    client_ = world_->add_node("client", [](NodeContext&) { return nullptr; });
    world_->start(client_);
  }
  void run(const std::function<void(SimClickHouseSink&)>& body) {
    bool done = false;
    world_->runtime(client_).spawn("test", [&] {
      SimClickHouseSink sink(world_->runtime(client_), world_->network_endpoint(client_), spec_, 100 * kMillis, &warnings_);
      body(sink);
      done = true;
    });
    for (int i = 0; i < 600 && !done; ++i) world_->run_until(world_->now() + 100 * kMillis);
    ASSERT_TRUE(done);
  }
  static std::vector<OutboxRow> rows(uint64_t from, uint64_t to, uint64_t batch_end) {
    return testing::outbox_rows(from, to, 1000, batch_end);
  }
  Status first_write_status() {
    Status status;
    run([&](SimClickHouseSink& sink) {
      auto r = sink.deliver("sink/ch/0", 1, rows(1, 2, 2));
      status = r ? Status::ok() : r.error();
    });
    return status;
  }

  SinkSpec spec_;
  TargetLog table_;
  ClickHouseData data_;
  TargetFaults faults_;
  Warnings warnings_;
  std::unique_ptr<World> world_;
  NodeIndex client_ = 0;
};

TEST_F(ClickHouseTest, DistributedAndNonMergeTreeTargetsAreRefusedAtSessionStart) {
  start({.engine = "Distributed"});
  Status s = first_write_status();
  EXPECT_TRUE(s.is_invalid_argument());
  EXPECT_NE(s.message().find("default.events is a Distributed table"), std::string::npos) << s.message();
  start({.engine = "Log"});
  s = first_write_status();
  EXPECT_NE(s.message().find("has engine Log, outside the MergeTree family"), std::string::npos) << s.message();
  start({.same_table_on_all_hosts = false});
  s = first_write_status();
  EXPECT_NE(s.message().find("cannot be shown to hold the same table"), std::string::npos) << s.message();
  EXPECT_TRUE(table_.appended.empty());
}

TEST_F(ClickHouseTest, ReplicatedAndSharedMergeTreesAreAcceptedSilently) {
  for (const char* engine : {"ReplicatedMergeTree", "ReplicatedReplacingMergeTree", "ReplicatedSummingMergeTree",
                             "ReplicatedAggregatingMergeTree", "SharedMergeTree"}) {
    warnings_.seen.clear();
    start({.engine = engine});
    EXPECT_TRUE(first_write_status().is_ok()) << engine;
    EXPECT_TRUE(warnings_.seen.empty()) << engine;
  }
}

TEST_F(ClickHouseTest, APlainMergeTreeIsAcceptedWithAWarningAndNoDedup) {
  start({.engine = "MergeTree"});
  run([&](SimClickHouseSink& sink) {
    ASSERT_TRUE(sink.deliver("sink/ch/0", 1, rows(1, 2, 2)).has_value());
    ASSERT_TRUE(sink.deliver("sink/ch/0", 1, rows(1, 2, 2)).has_value());  // a replay
  });
  ASSERT_EQ(warnings_.seen.size(), 1u);
  EXPECT_EQ(warnings_.seen[0].first, "ClickHouseTargetDoesNotDeduplicate");
  EXPECT_EQ(table_.appended.size(), 4u);  // the replay went in again
  EXPECT_EQ(simulated::default_guarantee(PipelineSpec{}, spec_, &data_.config), checkers::Guarantee::kAtLeastOnce);
}

TEST_F(ClickHouseTest, AWindowShorterThanTheReplayHorizonGivesTheStructuredWarning) {
  start({.database = "analytics", .window_us = 2 * kSeconds});
  EXPECT_TRUE(first_write_status().is_ok());
  ASSERT_EQ(warnings_.seen.size(), 1u);
  EXPECT_EQ(warnings_.seen[0].first, "ClickHouseDedupWindowShorterThanReplayHorizon");
  const std::vector<std::pair<std::string, std::string>> attrs = {
      {"Database", "analytics"}, {"Table", "events"}, {"DedupWindowSetting", "replicated_deduplication_window_seconds"},
      {"ReplayHorizon", "30.000000s"},  {"DedupWindow", "2.000000s"}};
  EXPECT_EQ(warnings_.seen[0].second, attrs);
}

TEST_F(ClickHouseTest, ARepeatedTokenIsDroppedInsideTheWindowAndInsertedAfterIt) {
  start({.window_us = 2 * kSeconds, .window_blocks = 100});
  run([&](SimClickHouseSink& sink) {
    ASSERT_TRUE(sink.deliver("sink/ch/0", 1, rows(1, 3, 3)).has_value());
    ASSERT_TRUE(sink.deliver("sink/ch/0", 1, rows(1, 3, 3)).has_value());  // inside the window
    EXPECT_EQ(table_.appended.size(), 3u);
    world_->runtime(client_).sleep_for(3 * kSeconds);
    // The window counts from the newest block: alone, the old token is still there.
    ASSERT_TRUE(sink.deliver("sink/ch/0", 1, rows(1, 3, 3)).has_value());
    EXPECT_EQ(table_.appended.size(), 3u);
    ASSERT_TRUE(sink.deliver("sink/ch/0", 1, rows(4, 6, 6)).has_value());  // a newer block pushes it out
    ASSERT_TRUE(sink.deliver("sink/ch/0", 1, rows(1, 3, 3)).has_value());  // evicted: inserted again
    EXPECT_EQ(table_.appended.size(), 9u);
  });
  EXPECT_EQ(data_.deduplicated_blocks, 2u);
}

TEST_F(ClickHouseTest, TheWindowKeepsAtMostWindowBlocksTokens) {
  start({.window_blocks = 2});
  run([&](SimClickHouseSink& sink) {
    for (uint64_t b = 0; b < 3; ++b) ASSERT_TRUE(sink.deliver("sink/ch/0", 1, rows(3 * b + 1, 3 * b + 3, 3 * b + 3)).has_value());
    ASSERT_TRUE(sink.deliver("sink/ch/0", 1, rows(4, 6, 6)).has_value());  // still in the window
    ASSERT_TRUE(sink.deliver("sink/ch/0", 1, rows(1, 3, 3)).has_value());  // the oldest of three: gone
  });
  EXPECT_EQ(data_.deduplicated_blocks, 1u);
  EXPECT_EQ(table_.appended.size(), 12u);
}

// A batch is an outbox row (the engine cuts them when it writes them, core/job_sink.cc): the sink
// sends up to each row's end, whatever its own max_batch_messages says now (a restart under
// another limit must resend the batches the target holds as they were), and only complete
// batches go.
TEST_F(ClickHouseTest, BatchesEndWhereTheOutboxRowsEndAndOnlyCompleteOnesGo) {
  start({});
  spec_.max_batch_messages = 2;  // not what cuts the batches
  run([&](SimClickHouseSink& sink) {
    // Rows [1..4] and [5..6] of one epoch (a limit of 4 when written), then [7..8] of the next
    // and 9 of a row still being filled (no end yet).
    std::vector<OutboxRow> outbox = rows(1, 9, 6);
    outbox[3].batch_end = true;  // seqNo 4
    outbox[7].batch_end = true;  // seqNo 8
    auto r = sink.deliver("sink/ch/0", 1, outbox);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(*r, 8u);  // batches [1..4], [5..6] and [7..8]; 9 waits for its batch to end
  });
  EXPECT_EQ(data_.inserted_blocks, 3u);
  EXPECT_EQ(table_.appended.size(), 8u);
}

TEST_F(ClickHouseTest, TheShardedSinkSuffixesTheTokenWithTheShardName) {
  start({});
  spec_.shard_hosts = {"s1", "s2"};
  run([&](SimClickHouseSink& sink) {
    ASSERT_TRUE(sink.deliver("sink/ch/0", 1, rows(1, 4, 4)).has_value());
    ASSERT_TRUE(sink.deliver("sink/ch/0", 1, rows(1, 4, 4)).has_value());
  });
  EXPECT_EQ(table_.appended.size(), 4u);
  ASSERT_EQ(data_.tokens.size(), 2u);
  EXPECT_EQ(data_.tokens.at("s1").front().first, format_id(1004) + ":s1");
  EXPECT_EQ(data_.tokens.at("s2").front().first, format_id(1004) + ":s2");
  EXPECT_EQ(data_.deduplicated_blocks, 2u);
}

TEST_F(ClickHouseTest, TheAtLeastOnceSinkGivesUpOnUnclassifiedErrorsAfterMaxInsertAttempts) {
  start({});
  spec_.max_insert_attempts = 3;
  spec_.delivery_guarantee = SinkDelivery::kAtLeastOnce;
  Status transient_then_ok, permanent, unclassified;
  run([&](SimClickHouseSink& sink) {
    ASSERT_TRUE(sink.write_now("sink/ch/0", 1, {Message{}}).is_ok());  // the session
    faults_.error_probability = 1;  // unavailable: retried without limit...
    world_->scheduler().at(world_->now() + 2 * kSeconds, kWorldNode, [this] { faults_.error_probability = 0; });
    transient_then_ok = sink.write_now("sink/ch/0", 1, {Message{}});
    faults_.reject_probability = 1;
    permanent = sink.write_now("sink/ch/0", 1, {Message{}});
    faults_.reject_probability = 0;
    // A frozen server: no answer at all (it may or may not have inserted): unclassified.
    world_->scheduler().at(world_->now(), kWorldNode, [this] { world_->pause(world_->find(sink_target_node("ch"))); });
    world_->runtime(client_).sleep_for(kMillis);
    unclassified = sink.write_now("sink/ch/0", 1, {Message{}});
  });
  EXPECT_TRUE(transient_then_ok.is_ok());
  EXPECT_GT(faults_.errors, 10u);
  EXPECT_TRUE(permanent.is_invalid_argument());
  EXPECT_EQ(faults_.rejections, 1u);  // failed at once
  EXPECT_TRUE(unclassified.is_timeout()) << unclassified.message();  // after max_insert_attempts tries
}

// --- Scenarios under swarm faults ---------------------------------------------------------------

TEST(ClickHouseScenarioTest, AShortDedupWindowWarnsAndDuplicatesALongOneDoesNeither) {
  const Tally shorter = run_seeds(options_of("clickhouse_short_window.yaml"), 20);
  ASSERT_FALSE(shorter.warnings.empty());
  EXPECT_NE(shorter.warnings[0].find("ClickHouseDedupWindowShorterThanReplayHorizon Database=default "
                                     "Table=word_counts DedupWindowSetting=replicated_deduplication_window_seconds "
                                     "ReplayHorizon=30.000000s DedupWindow=0.300000s"),
            std::string::npos)
      << shorter.warnings[0];
  EXPECT_GT(shorter.duplicated, 0);
  EXPECT_EQ(shorter.lost, 0) << testing::first_failure(shorter);
  const Tally longer = run_seeds(options_of("clickhouse_exactly_once.yaml"), 20);
  EXPECT_TRUE(longer.warnings.empty());
  EXPECT_EQ(longer.passed, 20) << testing::first_failure(longer);
}

TEST(ClickHouseScenarioTest, EverySinkKeepsItsGuarantee) {
  for (const char* file : {"clickhouse_sharded.yaml", "clickhouse_mergetree.yaml", "clickhouse_at_least_once.yaml",
                           "clickhouse_at_most_once.yaml", "clickhouse_at_most_once_queue.yaml"}) {
    const Tally t = run_seeds(options_of(file), 15);
    EXPECT_EQ(t.passed, 15) << file << ": " << testing::first_failure(t);
  }
}

TEST(ClickHouseScenarioTest, APlainMergeTreeIsOnlyAtLeastOnce) {
  simulated::PipelineRunOptions o = options_of("clickhouse_mergetree.yaml");
  EXPECT_EQ(o.sink_guarantees.at("counts_ch"), checkers::Guarantee::kAtLeastOnce);
  o.sink_guarantees["counts_ch"] = checkers::Guarantee::kExactlyOnce;
  const Tally strict = run_seeds(o, 20);
  ASSERT_FALSE(strict.warnings.empty());
  EXPECT_NE(strict.warnings[0].find("ClickHouseTargetDoesNotDeduplicate"), std::string::npos);
  EXPECT_GT(strict.duplicated, 0);
  EXPECT_EQ(strict.lost, 0) << testing::first_failure(strict);
}

}  // namespace
}  // namespace onceflow::sim
