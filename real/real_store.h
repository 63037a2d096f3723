// RealStore: a Store that `onceflow real` runs on (LevelDB, embedded; PostgreSQL, shared by
// processes), with what the deployment, its drain check and --verify ask of it beyond the
// engine's interface.
#pragma once

#include <string>
#include <vector>

#include "core/env/store.h"

namespace onceflow::real {

class RealLoop;

class RealStore : public Store {
 public:
  // Commits from fibers of `loop` may wait off the loop's thread (a synced write). `loop` must
  // outlive the store's use from it; nullptr: every call runs on its caller's thread.
  virtual void set_loop(RealLoop* loop) = 0;
  // OK, or the corruption or I/O error that failed the store for good.
  virtual const Status& failed() const = 0;
  // Where the store lives, for messages (a directory; a database, never its password).
  virtual std::string where() const = 0;

  struct Stats {
    uint64_t commits = 0;
    uint64_t writes = 0;  // rows put or erased by those commits
    uint64_t bytes = 0;   // keys and values written by them
    uint64_t synced_writes = 0;  // durable writes (LevelDB: one per group of commits)
    uint64_t scans_past_empty = 0;  // scans that sought past a range known to be empty
    uint64_t scans_before_empty = 0;  // scans that stopped before a range known to be empty
    uint64_t conflicts = 0;         // commits refused for a write-write conflict
    uint64_t lease_renewals = 0;    // pings that kept a Lease alive (worker, job, controller)
    // Read requests: a point read, a batch of them (PostgreSQL; LevelDB counts each key) or a
    // range. On PostgreSQL each is a round trip.
    uint64_t reads = 0;
    // LevelDB only (0 on PostgreSQL, whose commits overlap): the time one of its synced
    // writes was under way (a group's from its start until the loop took its end), and the
    // time `commit_waits` commits of fibers waited for their group's write.
    uint64_t write_us = 0;
    uint64_t commit_wait_us = 0;
    uint64_t commit_waits = 0;
  };
  virtual Stats stats() const = 0;

  // Every committed row of `table`, in key order (--verify and tools; not for the engine).
  virtual Result<std::vector<Row>> dump(const std::string& table) = 0;
  // Whether any table whose name starts with `table_prefix` has a committed row.
  virtual Result<bool> any_rows(const std::string& table_prefix) = 0;
  // The tables with committed rows whose names start with `table_prefix`, sorted.
  virtual Result<std::vector<std::string>> table_names(const std::string& table_prefix) = 0;
};

}  // namespace onceflow::real
