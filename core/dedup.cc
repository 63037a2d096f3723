#include "core/dedup.h"

#include <boost/endian/conversion.hpp>

#include <algorithm>
#include <cassert>
#include <utility>

#include "core/engine.h"
#include "core/env/codec.h"

namespace onceflow {
namespace {

// A compact row is its entries back to back, each the message id and its system time as
// 8 little-endian bytes apiece: an entry is appended without decoding the row, and a lookup
// steps through it 16 bytes at a time.
constexpr size_t kEntryBytes = 16;

uint64_t load64(const char* p) { return boost::endian::load_little_u64(reinterpret_cast<const unsigned char*>(p)); }

void append_entry(std::string& row, MessageId id, Micros ts) {
  unsigned char entry[kEntryBytes];
  boost::endian::store_little_u64(entry, id);
  boost::endian::store_little_u64(entry + 8, static_cast<uint64_t>(ts));
  row.append(reinterpret_cast<const char*>(entry), kEntryBytes);
}

bool holds(std::string_view row, MessageId id) {
  for (size_t at = 0; at + kEntryBytes <= row.size(); at += kEntryBytes) {
    if (load64(row.data() + at) == id) return true;
  }
  return false;
}

// The row without its entries older than `watermark`.
std::string drop_older(std::string_view row, Micros watermark) {
  std::string kept;
  for (size_t at = 0; at + kEntryBytes <= row.size(); at += kEntryBytes) {
    if (static_cast<Micros>(load64(row.data() + at + 8)) >= watermark) kept.append(row.substr(at, kEntryBytes));
  }
  return kept;
}

}  // namespace

DedupTable::DedupTable(DedupLayout layout, int partition)
    : layout_(layout), prefix_(tables::partition_prefix(partition)) {}

std::string DedupTable::row_key(uint64_t v) const {
  std::string key;
  key.reserve(prefix_.size() + 16);
  key += prefix_;
  append_id(key, v);
  return key;
}

bool DedupTable::contains(TableRows& rows, const Message& m) const {
  if (layout_ == DedupLayout::kFull) return rows.read(row_key(m.id)).has_value();
  const auto row = rows.read(row_key(m.key));
  return row.has_value() && holds(*row, m.id);
}

bool DedupTable::record_if_new(TableRows& rows, const Message& m) const {
  if (layout_ == DedupLayout::kFull) {
    const std::string key = row_key(m.id);
    if (rows.read(key).has_value()) return false;
    Encoder ts;
    ts.i64(m.system_ts);
    rows.put(key, ts.take());
    return true;
  }
  const std::string key = row_key(m.key);
  std::string row = rows.read(key).value_or("");
  if (holds(row, m.id)) return false;
  append_entry(row, m.id, m.system_ts);
  rows.put(key, std::move(row));
  return true;
}

bool DedupTable::Batch::record_if_new(const Message& m) {
  if (table_.layout_ == DedupLayout::kFull) {
    const bool fresh = table_.record_if_new(rows_, m);
    recorded_ += fresh ? 1 : 0;
    return fresh;
  }
  auto it = compact_.find(m.key);
  if (it == compact_.end()) {
    CompactRow row;
    row.value = rows_.read(table_.row_key(m.key)).value_or("");
    row.stored.reserve(row.value.size() / kEntryBytes);
    for (size_t at = 0; at + kEntryBytes <= row.value.size(); at += kEntryBytes) row.stored.push_back(load64(row.value.data() + at));
    std::sort(row.stored.begin(), row.stored.end());
    it = compact_.emplace(m.key, std::move(row)).first;
  }
  CompactRow& row = it->second;
  if (std::binary_search(row.stored.begin(), row.stored.end(), m.id) || !row.added.insert(m.id).second) return false;
  append_entry(row.value, m.id, m.system_ts);
  row.changed = true;
  ++recorded_;
  return true;
}

size_t DedupTable::Batch::flush(Micros forget_below) {
  for (auto& [message_key, row] : compact_) {
    if (!row.changed) continue;
    std::string kept = forget_below == INT64_MIN ? std::move(row.value) : drop_older(row.value, forget_below);
    if (kept.empty()) {
      rows_.erase(table_.row_key(message_key));
    } else {
      rows_.put(table_.row_key(message_key), std::move(kept));
    }
  }
  compact_.clear();
  return std::exchange(recorded_, 0);
}

std::string DedupTable::cleanup(TableRows& rows, Micros watermark, size_t max_rows, const std::string& cursor,
                                size_t* forgotten) const {
  size_t dropped = 0;
  assert(cursor.empty() || cursor.starts_with(prefix_));
  const std::vector<Row> page = rows.scan(cursor.empty() ? prefix_ : cursor, prefix_ + "~", max_rows);
  for (const Row& row : page) {
    if (layout_ == DedupLayout::kFull) {
      Decoder in(row.value);
      if (in.i64() < watermark) {
        rows.erase(row.key);
        ++dropped;
      }
      continue;
    }
    std::string kept = drop_older(row.value, watermark);
    dropped += (row.value.size() - kept.size()) / kEntryBytes;
    if (kept.empty()) {
      rows.erase(row.key);
    } else if (kept.size() != row.value.size()) {
      rows.put(row.key, std::move(kept));
    }
  }
  if (forgotten != nullptr) *forgotten = dropped;
  if (page.size() < max_rows || page.empty()) return "";  // the end: start over next time
  return page.back().key + '\0';                          // the least key after the last one
}

}  // namespace onceflow
