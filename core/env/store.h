// Store: the transactional store that plays YTsaurus' role.
//
// Leases: a Lease is started with a TTL, kept alive by pings and ends when aborted or when
// the store's own clock passes its last ping plus the TTL. An ended Lease never becomes
// active again.
//
// Transactions: snapshot isolation. begin() fixes a snapshot; reads see the snapshot plus the
// transaction's own buffered writes; commit() fails with kConflict when another transaction
// committed a write to one of our written keys after our snapshot (write-write conflict),
// and with kPrerequisiteFailed when a prerequisite Lease is not active at commit time.
// Results of commit():
//   OK (with the commit version) - applied;
//   kConflict, kPrerequisiteFailed, kUnavailable - not applied;
//   kAmbiguous - the reply was lost: it may or may not have applied. resolve(tx) answers
//     which, and fences the transaction so that it can never apply after resolve() said no.
//
// Thread-safety: as the node's Runtime; blocking calls suspend the calling fiber.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/env/clock.h"
#include "core/env/status.h"

namespace onceflow {

using LeaseId = uint64_t;
using TxId = uint64_t;
using Version = uint64_t;

enum class LeaseState : uint8_t { kActive, kAborted, kExpired, kUnknown };
std::string_view lease_state_name(LeaseState state);

struct Row {
  std::string key;
  std::string value;
  friend bool operator==(const Row&, const Row&) = default;
};

// A client-side transaction: its id, its snapshot and its buffered writes.
class Transaction {
 public:
  Transaction(TxId id, Version snapshot) : id_(id), snapshot_(snapshot) {}

  TxId id() const { return id_; }
  Version snapshot() const { return snapshot_; }

  // By value: a caller's temporaries move into the write set.
  void put(std::string table, std::string key, std::string value);
  void erase(std::string table, std::string key);

  // The buffered write of (table, key): nullopt when none; a nullopt inside when erased.
  const std::optional<std::string>* buffered(const std::string& table,
                                             const std::string& key) const;

  // Buffered erases of keys in [from, to) of `table` (an empty `to`: no upper bound).
  size_t buffered_erases(const std::string& table, const std::string& from, const std::string& to) const;
  // The first `limit` rows of [from, to) as this transaction sees them: `committed` (the
  // snapshot's rows of that range, in key order, from `from` on) with the buffered writes
  // laid over. When `committed_complete` is false, rows past its last key are unknown, so
  // buffered rows beyond it are left out.
  std::vector<Row> overlay(const std::string& table, const std::string& from, const std::string& to, size_t limit,
                           std::vector<Row> committed, bool committed_complete) const;

  // Ordered by (table, key); looked up by string views too, without copying the strings.
  struct TableKeyLess {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      const int table = std::string_view(a.first).compare(std::string_view(b.first));
      return table != 0 ? table < 0 : std::string_view(a.second) < std::string_view(b.second);
    }
  };
  using TableKey = std::pair<std::string_view, std::string_view>;
  using WriteSet = std::map<std::pair<std::string, std::string>, std::optional<std::string>, TableKeyLess>;
  const WriteSet& writes() const { return writes_; }
  size_t write_count() const { return writes_.size(); }

 private:
  TxId id_;
  Version snapshot_;
  WriteSet writes_;
};

enum class TxOutcome : uint8_t { kCommitted, kNotCommitted };

class Store {
 public:
  virtual ~Store() = default;

  // --- Leases ---
  // Starts a Lease that expires `ttl_us` after its last ping, measured by the store's clock.
  virtual Result<LeaseId> start_lease(Micros ttl_us) = 0;
  // Extends the Lease. kPrerequisiteFailed when it has already ended.
  virtual Status ping_lease(LeaseId lease) = 0;
  // Ends the Lease. Aborting an ended Lease is OK.
  virtual Status abort_lease(LeaseId lease) = 0;
  virtual Result<LeaseState> lease_state(LeaseId lease) = 0;

  // --- Transactions ---
  virtual Result<Transaction> begin() = 0;
  // The value of (table, key) as `tx` sees it; nullopt when absent.
  Result<std::optional<std::string>> get(const Transaction& tx, const std::string& table,
                                         const std::string& key);
  // The values of several keys of one table as `tx` sees them, in the order asked; one round
  // trip to a remote store.
  Result<std::vector<std::optional<std::string>>> get_many(const Transaction& tx, const std::string& table,
                                                           const std::vector<std::string>& keys);
  // Rows with from <= key < to (an empty `to` means no upper bound), in key order, at most
  // `limit`, as `tx` sees them.
  Result<std::vector<Row>> scan(const Transaction& tx, const std::string& table,
                                const std::string& from, const std::string& to, size_t limit);
  // Commits `tx` if every Lease in `prerequisites` is active. See the header comment.
  virtual Result<Version> commit(const Transaction& tx, const std::vector<LeaseId>& prerequisites) = 0;
  // Releases the snapshot of a transaction that will not commit. Best effort.
  virtual void abort(const Transaction& tx) = 0;
  // Whether `tx` committed (and, when it did and `version` is given, at which version). A
  // transaction that has not committed by now never will.
  virtual Result<TxOutcome> resolve(TxId tx, Version* version = nullptr) = 0;

 protected:
  // Snapshot reads of committed data, without the transaction's buffered writes.
  virtual Result<std::optional<std::string>> read(const Transaction& tx, const std::string& table,
                                                  const std::string& key) = 0;
  virtual Result<std::vector<Row>> read_range(const Transaction& tx, const std::string& table,
                                              const std::string& from, const std::string& to,
                                              size_t limit) = 0;
  // Several snapshot reads; by default one read() each.
  virtual Result<std::vector<std::optional<std::string>>> read_many(const Transaction& tx, const std::string& table,
                                                                    const std::vector<std::string>& keys);
};

}  // namespace onceflow
