// The simulated store: a store node serving the Store interface over the simulated network.
//
// StoreData is the store's disk: committed versions, Leases, transaction outcomes and the
// commit log. It outlives crashes of the store node. StoreServer is the process on the store
// node: it keeps the active transactions (volatile: a store crash forgets them, and their
// commits then fail with kUnavailable) and answers the "store" service. SimStoreClient is
// the Store a node uses; a lost reply to a commit surfaces as kAmbiguous, whether the commit
// applied (the reply was lost) or not (the request was lost).
//
// Version chains are pruned when a key is written again, keeping what the oldest active
// snapshot can still read. Thread-safety: none.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/env/codec.h"
#include "core/env/network.h"
#include "core/env/store.h"
#include "sim/world.h"

namespace onceflow::sim {

inline constexpr const char* kStoreService = "store";

struct StoreOptions {
  // A transaction neither committed nor aborted for this long (store clock) is forgotten.
  Micros tx_timeout_us = 60 * kSeconds;
  // How many transaction outcomes resolve() can still answer for.
  size_t outcome_retention = 1 << 20;
  // Store bugs, for checking the checkers (bug switches store-*):
  // resolve() of a transaction still open answers "not committed" without fencing it, so a
  // commit still in flight applies after the caller was told it did not.
  bool resolve_without_fence = false;
  // A delete is not a write to the conflict check: a transaction that read a row deleted
  // since its snapshot writes it back.
  bool delete_not_a_write = false;
  // Leases ended more than two TTLs ago are pruned, and a prerequisite Lease the store no
  // longer knows passes: a zombie paused that long commits.
  bool forget_ended_leases = false;
};

// Durable state of the store; survives store crashes.
class StoreData {
 public:
  StoreData() = default;
  // Not copyable: tombstones point into the tables.
  StoreData(const StoreData&) = delete;
  StoreData& operator=(const StoreData&) = delete;

  struct LeaseRecord {
    Micros ttl_us = 0;
    Micros started_at = 0;
    Micros last_ping = 0;
    LeaseState state = LeaseState::kActive;
    Micros ended_at = 0;  // store time the Lease ended (abort time or expiry time)
  };
  struct CommitRecord {
    Version version = 0;
    TxId tx = 0;
    Micros store_time = 0;
    std::vector<LeaseId> prerequisites;
    size_t writes = 0;
  };
  struct Rejection {  // a commit refused because a prerequisite Lease had ended
    TxId tx = 0;
    LeaseId lease = 0;
    Micros store_time = 0;
    LeaseState state = LeaseState::kUnknown;
  };
  struct Outcome {
    bool committed = false;
    Version version = 0;
  };
  struct Versioned {
    Version version;
    std::optional<std::string> value;  // nullopt: erased
  };
  using Chain = std::vector<Versioned>;  // ascending versions
  using Table = std::map<std::string, Chain, std::less<>>;

  // Writes a row as committed data before a run starts (bulk load; no transaction).
  void load(const std::string& table, const std::string& key, std::string value);

  // Fault switches: while `unavailable`, every request is answered kUnavailable; while
  // `ignore_pings`, Lease pings are lost (they extend nothing).
  bool unavailable = false;
  bool ignore_pings = false;
  // Ends every active Lease now, as if each had run out at `now` (store time).
  size_t expire_all_leases(Micros now);
  // What those switches did.
  struct FaultEffects {
    uint64_t requests_refused = 0;  // answered kUnavailable while `unavailable`
    uint64_t pings_lost = 0;        // lost while `ignore_pings`
    uint64_t leases_expired = 0;    // by expire_all_leases
  };
  FaultEffects fault_effects;

  // Committed value visible at `snapshot`; nullopt when absent.
  std::optional<std::string> read(std::string_view table, std::string_view key, Version snapshot) const;
  // The same without a copy: null when absent.
  const std::string* find(std::string_view table, std::string_view key, Version snapshot) const;
  std::vector<Row> read_range(std::string_view table, std::string_view from, std::string_view to, Version snapshot,
                              size_t limit) const;
  // Calls `row` with each row read_range() would return, without copying it; returns how many.
  size_t for_each_row(std::string_view table, std::string_view from, std::string_view to, Version snapshot,
                      size_t limit, const std::function<void(const std::string&, const std::string&)>& row) const;
  // The latest committed value (what a fresh snapshot reads). For tests and checkers.
  std::optional<std::string> latest(const std::string& table, const std::string& key) const;
  const std::map<std::string, Table, std::less<>>& tables() const { return tables_; }

  // Moves the Lease to expired when `now` (store clock) is past its deadline.
  LeaseState lease_state(LeaseId lease, Micros now);
  const std::map<LeaseId, LeaseRecord>& leases() const { return leases_; }
  const std::vector<CommitRecord>& commit_log() const { return commit_log_; }
  const std::vector<Rejection>& rejections() const { return rejections_; }
  // The commit version of `tx` if it committed (and its outcome is still retained).
  std::optional<Version> committed_version(TxId tx) const {
    auto it = outcomes_.find(tx);
    if (it == outcomes_.end() || !it->second.committed) return std::nullopt;
    return it->second.version;
  }
  // Called after each commit applied (the simulator's onlookers; never the engine).
  std::function<void(const CommitRecord&)> after_commit;
  // resolve() calls answered so far, by answer.
  uint64_t resolved_committed() const { return resolved_committed_; }
  uint64_t resolved_not_committed() const { return resolved_not_committed_; }
  Version last_version() const { return last_version_; }

 private:
  friend class StoreServer;

  std::map<std::string, Table, std::less<>> tables_;
  // Erased rows, in commit order: once no snapshot can see what came before the erasure,
  // the key goes from its table (a scan would otherwise step over it forever).
  struct Tombstone {
    Table* table;
    Table::iterator row;  // map iterators stay valid until their own row is erased
    Version version;
  };
  std::deque<Tombstone> tombstones_;
  std::map<LeaseId, LeaseRecord> leases_;
  std::map<TxId, Outcome> outcomes_;
  TxId outcomes_forgotten_below_ = 0;
  std::vector<CommitRecord> commit_log_;
  std::vector<Rejection> rejections_;
  uint64_t resolved_committed_ = 0;
  uint64_t resolved_not_committed_ = 0;
  Version last_version_ = 0;
  TxId last_tx_ = 0;
  LeaseId last_lease_ = 0;
};

// The store node's process.
class StoreServer {
 public:
  StoreServer(NodeContext& node, StoreData& data, StoreOptions options);

  // Boot function for World::add_node: a StoreServer over `data`.
  static BootFn boot(StoreData& data, StoreOptions options = {});

 private:
  struct ActiveTx {
    Version snapshot;
    Micros began_at;
  };

  Result<std::string> handle(std::string_view request);
  Result<std::string> begin(Micros now);
  Result<std::string> commit(Decoder& in, Micros now);
  Result<std::string> resolve(TxId tx);
  Status check_active(TxId tx, Micros now);
  void expire_transactions(Micros now);
  bool forgotten(LeaseId lease, Micros now) const;
  void record_outcome(TxId tx, bool committed, Version version);
  void prune(StoreData::Chain& chain) const;
  void forget_tombstones();
  Version oldest_snapshot() const;

  World& world_;
  NodeIndex node_;
  const Clock& clock_;
  StoreData& data_;
  StoreOptions options_;
  std::map<TxId, ActiveTx> active_;
  std::multiset<Version> snapshots_;
};

// A node's view of the store, over the simulated network.
class SimStoreClient final : public Store {
 public:
  SimStoreClient(Network& network, std::string store_node, Micros rpc_timeout_us);

  Result<LeaseId> start_lease(Micros ttl_us) override;
  Status ping_lease(LeaseId lease) override;
  Status abort_lease(LeaseId lease) override;
  Result<LeaseState> lease_state(LeaseId lease) override;
  Result<Transaction> begin() override;
  Result<Version> commit(const Transaction& tx, const std::vector<LeaseId>& prerequisites) override;
  void abort(const Transaction& tx) override;
  Result<TxOutcome> resolve(TxId tx, Version* version = nullptr) override;

 protected:
  Result<std::optional<std::string>> read(const Transaction& tx, const std::string& table,
                                          const std::string& key) override;
  Result<std::vector<Row>> read_range(const Transaction& tx, const std::string& table,
                                      const std::string& from, const std::string& to,
                                      size_t limit) override;
  Result<std::vector<std::optional<std::string>>> read_many(const Transaction& tx, const std::string& table,
                                                            const std::vector<std::string>& keys) override;

 private:
  // Sends one request; a lost or refused exchange becomes kUnavailable.
  Result<std::string> rpc(std::string request);

  Network& network_;
  std::string store_node_;
  Micros rpc_timeout_us_;
};

}  // namespace onceflow::sim
