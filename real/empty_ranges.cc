#include "real/empty_ranges.h"

namespace onceflow::real {
namespace {
// A table's ranges beyond this are dropped (scans from ever new keys, say): it costs speed only.
constexpr size_t kMaxRangesPerTable = 4096;
}  // namespace

void EmptyRanges::put(const std::string& table, const std::string& key, Version version) {
  auto t = ranges_.find(table);
  if (t != ranges_.end()) {
    auto& ranges = t->second;
    auto it = ranges.upper_bound(key);
    if (it != ranges.begin() && key < (--it)->second.until) {
      if (it->first == key) {
        ranges.erase(it);
      } else {
        it->second.until = key;  // [from, key) is still empty
      }
    }
  }
  Version& latest = puts_[table][key];
  latest = std::max(latest, version);
}

const std::string& EmptyRanges::start(const std::string& table, const std::string& from, TxId tx) const {
  auto t = ranges_.find(table);
  if (t == ranges_.end()) return from;
  auto it = t->second.find(from);
  if (it == t->second.end() || tx < it->second.learned_by) return from;
  return it->second.until;
}

void EmptyRanges::learn(const std::string& table, const std::string& from, std::string first, TxId tx,
                        Version snapshot) {
  if (first <= from) return;
  // A put the snapshot may lack ends what it can vouch for.
  if (auto p = puts_.find(table); p != puts_.end()) {
    for (auto it = p->second.lower_bound(from); it != p->second.end() && it->first < first; ++it) {
      if (it->second > snapshot) {
        first = it->first;
        break;
      }
    }
  }
  if (first <= from) return;
  auto& ranges = ranges_[table];
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
  for (auto t = puts_.begin(); t != puts_.end();) {
    std::erase_if(t->second, [oldest](const auto& put) { return put.second <= oldest; });
    t = t->second.empty() ? puts_.erase(t) : std::next(t);
  }
}

size_t EmptyRanges::size() const {
  size_t n = 0;
  for (const auto& [table, ranges] : ranges_) n += ranges.size();
  return n;
}

}  // namespace onceflow::real
