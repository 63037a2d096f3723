#include "core/message.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

#include "core/env/codec.h"
#include "core/env/random.h"

namespace onceflow {

namespace {
// Distinct tags keep ids of different origins apart even when their inputs coincide.
constexpr uint64_t kSourceTag = 0x736f75726365ULL;   // "source"
constexpr uint64_t kDerivedTag = 0x64657269766564ULL;  // "derived"
constexpr uint64_t kBatchTag = 0x6261746368ULL;        // "batch"
constexpr uint64_t kTimerTag = 0x74696d6572ULL;        // "timer"
}  // namespace

MessageId source_message_id(std::string_view source, int partition, uint64_t offset) {
  uint64_t h = mix64(kSourceTag ^ hash_bytes(source));
  h = mix64(h ^ static_cast<uint64_t>(partition));
  return mix64(h ^ offset);
}

MessageId derived_message_id(MessageId parent, uint32_t output_index) {
  return mix64(mix64(kDerivedTag ^ parent) ^ output_index);
}

MessageId batched_message_id(std::string_view stream, uint64_t key, uint32_t part, std::vector<MessageId> parents) {
  assert(!parents.empty());
  std::sort(parents.begin(), parents.end());
  uint64_t h = mix64(kBatchTag ^ hash_bytes(stream));
  h = mix64(mix64(h ^ key) ^ part);
  for (MessageId p : parents) h = mix64(h ^ p);
  return mix64(h ^ parents.size());
}

MessageId timer_output_id(std::string_view computation, std::string_view timer, uint32_t output_index) {
  uint64_t h = mix64(kTimerTag ^ hash_bytes(computation));
  h = mix64(h ^ hash_bytes(timer));
  return mix64(h ^ output_index);
}

void append_hex(std::string& out, uint64_t v, int digits) {
  static constexpr char kDigits[] = "0123456789abcdef";
  char buffer[16];
  assert(digits > 0 && digits <= 16);
  for (int i = digits - 1; i >= 0; --i, v >>= 4) buffer[i] = kDigits[v & 0xf];
  out.append(buffer, static_cast<size_t>(digits));
}

void append_id(std::string& out, uint64_t id) { append_hex(out, id, 16); }

std::string format_id(uint64_t id) {
  std::string out;
  append_id(out, id);
  return out;
}

std::string message_label(const Message& m) {
  constexpr size_t kPayloadShown = 24;
  std::string out;
  append_id(out, m.id);
  out += fmt::format(" (key {}, \"", m.key);
  for (const char c : std::string_view(m.payload).substr(0, kPayloadShown)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f && c != '"' && c != '\\') {
      out += c;
    } else {
      out += fmt::format("\\x{:02x}", byte);
    }
  }
  out += m.payload.size() > kPayloadShown ? "\"...)" : "\")";
  return out;
}

std::string format_ids(const std::vector<Message>& messages, size_t at_most) {
  std::string out;
  for (size_t i = 0; i < messages.size() && i < at_most; ++i) {
    if (i > 0) out.push_back(' ');
    append_id(out, messages[i].id);
  }
  if (messages.size() > at_most) out += fmt::format(" +{}", messages.size() - at_most);
  return out;
}

namespace {
// Timestamps are stored as differences (wrapping, so every pair of values round-trips): a
// message's times are close to one another, and a row's messages close to their neighbours'.
int64_t ts_delta(Micros ts, Micros base) { return static_cast<int64_t>(static_cast<uint64_t>(ts) - static_cast<uint64_t>(base)); }
Micros ts_from(int64_t delta, Micros base) { return static_cast<Micros>(static_cast<uint64_t>(base) + static_cast<uint64_t>(delta)); }
}  // namespace

void encode_message_fields(Encoder& out, const Message& m, Micros base_ts) {
  out.fixed64(m.id).u64(m.key).i64(ts_delta(m.system_ts, base_ts));
  out.i64(ts_delta(m.event_ts, m.system_ts)).i64(ts_delta(m.alignment_ts, m.system_ts));
  out.bytes(m.payload).u64(m.parents.size());
  for (MessageId p : m.parents) out.fixed64(p);
}

void decode_message_fields(Decoder& in, Message& m, Micros base_ts) {
  m.id = in.fixed64();
  m.key = in.u64();
  m.system_ts = ts_from(in.i64(), base_ts);
  m.event_ts = ts_from(in.i64(), m.system_ts);
  m.alignment_ts = ts_from(in.i64(), m.system_ts);
  m.payload = in.string();
  const uint64_t parents = in.u64();
  for (uint64_t i = 0; in.ok() && i < parents; ++i) m.parents.push_back(in.fixed64());
}

std::string encode_message(const Message& m) {
  Encoder out;
  out.bytes(m.stream);
  encode_message_fields(out, m);
  return out.take();
}

Result<Message> decode_message(std::string_view bytes) {
  Decoder in(bytes);
  Message m;
  m.stream = in.string();
  decode_message_fields(in, m);
  if (!in.done()) return Status::corruption("malformed message row");
  return m;
}

}  // namespace onceflow
