// The simulated Kafka (sim/kafka.h) and the connectors on it: the model's own semantics
// (idempotent retries, transactions, fencing by transactional.id, read_committed, timeouts),
// Flow's Kafka source and sinks under swarm faults, and the ArkFlow boundary (seeds/004): with
// the same workload and faults, an ArkFlow-style transactional output shows duplicates and
// Flow's exactly-once Kafka sink none.
#include <gtest/gtest.h>

#include <functional>
#include <optional>

#include "core/engine.h"
#include "sim/kafka.h"
#include "tests/scenario_runs.h"

namespace onceflow::sim {
namespace {

using testing::options_of;
using testing::run_seeds;
using testing::Tally;

// A world with the Kafka node and a client node whose fiber runs the test's steps.
class KafkaModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    World::Options options;
    options.seed = 7;
    world_ = std::make_unique<World>(options);
    data_.create_topic("t", 2);
    world_->start(world_->add_node(kKafkaNode, kafka_broker_boot(data_, faults_)));
    client_ = world_->add_node("client", [](NodeContext&) { return nullptr; });
    world_->start(client_);
  }
  // Runs `body` on the client's fiber until it returns.
  void run(const std::function<void(SimKafkaClient&)>& body) {
    bool done = false;
    world_->runtime(client_).spawn("test", [&] {
      SimKafkaClient client(world_->network_endpoint(client_), 100 * kMillis);
      body(client);
      done = true;
    });
    for (int i = 0; i < 600 && !done; ++i) world_->run_until(world_->now() + 100 * kMillis);
    ASSERT_TRUE(done);
  }
  std::vector<std::string> committed_values(const std::string& topic, int partition) const {
    std::vector<std::string> out;
    for (const auto& [offset, r] : data_.fetch(topic, partition, 0, 1000, true).records) out.push_back(r->value);
    return out;
  }
  // An exactly-once sink "out" on topic "t" (two partitions), with its progress topic.
  SinkSpec exactly_once_sink() {
    SinkSpec spec;
    spec.name = "out";
    spec.topic = "t";
    spec.partitions = 2;
    data_.create_topic(SimKafkaSink::progress_topic("t"), 2);
    return spec;
  }
  static KafkaRecord record(std::string value) { return {"1", std::move(value), 0, KafkaRecord::State::kPlain, 0, "", 0}; }

  KafkaData data_;
  TargetFaults faults_;
  std::unique_ptr<World> world_;
  NodeIndex client_ = 0;
};

TEST_F(KafkaModelTest, AnIdempotentProducersRetriedBatchLandsOnce) {
  run([&](SimKafkaClient& client) {
    auto p = client.init_producer("");
    ASSERT_TRUE(p.has_value());
    SimKafkaClient::Producer copy = *p;  // the same batch sent twice, as after a lost answer
    ASSERT_TRUE(client.produce(*p, "t", 0, {record("a"), record("b")}).is_ok());
    ASSERT_TRUE(client.produce(copy, "t", 0, {record("a"), record("b")}).is_ok());
    ASSERT_TRUE(client.produce(*p, "t", 0, {record("c")}).is_ok());
  });
  EXPECT_EQ(committed_values("t", 0), (std::vector<std::string>{"a", "b", "c"}));
}

TEST_F(KafkaModelTest, ASequenceGapIsRefusedAndForgottenStateIsNotGuessed) {
  run([&](SimKafkaClient& client) {
    auto p = client.init_producer("");
    ASSERT_TRUE(client.produce(*p, "t", 0, {record("a")}).is_ok());
    SimKafkaClient::Producer skipping = *p;
    skipping.next_sequence[{"t", 0}] = 5;
    EXPECT_TRUE(client.produce(skipping, "t", 0, {record("x")}).is_aborted());
    data_.forget_idempotent_state();  // producer-id expiry: a retry can no longer be told apart
    EXPECT_TRUE(client.produce(*p, "t", 0, {record("b")}).is_aborted());
  });
  EXPECT_EQ(committed_values("t", 0), (std::vector<std::string>{"a"}));
}

TEST_F(KafkaModelTest, ReadCommittedSeesATransactionOnlyOnceItCommits) {
  run([&](SimKafkaClient& client) {
    auto p = client.init_producer("tx-1");
    ASSERT_TRUE(client.produce(*p, "t", 1, {record("a"), record("b")}).is_ok());
    EXPECT_TRUE(committed_values("t", 1).empty());
    const auto uncommitted = data_.fetch("t", 1, 0, 10, false);
    EXPECT_EQ(uncommitted.records.size(), 2u);  // read_uncommitted sees them
    ASSERT_TRUE(client.end_transaction(*p, true).is_ok());
    EXPECT_EQ(committed_values("t", 1), (std::vector<std::string>{"a", "b"}));
    ASSERT_TRUE(client.produce(*p, "t", 1, {record("c")}).is_ok());
    ASSERT_TRUE(client.end_transaction(*p, false).is_ok());  // aborted: skipped for good
    ASSERT_TRUE(client.produce(*p, "t", 1, {record("d")}).is_ok());
    ASSERT_TRUE(client.end_transaction(*p, true).is_ok());
  });
  EXPECT_EQ(committed_values("t", 1), (std::vector<std::string>{"a", "b", "d"}));
}

TEST_F(KafkaModelTest, ANewProducerWithTheSameTransactionalIdFencesTheOldOne) {
  run([&](SimKafkaClient& client) {
    auto zombie = client.init_producer("tx-1");
    ASSERT_TRUE(client.produce(*zombie, "t", 0, {record("zombie")}).is_ok());
    auto fresh = client.init_producer("tx-1");  // aborts the zombie's open transaction
    ASSERT_TRUE(fresh.has_value());
    EXPECT_GT(fresh->epoch, zombie->epoch);
    EXPECT_TRUE(client.produce(*zombie, "t", 0, {record("late")}).is_aborted());
    EXPECT_TRUE(client.end_transaction(*zombie, true).is_aborted());
    ASSERT_TRUE(client.produce(*fresh, "t", 0, {record("fresh")}).is_ok());
    ASSERT_TRUE(client.end_transaction(*fresh, true).is_ok());
  });
  EXPECT_EQ(committed_values("t", 0), (std::vector<std::string>{"fresh"}));
}

// The zombie's first write after its successor's InitProducerId goes to a partition it never
// wrote: the broker must refuse it as fenced (the producer epoch is the producer's, not the
// partition's), not merely fail it.
TEST_F(KafkaModelTest, AZombiesFirstWriteToANewPartitionIsRefusedAsFenced) {
  run([&](SimKafkaClient& client) {
    auto zombie = client.init_producer("tx-1");
    ASSERT_TRUE(client.produce(*zombie, "t", 0, {record("zombie")}).is_ok());
    auto fresh = client.init_producer("tx-1");
    ASSERT_TRUE(fresh.has_value());
    const Status late = client.produce(*zombie, "t", 1, {record("late")});
    EXPECT_TRUE(late.is_aborted());
    EXPECT_NE(late.message().find("PRODUCER_FENCED"), std::string::npos) << late.message();
    ASSERT_TRUE(client.produce(*fresh, "t", 0, {record("fresh")}).is_ok());
    ASSERT_TRUE(client.end_transaction(*fresh, true).is_ok());
  });
  EXPECT_TRUE(committed_values("t", 1).empty());
}

// The same steps on a broker that fences by partition (KafkaData::fence_by_partition): the
// zombie's record joins the successor's transaction and commits with it.
TEST_F(KafkaModelTest, ABrokerThatFencesByPartitionLetsTheZombieIntoTheSuccessorsTransaction) {
  data_.fence_by_partition = true;
  run([&](SimKafkaClient& client) {
    auto zombie = client.init_producer("tx-1");
    ASSERT_TRUE(client.produce(*zombie, "t", 0, {record("zombie")}).is_ok());
    auto fresh = client.init_producer("tx-1");
    const Status late = client.produce(*zombie, "t", 1, {record("late")});
    EXPECT_TRUE(late.is_ok()) << late.to_string();
    ASSERT_TRUE(client.produce(*fresh, "t", 0, {record("fresh")}).is_ok());
    ASSERT_TRUE(client.end_transaction(*fresh, true).is_ok());
  });
  EXPECT_EQ(committed_values("t", 1), (std::vector<std::string>{"late"}));
}

// KIP-890's hazard: a copy of a transaction's EndTxn, held in the network until the producer
// has begun its next transaction, arrives. `held` is that copy: the same request as the first.
TEST_F(KafkaModelTest, WithoutAnEpochBumpADelayedEndTxnEndsTheNextTransaction) {
  data_.epoch_per_transaction = false;  // brokers before Kafka 4.0
  run([&](SimKafkaClient& client) {
    auto p = client.init_producer("tx-1");
    ASSERT_TRUE(client.produce(*p, "t", 0, {record("a")}).is_ok());
    SimKafkaClient::Producer held = *p;
    ASSERT_TRUE(client.end_transaction(*p, true).is_ok());  // the client's retry, answered
    ASSERT_TRUE(client.produce(*p, "t", 0, {record("b")}).is_ok());
    EXPECT_TRUE(client.end_transaction(held, true).is_ok());  // the held copy commits "b"
    EXPECT_TRUE(client.end_transaction(*p, false).is_ok());   // the writer aborts "b"'s transaction
  });
  EXPECT_EQ(committed_values("t", 0), (std::vector<std::string>{"a", "b"}));  // an aborted read
  const KafkaRecord& b = data_.topics["t"][0].log[1];
  EXPECT_NE(b.txn, b.committed_txn);  // torn: committed by another transaction's EndTxn
  EXPECT_EQ(data_.aborted_by_writer.count({b.producer_id, b.txn}), 1u);
}

TEST_F(KafkaModelTest, WithAnEpochBumpPerTransactionADelayedEndTxnEndsNothing) {
  run([&](SimKafkaClient& client) {
    auto p = client.init_producer("tx-1");
    ASSERT_TRUE(client.produce(*p, "t", 0, {record("a")}).is_ok());
    SimKafkaClient::Producer held = *p;
    ASSERT_TRUE(client.end_transaction(*p, true).is_ok());
    EXPECT_GT(p->epoch, held.epoch);  // the next transaction runs under a new epoch
    ASSERT_TRUE(client.produce(*p, "t", 0, {record("b")}).is_ok());
    // The held copy is a retry of the EndTxn that ended "a"'s transaction: answered, no effect.
    SimKafkaClient::Producer copy = held;  // each call sends the request as it was
    EXPECT_TRUE(client.end_transaction(copy, true).is_ok());
    EXPECT_EQ(committed_values("t", 0), (std::vector<std::string>{"a"}));
    // A copy that is not such a retry (an abort under the old epoch) is refused as fenced.
    copy = held;
    EXPECT_TRUE(client.end_transaction(copy, false).is_aborted());
    ASSERT_TRUE(client.end_transaction(*p, true).is_ok());
  });
  EXPECT_EQ(committed_values("t", 0), (std::vector<std::string>{"a", "b"}));
  const KafkaRecord& b = data_.topics["t"][0].log[1];
  EXPECT_EQ(b.txn, b.committed_txn);
}

TEST_F(KafkaModelTest, AnAbandonedTransactionTimesOutAndUnblocksReaders) {
  run([&](SimKafkaClient& client) {
    auto p = client.init_producer("tx-1");
    ASSERT_TRUE(client.produce(*p, "t", 0, {record("open")}).is_ok());
    auto other = client.init_producer("");
    ASSERT_TRUE(client.produce(*other, "t", 0, {record("after")}).is_ok());
  });
  EXPECT_TRUE(committed_values("t", 0).empty());  // blocked behind the open transaction
  world_->run_until(world_->now() + data_.transaction_timeout_us + kSeconds);
  EXPECT_EQ(committed_values("t", 0), (std::vector<std::string>{"after"}));
}

TEST_F(KafkaModelTest, AProducerWhoseTransactionTimedOutIsFenced) {
  std::optional<SimKafkaClient::Producer> p;
  run([&](SimKafkaClient& client) {
    p = *client.init_producer("tx-1");
    ASSERT_TRUE(client.produce(*p, "t", 0, {record("first half")}).is_ok());
  });
  world_->run_until(world_->now() + data_.transaction_timeout_us + kSeconds);  // aborted meanwhile
  run([&](SimKafkaClient& client) {
    // Carrying on would commit the second half alone: the broker refuses.
    EXPECT_TRUE(client.produce(*p, "t", 0, {record("second half")}).is_aborted());
    EXPECT_TRUE(client.end_transaction(*p, true).is_aborted());
  });
  EXPECT_TRUE(committed_values("t", 0).empty());
}

// The exactly-once sink's restart rule: its marker gone while its messages may be in the
// topic, it stops instead of writing them again.
TEST_F(KafkaModelTest, TheExactlyOnceSinkStopsWhenItsProgressMarkerIsLost) {
  const SinkSpec spec = exactly_once_sink();
  auto rows = [](uint64_t from, uint64_t to) { return testing::outbox_rows(from, to, 100); };
  run([&](SimKafkaClient&) {
    Network& net = world_->network_endpoint(client_);
    SimKafkaSink first(net, spec, 100 * kMillis);
    auto held = first.deliver("sink/out/0", 1, rows(1, 3));
    ASSERT_TRUE(held.has_value()) << held.error().message();
    EXPECT_EQ(*held, 3u);
    SimKafkaSink restarted(net, spec, 100 * kMillis);  // a replacement re-sends 2..5
    held = restarted.deliver("sink/out/0", 2, rows(2, 5));
    ASSERT_TRUE(held.has_value());
    EXPECT_EQ(*held, 5u);  // 2 and 3 skipped: the marker covers them
    data_.delete_records(SimKafkaSink::progress_topic("t"));
    SimKafkaSink blind(net, spec, 100 * kMillis);
    held = blind.deliver("sink/out/0", 3, rows(4, 6));
    ASSERT_FALSE(held.has_value());
    EXPECT_TRUE(held.error().is_invalid_argument());
    EXPECT_NE(held.error().message().find("progress marker"), std::string::npos) << held.error().message();
  });
  size_t records = committed_values("t", 0).size() + committed_values("t", 1).size();
  EXPECT_EQ(records, 5u);  // 1..5 once each; nothing of the blind attempt
}

TEST_F(KafkaModelTest, TheExactlyOnceSinkStopsWhenItsMarkerIsLostBeforeAnyAcknowledgement) {
  const SinkSpec spec = exactly_once_sink();
  const std::vector<OutboxRow> rows = testing::outbox_rows(1, 3);
  run([&](SimKafkaClient&) {
    Network& net = world_->network_endpoint(client_);
    SimKafkaSink first(net, spec, 100 * kMillis);
    ASSERT_TRUE(first.deliver("sink/out/0", 1, rows).has_value());  // committed, never acknowledged
    data_.delete_records(SimKafkaSink::progress_topic("t"));
    SimKafkaSink restarted(net, spec, 100 * kMillis);  // the outbox still starts at seqNo 1
    auto held = restarted.deliver("sink/out/0", 2, rows);
    ASSERT_FALSE(held.has_value());
    EXPECT_TRUE(held.error().is_invalid_argument()) << held.error().message();
  });
  EXPECT_EQ(committed_values("t", 0).size() + committed_values("t", 1).size(), 3u);
}

// --- Scenarios under swarm faults ---------------------------------------------------------------

TEST(KafkaScenarioTest, TheExactlyOnceSinkKeepsItsGuarantee) {
  const Tally t = run_seeds(options_of("kafka_exactly_once.yaml"), 20);
  EXPECT_EQ(t.passed, 20) << testing::first_failure(t);
}

TEST(KafkaScenarioTest, TheAtLeastOnceSinksLoseNothingAndMayRepeat) {
  for (const char* file : {"kafka_at_least_once.yaml", "kafka_sync_at_least_once.yaml"}) {
    simulated::PipelineRunOptions o = options_of(file);
    const Tally alo = run_seeds(o, 20);
    EXPECT_EQ(alo.passed, 20) << file << ": " << testing::first_failure(alo);
    o.sink_guarantees["counts_out"] = checkers::Guarantee::kExactlyOnce;
    const Tally strict = run_seeds(o, 20);
    EXPECT_GT(strict.duplicated, 0) << file << ": no repeat in 20 seeds under faults";
    EXPECT_EQ(strict.lost, 0) << file;
  }
}

TEST(KafkaScenarioTest, TheArkFlowBoundaryDuplicatesWhereFlowsSinkDoesNot) {
  const simulated::PipelineRunOptions ark = options_of("arkflow_boundary_arkflow.yaml");
  const simulated::PipelineRunOptions flow = options_of("arkflow_boundary_flow.yaml");
  // The same workload and faults; only the sink differs.
  EXPECT_EQ(ark.workload.messages, flow.workload.messages);
  EXPECT_EQ(ark.swarm_kinds, flow.swarm_kinds);
  EXPECT_EQ(ark.heal_at_us, flow.heal_at_us);
  EXPECT_EQ(ark.fault_point_probability, flow.fault_point_probability);
  const Tally a = run_seeds(ark, 20);
  EXPECT_GT(a.duplicated, 0) << "the ArkFlow-style output showed no duplicate in 20 seeds";
  EXPECT_EQ(a.lost, 0) << testing::first_failure(a);
  const Tally f = run_seeds(flow, 20);
  EXPECT_EQ(f.passed, 20) << testing::first_failure(f);
}

TEST(KafkaScenarioTest, ACrashRightAfterTheProducerCommitIsEnoughForArkFlowToDuplicate) {
  // No swarm: one crash at the named point between the Kafka commit and the offset commit.
  simulated::PipelineRunOptions o = options_of("arkflow_boundary_arkflow.yaml");
  o.swarm = false;
  o.scripted = {};
  o.fault_points_when_scripted = true;
  o.fault_point_probability = 0.02;
  int duplicated = 0;
  for (uint64_t seed = 1; seed <= 10 && duplicated == 0; ++seed) {
    o.seed = seed;
    const auto run = simulated::run_pipeline(o, testing::shared_registry()).outcome;
    for (const auto& v : run.verdicts) duplicated += !v.passed && v.detail.find("duplicate:") != std::string::npos;
  }
  EXPECT_GT(duplicated, 0);
}

TEST(KafkaSpecTest, ArkFlowExactlyOnceNeedsATransactionalId) {
  auto spec = load_pipeline_spec(std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/pipelines/kafka_copy_arkflow.yaml");
  ASSERT_TRUE(spec.has_value());
  spec->sinks[0].transactional_id.clear();
  const Status s = validate_pipeline_spec(*spec);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("sinks.orders_copy.transactional_id: exactly_once: true requires a non-empty "
                             "transactional_id"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace onceflow::sim
