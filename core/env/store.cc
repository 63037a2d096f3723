#include "core/env/store.h"

#include <algorithm>
#include <cassert>
#include <iterator>
#include <tuple>

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

namespace {
void set(Transaction::WriteSet& writes, std::string table, std::string key, std::optional<std::string> value) {
  const Transaction::TableKey where{table, key};
  const auto insert = [&](Transaction::WriteSet::const_iterator hint) {  // `where` is not read after
    writes.emplace_hint(hint, std::piecewise_construct, std::forward_as_tuple(std::move(table), std::move(key)),
                        std::forward_as_tuple(std::move(value)));
  };
  // Rows are mostly written in key order (a batch of appends, an epoch's partitions): one
  // comparison with the last row places them.
  if (writes.empty() || writes.key_comp()(std::prev(writes.end())->first, where)) return insert(writes.end());
  auto it = writes.lower_bound(where);
  if (it != writes.end() && !writes.key_comp()(where, it->first)) {
    it->second = std::move(value);
  } else {
    insert(it);
  }
}
}  // namespace

void Transaction::put(std::string table, std::string key, std::string value) {
  set(writes_, std::move(table), std::move(key), std::move(value));
}

void Transaction::erase(std::string table, std::string key) {
  set(writes_, std::move(table), std::move(key), std::nullopt);
}

const std::optional<std::string>* Transaction::buffered(const std::string& table,
                                                        const std::string& key) const {
  auto it = writes_.find(TableKey{table, key});
  return it == writes_.end() ? nullptr : &it->second;
}

namespace {
bool in_range(const std::string& key, const std::string& from, const std::string& to) {
  return key >= from && (to.empty() || key < to);
}
}  // namespace

size_t Transaction::buffered_erases(const std::string& table, const std::string& from, const std::string& to) const {
  size_t erases = 0;
  for (auto it = writes_.lower_bound(TableKey{table, from}); it != writes_.end() && it->first.first == table &&
                                                      in_range(it->first.second, from, to);
       ++it) {
    if (!it->second.has_value()) ++erases;
  }
  return erases;
}

std::vector<Row> Transaction::overlay(const std::string& table, const std::string& from, const std::string& to,
                                      size_t limit, std::vector<Row> committed, bool committed_complete) const {
  if (!committed_complete && committed.empty()) return {};  // nothing is known
  const std::string* cutoff = committed_complete ? nullptr : &committed.back().key;
  std::vector<Row> merged;
  merged.reserve(std::min(limit, committed.size()));
  auto row = committed.begin();
  auto own = writes_.lower_bound(TableKey{table, from});
  const auto own_left = [&] {
    return own != writes_.end() && own->first.first == table && in_range(own->first.second, from, to) &&
           (cutoff == nullptr || own->first.second <= *cutoff);
  };
  while (merged.size() < limit) {
    const bool rows_left = row != committed.end();
    const bool mine = own_left();
    if (!rows_left && !mine) break;
    if (mine && (!rows_left || own->first.second <= row->key)) {
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
  // Fetch enough committed rows that our own erases cannot leave the page short.
  const size_t fetch = limit + tx.buffered_erases(table, from, to);
  auto committed = read_range(tx, table, from, to, fetch);
  if (!committed) return committed.error();
  const bool complete = committed->size() < fetch;
  return tx.overlay(table, from, to, limit, std::move(*committed), complete);
}

}  // namespace onceflow
