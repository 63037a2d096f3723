// Stream rows: how the messages between two jobs are kept.
//
// A producer's epoch writes what it emitted for one partition of a stream's consumer as one
// row, "<p>/<ts>/<producer>/<epoch>", where <ts> is the least alignment time among them (16
// hex, offset so negative times sort first), <producer> the producer's JobId and <epoch> its
// epoch (16 hex). Only one epoch of a given number ever commits, so no commit overwrites
// another's row, and a row's messages are never older than its key says: a consumer that
// has read rows in key order up to some row knows every row it has not read holds nothing
// older than that row's <ts>.
//
// A consumer takes messages one by one, in (alignment_ts, id) order across rows. At the end
// of its epoch each row it took from is erased when nothing is left in it, else rewritten
// with what is left, under the same key (its <ts> stays a lower bound). One epoch thus costs
// a write per row instead of two per message.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/env/store.h"
#include "core/message.h"

namespace onceflow {

namespace stream_rows {

std::string row_key(int partition, Micros least_alignment_ts, std::string_view producer, uint64_t epoch);
// The <ts> of a row key: no message of the row is older.
Micros least_ts(std::string_view key);
// The messages of a row, in the order written; all of one stream.
std::string encode(const std::vector<Message>& messages);
Result<std::vector<Message>> decode(std::string_view value);
// decode(), its error naming the row: "<table>: row <key>: malformed stream row".
Result<std::vector<Message>> decode_row(std::string_view table, std::string_view key, std::string_view value);

}  // namespace stream_rows

// What one epoch emits into streams, gathered per (stream table, consumer partition) and
// written as one row each.
class StreamWrites {
 public:
  void add(const std::string& table, int partition, Message m);
  // A row put: where, its newest alignment time and its messages.
  struct Written {
    std::pair<std::string, int> where;  // (stream table, consumer partition)
    Micros newest_ts = 0;
    uint64_t messages = 0;
  };
  // Puts the rows into `tx`, in (table, partition) order; nothing is left gathered.
  std::vector<Written> write(Transaction& tx, std::string_view producer, uint64_t epoch);
  bool empty() const { return rows_.empty(); }

 private:
  std::map<std::pair<std::string, int>, std::vector<Message>> rows_;
};

// Backpressure's ledger (spec.max_in_flight): the rows one producer put for one consumer
// partition, as (newest alignment time, messages), until that partition says it took them
// (Job::holds_back). Rows need not come in time order: a swift job that re-processes
// replayed inputs puts a row older than the ones before it.
class UntakenRows {
 public:
  void put(const StreamWrites::Written& row) {
    rows_.emplace_back(row.newest_ts, row.messages);
    messages_ += row.messages;
  }
  // Forgets every row the consumer took whole: nothing in it as new as `taken_below`.
  void taken_below(Micros taken_below);
  // Messages of the rows whose newest message is older than `below`.
  uint64_t older_than(Micros below) const;
  uint64_t messages() const { return messages_; }
  size_t rows() const { return rows_.size(); }

 private:
  std::vector<std::pair<Micros, uint64_t>> rows_;
  uint64_t messages_ = 0;
};

// Where an input message is kept: its stream row ("<table>\x1f<key>") and its id.
struct InputRef {
  std::string row;
  MessageId id = 0;
  auto operator<=>(const InputRef&) const = default;
};

// What an epoch takes from its input rows, settled into erases and rewrites at its end.
class InputTakes {
 public:
  // A row as read ("<table>\x1f<key>", its value), which decoded whole; returns its number
  // within the epoch.
  uint32_t read(std::string row, std::string value);
  const std::string& row(uint32_t read) const { return read_[read].row; }
  void take(uint32_t read, MessageId id) { read_[read].taken.push_back(id); }
  // A message of any row, read by this epoch or not (a swift job acknowledging late).
  void take(const InputRef& ref);
  // Erases or rewrites every row taken from. A row not read by this epoch is read through
  // `lookup`; false (the epoch must not commit) when a row does not decode or could not be
  // read.
  bool settle(Transaction& tx, const std::function<std::optional<std::string>(const std::string& table,
                                                                            const std::string& key)>& lookup,
              Status* failed);

 private:
  struct Read {
    std::string row;
    std::string value;
    std::vector<MessageId> taken;
  };
  std::vector<Read> read_;
  std::map<std::string, uint32_t> by_row_;                  // row -> its number in read_
  std::map<std::string, std::vector<MessageId>> unread_;  // rows taken from but not read
};

}  // namespace onceflow
