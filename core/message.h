// Messages and their ids.
//
// A MessageId is a 64-bit hash of the message's origin, so a replay computes the same id:
// a source message's id comes from (source, partition, offset); a derived message's from
// (parent id, output index); a batched message's from the sorted set of its parents; a
// timer's outputs from the timer's identity. Ids are printed as 16 hex digits.
//
// Within a stream partition a job processes messages by (alignment_ts, id). A source
// message's alignment time is the time it was written to its queue; a transform's output
// takes its creation time (its SystemTimestamp); any other message inherits its parent's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/env/clock.h"
#include "core/env/status.h"

namespace onceflow {

using MessageId = uint64_t;

struct Message {
  MessageId id = 0;
  uint64_t key = 0;
  std::string stream;
  Micros system_ts = 0;
  Micros event_ts = 0;
  Micros alignment_ts = 0;
  std::string payload;
  std::vector<MessageId> parents;  // batched messages only: the inputs they combine

  friend bool operator==(const Message&, const Message&) = default;
};

MessageId source_message_id(std::string_view source, int partition, uint64_t offset);
// A service log row's "offset" for source_message_id: its row index within its cycle.
inline uint64_t service_log_offset(uint64_t cycle, uint64_t row) { return (cycle << 40) | row; }
MessageId derived_message_id(MessageId parent, uint32_t output_index);
// A relaxed swift batch's id: its (stream, key) group, its place among the group's batches
// (`part`) and its parents, in any order. One input's outputs may land in several groups, or
// in several batches of one group: each batch gets its own id. REQUIRES: parents is not empty.
MessageId batched_message_id(std::string_view stream, uint64_t key, uint32_t part, std::vector<MessageId> parents);
// `timer` identifies the timer within its computation: trigger, key, timer stream and, when
// equal timestamps are not merged, what made it unique.
MessageId timer_output_id(std::string_view computation, std::string_view timer, uint32_t output_index);

std::string format_id(uint64_t id);  // 16 hex digits
void append_id(std::string& out, uint64_t id);  // appends format_id(id) without a temporary
void append_hex(std::string& out, uint64_t v, int digits);  // the low `digits` hex digits of v
// A message as trace lines name it: its id, key and the first bytes of its payload, quoted
// (other than printable ASCII as \xNN): `3049f715789b0d82 (key 13, "key=13 count=9")`.
std::string message_label(const Message& m);
// The ids of the first `at_most` messages, space-separated, then " +N" for the rest (trace lines).
std::string format_ids(const std::vector<Message>& messages, size_t at_most);

std::string encode_message(const Message& m);
Result<Message> decode_message(std::string_view bytes);
// Every field but the stream, for rows that hold messages of one stream (core/stream_rows.h).
// The system time is stored relative to `base_ts` (a row passes its previous message's), the
// other times relative to the system time.
class Encoder;
class Decoder;
void encode_message_fields(Encoder& out, const Message& m, Micros base_ts = 0);
void decode_message_fields(Decoder& in, Message& m, Micros base_ts = 0);  // check in.ok() after

}  // namespace onceflow
