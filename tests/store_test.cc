// The simulated store: what only it can show (lost requests and replies on the simulated
// network, a store node crash, duplicated requests). The contract every store keeps is
// tests/store_contract_test.cc, run against this store too.
#include "sim/store.h"

#include <gtest/gtest.h>

#include <functional>

namespace onceflow::sim {
namespace {

// A store node and a client node; run() executes `body` on a client fiber with a Store.
class StoreTest : public ::testing::Test {
 protected:
  StoreTest() { build(LinkOptions{}); }

  void build(LinkOptions link) {
    World::Options options;
    options.seed = 7;
    options.network.link = link;
    world_ = std::make_unique<World>(options);
    store_ = world_->add_node("store", StoreServer::boot(data_));
    client_ = world_->add_node("client", [](NodeContext&) { return nullptr; });
    world_->start(store_);
    world_->start(client_);
  }

  void run(const std::function<void(Store&)>& body) {
    bool finished = false;
    world_->runtime(client_).spawn("test", [&] {
      SimStoreClient store(world_->network_endpoint(client_), "store", 10'000);
      body(store);
      finished = true;
    });
    world_->run_until(kNever);
    ASSERT_TRUE(finished);
  }

  StoreData data_;
  std::unique_ptr<World> world_;
  NodeIndex store_ = 0, client_ = 0;
};

// What Store::scan and the engine's read-ahead both rely on: buffered writes laid over the
// committed rows of a range, and, when those rows are only a page, nothing past its end.
TEST(TransactionTest, OverlayLaysBufferedWritesOverCommittedRows) {
  Transaction tx(1, 0);
  tx.put("t", "b", "new-b");
  tx.erase("t", "c");
  tx.put("t", "e", "new-e");
  tx.put("u", "a", "other table");
  const std::vector<Row> committed{{"a", "old-a"}, {"c", "old-c"}, {"d", "old-d"}};
  EXPECT_EQ(tx.buffered_erases("t", "a", ""), 1u);
  EXPECT_EQ(tx.buffered_erases("t", "d", ""), 0u);

  const std::vector<Row> all{{"a", "old-a"}, {"b", "new-b"}, {"d", "old-d"}, {"e", "new-e"}};
  EXPECT_EQ(tx.overlay("t", "a", "", 10, committed, true), all);
  EXPECT_EQ(tx.overlay("t", "a", "", 2, committed, true), (std::vector<Row>{all[0], all[1]}));
  EXPECT_EQ(tx.overlay("t", "a", "e", 10, committed, true), (std::vector<Row>{all[0], all[1], all[2]}));
  // A page that may go on past "d": the buffered "e" lies beyond what is known.
  EXPECT_EQ(tx.overlay("t", "a", "", 10, committed, false), (std::vector<Row>{all[0], all[1], all[2]}));
  // An empty page that is not complete tells nothing.
  EXPECT_TRUE(tx.overlay("t", "a", "", 10, {}, false).empty());
  EXPECT_EQ(tx.overlay("t", "a", "", 10, {}, true), (std::vector<Row>{all[1], all[3]}));
}

TEST_F(StoreTest, GetManyAnswersLikeGetKeyByKeyInOneRoundTrip) {
  run([&](Store& store) {
    auto setup = store.begin();
    for (const char* k : {"a", "b", "c"}) setup->put("t", k, std::string("old-") + k);
    ASSERT_TRUE(store.commit(*setup, {}).has_value());
    auto tx = store.begin();
    auto later = store.begin();
    later->put("t", "a", "later-a");  // committed after tx's snapshot: tx must not see it
    ASSERT_TRUE(store.commit(*later, {}).has_value());
    tx->erase("t", "b");
    tx->put("t", "z", "new-z");
    const std::vector<std::string> keys{"z", "a", "b", "c", "missing"};
    auto many = store.get_many(*tx, "t", keys);
    ASSERT_TRUE(many.has_value());
    ASSERT_EQ(many->size(), keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      auto one = store.get(*tx, "t", keys[i]);
      ASSERT_TRUE(one.has_value());
      EXPECT_EQ((*many)[i], *one) << keys[i];
    }
    EXPECT_EQ((*many)[0], std::optional<std::string>("new-z"));
    EXPECT_EQ((*many)[1], std::optional<std::string>("old-a"));
    EXPECT_EQ((*many)[2], std::nullopt);
  });
}

TEST_F(StoreTest, LostReplyGivesAmbiguousCommitThatDidApply) {
  LinkOptions link;
  build(link);
  const NodeIndex store_node = store_;
  run([&](Store& store) {
    auto tx = store.begin();
    tx->put("t", "k", "v");
    world_->network().block(store_node, client_);  // replies from the store are lost
    auto result = store.commit(*tx, {});
    ASSERT_FALSE(result.has_value());
    EXPECT_TRUE(result.error().is_ambiguous());
    world_->network().heal();
    EXPECT_EQ(*store.resolve(tx->id()), TxOutcome::kCommitted);
  });
  EXPECT_EQ(data_.latest("t", "k").value_or(""), "v");
}

TEST_F(StoreTest, LostRequestGivesAmbiguousCommitThatDidNotApplyAndIsFenced) {
  const NodeIndex store_node = store_;
  run([&](Store& store) {
    auto tx = store.begin();
    tx->put("t", "k", "v");
    world_->network().block(client_, store_node);  // the commit request is lost
    auto result = store.commit(*tx, {});
    ASSERT_FALSE(result.has_value());
    EXPECT_TRUE(result.error().is_ambiguous());
    world_->network().heal();
    EXPECT_EQ(*store.resolve(tx->id()), TxOutcome::kNotCommitted);
    // A late copy of the same commit can no longer apply.
    EXPECT_FALSE(store.commit(*tx, {}).has_value());
  });
  EXPECT_FALSE(data_.latest("t", "k").has_value());
}

TEST_F(StoreTest, StoreCrashKeepsCommittedDataAndForgetsOpenTransactions) {
  run([&](Store& store) {
    auto committed = store.begin();
    committed->put("t", "k", "durable");
    ASSERT_TRUE(store.commit(*committed, {}).has_value());
    auto open = store.begin();
    open->put("t", "k", "lost");
    world_->scheduler().at(world_->now(), kWorldNode, [&] { world_->restart(store_); });
    world_->runtime(client_).sleep_for(10);
    auto result = store.commit(*open, {});
    ASSERT_FALSE(result.has_value());
    EXPECT_TRUE(result.error().is_unavailable());
  });
  EXPECT_EQ(data_.latest("t", "k").value_or(""), "durable");
}

TEST_F(StoreTest, UnavailableStoreRefusesEverything) {
  data_.unavailable = true;
  run([&](Store& store) {
    auto tx = store.begin();
    ASSERT_FALSE(tx.has_value());
    EXPECT_TRUE(tx.error().is_unavailable());
  });
}

TEST_F(StoreTest, DuplicatedCommitRequestAppliesOnce) {
  LinkOptions link;
  link.duplicate_probability = 1.0;
  build(link);
  run([&](Store& store) {
    auto tx = store.begin();
    tx->put("t", "k", "v");
    ASSERT_TRUE(store.commit(*tx, {}).has_value());
  });
  EXPECT_EQ(data_.commit_log().size(), 1u);
}

}  // namespace
}  // namespace onceflow::sim
