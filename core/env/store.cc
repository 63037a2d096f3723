#include "core/env/store.h"

#include <algorithm>
#include <cassert>

namespace onceflow {

std::string_view lease_state_name(LeaseState state) {
  switch (state) {
    case LeaseState::kActive: return "active";
    case LeaseState::kAborted: return "aborted";
    case LeaseState::kExpired: return "expired";
    case LeaseState::kUnknown: return "unknown";
  }
  return "?";
}

void Transaction::put(const std::string& table, const std::string& key, std::string value) {
  writes_[{table, key}] = std::move(value);
}

void Transaction::erase(const std::string& table, const std::string& key) {
  writes_[{table, key}] = std::nullopt;
}

const std::optional<std::string>* Transaction::buffered(const std::string& table,
                                                        const std::string& key) const {
  auto it = writes_.find({table, key});
  return it == writes_.end() ? nullptr : &it->second;
}

Result<std::optional<std::string>> Store::get(const Transaction& tx, const std::string& table,
                                              const std::string& key) {
  if (const auto* own = tx.buffered(table, key)) return *own;
  return read(tx, table, key);
}

Result<std::vector<std::optional<std::string>>> Store::get_many(const Transaction& tx, const std::string& table,
                                                                const std::vector<std::string>& keys) {
  std::vector<std::string> unbuffered;
  for (const std::string& key : keys) {
    if (tx.buffered(table, key) == nullptr) unbuffered.push_back(key);
  }
  std::vector<std::optional<std::string>> committed;
  if (!unbuffered.empty()) {
    auto read = read_many(tx, table, unbuffered);
    if (!read) return read.error();
    committed = std::move(*read);
  }
  std::vector<std::optional<std::string>> out;
  out.reserve(keys.size());
  size_t next = 0;
  for (const std::string& key : keys) {
    const auto* own = tx.buffered(table, key);
    out.push_back(own != nullptr ? *own : std::move(committed[next++]));
  }
  return out;
}

Result<std::vector<std::optional<std::string>>> Store::read_many(const Transaction& tx, const std::string& table,
                                                                 const std::vector<std::string>& keys) {
  std::vector<std::optional<std::string>> out;
  out.reserve(keys.size());
  for (const std::string& key : keys) {
    auto value = read(tx, table, key);
    if (!value) return value.error();
    out.push_back(std::move(*value));
  }
  return out;
}

Result<std::vector<Row>> Store::scan(const Transaction& tx, const std::string& table,
                                     const std::string& from, const std::string& to,
                                     size_t limit) {
  assert(limit > 0);
  const auto in_range = [&](const std::string& key) { return key >= from && (to.empty() || key < to); };
  auto lo = tx.writes().lower_bound({table, from});
  auto hi = lo;
  size_t buffered_erases = 0;
  for (; hi != tx.writes().end() && hi->first.first == table && in_range(hi->first.second); ++hi) {
    if (!hi->second.has_value()) ++buffered_erases;
  }
  // Fetch enough committed rows that our own erases cannot leave the page short.
  const size_t fetch = limit + buffered_erases;
  auto committed = read_range(tx, table, from, to, fetch);
  if (!committed) return committed.error();
  // If the page is full, rows past its last key are unknown: buffered rows beyond it must wait.
  const bool page_full = committed->size() == fetch;
  const std::string* cutoff = page_full ? &committed->back().key : nullptr;

  std::vector<Row> merged;
  merged.reserve(committed->size());
  auto row = committed->begin();
  auto own = lo;
  while (merged.size() < limit) {
    const bool rows_left = row != committed->end();
    const bool own_left = own != hi && (cutoff == nullptr || own->first.second <= *cutoff);
    if (!rows_left && !own_left) break;
    if (own_left && (!rows_left || own->first.second <= row->key)) {
      if (rows_left && own->first.second == row->key) ++row;  // our write shadows it
      if (own->second.has_value()) merged.push_back({own->first.second, *own->second});
      ++own;
    } else {
      merged.push_back(std::move(*row));
      ++row;
    }
  }
  return merged;
}

}  // namespace onceflow
