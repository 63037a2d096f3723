// The simulated store against a plain model, with RapidCheck's stateful testing: random
// sequences of begin, get, put, commit (with and without Lease prerequisites, with a lost
// request or a lost reply), resolve, Lease start, ping and abort, and the passing of time.
// The network has zero latency here so that the model knows the store's clock exactly.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/store.h"

namespace onceflow::sim {
namespace {

constexpr Micros kRpcTimeout = 10'000;
constexpr Micros kTxTimeout = 20 * kSeconds;
constexpr size_t kMaxOpenTxs = 4;
const char* const kTable = "t";

// --- The model -------------------------------------------------------------------------

struct ModelTx {
  uint64_t snapshot_version = 0;
  std::map<std::string, std::string> snapshot;
  std::map<std::string, std::optional<std::string>> writes;
  Micros began_at = 0;
  bool open = true;
};

struct ModelLease {
  Micros ttl = 0;
  Micros last_ping = 0;
  bool aborted = false;
};

enum class Expect { kCommitted, kConflict, kPrerequisiteFailed, kUnavailable };

struct Model {
  Micros now = 0;
  uint64_t version = 0;
  std::map<std::string, std::string> committed;
  std::map<std::string, uint64_t> last_write;
  std::vector<ModelTx> txs;
  std::vector<ModelLease> leases;

  bool lease_active(size_t i) const {
    return !leases[i].aborted && now <= leases[i].last_ping + leases[i].ttl;
  }
  bool tx_alive(size_t i) const { return txs[i].open && txs[i].began_at + kTxTimeout >= now; }
  size_t open_txs() const {
    size_t n = 0;
    for (size_t i = 0; i < txs.size(); ++i) n += tx_alive(i) ? 1 : 0;
    return n;
  }
  Expect predict_commit(size_t tx, const std::vector<size_t>& leases_needed) const {
    if (!tx_alive(tx)) return Expect::kUnavailable;
    for (size_t l : leases_needed) {
      if (!lease_active(l)) return Expect::kPrerequisiteFailed;
    }
    for (const auto& [key, value] : txs[tx].writes) {
      auto it = last_write.find(key);
      if (it != last_write.end() && it->second > txs[tx].snapshot_version) return Expect::kConflict;
    }
    return Expect::kCommitted;
  }
  void apply_commit(size_t tx) {
    ++version;
    for (const auto& [key, value] : txs[tx].writes) {
      if (value) {
        committed[key] = *value;
      } else {
        committed.erase(key);
      }
      last_write[key] = version;
    }
  }
};

// --- The system under test ---------------------------------------------------------------

struct Sut {
  Sut() {
    World::Options options;
    options.seed = 1;
    options.network.link.latency_us_min = 0;
    options.network.link.latency_us_mean = 0;
    world = std::make_unique<World>(options);
    StoreOptions store_options;
    store_options.tx_timeout_us = kTxTimeout;
    store = world->add_node("store", StoreServer::boot(data, store_options));
    client = world->add_node("client", [](NodeContext&) { return nullptr; });
    world->start(store);
    world->start(client);
    store_client = std::make_unique<SimStoreClient>(world->network_endpoint(client), "store",
                                                    kRpcTimeout);
  }

  // Runs `body` on a client fiber to completion.
  void run(const std::function<void(Store&)>& body) {
    bool done = false;
    world->runtime(client).spawn("op", [&] {
      body(*store_client);
      done = true;
    });
    // Step only until the operation ends: left-over timeout events must not move the clock.
    while (!done && world->scheduler().step()) {
    }
    RC_ASSERT(done);
  }

  StoreData data;
  std::unique_ptr<World> world;
  NodeIndex store = 0, client = 0;
  std::unique_ptr<SimStoreClient> store_client;
  std::vector<Transaction> txs;
  std::vector<LeaseId> leases;
};

using Command = rc::state::Command<Model, Sut>;

std::string gen_key() { return *rc::gen::element<std::string>("a", "b", "c", "d"); }

void expect_status(const Status& status, Expect expect) {
  switch (expect) {
    case Expect::kCommitted: RC_ASSERT(status.is_ok()); break;
    case Expect::kConflict: RC_ASSERT(status.is_conflict()); break;
    case Expect::kPrerequisiteFailed: RC_ASSERT(status.is_prerequisite_failed()); break;
    case Expect::kUnavailable: RC_ASSERT(status.is_unavailable()); break;
  }
}

struct Begin : Command {
  void checkPreconditions(const Model& m) const override { RC_PRE(m.open_txs() < kMaxOpenTxs); }
  void apply(Model& m) const override {
    m.txs.push_back(ModelTx{m.version, m.committed, {}, m.now, true});
  }
  void run(const Model&, Sut& sut) const override {
    sut.run([&](Store& store) {
      auto tx = store.begin();
      RC_ASSERT(tx.has_value());
      sut.txs.push_back(*tx);
    });
  }
  void show(std::ostream& os) const override { os << "Begin"; }
};

// RapidCheck's RC_PRE does not short-circuit &&, so bounds are checked here.
bool is_open(const Model& m, size_t tx) { return tx < m.txs.size() && m.txs[tx].open; }

// Picks an open transaction of the model.
size_t pick_tx(const Model& m) {
  std::vector<size_t> open;
  for (size_t i = 0; i < m.txs.size(); ++i) {
    if (m.txs[i].open) open.push_back(i);
  }
  RC_PRE(!open.empty());
  return *rc::gen::elementOf(open);
}

struct Put : Command {
  size_t tx;
  std::string key;
  std::optional<std::string> value;
  explicit Put(const Model& m)
      : tx(pick_tx(m)), key(gen_key()),
        value(erase_instead() ? std::nullopt
                              : std::optional<std::string>(
                                    *rc::gen::element<std::string>("x", "y", "z"))) {}
  static bool erase_instead() { return *rc::gen::inRange(0, 4) == 0; }
  void checkPreconditions(const Model& m) const override { RC_PRE(is_open(m, tx)); }
  void apply(Model& m) const override { m.txs[tx].writes[key] = value; }
  void run(const Model&, Sut& sut) const override {
    if (value) {
      sut.txs[tx].put(kTable, key, *value);
    } else {
      sut.txs[tx].erase(kTable, key);
    }
  }
  void show(std::ostream& os) const override {
    os << "Put(tx" << tx << ", " << key << ", " << value.value_or("<erase>") << ")";
  }
};

struct Get : Command {
  size_t tx;
  std::string key;
  explicit Get(const Model& m) : tx(pick_tx(m)), key(gen_key()) {}
  void checkPreconditions(const Model& m) const override { RC_PRE(is_open(m, tx)); }
  void apply(Model&) const override {}
  void run(const Model& m, Sut& sut) const override {
    const ModelTx& mt = m.txs[tx];
    std::optional<std::string> expected;
    if (auto w = mt.writes.find(key); w != mt.writes.end()) {
      expected = w->second;
    } else if (auto s = mt.snapshot.find(key); s != mt.snapshot.end()) {
      expected = s->second;
    }
    const bool own_write = mt.writes.count(key) != 0;
    sut.run([&](Store& store) {
      auto got = store.get(sut.txs[tx], kTable, key);
      if (!own_write && !m.tx_alive(tx)) {
        RC_ASSERT(!got.has_value());
        RC_ASSERT(got.error().is_unavailable());
        return;
      }
      RC_ASSERT(got.has_value());
      RC_ASSERT(*got == expected);
    });
  }
  void show(std::ostream& os) const override { os << "Get(tx" << tx << ", " << key << ")"; }
};

// A scan from a random key sees the snapshot merged with the transaction's own writes.
struct Scan : Command {
  size_t tx;
  std::string from;
  size_t limit;
  explicit Scan(const Model& m)
      : tx(pick_tx(m)), from(*rc::gen::element<std::string>("", "b", "c")),
        limit(*rc::gen::inRange<size_t>(1, 5)) {}
  void checkPreconditions(const Model& m) const override { RC_PRE(is_open(m, tx)); }
  void apply(Model&) const override {}
  void run(const Model& m, Sut& sut) const override {
    const ModelTx& mt = m.txs[tx];
    std::map<std::string, std::string> view = mt.snapshot;
    for (const auto& [key, value] : mt.writes) {
      if (value) {
        view[key] = *value;
      } else {
        view.erase(key);
      }
    }
    std::vector<Row> expected;
    for (auto it = view.lower_bound(from); it != view.end() && expected.size() < limit; ++it) {
      expected.push_back({it->first, it->second});
    }
    const bool alive = m.tx_alive(tx);
    sut.run([&](Store& store) {
      auto rows = store.scan(sut.txs[tx], kTable, from, "", limit);
      if (!alive) {
        RC_ASSERT(!rows.has_value());
        return;
      }
      RC_ASSERT(rows.has_value());
      RC_ASSERT(*rows == expected);
    });
  }
  void show(std::ostream& os) const override {
    os << "Scan(tx" << tx << ", from '" << from << "', limit " << limit << ")";
  }
};

std::vector<size_t> gen_prerequisites(const Model& m) {
  if (m.leases.empty()) return {};
  std::vector<size_t> all(m.leases.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return *rc::gen::container<std::vector<size_t>>(rc::gen::elementOf(all));
}

// Shrinking may remove the StartLease a command refers to.
bool leases_exist(const Model& m, const std::vector<size_t>& leases) {
  for (size_t l : leases) {
    if (l >= m.leases.size()) return false;
  }
  return true;
}

std::vector<LeaseId> sut_leases(const Sut& sut, const std::vector<size_t>& indexes) {
  std::vector<LeaseId> out;
  for (size_t i : indexes) out.push_back(sut.leases[i]);
  return out;
}

struct Commit : Command {
  size_t tx;
  std::vector<size_t> leases;
  explicit Commit(const Model& m) : tx(pick_tx(m)), leases(gen_prerequisites(m)) {}
  void checkPreconditions(const Model& m) const override {
    RC_PRE(is_open(m, tx));
    RC_PRE(leases_exist(m, leases));
  }
  void apply(Model& m) const override {
    if (m.predict_commit(tx, leases) == Expect::kCommitted) m.apply_commit(tx);
    m.txs[tx].open = false;
  }
  void run(const Model& m, Sut& sut) const override {
    const Expect expect = m.predict_commit(tx, leases);
    sut.run([&](Store& store) {
      expect_status(store.commit(sut.txs[tx], sut_leases(sut, leases)).status(), expect);
    });
  }
  void show(std::ostream& os) const override {
    os << "Commit(tx" << tx << ", leases " << leases.size() << ")";
  }
};

// A commit whose request (lost_reply=false) or reply (true) is lost: the client sees
// kAmbiguous, and resolve() then tells whether it applied.
struct AmbiguousCommit : Command {
  size_t tx;
  std::vector<size_t> leases;
  bool lost_reply;
  explicit AmbiguousCommit(const Model& m)
      : tx(pick_tx(m)), leases(gen_prerequisites(m)), lost_reply(*rc::gen::arbitrary<bool>()) {}
  void checkPreconditions(const Model& m) const override {
    RC_PRE(is_open(m, tx));
    RC_PRE(leases_exist(m, leases));
  }
  bool applies(const Model& m) const {
    return lost_reply && m.predict_commit(tx, leases) == Expect::kCommitted;
  }
  void apply(Model& m) const override {
    if (applies(m)) m.apply_commit(tx);
    m.txs[tx].open = false;
    m.now += kRpcTimeout;
  }
  void run(const Model& m, Sut& sut) const override {
    const bool expect_applied = applies(m);
    sut.run([&](Store& store) {
      SimNetwork& net = sut.world->network();
      if (lost_reply) {
        net.block(sut.store, sut.client);
      } else {
        net.block(sut.client, sut.store);
      }
      auto result = store.commit(sut.txs[tx], sut_leases(sut, leases));
      net.heal();
      RC_ASSERT(!result.has_value());
      RC_ASSERT(result.error().is_ambiguous());
      auto outcome = store.resolve(sut.txs[tx].id());
      RC_ASSERT(outcome.has_value());
      RC_ASSERT((*outcome == TxOutcome::kCommitted) == expect_applied);
    });
  }
  void show(std::ostream& os) const override {
    os << "AmbiguousCommit(tx" << tx << ", lost " << (lost_reply ? "reply" : "request") << ")";
  }
};

struct StartLease : Command {
  Micros ttl = *rc::gen::inRange<Micros>(1, 3'000) * kMillis;
  void apply(Model& m) const override { m.leases.push_back(ModelLease{ttl, m.now, false}); }
  void run(const Model&, Sut& sut) const override {
    sut.run([&](Store& store) {
      auto lease = store.start_lease(ttl);
      RC_ASSERT(lease.has_value());
      sut.leases.push_back(*lease);
    });
  }
  void show(std::ostream& os) const override { os << "StartLease(" << ttl << "us)"; }
};

size_t pick_lease(const Model& m) {
  RC_PRE(!m.leases.empty());
  return *rc::gen::inRange<size_t>(0, m.leases.size());
}

struct PingLease : Command {
  size_t lease;
  explicit PingLease(const Model& m) : lease(pick_lease(m)) {}
  void checkPreconditions(const Model& m) const override { RC_PRE(lease < m.leases.size()); }
  void apply(Model& m) const override {
    if (m.lease_active(lease)) m.leases[lease].last_ping = m.now;
  }
  void run(const Model& m, Sut& sut) const override {
    const bool active = m.lease_active(lease);
    sut.run([&](Store& store) {
      const Status s = store.ping_lease(sut.leases[lease]);
      const bool as_expected = active ? s.is_ok() : s.is_prerequisite_failed();
      RC_ASSERT(as_expected);
    });
  }
  void show(std::ostream& os) const override { os << "PingLease(" << lease << ")"; }
};

struct AbortLease : Command {
  size_t lease;
  explicit AbortLease(const Model& m) : lease(pick_lease(m)) {}
  void checkPreconditions(const Model& m) const override { RC_PRE(lease < m.leases.size()); }
  void apply(Model& m) const override {
    if (m.lease_active(lease)) m.leases[lease].aborted = true;
  }
  void run(const Model& m, Sut& sut) const override {
    const bool was_active = m.lease_active(lease);
    const bool was_aborted = m.leases[lease].aborted;
    sut.run([&](Store& store) {
      RC_ASSERT(store.abort_lease(sut.leases[lease]).is_ok());
      auto state = store.lease_state(sut.leases[lease]);
      RC_ASSERT(state.has_value());
      const LeaseState expected =
          (was_active || was_aborted) ? LeaseState::kAborted : LeaseState::kExpired;
      RC_ASSERT(*state == expected);
    });
  }
  void show(std::ostream& os) const override { os << "AbortLease(" << lease << ")"; }
};

struct AdvanceTime : Command {
  Micros by = *rc::gen::inRange<Micros>(1, 2'000) * kMillis;
  void apply(Model& m) const override { m.now += by; }
  void run(const Model&, Sut& sut) const override { sut.world->run_until(sut.world->now() + by); }
  void show(std::ostream& os) const override { os << "AdvanceTime(" << by << "us)"; }
};

// The store's latest committed state equals the model's.
struct CheckLatest : Command {
  void apply(Model&) const override {}
  void run(const Model& m, Sut& sut) const override {
    for (const char* key : {"a", "b", "c", "d"}) {
      auto it = m.committed.find(key);
      const auto expected = it == m.committed.end() ? std::nullopt
                                                    : std::optional<std::string>(it->second);
      RC_ASSERT(sut.data.latest(kTable, key) == expected);
    }
  }
  void show(std::ostream& os) const override { os << "CheckLatest"; }
};

RC_GTEST_PROP(StoreModelTest, SimulatedStoreMatchesTheModel, ()) {
  Model model;
  Sut sut;
  rc::state::check(model, sut,
                   rc::state::gen::execOneOfWithArgs<Begin, Put, Put, Get, Scan, Commit, AmbiguousCommit,
                                                     StartLease, PingLease, AbortLease,
                                                     AdvanceTime, CheckLatest>());
}

}  // namespace
}  // namespace onceflow::sim
