#include "core/dedup.h"

#include <algorithm>

#include "core/engine.h"
#include "core/env/codec.h"

namespace onceflow {
namespace {

using Entries = std::vector<std::pair<MessageId, Micros>>;  // compact: (id, system_ts)

Entries decode_compact(std::string_view bytes) {
  Entries out;
  Decoder in(bytes);
  const uint64_t n = in.u64();
  for (uint64_t i = 0; in.ok() && i < n; ++i) {
    const MessageId id = in.u64();
    out.emplace_back(id, in.i64());
  }
  return out;
}

std::string encode_compact(const Entries& entries) {
  Encoder out;
  out.u64(entries.size());
  for (const auto& [id, ts] : entries) out.u64(id).i64(ts);
  return out.take();
}

}  // namespace

DedupTable::DedupTable(DedupLayout layout, int partition)
    : layout_(layout), prefix_(tables::partition_prefix(partition)) {}

std::string DedupTable::row_key(uint64_t v) const { return prefix_ + tables::hex16(v); }

bool DedupTable::contains(TableRows& rows, const Message& m) const {
  if (layout_ == DedupLayout::kFull) return rows.read(row_key(m.id)).has_value();
  const auto row = rows.read(row_key(m.key));
  if (!row) return false;
  const Entries entries = decode_compact(*row);
  return std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.first == m.id; });
}

void DedupTable::record(TableRows& rows, const Message& m) const {
  if (layout_ == DedupLayout::kFull) {
    Encoder ts;
    ts.i64(m.system_ts);
    rows.put(row_key(m.id), ts.take());
    return;
  }
  const std::string key = row_key(m.key);
  const auto row = rows.read(key);
  Entries entries = row ? decode_compact(*row) : Entries{};
  entries.emplace_back(m.id, m.system_ts);
  rows.put(key, encode_compact(entries));
}

void DedupTable::cleanup(TableRows& rows, Micros watermark, size_t max_rows) const {
  for (const Row& row : rows.scan(prefix_, prefix_ + "~", max_rows)) {
    if (layout_ == DedupLayout::kFull) {
      Decoder in(row.value);
      if (in.i64() < watermark) rows.erase(row.key);
      continue;
    }
    Entries entries = decode_compact(row.value);
    const size_t before = entries.size();
    std::erase_if(entries, [&](const auto& e) { return e.second < watermark; });
    if (entries.empty()) {
      rows.erase(row.key);
    } else if (entries.size() != before) {
      rows.put(row.key, encode_compact(entries));
    }
  }
}

}  // namespace onceflow
