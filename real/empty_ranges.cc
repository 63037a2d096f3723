#include "real/empty_ranges.h"

namespace onceflow::real {
namespace {
// A table's ranges beyond this are dropped (scans from ever new keys, say): it costs speed only.
constexpr size_t kMaxRangesPerTable = 4096;

bool has(EmptyRanges::Ends ends, EmptyRanges::Ends side) {
  return (static_cast<uint8_t>(ends) & static_cast<uint8_t>(side)) != 0;
}
}  // namespace

EmptyRanges::Table& EmptyRanges::table(const std::string& name) {
  if (last_name_ == nullptr || *last_name_ != name) {
    auto t = tables_.find(name);
    if (t == tables_.end()) t = tables_.emplace(name, Table{}).first;
    last_name_ = &t->first;
    last_table_ = &t->second;
  }
  return *last_table_;
}

void EmptyRanges::put(const std::string& table_name, const std::string& key, Version version) {
  Table& t = table(table_name);
  auto& ranges = t.ranges;
  auto it = ranges.upper_bound(key);
  if (it != ranges.begin() && key < (--it)->second.until) {
    // [from, key) and (key, until) are still empty: a head keeps the first, a tail the second.
    std::string after;  // made only for a tail: most puts land in no range, or in a head
    if (it->second.tail) after = key + '\0';
    const bool keep_after = it->second.tail && after < it->second.until;
    const bool keep_before = it->second.head && it->first < key;
    if (keep_after && keep_before) {
      Range tail{it->second.until, it->second.learned_by, /*head=*/false, /*tail=*/true};
      it->second.until = key;
      it->second.tail = false;
      ranges.emplace_hint(std::next(it), std::move(after), std::move(tail));
    } else if (keep_after) {
      auto node = ranges.extract(it);  // the same node, moved past the key
      node.key() = std::move(after);
      node.mapped().head = false;
      ranges.insert(std::move(node));
    } else if (keep_before) {
      it->second.until = key;
      it->second.tail = false;
    } else {
      ranges.erase(it);
    }
  }
  t.puts.emplace_back(version, key);  // commits are validated in version order
}

const std::string& EmptyRanges::start(const std::string& table, const std::string& from, TxId tx) const {
  auto t = tables_.find(table);
  if (t == tables_.end()) return from;
  auto it = t->second.ranges.find(from);
  if (it == t->second.ranges.end() || tx < it->second.learned_by) return from;
  return it->second.until;
}

const std::string* EmptyRanges::tail(const std::string& table, const std::string& to, TxId tx) const {
  if (to.empty()) return nullptr;
  auto t = tables_.find(table);
  if (t == tables_.end()) return nullptr;
  const auto& ranges = t->second.ranges;
  auto it = ranges.lower_bound(to);  // the first range from `to` on; the one before may reach it
  if (it == ranges.begin()) return nullptr;
  --it;
  if (it->second.until < to || tx < it->second.learned_by) return nullptr;
  return &it->first;
}

void EmptyRanges::learn(const std::string& table_name, const std::string& from, std::string first, TxId tx,
                        Version snapshot, Ends ends) {
  if (first <= from) return;
  Table& t = table(table_name);
  // A put the snapshot may lack ends what it can vouch for.
  const auto& puts = t.puts;
  bool tail = has(ends, Ends::kTail);
  for (auto p = puts.rbegin(); p != puts.rend() && p->first > snapshot; ++p) {
    if (p->second >= from && p->second < first) {
      first = p->second;
      tail = false;
    }
  }
  const bool head = has(ends, Ends::kHead);
  if (first <= from || (!head && !tail)) return;  // a tail cut short serves no scan
  auto& ranges = t.ranges;
  if (ranges.size() >= kMaxRangesPerTable) ranges.clear();
  // Ranges it overlaps give way: the one before is cut at `from`, those inside go.
  auto it = ranges.lower_bound(from);
  if (it != ranges.begin()) {
    auto before = std::prev(it);
    if (before->second.until > from) {
      before->second.until = from;
      before->second.tail = false;
    }
  }
  while (it != ranges.end() && it->first < first) it = ranges.erase(it);
  ranges.emplace(from, Range{std::move(first), tx, head, tail});
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
