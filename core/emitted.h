// Emitted: how the engine names and keeps what a computation's function emits.
//
// One call of a function (on a message, or on a timer that fired) emits messages and timers.
// Their identities follow from what was processed alone, never from when or where: a message
// output is named by its parent's id and its index; a timer by its row
// (<trigger>/<key>/<stream>[/<unique>]) and, for what its firing emits, by the creation that
// set it. The engine (core/job_computation.cc) and the re-execution of a committed history
// (core/reexecute.h) both name outputs here, so the two can be compared by identity.
//
// Pure functions; no state, no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/computation.h"
#include "core/message.h"
#include "core/spec.h"

namespace onceflow {

// The message output number `index` of a call on `parent`: id, key, stream, event time and
// payload (the times a job stamps it with are the caller's).
Message message_output(const Message& parent, CollectingOutput::Out&& out, uint32_t index);
// What makes timer number `index` set while processing `parent` unique.
inline uint64_t message_timer_unique(const Message& parent, uint32_t index) {
  return derived_message_id(parent.id, index);
}

// A timer's row within its partition: <trigger>/<key>/<stream>, and /<unique> when its timer
// stream does not merge equal timestamps. Rows sort by trigger time.
std::string timer_row(const Timer& t, bool deduplicate_equal_timestamps, uint64_t unique);
// What a timer row's value holds: the timer's event time and its creation.
struct TimerValue {
  Micros event_ts = 0;
  uint64_t creation = 0;
};
std::string encode_timer_value(const TimerValue& v);
TimerValue decode_timer_value(std::string_view value);
// For reports: "event time 0.012000s, set by <creation, 16 hex digits>".
std::string describe_timer_value(const TimerValue& v);
// The timer a row holds. REQUIRES: `row` was made by timer_row.
Timer decode_timer(std::string_view row, const TimerValue& value);
// Adding a timer (event time `event_ts`, unique `unique`) where `existing` is stored: the
// row's new value, or nullopt when the existing row stays (it has the earlier event time).
// A merge keeps the creation it merged into.
std::optional<TimerValue> timer_after_add(const std::optional<TimerValue>& existing, Micros event_ts, uint64_t unique);
// One firing of a timer: its row and creation.
std::string timer_firing(std::string_view row, uint64_t creation);
// Output number `index` of a firing: a message, or what makes a timer it sets unique.
Message timer_output(std::string_view computation, std::string_view firing, const Timer& t, CollectingOutput::Out&& out,
                     uint32_t index);
inline uint64_t timer_timer_unique(std::string_view computation, std::string_view firing, uint32_t index) {
  return timer_output_id(computation, firing, 1000 + index);
}

// A swift map's batching with relaxed guarantees: the outputs of one epoch grouped by
// (stream, key), each group cut into messages of at most `batch_size` outputs (newline-joined
// payloads), named by group, place and parents (batched_message_id). Times are the first
// parent's.
class OutputBatches {
 public:
  void add(const Message& parent, CollectingOutput::Out&& out);
  std::vector<Message> take(int batch_size);

 private:
  struct Where {
    std::string stream;
    uint64_t key;
    auto operator<=>(const Where&) const = default;
  };
  struct Item {
    MessageId parent;
    Micros event_ts;
    Micros system_ts;
    std::string payload;
  };
  std::map<Where, std::vector<Item>> groups_;
};

}  // namespace onceflow
