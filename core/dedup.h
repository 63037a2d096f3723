// Input deduplication: which messages a job has already processed, as rows of its own table.
//
// Two layouts, as in the seed: the full table keeps one row per message ("<p>/<id>" ->
// system_ts); the compact table keeps one row per key ("<p>/<key>" -> its (id, system_ts)
// pairs), which is cheaper when keys are few and messages many. Rows live in the job's
// partition prefix, so partitions never see each other's entries. Cleanup drops entries older
// than the producers' SystemWatermark: no producer re-emits anything older than that, so no
// duplicate of such a message can still arrive. A cleanup looks at a bounded number of rows
// from a cursor the job keeps in its meta row (committed with the epoch), wrapping around at
// the partition's end.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/env/store.h"
#include "core/message.h"

namespace onceflow {

// The rows of one table as one transaction sees them (its own writes included).
class TableRows {
 public:
  virtual ~TableRows() = default;
  virtual std::optional<std::string> read(const std::string& key) = 0;
  virtual void put(const std::string& key, std::string value) = 0;
  virtual void erase(const std::string& key) = 0;
  // Rows with from <= key < to, in key order, at most `limit`.
  virtual std::vector<Row> scan(const std::string& from, const std::string& to, size_t limit) = 0;
};

enum class DedupLayout { kFull, kCompact };

class DedupTable {
 public:
  DedupTable(DedupLayout layout, int partition);

  bool contains(TableRows& rows, const Message& m) const;
  // The row contains() and record() read for `m`.
  std::string row_key_of(const Message& m) const { return row_key(row_of(m)); }
  // What names that row: the message's id (full layout) or key (compact); the rows sort as
  // these numbers do.
  uint64_t row_of(const Message& m) const { return layout_ == DedupLayout::kFull ? m.id : m.key; }
  std::string row_key(uint64_t v) const;
  // Records `m` unless contains(rows, m), reading its row once: true when `m` was new (and
  // is now recorded), false when it was a duplicate (and nothing changed).
  bool record_if_new(TableRows& rows, const Message& m) const;
  // Drops the entries with system_ts < watermark among at most `max_rows` rows of the
  // partition, from row key `cursor` on ("": the partition's first row). Returns where the
  // next cleanup goes on: past the last row looked at, or "" once the partition's end was
  // reached, so that bounded cleanups sweep every row in turn, however busy the first ones.
  // `forgotten`, when given, counts the entries dropped.
  std::string cleanup(TableRows& rows, Micros watermark, size_t max_rows, const std::string& cursor = "",
                      size_t* forgotten = nullptr) const;

  // Records the messages of one epoch, in order, as record_if_new() one by one would, but a
  // compact row (one per key, its entries growing through the epoch) is read and searched
  // once, not once per message, and written once by flush(). Nothing else may read or write
  // the table between the first record_if_new() and flush().
  class Batch {
   public:
    Batch(const DedupTable& table, TableRows& rows) : table_(table), rows_(rows) {}
    bool record_if_new(const Message& m);
    // Writes the rows that changed; returns how many messages were new. A compact row written
    // anyway drops its entries with system_ts < `forget_below` on the way, as cleanup() would:
    // pass what a cleanup would be given now, or nothing.
    size_t flush(Micros forget_below = INT64_MIN);

   private:
    struct CompactRow {
      std::string value;
      std::vector<MessageId> stored;        // the ids the row held when read, sorted
      std::unordered_set<MessageId> added;  // this epoch's (membership only: never iterated)
      bool changed = false;
    };
    const DedupTable& table_;
    TableRows& rows_;
    std::map<uint64_t, CompactRow> compact_;  // by message key (its row's key is made at flush)
    size_t recorded_ = 0;
  };

 private:
  DedupLayout layout_;
  std::string prefix_;
};

}  // namespace onceflow
