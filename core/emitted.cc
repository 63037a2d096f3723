#include "core/emitted.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

#include "core/engine.h"
#include "core/env/codec.h"

namespace onceflow {

Message message_output(const Message& parent, CollectingOutput::Out&& out, uint32_t index) {
  Message child;
  child.id = derived_message_id(parent.id, index);
  child.key = out.key;
  child.stream = std::move(out.stream);
  child.event_ts = parent.event_ts;
  child.payload = std::move(out.payload);
  return child;
}

std::string timer_row(const Timer& t, bool deduplicate_equal_timestamps, uint64_t unique) {
  std::string row = fmt::format("{:016x}/{:016x}/{}", static_cast<uint64_t>(t.trigger_ts) ^ (1ULL << 63), t.key,
                                t.timer_stream);
  if (!deduplicate_equal_timestamps) row += fmt::format("/{:016x}", unique);
  return row;
}

std::string encode_timer_value(const TimerValue& v) {
  Encoder out;
  out.i64(v.event_ts).u64(v.creation);
  return out.take();
}

TimerValue decode_timer_value(std::string_view value) {
  Decoder in(value);
  TimerValue v;
  v.event_ts = in.i64();
  v.creation = in.u64();
  return v;
}

std::string describe_timer_value(const TimerValue& v) {
  return fmt::format("event time {}, set by {}", format_time(v.event_ts), tables::hex16(v.creation));
}

Timer decode_timer(std::string_view row, const TimerValue& value) {
  assert(row.size() > 34 && row[16] == '/' && row[33] == '/');
  Timer t;
  t.trigger_ts = static_cast<Micros>(tables::parse_hex16(row.substr(0, 16)) ^ (1ULL << 63));
  t.key = tables::parse_hex16(row.substr(17, 16));
  const std::string_view stream = row.substr(34);
  t.timer_stream = std::string(stream.substr(0, stream.find('/')));
  t.event_ts = value.event_ts;
  return t;
}

std::optional<TimerValue> timer_after_add(const std::optional<TimerValue>& existing, Micros event_ts, uint64_t unique) {
  if (!existing) return TimerValue{event_ts, unique};
  if (existing->event_ts <= event_ts) return std::nullopt;
  return TimerValue{event_ts, existing->creation};
}

std::string timer_firing(std::string_view row, uint64_t creation) {
  return fmt::format("{}@{}", row, tables::hex16(creation));
}

Message timer_output(std::string_view computation, std::string_view firing, const Timer& t, CollectingOutput::Out&& out,
                     uint32_t index) {
  Message child;
  child.id = timer_output_id(computation, firing, index);
  child.key = out.key;
  child.stream = std::move(out.stream);
  child.event_ts = t.event_ts;
  child.payload = std::move(out.payload);
  return child;
}

void OutputBatches::add(const Message& parent, CollectingOutput::Out&& out) {
  groups_[{std::move(out.stream), out.key}].push_back({parent.id, parent.event_ts, parent.system_ts, std::move(out.payload)});
}

std::vector<Message> OutputBatches::take(int batch_size) {
  assert(batch_size > 0);
  std::vector<Message> out;
  for (auto& [where, items] : groups_) {
    for (size_t at = 0; at < items.size(); at += static_cast<size_t>(batch_size)) {
      const size_t end = std::min(items.size(), at + static_cast<size_t>(batch_size));
      Message batch;
      batch.key = where.key;
      batch.stream = where.stream;
      batch.event_ts = items[at].event_ts;
      batch.system_ts = batch.alignment_ts = items[at].system_ts;
      for (size_t i = at; i < end; ++i) {
        batch.parents.push_back(items[i].parent);
        if (!batch.payload.empty()) batch.payload += '\n';
        batch.payload += items[i].payload;
      }
      batch.id = batched_message_id(where.stream, where.key, static_cast<uint32_t>(at / static_cast<size_t>(batch_size)),
                                    batch.parents);
      out.push_back(std::move(batch));
    }
  }
  groups_.clear();
  return out;
}

}  // namespace onceflow
