// PgStore: the Store interface on PostgreSQL, for engines in several processes or on several
// hosts sharing one store (issue 22). Same contract as the simulated and the LevelDB store
// (core/env/store.h); tests/store_contract_test.cc runs one suite against all three.
//
// Data: one table of rows (table, key) -> value, with the transaction that last wrote each
// (its PostgreSQL transaction id, `writer`); an erase leaves a tombstone (NULL value) so that
// a later commit whose snapshot is older still sees the write and conflicts.
//
// A Transaction holds a connection with its snapshot open (REPEATABLE READ) until it commits
// or aborts; begin() keeps that snapshot's description (pg_current_snapshot()). commit ends
// the snapshot and calls onceflow_commit3(), one statement, one round trip: it checks the
// prerequisite Leases (locked FOR SHARE, so that an abort_lease cannot slip between the check
// and the commit) and the transaction's age, writes the commit token, and upserts the rows in
// key order, each only if its last writer is visible in the snapshot: a row written by a
// commit the snapshot does not hold (or by one still running, which the upsert waits for)
// makes the commit fail as a conflict. Commits run side by side; two on one key wait for each
// other at its row. Versions come from a sequence: they increase from one commit to the next
// one begun after it, and name commits; they do not order concurrent ones. Leases are timed
// by the database's clock (clock_timestamp()), as YTsaurus times them by its own.
//
// A commit whose reply is lost (the connection broke) is kAmbiguous; resolve(tx) writes a
// fence token for tx unless the commit's token is there: the commit either got in first (its
// token has a version: committed) or can no longer (its token insert fails).
//
// Tombstones older than twice the transaction timeout are deleted now and then: a transaction
// old enough to need them is refused at commit.
//
// Durability is the server's: every session runs with synchronous_commit on (a commit is
// acknowledged once its WAL is flushed, whatever the server's default), and a server with
// fsync off is refused at open, since a crash of it can lose acknowledged commits silently.
// What the store cannot see is a database put back as a whole (a restore from a backup, a
// failover to a replica that was behind): docs/real.md says what an operator does then. Blocking libpq calls run on the calling thread,
// except a commit from a fiber of a RealLoop given with set_loop, which runs on a helper
// thread so that the loop goes on during the database's synced write.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/env/store.h"
#include "real/real_store.h"

typedef struct pg_conn PGconn;

namespace onceflow::real {

class PgStore final : public RealStore {
 public:
  struct Options {
    // A transaction open longer than this is over: commit refuses it (by the database's
    // clock) and begin() gives its connection back (by the local one).
    Micros tx_timeout_us = 60 * kSeconds;
    // Connections at once (for transactions and the rest); at most an eighth of the server's
    // max_connections (at least 2), so that the processes of a deployment leave it room.
    size_t max_connections = 64;
    // A database without the schema is refused (kNotFound) rather than given one: for a
    // reader (onceflow ctl), so that a mistyped database is not written to.
    bool existing_only = false;
  };
  // Connects to `conninfo` (a libpq connection string or URI) and creates the schema when
  // missing. One line naming the server when it cannot.
  static Result<std::unique_ptr<PgStore>> open(const std::string& conninfo, Options options);
  static Result<std::unique_ptr<PgStore>> open(const std::string& conninfo) { return open(conninfo, Options{}); }
  ~PgStore() override;

  Result<LeaseId> start_lease(Micros ttl_us) override;
  Status ping_lease(LeaseId lease) override;
  Status abort_lease(LeaseId lease) override;
  Result<LeaseState> lease_state(LeaseId lease) override;

  Result<Transaction> begin() override;
  Result<Version> commit(const Transaction& tx, const std::vector<LeaseId>& prerequisites) override;
  void abort(const Transaction& tx) override;
  Result<TxOutcome> resolve(TxId tx, Version* version = nullptr) override;

  void set_loop(RealLoop* loop) override { loop_ = loop; }
  const Status& failed() const override { return failed_; }
  std::string where() const override { return where_; }
  Stats stats() const override;
  Result<std::vector<Row>> dump(const std::string& table) override;
  Result<bool> any_rows(const std::string& table_prefix) override;
  Result<std::vector<std::string>> table_names(const std::string& table_prefix) override;

  size_t open_transactions() const;
  // Breaks the connection of an open transaction, as a network failure would (tests).
  void break_connection_of(TxId tx);
  // Deletes the tombstones no transaction may still need (commit does it every 1000 commits).
  Status erase_old_tombstones();
  // A setting (current_setting(name)) as a session of this store sees it.
  Result<std::string> setting(const std::string& name);

 protected:
  Result<std::optional<std::string>> read(const Transaction& tx, const std::string& table,
                                          const std::string& key) override;
  Result<std::vector<Row>> read_range(const Transaction& tx, const std::string& table, const std::string& from,
                                      const std::string& to, size_t limit) override;
  Result<std::vector<std::optional<std::string>>> read_many(const Transaction& tx, const std::string& table,
                                                            const std::vector<std::string>& keys) override;

 private:
  struct Connection;
  struct Open {  // an open transaction
    std::unique_ptr<Connection> connection;
    Micros begun_local = 0;
    std::string begun_db;  // the database's clock_timestamp() at begin, as text
    std::string snapshot;  // pg_current_snapshot() of its reads, as text
  };
  using Params = std::vector<std::optional<std::string>>;  // text format; nullopt is NULL
  using TextRows = std::vector<std::vector<std::optional<std::string>>>;
  PgStore(std::string conninfo, Options options);
  // One attempt of open(): `answered` once a connection was made, `lost` when this attempt
  // has no connection (it could not make one, or the one it made broke).
  static Result<std::unique_ptr<PgStore>> open_once(const std::string& conninfo, Options options, bool* answered,
                                                    bool* lost);
  // One statement on a pooled connection, outside any transaction: its rows as text (NULL
  // is nullopt), or why it (or the connection) failed.
  Result<TextRows> query_once(const char* sql, const Params& params);
  Result<std::unique_ptr<Connection>> acquire();
  void release(std::unique_ptr<Connection> c);
  // The open transaction's connection; `reading`: a read request is about to use it (counted).
  Result<Connection*> connection_of(const Transaction& tx, bool reading = false);
  void expire_old_transactions();

  std::string conninfo_;
  std::string where_;  // "postgresql database D on H", without the password
  Options options_;
  Status failed_;  // never set: a database that fails is unavailable, and may come back
  Stats stats_;    // under mu_
  RealLoop* loop_ = nullptr;
  mutable std::mutex mu_;  // idle_ and open_: a commit may run on a helper thread
  std::vector<std::unique_ptr<Connection>> idle_;
  std::map<TxId, Open> open_;
  std::atomic<size_t> live_connections_ = 0;  // open connections, idle or in use
  std::atomic<uint64_t> commits_since_cleanup_ = 0;
};

}  // namespace onceflow::real
