// Key ranges the LevelDB store knows to hold no row, so that a scan seeks past them.
//
// A consumed stream row is erased, and LevelDB keeps its tombstone until a compaction reaches
// it: a scan from a partition's first key walks every tombstone of the rows consumed so far
// (callgrind put 75% of the real engine's instructions there). The store remembers, per table,
// ranges [from, until) a scan found empty, and the next scan from `from` seeks to `until`.
//
// Exactness under snapshots. A range is learned by the scan of a transaction T: [from, first)
// held no row in T's snapshot. It is kept only where no put that T's snapshot may lack lies in
// it (a put validated at a version after T's snapshot version), and every later put into it
// cuts it short at the put's key (at validation, before the write is visible to anyone).
// Erasures never matter: the range stays empty. A range is used only by transactions that
// began no earlier than T (their snapshots hold everything T's did); an older transaction scans
// as before. So a scan returns exactly what it would without the ranges.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "core/env/store.h"

namespace onceflow::real {

class EmptyRanges {
 public:
  // A put of `key` into `table`, validated at `version` (before anyone can see it).
  void put(const std::string& table, const std::string& key, Version version);
  // Where a scan of `table` from `from` by transaction `tx` may start: `from`, or the end of a
  // range from `from` known to be empty for it.
  const std::string& start(const std::string& table, const std::string& from, TxId tx) const;
  // A scan by `tx` (snapshot version `snapshot`) found no row in [from, first).
  void learn(const std::string& table, const std::string& from, std::string first, TxId tx, Version snapshot);
  // Puts at or below `oldest` (no open transaction's snapshot is older) no longer matter.
  void forget_puts(Version oldest);
  // Ranges kept now (for tests and stats).
  size_t size() const;

 private:
  struct Range {
    std::string until;
    TxId learned_by = 0;
  };
  struct Table {
    std::map<std::string, Range> ranges;  // by first key; they never overlap
    std::deque<std::pair<Version, std::string>> puts;  // not yet forgotten, in version order
  };
  std::map<std::string, Table, std::less<>> tables_;
};

}  // namespace onceflow::real
