// The Store contract (core/env/store.h), one suite run against every backend: the simulated
// store (through its client, over the simulated network), LevelDB, and PostgreSQL (a server
// of the test's own, tests/pg_server.h). What only one backend can show (lost replies on the
// simulated network, reopening LevelDB, a broken database connection) stays in its own test.
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "real/leveldb_store.h"
#include "real/pg_store.h"
#include "sim/store.h"
#include "tests/pg_server.h"
#include "tests/manual_clock.h"
#include "tests/temp_dir.h"

namespace onceflow {
namespace {

// A store under test: run() calls `body` with it where its calls may block; wait() lets the
// store's clock move on by `us` (from inside body).
class Backend {
 public:
  virtual ~Backend() = default;
  virtual void run(const std::function<void(Store&)>& body) = 0;
  virtual void wait(Micros us) = 0;
};

class SimBackend final : public Backend {
 public:
  SimBackend() {
    sim::World::Options options;
    options.seed = 7;
    world_ = std::make_unique<sim::World>(options);
    const auto store = world_->add_node("store", sim::StoreServer::boot(data_));
    client_ = world_->add_node("client", [](sim::NodeContext&) { return nullptr; });
    world_->start(store);
    world_->start(client_);
  }
  void run(const std::function<void(Store&)>& body) override {
    bool finished = false;
    world_->runtime(client_).spawn("test", [&] {
      sim::SimStoreClient store(world_->network_endpoint(client_), "store", 10'000);
      body(store);
      finished = true;
    });
    world_->run_until(fibers::kNever);
    ASSERT_TRUE(finished);
  }
  void wait(Micros us) override { world_->runtime(client_).sleep_for(us); }

 private:
  sim::StoreData data_;
  std::unique_ptr<sim::World> world_;
  sim::NodeIndex client_ = 0;
};

class LevelDbBackend final : public Backend {
 public:
  LevelDbBackend() : dir_("contract") {
    auto store = real::LevelDbStore::open(dir_.str(), clock_);
    EXPECT_TRUE(store.has_value()) << store.error().message();
    if (store) store_ = std::move(*store);
  }
  void run(const std::function<void(Store&)>& body) override {
    ASSERT_NE(store_, nullptr);
    body(*store_);
  }
  void wait(Micros us) override { clock_.advance(us); }

 private:
  testing::TempDir dir_;
  testing::ManualClock clock_;
  std::unique_ptr<real::LevelDbStore> store_;
};

class PgBackend final : public Backend {
 public:
  explicit PgBackend(real::PgStore::Options options = {}) {
    server_ = testing::PgServer::start(&why_);
    if (server_ == nullptr) return;
    auto store = real::PgStore::open(server_->conninfo(), options);
    if (!store) {
      why_ = store.error().message();
      return;
    }
    store_ = std::move(*store);
  }
  void run(const std::function<void(Store&)>& body) override {
    ASSERT_NE(store_, nullptr) << why_;
    body(*store_);
  }
  void wait(Micros us) override { std::this_thread::sleep_for(std::chrono::microseconds(us)); }
  real::PgStore& store() { return *store_; }
  const testing::PgServer& server() const { return *server_; }

 private:
  std::string why_;
  std::unique_ptr<testing::PgServer> server_;
  std::unique_ptr<real::PgStore> store_;
};

class StoreContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "simulated") backend_ = std::make_unique<SimBackend>();
    if (GetParam() == "leveldb") backend_ = std::make_unique<LevelDbBackend>();
    if (GetParam() == "postgresql") backend_ = std::make_unique<PgBackend>();
    ASSERT_NE(backend_, nullptr);
  }
  void run(const std::function<void(Store&)>& body) { backend_->run(body); }
  void wait(Micros us) { backend_->wait(us); }

  std::unique_ptr<Backend> backend_;
};

std::string get(Store& store, const Transaction& tx, const std::string& table, const std::string& key) {
  auto v = store.get(tx, table, key);
  EXPECT_TRUE(v.has_value()) << v.error().message();
  return v.has_value() && v->has_value() ? **v : "<none>";
}

Result<Version> put_and_commit(Store& store, const std::string& key, const std::string& value,
                               const std::vector<LeaseId>& prerequisites = {}) {
  auto tx = store.begin();
  if (!tx) return tx.error();
  tx->put("t", key, value);
  return store.commit(*tx, prerequisites);
}

std::string latest(Store& store, const std::string& key) {
  auto tx = store.begin();
  EXPECT_TRUE(tx.has_value());
  std::string value = get(store, *tx, "t", key);
  store.abort(*tx);
  return value;
}

TEST_P(StoreContractTest, CommittedWritesAreVisibleToLaterSnapshotsOnly) {
  run([&](Store& store) {
    auto before = store.begin();
    ASSERT_TRUE(before.has_value());
    auto tx = store.begin();
    tx->put("t", "k", "v1");
    EXPECT_EQ(get(store, *tx, "t", "k"), "v1");  // its own write
    ASSERT_TRUE(store.commit(*tx, {}).has_value());
    EXPECT_EQ(get(store, *before, "t", "k"), "<none>");  // the snapshot was taken before
    store.abort(*before);
    EXPECT_EQ(latest(store, "k"), "v1");
  });
}

TEST_P(StoreContractTest, AWriteAfterTheSnapshotToAKeyWeWriteIsAConflict) {
  run([&](Store& store) {
    auto a = store.begin();
    auto b = store.begin();
    a->put("t", "k", "a");
    b->put("t", "k", "b");
    b->put("t", "other", "b");
    ASSERT_TRUE(store.commit(*a, {}).has_value());
    auto second = store.commit(*b, {});
    ASSERT_FALSE(second.has_value());
    EXPECT_TRUE(second.error().is_conflict()) << second.error().message();
    EXPECT_EQ(latest(store, "k"), "a");
    EXPECT_EQ(latest(store, "other"), "<none>");  // nothing of the loser applied
    // An erase is a write like a put, whichever comes first; also of a key absent at the snapshot.
    auto c = store.begin();
    auto d = store.begin();
    c->erase("t", "k");
    d->put("t", "k", "d");
    ASSERT_TRUE(store.commit(*c, {}).has_value());
    EXPECT_TRUE(store.commit(*d, {}).error().is_conflict());
    auto e = store.begin();
    auto f = store.begin();
    e->put("t", "k", "e");
    f->erase("t", "k");
    ASSERT_TRUE(store.commit(*e, {}).has_value());
    EXPECT_TRUE(store.commit(*f, {}).error().is_conflict());
    EXPECT_EQ(latest(store, "k"), "e");
  });
}

TEST_P(StoreContractTest, DisjointWritesDoNotConflict) {
  run([&](Store& store) {
    auto a = store.begin();
    auto b = store.begin();
    a->put("t", "x", "a");
    b->put("t", "y", "b");
    b->put("u", "x", "b");  // the same key in another table
    EXPECT_TRUE(store.commit(*a, {}).has_value());
    EXPECT_TRUE(store.commit(*b, {}).has_value());
  });
}

TEST_P(StoreContractTest, ScansSeeTheirTableAndBoundsWithBufferedWritesLaidOver) {
  run([&](Store& store) {
    auto setup = store.begin();
    for (const char* k : {"a", "b", "c", "d", "e"}) setup->put("t", k, std::string("old-") + k);
    setup->put("s", "b", "another table");
    setup->put("tt", "a", "a table whose name extends t");
    setup->put("t/x", "a", "a table whose name extends t");
    setup->put("t2", "c", "a table whose name extends t");
    ASSERT_TRUE(store.commit(*setup, {}).has_value());
    auto tx = store.begin();
    tx->erase("t", "b");
    tx->put("t", "c", "new-c");
    tx->put("t", "bb", "new-bb");
    auto rows = store.scan(*tx, "t", "a", "", 4);
    ASSERT_TRUE(rows.has_value());
    EXPECT_EQ(*rows, (std::vector<Row>{{"a", "old-a"}, {"bb", "new-bb"}, {"c", "new-c"}, {"d", "old-d"}}));
    rows = store.scan(*tx, "t", "b", "d", 100);
    ASSERT_TRUE(rows.has_value());
    EXPECT_EQ(*rows, (std::vector<Row>{{"bb", "new-bb"}, {"c", "new-c"}}));
    store.abort(*tx);
  });
}

TEST_P(StoreContractTest, GetManyAnswersInTheOrderAsked) {
  run([&](Store& store) {
    auto setup = store.begin();
    setup->put("t", "a", "1");
    setup->put("t", "c", "3");
    setup->put("t", "d", "4");
    ASSERT_TRUE(store.commit(*setup, {}).has_value());
    auto tx = store.begin();
    tx->erase("t", "d");
    tx->put("t", "e", "5");
    auto got = store.get_many(*tx, "t", {"c", "b", "a", "d", "e", "a"});
    ASSERT_TRUE(got.has_value());
    const std::vector<std::optional<std::string>> expected{"3", std::nullopt, "1", std::nullopt, "5", "1"};
    EXPECT_EQ(*got, expected);
    store.abort(*tx);
  });
}

TEST_P(StoreContractTest, KeysAndValuesAreBytes) {
  const std::string zero("k\0z", 3), high("k\xff", 2), low("k\x01", 2);
  run([&](Store& store) {
    auto tx = store.begin();
    tx->put("t", zero, std::string("v\0\xff", 3));
    tx->put("t", high, "");
    tx->put("t", low, "\x7f");
    ASSERT_TRUE(store.commit(*tx, {}).has_value());
    auto read = store.begin();
    EXPECT_EQ(get(store, *read, "t", zero), std::string("v\0\xff", 3));
    EXPECT_EQ(get(store, *read, "t", high), "");
    auto rows = store.scan(*read, "t", "k", "", 10);  // byte order: \0 < \x01 < \xff
    ASSERT_TRUE(rows.has_value());
    ASSERT_EQ(rows->size(), 3u);
    EXPECT_EQ((*rows)[0].key, zero);
    EXPECT_EQ((*rows)[1].key, low);
    EXPECT_EQ((*rows)[2].key, high);
    store.abort(*read);
  });
}

TEST_P(StoreContractTest, CommitVersionsIncreaseAndResolveTellsThem) {
  run([&](Store& store) {
    auto first = store.begin();
    first->put("t", "k", "1");
    auto v1 = store.commit(*first, {});
    ASSERT_TRUE(v1.has_value());
    auto second = store.begin();
    second->put("t", "k", "2");
    auto v2 = store.commit(*second, {});
    ASSERT_TRUE(v2.has_value());
    EXPECT_LT(*v1, *v2);
    Version resolved = 0;
    EXPECT_EQ(*store.resolve(second->id(), &resolved), TxOutcome::kCommitted);
    EXPECT_EQ(resolved, *v2);
    EXPECT_EQ(*store.resolve(first->id()), TxOutcome::kCommitted);
  });
}

TEST_P(StoreContractTest, ResolveFencesATransactionThatHasNotCommitted) {
  run([&](Store& store) {
    auto tx = store.begin();
    tx->put("t", "k", "late");
    EXPECT_EQ(*store.resolve(tx->id()), TxOutcome::kNotCommitted);
    EXPECT_FALSE(store.commit(*tx, {}).has_value());  // never after resolve said no
    EXPECT_EQ(*store.resolve(tx->id()), TxOutcome::kNotCommitted);
    EXPECT_EQ(latest(store, "k"), "<none>");
  });
}

TEST_P(StoreContractTest, ALeaseEndsByTheStoreClockAndFencesCommits) {
  run([&](Store& store) {
    // Margins of a second either way: PostgreSQL's clock is the wall clock.
    auto lease = store.start_lease(2'000'000);
    ASSERT_TRUE(lease.has_value());
    EXPECT_EQ(*store.lease_state(*lease), LeaseState::kActive);
    wait(1'200'000);
    EXPECT_TRUE(store.ping_lease(*lease).is_ok());
    wait(1'000'000);  // within the TTL of the last ping
    ASSERT_TRUE(put_and_commit(store, "k", "live", {*lease}).has_value());
    wait(2'000'000);  // now past it
    EXPECT_EQ(*store.lease_state(*lease), LeaseState::kExpired);
    auto late = put_and_commit(store, "k", "zombie", {*lease});
    ASSERT_FALSE(late.has_value());
    EXPECT_TRUE(late.error().is_prerequisite_failed()) << late.error().message();
    EXPECT_TRUE(store.ping_lease(*lease).is_prerequisite_failed());  // never revived
    EXPECT_TRUE(store.abort_lease(*lease).is_ok());
    EXPECT_EQ(*store.lease_state(*lease), LeaseState::kExpired);  // an ended Lease stays as it ended
    EXPECT_EQ(latest(store, "k"), "live");
  });
}

TEST_P(StoreContractTest, AnAbortedLeaseFencesCommitsAndPings) {
  run([&](Store& store) {
    auto lease = store.start_lease(10'000'000);
    auto other = store.start_lease(10'000'000);
    ASSERT_TRUE(lease.has_value() && other.has_value());
    EXPECT_NE(*lease, *other);
    EXPECT_TRUE(store.abort_lease(*lease).is_ok());
    auto result = put_and_commit(store, "k", "v", {*other, *lease});
    ASSERT_FALSE(result.has_value());
    EXPECT_TRUE(result.error().is_prerequisite_failed());
    EXPECT_EQ(*store.lease_state(*lease), LeaseState::kAborted);
    EXPECT_TRUE(store.ping_lease(*lease).is_prerequisite_failed());
    EXPECT_TRUE(put_and_commit(store, "k", "v", {*other}).has_value());
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreContractTest, ::testing::Values("simulated", "leveldb", "postgresql"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// PostgreSQL only: a transaction whose connection broke before its commit is not applied,
// and the store goes on with fresh connections.
TEST(PgStoreTest, ABrokenConnectionLosesOnlyItsOpenTransaction) {
  PgBackend backend;
  backend.run([&](Store& store) {
    auto tx = store.begin();
    ASSERT_TRUE(tx.has_value());
    tx->put("t", "k", "lost");
    backend.store().break_connection_of(tx->id());
    auto result = store.commit(*tx, {});
    ASSERT_FALSE(result.has_value());
    EXPECT_TRUE(result.error().is_unavailable()) << result.error().message();
    EXPECT_EQ(latest(store, "k"), "<none>");
    EXPECT_TRUE(put_and_commit(store, "k", "kept").has_value());
    EXPECT_EQ(backend.store().open_transactions(), 0u);
  });
}

// PostgreSQL only (the other stores serve one thread): threads that each read a counter and
// write it plus one, retrying conflicts, lose no increment.
TEST(PgStoreTest, ConcurrentIncrementsFromManyConnectionsAreNeverLost) {
  PgBackend backend;
  real::PgStore& store = backend.store();
  constexpr int kThreads = 4, kEach = 40;
  std::atomic<int> committed = 0, conflicts = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int done = 0; done < kEach;) {
        auto tx = store.begin();
        ASSERT_TRUE(tx.has_value()) << tx.error().message();
        auto v = store.get(*tx, "t", "counter");
        ASSERT_TRUE(v.has_value());
        const int next = (v->has_value() ? std::stoi(**v) : 0) + 1;
        tx->put("t", "counter", std::to_string(next));
        auto result = store.commit(*tx, {});
        if (result.has_value()) {
          ++done;
          ++committed;
        } else {
          ASSERT_TRUE(result.error().is_conflict()) << result.error().message();
          ++conflicts;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(committed.load(), kThreads * kEach);
  backend.run([&](Store& s) { EXPECT_EQ(latest(s, "counter"), std::to_string(kThreads * kEach)); });
  EXPECT_GT(conflicts.load(), 0);  // they did race
}

// One statement on a connection of its own, outside the store (ALTER SYSTEM and the like).
std::string sql(const std::string& conninfo, const std::string& statement) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  std::string out;
  if (PQstatus(conn) != CONNECTION_OK) {
    out = std::string("cannot connect: ") + PQerrorMessage(conn);
  } else {
    PGresult* r = PQexec(conn, statement.c_str());
    const ExecStatusType status = PQresultStatus(r);
    if (status == PGRES_TUPLES_OK && PQntuples(r) > 0) out = PQgetvalue(r, 0, 0);
    if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) out = std::string("error: ") + PQerrorMessage(conn);
    PQclear(r);
  }
  PQfinish(conn);
  return out;
}

std::string rows_under(const std::string& conninfo, const std::string& key) {
  return sql(conninfo, "SELECT count(*) FROM onceflow_rows WHERE key = '" + key + "'::bytea");
}

// PostgreSQL only: the tombstones an erase leaves are deleted once no transaction may still
// need them, and a transaction that began before the erase never writes over the erased row:
// while the tombstone is there its write conflicts, and once it is gone the transaction is too
// old to commit at all.
TEST(PgStoreTest, AStaleWriteNeverCommitsOverAnErasedRowAcrossATombstoneCleanup) {
  real::PgStore::Options options;
  // Long enough that a loaded machine (the suite runs two at a time) keeps the young
  // transaction within it; the old one sleeps past twice it.
  options.tx_timeout_us = 1'000'000;
  PgBackend backend(options);
  backend.run([&](Store& store) {
    real::PgStore& pg = backend.store();
    const std::string conninfo = backend.server().conninfo();
    for (const std::string key : {"young", "old"}) {
      ASSERT_TRUE(put_and_commit(store, key, "v").has_value());
      auto stale = store.begin();
      ASSERT_TRUE(stale.has_value());
      EXPECT_EQ(get(store, *stale, "t", key), "v");
      auto eraser = store.begin();
      ASSERT_TRUE(eraser.has_value());
      eraser->erase("t", key);
      ASSERT_TRUE(store.commit(*eraser, {}).has_value());
      if (key == "old") std::this_thread::sleep_for(std::chrono::milliseconds(2'200));  // past twice the timeout
      ASSERT_TRUE(pg.erase_old_tombstones().is_ok());
      // The young tombstone is kept; the old one is gone: the test tests both ways.
      EXPECT_EQ(rows_under(conninfo, key), key == "young" ? "1" : "0");
      stale->put("t", key, "stale");
      auto committed = store.commit(*stale, {});
      ASSERT_FALSE(committed.has_value()) << "a write from before the erase committed over it (" << key << ")";
      const bool expected = key == "young" ? committed.error().is_conflict() : committed.error().is_aborted();
      EXPECT_TRUE(expected) << key << ": " << committed.error().message();
      EXPECT_EQ(latest(store, key), "<none>");
    }
  });
}

// PostgreSQL only: commits are acknowledged once durable whatever the database's default, and
// a server that may lose acknowledged commits at a crash (fsync off) is refused.
TEST(PgStoreTest, CommitsAreSynchronousAndAServerWithFsyncOffIsRefused) {
  PgBackend backend;
  backend.run([&](Store&) {
    const std::string conninfo = backend.server().conninfo();
    ASSERT_EQ(sql(conninfo, "ALTER DATABASE postgres SET synchronous_commit = off"), "");
    auto store = real::PgStore::open(conninfo);
    ASSERT_TRUE(store.has_value()) << store.error().message();
    EXPECT_EQ(sql(conninfo, "SHOW synchronous_commit"), "off") << "the database default did not change";
    auto setting = (*store)->setting("synchronous_commit");
    ASSERT_TRUE(setting.has_value());
    EXPECT_EQ(*setting, "on") << "the store's sessions commit asynchronously";
    store->reset();
    ASSERT_EQ(sql(conninfo, "ALTER SYSTEM SET fsync = off"), "");
    ASSERT_EQ(sql(conninfo, "SELECT pg_reload_conf()"), "t");
    auto refused = real::PgStore::open(conninfo);
    ASSERT_FALSE(refused.has_value()) << "a server with fsync off was taken";
    EXPECT_TRUE(refused.error().is_invalid_argument());
    EXPECT_NE(refused.error().message().find("fsync off"), std::string::npos) << refused.error().message();
    ASSERT_EQ(sql(conninfo, "ALTER SYSTEM RESET fsync"), "");
    ASSERT_EQ(sql(conninfo, "SELECT pg_reload_conf()"), "t");
  });
}

}  // namespace
}  // namespace onceflow
