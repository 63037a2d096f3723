#include "real/empty_ranges.h"

namespace onceflow::real {
namespace {
// A table's ranges beyond this are dropped (scans from ever new keys, say): it costs speed only.
constexpr size_t kMaxRangesPerTable = 4096;
}  // namespace

void EmptyRanges::put(const std::string& table, const std::string& key, Version version) {
  auto t = tables_.find(table);
  if (t == tables_.end()) t = tables_.emplace(table, Table{}).first;
  auto& ranges = t->second.ranges;
  auto it = ranges.upper_bound(key);
  if (it != ranges.begin() && key < (--it)->second.until) {
    if (it->first == key) {
      ranges.erase(it);
    } else {
      it->second.until = key;  // [from, key) is still empty
    }
  }
  t->second.puts.emplace_back(version, key);  // commits are validated in version order
}

const std::string& EmptyRanges::start(const std::string& table, const std::string& from, TxId tx) const {
  auto t = tables_.find(table);
  if (t == tables_.end()) return from;
  auto it = t->second.ranges.find(from);
  if (it == t->second.ranges.end() || tx < it->second.learned_by) return from;
  return it->second.until;
}

void EmptyRanges::learn(const std::string& table, const std::string& from, std::string first, TxId tx,
                        Version snapshot) {
  if (first <= from) return;
  auto t = tables_.find(table);
  if (t == tables_.end()) t = tables_.emplace(table, Table{}).first;
  // A put the snapshot may lack ends what it can vouch for.
  const auto& puts = t->second.puts;
  for (auto p = puts.rbegin(); p != puts.rend() && p->first > snapshot; ++p) {
    if (p->second >= from && p->second < first) first = p->second;
  }
  if (first <= from) return;
  auto& ranges = t->second.ranges;
  if (ranges.size() >= kMaxRangesPerTable) ranges.clear();
  // Ranges it overlaps give way: the one before is cut at `from`, those inside go.
  auto it = ranges.lower_bound(from);
  if (it != ranges.begin()) {
    auto before = std::prev(it);
    if (before->second.until > from) before->second.until = from;
  }
  while (it != ranges.end() && it->first < first) it = ranges.erase(it);
  ranges.emplace(from, Range{std::move(first), tx});
}

void EmptyRanges::forget_puts(Version oldest) {
  for (auto& [name, table] : tables_) {
    while (!table.puts.empty() && table.puts.front().first <= oldest) table.puts.pop_front();
  }
}

size_t EmptyRanges::size() const {
  size_t n = 0;
  for (const auto& [name, table] : tables_) n += table.ranges.size();
  return n;
}

}  // namespace onceflow::real
