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
//
// The end of a scan walks tombstones too: after its last row, a step finds the next live row,
// past the tombstones of whatever follows (the next partition's consumed rows). A scan that
// reached its end learns the range after its last row as empty up to that end (a tail), and a
// scan whose row is the last before a tail that reaches its own end stops there without the
// step. A put into a tail moves the tail past it (what follows the new row is still empty), a
// put into a range a scan starts from cuts it short (what precedes the new row is still
// empty); a range that is both is split in two. So appending rows keeps a partition's tail.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "core/env/store.h"

namespace onceflow::real {

class EmptyRanges {
 public:
  // A put of `key` into `table`, validated at `version` (before anyone can see it): a range
  // holding `key` keeps what is on either side of it that scans use.
  void put(const std::string& table, const std::string& key, Version version);
  // Where a scan of `table` from `from` by transaction `tx` may start: `from`, or the end of a
  // range from `from` known to be empty for it.
  const std::string& start(const std::string& table, const std::string& from, TxId tx) const;
  // The first key of a range known to `tx` to be empty up to `to` (or beyond), which a scan of
  // `table` up to `to` may stop at: after a row whose key is just below it, no row follows.
  // nullptr when there is none.
  const std::string* tail(const std::string& table, const std::string& to, TxId tx) const;
  // What a scan starts at, ends at, or both: a range of the kind is used by them.
  enum class Ends : uint8_t { kHead = 1, kTail = 2, kBoth = 3 };
  // A scan by `tx` (snapshot version `snapshot`) found no row in [from, first). `ends` says
  // whether the scan started at `from` (kHead), ended at `first` (kTail: its last row was just
  // below `from`), or both (it found no row).
  void learn(const std::string& table, const std::string& from, std::string first, TxId tx, Version snapshot,
             Ends ends = Ends::kHead);
  // Puts at or below `oldest` (no open transaction's snapshot is older) no longer matter.
  void forget_puts(Version oldest);
  // Ranges kept now (for tests and stats).
  size_t size() const;

 private:
  struct Range {
    std::string until;
    TxId learned_by = 0;
    bool head = true;   // scans start at its first key
    bool tail = false;  // it reaches a scan's end
  };
  struct Table {
    std::map<std::string, Range> ranges;  // by first key; they never overlap
    std::deque<std::pair<Version, std::string>> puts;  // not yet forgotten, in version order
  };
  // The table named `name`, made if missing; the last one asked for is remembered, as a
  // commit's puts come table by table.
  Table& table(const std::string& name);

  std::map<std::string, Table, std::less<>> tables_;
  const std::string* last_name_ = nullptr;  // a key of tables_ (they stay put)
  Table* last_table_ = nullptr;
};

}  // namespace onceflow::real
