// The dedup tables (full and compact) against a model, with RapidCheck's stateful testing:
// random sequences of "process a message" (record it unless it is a duplicate), "is this a
// duplicate?" and SystemWatermark cleanups, over two partitions of one table.
//
// The model is a set of (partition, id) -> system_ts. A message id always has the same key
// and system_ts, as a replayed message does; ids come from a small pool so that duplicates
// and shared keys are common.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <rapidcheck/state.h>

#include <map>
#include <optional>
#include <set>
#include <string>

#include "core/dedup.h"

namespace onceflow {
namespace {

constexpr uint64_t kIds = 48;
constexpr uint64_t kKeys = 5;
constexpr int kPartitions = 2;

Message message(uint64_t id) {
  Message m;
  m.id = id * 0x9e3779b97f4a7c15ULL;  // spread over the whole id space, like real ids
  m.key = id % kKeys;
  m.system_ts = static_cast<Micros>((id * 37) % 500);
  return m;
}

// A table in memory; rows are seen by the transaction that wrote them.
class MemoryRows final : public TableRows {
 public:
  std::optional<std::string> read(const std::string& key) override {
    auto it = rows_.find(key);
    return it == rows_.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  void put(const std::string& key, std::string value) override { rows_[key] = std::move(value); }
  void erase(const std::string& key) override { rows_.erase(key); }
  std::vector<Row> scan(const std::string& from, const std::string& to, size_t limit) override {
    std::vector<Row> out;
    for (auto it = rows_.lower_bound(from); it != rows_.end() && it->first < to && out.size() < limit; ++it) {
      out.push_back({it->first, it->second});
    }
    return out;
  }
  size_t size() const { return rows_.size(); }

 private:
  std::map<std::string, std::string> rows_;
};

struct Model {
  std::map<std::pair<int, uint64_t>, Micros> processed;  // (partition, pool id) -> system_ts
};

struct Sut {
  explicit Sut(DedupLayout layout) : layout(layout) {}
  DedupLayout layout;
  MemoryRows rows;
  DedupTable table(int partition) const { return DedupTable(layout, partition); }
};

using Command = rc::state::Command<Model, Sut>;

struct Process : Command {
  int partition = *rc::gen::inRange(0, kPartitions);
  uint64_t id = *rc::gen::inRange<uint64_t>(0, kIds);
  void apply(Model& m) const override { m.processed.try_emplace({partition, id}, message(id).system_ts); }
  void run(const Model& m, Sut& sut) const override {
    // As the engine does it: one read that both checks and records.
    const DedupTable t = sut.table(partition);
    const bool fresh = t.record_if_new(sut.rows, message(id));
    RC_ASSERT(fresh == (m.processed.count({partition, id}) == 0));
    RC_ASSERT(t.contains(sut.rows, message(id)));
  }
  void show(std::ostream& os) const override { os << "Process(p" << partition << ", #" << id << ")"; }
};

struct Query : Command {
  int partition = *rc::gen::inRange(0, kPartitions);
  uint64_t id = *rc::gen::inRange<uint64_t>(0, kIds);
  void apply(Model&) const override {}
  void run(const Model& m, Sut& sut) const override {
    RC_ASSERT(sut.table(partition).contains(sut.rows, message(id)) == (m.processed.count({partition, id}) > 0));
  }
  void show(std::ostream& os) const override { os << "Query(p" << partition << ", #" << id << ")"; }
};

// A cleanup that sees every row of its partition forgets exactly the entries older than the
// watermark, in that partition only.
struct Cleanup : Command {
  int partition = *rc::gen::inRange(0, kPartitions);
  Micros watermark = *rc::gen::inRange<Micros>(0, 520);
  void apply(Model& m) const override {
    std::erase_if(m.processed, [&](const auto& e) { return e.first.first == partition && e.second < watermark; });
  }
  void run(const Model&, Sut& sut) const override { sut.table(partition).cleanup(sut.rows, watermark, SIZE_MAX); }
  void show(std::ostream& os) const override { os << "Cleanup(p" << partition << ", below " << watermark << ")"; }
};

// Every partition's answers equal the model's, and no row is left without an entry.
struct CheckAll : Command {
  void apply(Model&) const override {}
  void run(const Model& m, Sut& sut) const override {
    for (int p = 0; p < kPartitions; ++p) {
      for (uint64_t id = 0; id < kIds; ++id) {
        RC_ASSERT(sut.table(p).contains(sut.rows, message(id)) == (m.processed.count({p, id}) > 0));
      }
    }
    if (sut.layout == DedupLayout::kFull) RC_ASSERT(sut.rows.size() == m.processed.size());
    if (m.processed.empty()) RC_ASSERT(sut.rows.size() == 0u);
  }
  void show(std::ostream& os) const override { os << "CheckAll"; }
};

void check_layout(DedupLayout layout) {
  Model model;
  Sut sut(layout);
  rc::state::check(model, sut, rc::state::gen::execOneOfWithArgs<Process, Process, Query, Cleanup, CheckAll>());
}

RC_GTEST_PROP(DedupModelTest, FullTableMatchesTheModel, ()) { check_layout(DedupLayout::kFull); }
RC_GTEST_PROP(DedupModelTest, CompactTableMatchesTheModel, ()) { check_layout(DedupLayout::kCompact); }

// A cleanup that may look at only some rows (one epoch's budget) never forgets an entry at
// or above the watermark, never forgets one it did not scan, and forgets the old entries of
// every row it scanned.
RC_GTEST_PROP(DedupModelTest, BoundedCleanupNeverForgetsWhatAReplayMayResend, ()) {
  const DedupLayout layout = *rc::gen::element(DedupLayout::kFull, DedupLayout::kCompact);
  const auto ids = *rc::gen::container<std::set<uint64_t>>(rc::gen::inRange<uint64_t>(0, kIds));
  const Micros watermark = *rc::gen::inRange<Micros>(0, 520);
  const size_t budget = *rc::gen::inRange<size_t>(0, kIds + 1);
  MemoryRows rows;
  const DedupTable table(layout, 0);
  for (const uint64_t id : ids) table.record_if_new(rows, message(id));
  const size_t rows_before = rows.size();
  table.cleanup(rows, watermark, budget);
  size_t forgotten_old = 0, old = 0;
  for (const uint64_t id : ids) {
    const bool kept = table.contains(rows, message(id));
    if (message(id).system_ts >= watermark) {
      RC_ASSERT(kept);
    } else {
      ++old;
      forgotten_old += kept ? 0 : 1;
    }
  }
  if (budget >= rows_before) RC_ASSERT(forgotten_old == old);
  RC_ASSERT(rows.size() <= rows_before);
}

// Bounded cleanups, each going on from where the last one stopped, over a partition whose first
// keys stay busy (a new entry above the watermark arrives there between two cleanups, fewer
// than a cleanup looks at, as the engine's budget makes sure): within a bounded number of
// rounds every entry below the watermark is forgotten, and never one at or above it. (A cleanup that always started at the partition's first row never reached the
// rows behind busy ones, and those grew without bound.)
RC_GTEST_PROP(DedupModelTest, CleanupsFromACursorForgetEveryOldEntryInTurn, ()) {
  const DedupLayout layout = *rc::gen::element(DedupLayout::kFull, DedupLayout::kCompact);
  const auto ids = *rc::gen::container<std::set<uint64_t>>(rc::gen::inRange<uint64_t>(0, kIds));
  const Micros watermark = *rc::gen::inRange<Micros>(0, 520);
  const size_t budget = *rc::gen::inRange<size_t>(2, 8);
  MemoryRows rows;
  const DedupTable table(layout, 0);
  for (const uint64_t id : ids) table.record_if_new(rows, message(id));
  std::string cursor;
  uint64_t next_busy = 1'000;
  const size_t rounds = ids.size() + 3;  // each round gets past at least one old row
  for (size_t round = 0; round < rounds; ++round) {
    // A busy key: a new message at the partition's first key, above the watermark.
    Message busy = message(0);
    busy.id = ++next_busy;
    busy.system_ts = watermark + 1'000;
    table.record_if_new(rows, busy);
    cursor = table.cleanup(rows, watermark, budget, cursor);
    for (const uint64_t id : ids) {
      if (message(id).system_ts >= watermark) RC_ASSERT(table.contains(rows, message(id)));
    }
  }
  for (const uint64_t id : ids) RC_ASSERT(table.contains(rows, message(id)) == (message(id).system_ts >= watermark));
}

// An epoch's batch (each row read once, written at flush) answers every message as recording
// them one by one does, duplicates within the batch included, and leaves the same rows.
RC_GTEST_PROP(DedupModelTest, ABatchAnswersAndWritesAsOneByOne, ()) {
  const DedupLayout layout = *rc::gen::element(DedupLayout::kFull, DedupLayout::kCompact);
  const auto before = *rc::gen::container<std::vector<uint64_t>>(rc::gen::inRange<uint64_t>(0, kIds));
  const auto epoch = *rc::gen::container<std::vector<uint64_t>>(rc::gen::inRange<uint64_t>(0, kIds));
  MemoryRows one_by_one, batched;
  const DedupTable table(layout, 0);
  for (const uint64_t id : before) {
    table.record_if_new(one_by_one, message(id));
    table.record_if_new(batched, message(id));
  }
  DedupTable::Batch batch(table, batched);
  size_t fresh = 0;
  for (const uint64_t id : epoch) {
    const bool expected = table.record_if_new(one_by_one, message(id));
    RC_ASSERT(batch.record_if_new(message(id)) == expected);
    fresh += expected ? 1 : 0;
  }
  RC_ASSERT(batch.flush() == fresh);
  const std::vector<Row> a = one_by_one.scan("", "~~", SIZE_MAX), b = batched.scan("", "~~", SIZE_MAX);
  RC_ASSERT(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) RC_ASSERT(a[i].key == b[i].key && a[i].value == b[i].value);
}

// A batch's flush that forgets below a watermark leaves the rows it writes as a cleanup of
// them with that watermark would, and every other row as it was.
RC_GTEST_PROP(DedupModelTest, AFlushThatForgetsLeavesWhatACleanupWould, ()) {
  const auto before = *rc::gen::container<std::vector<uint64_t>>(rc::gen::inRange<uint64_t>(0, kIds));
  const auto epoch = *rc::gen::container<std::vector<uint64_t>>(rc::gen::inRange<uint64_t>(0, kIds));
  const Micros watermark = *rc::gen::inRange<Micros>(0, 520);
  MemoryRows reference, batched;
  const DedupTable table(DedupLayout::kCompact, 0);
  for (const uint64_t id : before) {
    table.record_if_new(reference, message(id));
    table.record_if_new(batched, message(id));
  }
  std::set<std::string> written;
  for (const uint64_t id : epoch) {
    if (table.record_if_new(reference, message(id))) written.insert(table.row_key_of(message(id)));
  }
  // The reference: the rows the epoch wrote, each cleaned up alone with the watermark.
  for (const std::string& key : written) table.cleanup(reference, watermark, 1, key);
  DedupTable::Batch batch(table, batched);
  for (const uint64_t id : epoch) batch.record_if_new(message(id));
  batch.flush(watermark);
  const std::vector<Row> a = reference.scan("", "~~", SIZE_MAX), b = batched.scan("", "~~", SIZE_MAX);
  RC_ASSERT(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) RC_ASSERT(a[i].key == b[i].key && a[i].value == b[i].value);
}

}  // namespace
}  // namespace onceflow
