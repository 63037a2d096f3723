// Each kernel fault kind, applied by the injector, has its effect in the simulator.
#include "faults/injector.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>

namespace onceflow::faults {
namespace {

class InjectorTest : public ::testing::Test {
 protected:
  InjectorTest() : world_(World::Options{}) {
    store_ = world_.add_node("store", sim::StoreServer::boot(data_));
    client_ = world_.add_node("client", [](sim::NodeContext& ctx) -> std::shared_ptr<void> {
      ctx.network.serve("echo", [](const std::string&, std::string_view r) {
        return Result<std::string>(std::string(r));
      });
      return nullptr;
    });
    peer_ = world_.add_node("peer", [this](sim::NodeContext& ctx) -> std::shared_ptr<void> {
      ctx.network.serve("echo", [this](const std::string&, std::string_view r) {
        ++echoes_;
        return Result<std::string>(std::string(r));
      });
      return nullptr;
    });
    for (auto n : {store_, client_, peer_}) world_.start(n);
  }

  using World = sim::World;

  void plan(std::vector<Fault> faults, Micros heal_at = 10 * kSeconds) {
    injector_.schedule(FaultPlan{std::move(faults), heal_at});
  }

  // Runs `body` on a client fiber starting at virtual time `at`, then the world to `until`.
  void on_client(Micros at, std::function<void(Store&)> body, Micros until = 20 * kSeconds) {
    world_.scheduler().at(at, sim::kWorldNode, [this, body] {
      world_.runtime(client_).spawn("test", [this, body] {
        sim::SimStoreClient store(world_.network_endpoint(client_), "store", 50 * kMillis);
        body(store);
      });
    });
    world_.run_until(until);
  }

  Result<std::string> echo(Micros timeout = 50 * kMillis) {
    return world_.network_endpoint(client_).call("peer", "echo", "x", timeout);
  }

  sim::StoreData data_;
  World world_;
  sim::NodeIndex store_, client_, peer_;
  FaultInjector injector_{world_, &data_};
  int echoes_ = 0;
};

Fault fault(FaultKind kind, Micros at, Micros duration, std::string node, std::string peer = "") {
  Fault f;
  f.kind = kind;
  f.at_us = at;
  f.duration_us = duration;
  f.node = std::move(node);
  f.peer = std::move(peer);
  return f;
}

TEST_F(InjectorTest, CrashTakesTheNodeDownAndRestartsItAfterwards) {
  plan({fault(FaultKind::kCrash, 1'000, 5'000, "peer")});
  world_.run_until(2'000);
  EXPECT_FALSE(world_.is_up(peer_));
  world_.run_until(7'000);
  EXPECT_TRUE(world_.is_up(peer_));
  EXPECT_EQ(world_.incarnation(peer_), 2u);
}

TEST_F(InjectorTest, StoreCrashKeepsDataAndForgetsOpenTransactions) {
  plan({fault(FaultKind::kCrash, 100 * kMillis, 100 * kMillis, "store")});
  std::optional<Status> late_commit;
  on_client(0, [&](Store& store) {
    auto tx = store.begin();
    tx->put("t", "k", "v");
    world_.runtime(client_).sleep_for(300 * kMillis);
    late_commit = store.commit(*tx, {}).status();
  });
  ASSERT_TRUE(late_commit.has_value());
  EXPECT_TRUE(late_commit->is_unavailable());
  EXPECT_EQ(world_.incarnation(store_), 2u);
}

TEST_F(InjectorTest, PausePastTheLeaseTtlMakesAZombieWhoseCommitIsRejected) {
  plan({fault(FaultKind::kPause, 100 * kMillis, 3 * kSeconds, "client")});
  std::optional<Status> zombie_commit;
  Micros committed_at = 0;
  on_client(0, [&](Store& store) {
    auto lease = store.start_lease(1 * kSeconds);
    auto tx = store.begin();
    tx->put("t", "k", "zombie");
    world_.runtime(client_).sleep_for(200 * kMillis);  // frozen in here past the TTL
    committed_at = world_.now();
    zombie_commit = store.commit(*tx, {*lease}).status();
  });
  ASSERT_TRUE(zombie_commit.has_value());
  EXPECT_GE(committed_at, 3'100 * kMillis);  // it resumed as if nothing happened
  EXPECT_TRUE(zombie_commit->is_prerequisite_failed());
  EXPECT_FALSE(data_.latest("t", "k").has_value());
}

TEST_F(InjectorTest, PartitionCutsBothWaysUntilItEnds) {
  plan({fault(FaultKind::kPartition, 0, 1 * kSeconds, "client", "peer")});
  std::vector<bool> ok;
  on_client(1, [&](Store&) {
    ok.push_back(echo().has_value());
    world_.runtime(client_).sleep_for(1 * kSeconds);
    ok.push_back(echo().has_value());
  });
  EXPECT_EQ(ok, (std::vector<bool>{false, true}));
  EXPECT_EQ(echoes_, 1);
}

TEST_F(InjectorTest, OneWayPartitionLosesRepliesButRunsRequests) {
  plan({fault(FaultKind::kOneWayPartition, 0, 1 * kSeconds, "peer", "client")});
  std::optional<Status> status;
  on_client(1, [&](Store&) { status = echo().status(); });
  EXPECT_TRUE(status->is_timeout());
  EXPECT_EQ(echoes_, 1);
}

TEST_F(InjectorTest, IsolateCutsEveryLinkOfTheNode) {
  plan({fault(FaultKind::kIsolate, 0, 1 * kSeconds, "client")});
  std::optional<Status> to_peer, to_store;
  on_client(1, [&](Store& store) {
    to_peer = echo().status();
    to_store = store.begin().status();
  });
  EXPECT_TRUE(to_peer->is_timeout());
  EXPECT_TRUE(to_store->is_unavailable());
}

TEST_F(InjectorTest, DropLosesPackets) {
  Fault f = fault(FaultKind::kDrop, 0, 1 * kSeconds, "client");
  f.intensity = 1.0;
  plan({f});
  std::optional<Status> status;
  on_client(1, [&](Store&) { status = echo().status(); });
  EXPECT_TRUE(status->is_timeout());
  EXPECT_EQ(echoes_, 0);
}

TEST_F(InjectorTest, DuplicateRunsRequestsTwice) {
  Fault f = fault(FaultKind::kDuplicate, 0, 1 * kSeconds, "client");
  f.intensity = 1.0;
  plan({f});
  on_client(1, [&](Store&) { EXPECT_TRUE(echo().has_value()); });
  EXPECT_EQ(echoes_, 2);
}

TEST_F(InjectorTest, DelaySlowsTheLink) {
  Fault f = fault(FaultKind::kDelay, 0, 10 * kSeconds, "client");
  f.amount_us = 400 * kMillis;
  plan({f});
  Micros took = 0;
  on_client(1, [&](Store&) {
    const Micros start = world_.now();
    (void)echo(2 * kSeconds);
    took = world_.now() - start;
  });
  EXPECT_GE(took, 200 * kMillis);  // at least the raised minimum one way
}

TEST_F(InjectorTest, ReorderLetsALaterRequestOvertakeAnEarlierOne) {
  Fault f = fault(FaultKind::kReorder, 0, 10 * kSeconds, "client");
  f.intensity = 0.5;
  f.amount_us = 100 * kMillis;
  plan({f});
  std::vector<int> arrival;
  world_.network_endpoint(peer_).serve("seq", [&](const std::string&, std::string_view r) {
    arrival.push_back(std::stoi(std::string(r)));
    return Result<std::string>("");
  });
  world_.scheduler().at(1, sim::kWorldNode, [&] {
    for (int i = 0; i < 20; ++i) {
      world_.runtime(client_).spawn("send", [&, i] {
        (void)world_.network_endpoint(client_).call("peer", "seq", std::to_string(i), kSeconds);
      });
    }
  });
  world_.run_until(5 * kSeconds);
  ASSERT_EQ(arrival.size(), 20u);
  EXPECT_FALSE(std::is_sorted(arrival.begin(), arrival.end()));
}

TEST_F(InjectorTest, LostRepliesMakeAmbiguousCommitsThatDidApply) {
  Fault f = fault(FaultKind::kLostReplies, 1 * kSeconds, 1 * kSeconds, "store");
  f.intensity = 1.0;
  plan({f});
  std::optional<Status> commit;
  std::optional<TxOutcome> outcome;
  on_client(1, [&](Store& store) {
    auto tx = store.begin();
    ASSERT_TRUE(tx.has_value());
    tx->put("t", "k", "applied");
    world_.runtime(client_).sleep_for(1'200 * kMillis);  // into the fault
    commit = store.commit(*tx, {}).status();
    world_.runtime(client_).sleep_for(1 * kSeconds);  // past it
    auto resolved = store.resolve(tx->id());
    ASSERT_TRUE(resolved.has_value());
    outcome = *resolved;
  });
  ASSERT_TRUE(commit.has_value());
  EXPECT_TRUE(commit->is_ambiguous());
  EXPECT_EQ(outcome, TxOutcome::kCommitted);
  EXPECT_EQ(data_.latest("t", "k").value_or(""), "applied");
}

TEST_F(InjectorTest, StoreUnavailableRefusesThenRecovers) {
  Fault f = fault(FaultKind::kStoreUnavailable, 0, 1 * kSeconds, "");
  plan({f});
  std::vector<bool> ok;
  on_client(1, [&](Store& store) {
    ok.push_back(store.begin().has_value());
    world_.runtime(client_).sleep_for(1 * kSeconds);
    ok.push_back(store.begin().has_value());
  });
  EXPECT_EQ(ok, (std::vector<bool>{false, true}));
}

TEST_F(InjectorTest, ClockSkewIsTemporaryAndAJumpStays) {
  Fault skew = fault(FaultKind::kClockSkew, 1'000, 1'000, "peer");
  skew.amount_us = 500;
  Fault jump = fault(FaultKind::kClockJump, 5'000, 1'000, "client");
  jump.amount_us = -700;
  plan({skew, jump});
  world_.run_until(1'500);
  EXPECT_EQ(world_.node_now(peer_), 2'000);
  world_.run_until(3'000);
  EXPECT_EQ(world_.node_now(peer_), 3'000);
  world_.run_until(10'000);
  EXPECT_EQ(world_.node_now(client_), 9'300);
}

TEST_F(InjectorTest, OverlappingFaultsEndIndependentlyAndHealLiftsEverything) {
  plan({fault(FaultKind::kPartition, 0, 5 * kSeconds, "client", "peer"),
        fault(FaultKind::kPartition, 1 * kSeconds, 1 * kSeconds, "client", "peer"),
        fault(FaultKind::kCrash, 0, 100 * kSeconds, "peer")},
       /*heal_at=*/6 * kSeconds);
  world_.run_until(3 * kSeconds);  // the short partition ended, the long one holds
  EXPECT_TRUE(world_.network().blocked(client_, peer_));
  EXPECT_FALSE(world_.is_up(peer_));
  world_.run_until(6 * kSeconds + 1);
  EXPECT_FALSE(world_.network().blocked(client_, peer_));
  EXPECT_TRUE(world_.is_up(peer_));
  EXPECT_EQ(injector_.active_faults(), 0u);
}

}  // namespace
}  // namespace onceflow::faults
