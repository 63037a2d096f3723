// The sending side of an async sink's outbox, and the append protocol its targets speak.
//
// An epoch of an async sink commits its outputs as outbox rows numbered by consecutive
// seqNos; after the commit the rows go to the target in batches, each row under (producer
// id, seqNo), and the target appends a row only if its seqNo is above the last one it holds
// from that producer. The target answers the highest seqNo it now holds: an acknowledgement
// covers a range, and a target may take only the first part of a batch. The sender remembers
// (in memory only) the highest seqNo acknowledged and resends everything above it, in order,
// so that a lost request, a lost reply, a batch taken in part or a restarted sender never
// makes the target append a message twice or skip one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env/codec.h"
#include "core/env/status.h"
#include "core/message.h"

namespace onceflow {

struct OutboxRow {
  uint64_t seqno = 0;
  std::string message;     // the encoded message
  bool batch_end = false;  // batching sinks: the last message of an outbox row (a batch's end)
  MessageId id = 0;        // the message's id, for the delivery callback
};

// --- Outbox rows in the store (tables::outbox: "<partition>/<seqNo of its first message>") --
// A row holds messages of consecutive seqNos from its key's, of the one stream the sink reads,
// encoded as a stream row is (core/stream_rows.h). An epoch of an exactly-once sink writes one
// row for all its outputs: one put, and one erase once the target holds the last of them; a
// batching sink writes a row per batch (its outputs cut at every max_batch_messages-th seqNo). An at-most-once ClickHouse sink, which acknowledges
// each message alone just before its send, writes one row per message.
class OutboxRowWriter {
 public:
  void add(Message m) { messages_.push_back(std::move(m)); }
  size_t messages() const { return messages_.size(); }
  // The row's value; the writer is left empty, its messages moved to `kept` when given.
  std::string take(std::vector<Message>* kept = nullptr);

 private:
  std::vector<Message> messages_;
};
// Appends `messages`, an outbox row's from seqNo `first` on, to `out`, each as the target takes
// it (encode_message); with `batch_end` the last one closes a batch.
void append_outbox_rows(uint64_t first, const std::vector<Message>& messages, bool batch_end, std::vector<OutboxRow>* out);
// Appends the messages of the row keyed by seqNo `first` to `out` (append_outbox_rows). False
// (and `out` as it was) when the value does not decode.
bool decode_outbox_row(uint64_t first, std::string_view value, bool batch_end, std::vector<OutboxRow>* out);

// --- The append protocol (service kSinkAppendService, core/engine.h) --------------------
// One request appends a batch of rows from one producer, in seqNo order, in one transaction
// of the target. An empty producer (an at-most-once send) is never deduplicated.
struct AppendRequest {
  std::string producer;
  uint64_t lease = 0;   // the sender's Lease, recorded by the target for the fencing checker
  uint64_t tablet = 0;  // the sink partition's index: a sharded target's tablet
  struct Entry {
    uint64_t seqno = 0;
    std::string_view message;  // the encoded message (a view into the rows or the request)
  };
  std::vector<Entry> entries;
};
std::string encode_append(const AppendRequest& r);
// nullopt: malformed.
std::optional<AppendRequest> decode_append(std::string_view request);

struct AppendReply {
  uint64_t held = 0;        // the highest seqNo the target holds from the producer (at-most-once: 0)
  uint64_t appended = 0;    // rows of the request appended
  uint64_t duplicates = 0;  // rows of the request it held already (dropped)
};
std::string encode_append_reply(const AppendReply& r);
std::optional<AppendReply> decode_append_reply(std::string_view reply);

// How much one append request carries at most (SinkSpec: delivery_batch_messages and
// delivery_batch_bytes); a row larger than the byte budget goes alone.
struct BatchLimits {
  size_t messages = 256;
  size_t bytes = 1 << 20;
};

class OutboxSender {
 public:
  struct Bugs {
    bool new_seqno_on_resend = false;  // every send numbered afresh (breaks the target's dedup)
    bool batch_ack_whole = false;      // an answered batch counts as taken whole, whatever the target holds
  };
  OutboxSender() = default;
  explicit OutboxSender(Bugs bugs) : bugs_(bugs) {}

  // Sends one batch; answers the highest seqNo the target now holds from this producer.
  using SendBatch = std::function<Result<uint64_t>(const std::vector<AppendRequest::Entry>& batch)>;
  // Sends the rows above delivered(), in seqNo order, in batches within `limits`, until a
  // batch fails or the target takes none of one; returns that failure, or OK once every row
  // was acknowledged. REQUIRES: rows sorted by seqno.
  Status deliver(const std::vector<OutboxRow>& rows, const BatchLimits& limits, const SendBatch& send);

  // For a connector that takes rows its own way (core/connectors.h): hands every row above
  // delivered() to `send` at once; `send` answers the highest seqNo the target now holds.
  // Returns its failure, or OK. REQUIRES: rows sorted by seqno.
  using SendAll = std::function<Result<uint64_t>(const std::vector<OutboxRow>& pending)>;
  Status deliver_all(const std::vector<OutboxRow>& rows, const SendAll& send);

  uint64_t delivered() const { return delivered_; }
  // Counts every row up to `seqno` as handed over (at-most-once: sent or given up).
  void skip_to(uint64_t seqno) { delivered_ = std::max(delivered_, seqno); }

 private:
  Bugs bugs_;
  uint64_t delivered_ = 0;
  uint64_t resend_salt_ = 0;
};

}  // namespace onceflow
