#include "core/stream_rows.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/engine.h"
#include "core/env/codec.h"

namespace onceflow {

namespace stream_rows {

std::string row_key(int partition, Micros least_alignment_ts, std::string_view producer, uint64_t epoch) {
  std::string key = tables::partition_prefix(partition);
  key.reserve(key.size() + 34 + producer.size());
  append_id(key, static_cast<uint64_t>(least_alignment_ts) ^ (1ULL << 63));
  key += '/';
  key += producer;
  key += '/';
  append_id(key, epoch);
  return key;
}

Micros least_ts(std::string_view key) {
  if (key.size() < 21) return INT64_MIN;
  return static_cast<Micros>(tables::parse_hex16(key.substr(5, 16)) ^ (1ULL << 63));
}

std::string encode(const std::vector<Message>& messages) {
  Encoder out;
  out.u64(messages.size()).bytes(messages.empty() ? std::string_view() : std::string_view(messages.front().stream));
  Micros base = 0;  // each message's system time is stored relative to the one before it
  for (const Message& m : messages) {
    encode_message_fields(out, m, base);
    base = m.system_ts;
  }
  return out.take();
}

Result<std::vector<Message>> decode(std::string_view value) {
  Decoder in(value);
  const uint64_t count = in.u64();
  const std::string stream = in.string();
  std::vector<Message> messages;
  // Each message takes several bytes: a count beyond the row's size is damage, not a size.
  if (!in.ok() || count > value.size()) return Status::corruption("malformed stream row");
  messages.reserve(count);
  Micros base = 0;
  for (uint64_t i = 0; in.ok() && i < count; ++i) {
    Message& m = messages.emplace_back();
    m.stream = stream;
    decode_message_fields(in, m, base);
    base = m.system_ts;
  }
  if (!in.done()) return Status::corruption("malformed stream row");
  return messages;
}

Result<std::vector<Message>> decode_row(std::string_view table, std::string_view key, std::string_view value) {
  auto messages = decode(value);
  if (!messages) return Status::corruption(fmt::format("{}: row {}: {}", table, key, messages.error().message()));
  return messages;
}

}  // namespace stream_rows

void StreamWrites::add(const std::string& table, int partition, Message m) {
  rows_[{table, partition}].push_back(std::move(m));
}

std::vector<StreamWrites::Written> StreamWrites::write(Transaction& tx, std::string_view producer, uint64_t epoch) {
  std::vector<Written> written;
  written.reserve(rows_.size());
  for (auto& [where, messages] : rows_) {
    Micros least = messages.front().alignment_ts;
    Micros newest = least;
    for (const Message& m : messages) {
      least = std::min(least, m.alignment_ts);
      newest = std::max(newest, m.alignment_ts);
    }
    tx.put(where.first, stream_rows::row_key(where.second, least, producer, epoch), stream_rows::encode(messages));
    written.push_back({where, newest, messages.size()});
  }
  rows_.clear();
  return written;
}

uint32_t InputTakes::read(std::string row, std::string value) {
  const auto n = static_cast<uint32_t>(read_.size());
  by_row_.emplace(row, n);
  read_.push_back({std::move(row), std::move(value), {}});
  return n;
}

void InputTakes::take(const InputRef& ref) {
  if (auto it = by_row_.find(ref.row); it != by_row_.end()) {
    take(it->second, ref.id);
  } else {
    unread_[ref.row].push_back(ref.id);
  }
}

namespace {

// Erases the row, or rewrites it without the messages `taken` names (ids of its messages).
// `decoded`: the row was decoded whole when it was read, so its message count is known good,
// and a row whose every message was taken goes without being decoded again.
bool settle_row(Transaction& tx, const std::string& row, std::string_view value, std::vector<MessageId>& taken,
                bool decoded, Status* failed) {
  const auto sep = row.find('\x1f');
  std::string table = row.substr(0, sep);
  std::string key = row.substr(sep + 1);
  std::sort(taken.begin(), taken.end());
  taken.erase(std::unique(taken.begin(), taken.end()), taken.end());
  if (decoded) {
    Decoder in(value);
    if (const uint64_t count = in.u64(); in.ok() && count == taken.size()) {
      tx.erase(std::move(table), std::move(key));
      return true;
    }
  }
  auto messages = stream_rows::decode_row(table, key, value);
  if (!messages) {
    *failed = messages.error();
    return false;
  }
  std::erase_if(*messages, [&taken](const Message& m) { return std::binary_search(taken.begin(), taken.end(), m.id); });
  if (messages->empty()) {
    tx.erase(std::move(table), std::move(key));
  } else {
    tx.put(std::move(table), std::move(key), stream_rows::encode(*messages));
  }
  return true;
}

}  // namespace

bool InputTakes::settle(Transaction& tx,
                        const std::function<std::optional<std::string>(const std::string&, const std::string&)>& lookup,
                        Status* failed) {
  for (Read& r : read_) {
    if (!r.taken.empty() && !settle_row(tx, r.row, r.value, r.taken, /*decoded=*/true, failed)) return false;
  }
  for (auto& [row, taken] : unread_) {
    const auto sep = row.find('\x1f');
    const std::optional<std::string> value = lookup(row.substr(0, sep), row.substr(sep + 1));
    if (!failed->is_ok()) return false;
    if (value && !settle_row(tx, row, *value, taken, /*decoded=*/false, failed)) return false;  // else gone already
  }
  read_.clear();
  by_row_.clear();
  unread_.clear();
  return true;
}

void UntakenRows::taken_below(Micros taken_below) {
  std::erase_if(rows_, [&](const std::pair<Micros, uint64_t>& row) {
    if (row.first >= taken_below) return false;
    messages_ -= row.second;
    return true;
  });
}

uint64_t UntakenRows::older_than(Micros below) const {
  uint64_t n = 0;
  for (const auto& [newest, messages] : rows_) n += newest < below ? messages : 0;
  return n;
}

}  // namespace onceflow
