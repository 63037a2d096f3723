// The LevelDB store beyond the contract every store keeps (tests/store_contract_test.cc):
// durability across reopening, the generation that fences every Lease of an earlier life,
// group commit (fibers of a loop sharing synced writes, no update lost); refusing a reset store, a corruption and a full disk;
// table files written paced (real/leveldb_env.h). A RapidCheck property runs random
// transactions and reopenings against a model.
#include "real/leveldb_store.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <leveldb/env.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <string>

#include "real/leveldb_env.h"
#include "real/loop.h"
#include "real/wall_clock.h"
#include "tests/manual_clock.h"
#include "tests/temp_dir.h"

namespace onceflow::real {
namespace {

using testing::ManualClock;
using testing::TempDir;

std::unique_ptr<LevelDbStore> open_store(const TempDir& dir, const Clock& clock, LevelDbStore::Options options = {}) {
  auto store = LevelDbStore::open(dir.str(), clock, options);
  EXPECT_TRUE(store.has_value()) << store.status().message();
  return std::move(*store);
}

std::optional<std::string> get(LevelDbStore& store, const Transaction& tx, const std::string& key) {
  auto v = store.get(tx, "t", key);
  EXPECT_TRUE(v.has_value());
  return v.has_value() ? *v : std::nullopt;
}

Result<Version> put_and_commit(LevelDbStore& store, const std::string& key, const std::string& value,
                               const std::vector<LeaseId>& prerequisites = {}) {
  auto tx = store.begin();
  if (!tx) return tx.error();  // a store that failed refuses new transactions too
  tx->put("t", key, value);
  return store.commit(*tx, prerequisites);
}

TEST(LevelDbStoreTest, CommitsSurviveReopeningAndLeasesOfTheLastLifeAreFenced) {
  TempDir dir;
  ManualClock clock;
  LeaseId old_lease = 0;
  Version version = 0;
  uint64_t generation = 0;
  {
    auto store = open_store(dir, clock);
    generation = store->generation();
    old_lease = *store->start_lease(60 * kSeconds);
    version = *put_and_commit(*store, "a", "durable", {old_lease});
    auto unfinished = store->begin();
    unfinished->put("t", "b", "never committed");
  }
  auto store = open_store(dir, clock);
  EXPECT_EQ(store->generation(), generation + 1);
  EXPECT_EQ(store->last_version(), version);
  auto tx = store->begin();
  EXPECT_EQ(get(*store, *tx, "a"), "durable");
  EXPECT_EQ(get(*store, *tx, "b"), std::nullopt);
  // Within its TTL by the clock, but from the last life: over.
  EXPECT_EQ(*store->lease_state(old_lease), LeaseState::kExpired);
  auto r = put_and_commit(*store, "a", "zombie", {old_lease});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kPrerequisiteFailed);
  const LeaseId fresh = *store->start_lease(kSeconds);
  EXPECT_NE(fresh, old_lease);
  EXPECT_EQ(*put_and_commit(*store, "a", "new", {fresh}), version + 1);
}

TEST(LevelDbStoreTest, ResolveAnswersFromThisLifeAndFencesTheUnseen) {
  TempDir dir;
  ManualClock clock;
  auto store = open_store(dir, clock);
  auto tx = store->begin();
  tx->put("t", "a", "1");
  const Version v = *store->commit(*tx, {});
  Version resolved = 0;
  EXPECT_EQ(*store->resolve(tx->id(), &resolved), TxOutcome::kCommitted);
  EXPECT_EQ(resolved, v);
  auto pending = store->begin();
  pending->put("t", "b", "2");
  EXPECT_EQ(*store->resolve(pending->id()), TxOutcome::kNotCommitted);
  EXPECT_FALSE(store->commit(*pending, {}).has_value());  // said "no": it never applies
  EXPECT_EQ(store->open_transactions(), 0u);
}

TEST(LevelDbStoreTest, PruningTheConflictIndexKeepsWhatAnOpenSnapshotNeeds) {
  TempDir dir;
  ManualClock clock;
  auto store = open_store(dir, clock);
  auto old = store->begin();
  old->put("t", "k", "old");
  ASSERT_TRUE(put_and_commit(*store, "k", "new").has_value());
  for (int i = 0; i < 600; ++i) ASSERT_TRUE(put_and_commit(*store, "other" + std::to_string(i % 7), "x").has_value());
  const auto r = store->commit(*old, {});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kConflict);
}

// Pruning drops a write once no open snapshot predates it, but not a key's later write: a
// snapshot taken between two writes of a key still conflicts with the second.
TEST(LevelDbStoreTest, PruningKeepsAKeysLaterWrite) {
  TempDir dir;
  ManualClock clock;
  auto store = open_store(dir, clock);
  ASSERT_TRUE(put_and_commit(*store, "k", "first").has_value());
  auto between = store->begin();  // sees the first write, not the second
  ASSERT_TRUE(put_and_commit(*store, "k", "second").has_value());
  // Many prunings: each may drop the first write of "k" (no snapshot predates it).
  for (int i = 0; i < 600; ++i) ASSERT_TRUE(put_and_commit(*store, "other" + std::to_string(i % 7), "x").has_value());
  between->put("t", "k", "between");
  const auto r = store->commit(*between, {});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kConflict);
}

TEST(LevelDbStoreTest, ATransactionLeftOpenPastTheTimeoutIsOver) {
  TempDir dir;
  ManualClock clock;
  auto store = open_store(dir, clock);
  auto forgotten = store->begin();
  forgotten->put("t", "k", "late");
  clock.advance(61 * kSeconds);
  auto fresh = store->begin();  // ends the stale one
  EXPECT_EQ(store->open_transactions(), 1u);
  const auto r = store->commit(*forgotten, {});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kAborted);
  EXPECT_EQ(get(*store, *fresh, "k"), std::nullopt);
}

TEST(LevelDbStoreTest, AStoreThatCannotOpenIsAnError) {
  ManualClock clock;
  auto store = LevelDbStore::open("/proc/onceflow-cannot-be-here", clock);
  ASSERT_FALSE(store.has_value());
  EXPECT_NE(store.error().message().find("cannot open the store"), std::string::npos);
}

// A process killed while LevelDB made a new store (after its first manifest, before its
// CURRENT file) left nothing that ever held a row: the next open makes the store again. Any
// other LevelDB file beside them is a store that held rows, and is refused.
TEST(LevelDbStoreTest, AStoreWhoseCreationWasCutShortIsCreatedAgain) {
  namespace fs = std::filesystem;
  const auto write = [](const fs::path& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
  };
  TempDir dir;
  ManualClock clock;
  fs::create_directories(dir.str());
  write(fs::path(dir.str()) / "MANIFEST-000001", std::string("\x56\x00\x00\x00\x01", 5));
  write(fs::path(dir.str()) / "000001.dbtmp", "MANIFEST-000001\n");
  write(fs::path(dir.str()) / "LOG", "");
  ASSERT_TRUE(fs::exists(fs::path(dir.str()) / "000001.dbtmp"));
  {
    auto store = LevelDbStore::open(dir.str(), clock);
    ASSERT_TRUE(store.has_value()) << store.error().message();
    EXPECT_TRUE((*store)->created());
    ASSERT_TRUE(put_and_commit(**store, "k", "v").has_value());
  }
  auto reopened = open_store(dir, clock);
  EXPECT_FALSE(reopened->created());
  auto tx = reopened->begin();
  EXPECT_EQ(get(*reopened, *tx, "k"), std::optional<std::string>("v"));

  TempDir held;
  fs::create_directories(held.str());
  write(fs::path(held.str()) / "MANIFEST-000001", "x");
  write(fs::path(held.str()) / "000003.log", "x");
  auto refused = LevelDbStore::open(held.str(), clock);
  ASSERT_FALSE(refused.has_value());
  EXPECT_TRUE(refused.error().is_corruption());
  EXPECT_TRUE(fs::exists(fs::path(held.str()) / "MANIFEST-000001"));  // nothing removed
}

TEST(LevelDbStoreTest, ADirectoryWithLevelDbFilesButNoCurrentIsRefused) {
  TempDir dir;
  ManualClock clock;
  ASSERT_TRUE(put_and_commit(*open_store(dir, clock), "k", "v").has_value());
  std::filesystem::remove(std::filesystem::path(dir.str()) / "CURRENT");
  auto reopened = LevelDbStore::open(dir.str(), clock);
  ASSERT_FALSE(reopened.has_value()) << "a reset store was opened as a new one";
  EXPECT_TRUE(reopened.error().is_corruption());
  EXPECT_NE(reopened.error().message().find(dir.str()), std::string::npos) << reopened.error().message();
  EXPECT_NE(reopened.error().message().find("no CURRENT"), std::string::npos) << reopened.error().message();
}

// Flips bytes in the middle of every table file of `dir`.
void damage_tables(const std::string& dir) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".ldb") continue;
    std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    const auto size = static_cast<std::streamoff>(std::filesystem::file_size(entry.path()));
    f.seekp(size / 2);
    for (int i = 0; i < 64; ++i) f.put('\xa5');
  }
}

TEST(LevelDbStoreTest, ACorruptionFailsTheStoreAndEveryCallAfter) {
  TempDir dir;
  ManualClock clock;
  {
    auto store = open_store(dir, clock);
    // Enough rows that LevelDB writes table files (a 4 MB write buffer fills).
    for (int batch = 0; batch < 12; ++batch) {
      auto tx = store->begin();
      for (int i = 0; i < 1000; ++i) tx->put("t", fmt::format("{:04}-{:04}", batch, i), std::string(500, 'x'));
      ASSERT_TRUE(store->commit(*tx, {}).has_value());
    }
  }
  {
    auto store = open_store(dir, clock);  // the reopening flushes the log into a table
  }
  damage_tables(dir.str());
  auto store = LevelDbStore::open(dir.str(), clock);
  if (!store) {  // refused at open: as good
    EXPECT_TRUE(store.error().is_corruption()) << store.error().message();
    return;
  }
  auto tx = (*store)->begin();
  ASSERT_TRUE(tx.has_value());
  auto rows = (*store)->scan(*tx, "t", "", "", SIZE_MAX);
  ASSERT_FALSE(rows.has_value()) << "damaged tables were read without a complaint";
  EXPECT_TRUE(rows.error().is_corruption()) << rows.error().message();
  EXPECT_FALSE((*store)->failed().is_ok());
  EXPECT_NE((*store)->failed().message().find(dir.str()), std::string::npos);
  EXPECT_FALSE((*store)->begin().has_value()) << "a failed store went on";
}

// A file system whose writes start failing on demand, as a full disk does.
class FullDiskEnv final : public leveldb::EnvWrapper {
 public:
  FullDiskEnv() : EnvWrapper(store_env()) {}  // over the store's own file system
  std::atomic<bool> full{false};

  leveldb::Status NewWritableFile(const std::string& f, leveldb::WritableFile** r) override {
    return wrap(target()->NewWritableFile(f, r), r);
  }
  leveldb::Status NewAppendableFile(const std::string& f, leveldb::WritableFile** r) override {
    return wrap(target()->NewAppendableFile(f, r), r);
  }

 private:
  class File final : public leveldb::WritableFile {
   public:
    File(leveldb::WritableFile* f, const std::atomic<bool>& full) : f_(f), full_(full) {}
    ~File() override { delete f_; }
    leveldb::Status Append(const leveldb::Slice& data) override {
      if (full_) return leveldb::Status::IOError("injected", "No space left on device");
      return f_->Append(data);
    }
    leveldb::Status Close() override { return f_->Close(); }
    leveldb::Status Flush() override { return full_ ? leveldb::Status::IOError("injected", "No space left on device") : f_->Flush(); }
    leveldb::Status Sync() override { return full_ ? leveldb::Status::IOError("injected", "No space left on device") : f_->Sync(); }

   private:
    leveldb::WritableFile* f_;
    const std::atomic<bool>& full_;
  };
  leveldb::Status wrap(leveldb::Status s, leveldb::WritableFile** r) {
    if (s.ok()) *r = new File(*r, full);
    return s;
  }
};

TEST(LevelDbStoreTest, AFullDiskFailsTheStoreAndAReopeningResumesWithNothingLost) {
  TempDir dir;
  ManualClock clock;
  FullDiskEnv env;
  LevelDbStore::Options options;
  options.env = &env;
  {
    auto store = LevelDbStore::open(dir.str(), clock, options);
    ASSERT_TRUE(store.has_value());
    ASSERT_TRUE(put_and_commit(**store, "before", "1").has_value());
    env.full = true;
    auto failed = put_and_commit(**store, "during", "2");
    ASSERT_FALSE(failed.has_value());
    EXPECT_TRUE(failed.error().is_ambiguous()) << "the write may be in the log: nobody can say it did not apply";
    EXPECT_NE((*store)->failed().message().find("No space left"), std::string::npos) << (*store)->failed().message();
    EXPECT_FALSE((*store)->begin().has_value());
  }
  env.full = false;
  auto store = LevelDbStore::open(dir.str(), clock, options);
  ASSERT_TRUE(store.has_value()) << store.error().message();
  auto tx = (*store)->begin();
  EXPECT_EQ(get(**store, *tx, "before"), "1");
  ASSERT_TRUE(put_and_commit(**store, "after", "3").has_value());
}

// The same in a group commit: A's group write fails; B, which committed during that write,
// is refused with the store's failure, certain (its group is never written), not ambiguous.
TEST(LevelDbStoreTest, AGroupBehindAFailedWriteIsNeverWritten) {
  TempDir dir;
  WallClock clock;
  FullDiskEnv env;
  LevelDbStore::Options options;
  options.env = &env;
  auto opened = open_store(dir, clock, options);
  ASSERT_NE(opened, nullptr);
  LevelDbStore& store = *opened;
  RealLoop loop;
  store.set_loop(&loop);
  loop.add_node("n");
  Runtime& rt = loop.runtime("n");
  std::optional<Result<Version>> a, b;
  env.full = true;
  rt.spawn("a", [&] { a = put_and_commit(store, "a", "1"); });
  rt.spawn("b", [&] {
    rt.yield();  // A's write is under way once B runs again
    b = put_and_commit(store, "b", "1");
  });
  loop.run([&] { return a.has_value() && b.has_value(); });
  store.set_loop(nullptr);
  ASSERT_FALSE(a->has_value());
  EXPECT_TRUE(a->error().is_ambiguous()) << a->error().message();
  ASSERT_FALSE(b->has_value());
  EXPECT_FALSE(b->error().is_ambiguous()) << "B's group was written after the store failed: " << b->error().message();
  EXPECT_NE(b->error().message().find("No space left"), std::string::npos) << b->error().message();
  EXPECT_EQ(store.stats().synced_writes, 1u);
}

// A loop that ends while a group is forming (B committed during A's write) unwinds B's fiber:
// B's group is never written, and the store, let go by the loop, commits on its own at once
// (it refused every commit while that group stood: a drained real run could not record its
// end), B's key included, without a conflict with B's commit that never was.
TEST(LevelDbStoreTest, AGroupFormingWhenItsLoopEndsIsNeverWrittenAndBlocksNothing) {
  TempDir dir;
  WallClock clock;
  {
    auto store = open_store(dir, clock);
    RealLoop loop;
    store->set_loop(&loop);
    loop.add_node("n");
    Runtime& rt = loop.runtime("n");
    bool b_committing = false;
    std::optional<Result<Version>> b;
    rt.spawn("a", [&] { (void)put_and_commit(*store, "a", "1"); });
    rt.spawn("b", [&] {
      rt.yield();  // A's write is under way once B runs again
      b_committing = true;
      b = put_and_commit(*store, "b", "1");
    });
    loop.run([&] { return b_committing; });
    store->set_loop(nullptr);
    EXPECT_FALSE(b.has_value()) << "B's commit returned: the loop did not end while its group formed";
    EXPECT_EQ(store->last_version(), 1u);
    auto again = put_and_commit(*store, "b", "2");
    ASSERT_TRUE(again.has_value()) << again.error().message();
    EXPECT_EQ(*again, 2u);
    auto tx = store->begin();
    EXPECT_EQ(get(*store, *tx, "b"), "2");
  }
  auto store = open_store(dir, clock);
  auto tx = store->begin();
  EXPECT_EQ(get(*store, *tx, "a"), "1");
  EXPECT_EQ(get(*store, *tx, "b"), "2");
  EXPECT_EQ(store->last_version(), 2u);
}

// Random transactions (interleaved, some aborted) and reopenings against a model: what is
// read equals the model's committed state as of the transaction's snapshot, a commit fails
// exactly when a key it writes was committed after its snapshot, and all of it survives
// reopening.
RC_GTEST_PROP(LevelDbStoreProps, MatchesAModelAcrossReopenings, ()) {
  TempDir dir;
  ManualClock clock;
  auto store = open_store(dir, clock);
  std::map<std::string, std::string> model;
  std::map<std::string, Version> written_at;
  struct Open {
    Transaction tx;
    std::map<std::string, std::string> snapshot;
  };
  std::vector<Open> open;
  const int steps = *rc::gen::inRange(1, 80);
  for (int i = 0; i < steps; ++i) {
    const int what = *rc::gen::inRange(0, 16);
    const std::string key(1, static_cast<char>('a' + *rc::gen::inRange(0, 6)));
    if (what < 2 || open.empty()) {
      open.push_back({*store->begin(), model});
    } else if (what < 4) {
      open.back().tx.put("t", key, std::to_string(i));
    } else if (what < 6) {
      open.back().tx.erase("t", key);
    } else if (what < 7) {
      const auto& o = open[static_cast<size_t>(*rc::gen::inRange<size_t>(0, open.size()))];
      auto it = o.snapshot.find(key);
      const auto* buffered = o.tx.buffered("t", key);
      const std::optional<std::string> expected =
          buffered != nullptr ? *buffered : (it == o.snapshot.end() ? std::nullopt : std::optional(it->second));
      RC_ASSERT(get(*store, o.tx, key) == expected);
    } else if (what < 10) {
      const size_t pick = *rc::gen::inRange<size_t>(0, open.size());
      const Open o = open[pick];
      open.erase(open.begin() + static_cast<long>(pick));
      bool conflict = false;
      for (const auto& [where, value] : o.tx.writes()) {
        auto w = written_at.find(where.second);
        conflict = conflict || (w != written_at.end() && w->second > o.tx.snapshot());
      }
      const auto r = store->commit(o.tx, {});
      RC_ASSERT(r.has_value() == !conflict);
      if (r.has_value()) {
        for (const auto& [where, value] : o.tx.writes()) {
          written_at[where.second] = *r;
          if (value) {
            model[where.second] = *value;
          } else {
            model.erase(where.second);
          }
        }
      }
    } else if (what < 15) {
      // A scan (which may seek past ranges earlier scans found empty) sees exactly the
      // snapshot and the transaction's own writes.
      const auto& o = open[static_cast<size_t>(*rc::gen::inRange<size_t>(0, open.size()))];
      const std::string from = *rc::gen::element<std::string>("", "", "", "a", "b", "c", "d");
      const std::string to = *rc::gen::element<std::string>("", "c", "e", "f", "z");
      const size_t limit = *rc::gen::inRange<size_t>(1, 5);
      std::map<std::string, std::string> view = o.snapshot;
      for (const auto& [where, value] : o.tx.writes()) {
        if (value) {
          view[where.second] = *value;
        } else {
          view.erase(where.second);
        }
      }
      std::vector<Row> expected;
      for (auto it = view.lower_bound(from); it != view.end() && (to.empty() || it->first < to) && expected.size() < limit; ++it) {
        expected.push_back({it->first, it->second});
      }
      auto rows = store->scan(o.tx, "t", from, to, limit);
      RC_ASSERT(rows.has_value());
      RC_ASSERT(*rows == expected);
    } else {
      open.clear();  // a restart loses the open transactions, never a commit
      store.reset();
      store = open_store(dir, clock);
      written_at.clear();  // every snapshot from now on is newer than every write so far
    }
  }
  store.reset();
  store = open_store(dir, clock);
  auto rows = store->dump("t");
  RC_ASSERT(rows.has_value());
  std::map<std::string, std::string> stored;
  for (const Row& r : *rows) stored[r.key] = r.value;
  RC_ASSERT(stored == model);
}

// Fibers of a loop, each committing `commits` transactions that write its own key and, every
// `shared_every`-th (0: never), increment a shared counter; a conflict is retried at once
// (the store tells a conflict with a commit still being written only once it is written, so
// such a retry does not spin). Returns the increments of the counter reported committed.
uint64_t run_committers(LevelDbStore& store, const std::string& phase, int fibers, uint64_t commits,
                        uint64_t shared_every, Version* last) {
  RealLoop loop;
  store.set_loop(&loop);
  std::map<std::string, uint64_t> committed;  // per fiber: commits reported applied
  uint64_t shared_increments = 0;
  int finished = 0;
  for (int f = 0; f < fibers; ++f) {
    const std::string node = fmt::format("{}{}", phase, f);
    loop.add_node(node);
    loop.runtime(node).spawn("committer", [&, node] {
      while (committed[node] < commits) {
        auto tx = store.begin();
        ASSERT_TRUE(tx.has_value());
        const bool shared = shared_every > 0 && committed[node] % shared_every == 0;
        if (shared) {
          auto v = store.get(*tx, "t", "shared");
          ASSERT_TRUE(v.has_value());
          tx->put("t", "shared", std::to_string((*v ? std::stoull(**v) : 0) + 1));
        }
        tx->put("t", node, std::to_string(committed[node] + 1));
        auto version = store.commit(*tx, {});
        if (!version) {
          ASSERT_TRUE(version.error().is_conflict()) << version.error().message();
          continue;
        }
        *last = std::max(*last, *version);
        ++committed[node];
        shared_increments += shared ? 1 : 0;
      }
      ++finished;
    });
  }
  loop.run([&] { return finished == fibers; });
  store.set_loop(nullptr);
  return shared_increments;
}

// The store's file system writes a table file in paced chunks (real/leveldb_env.h): what is
// appended, in pieces of any size with flushes anywhere, is in the file whole once closed (or
// destroyed unclosed: LevelDB's own files flush then too), and a file that is not a table
// goes through unchanged.
TEST(StoreEnvTest, APacedTableFileHoldsEveryByteAppended) {
  TempDir dir;
  std::filesystem::create_directories(dir.str());
  leveldb::Env* env = store_env();
  // How each file ends: synced and closed, closed only, or destroyed without a Close().
  enum class End { kSyncClose, kClose, kDestroy };
  for (const auto& [name, end] : {std::pair<std::string, End>{"000007.ldb", End::kSyncClose}, {"000008.ldb", End::kClose},
                                  {"000009.ldb", End::kDestroy}, {"000010.log", End::kSyncClose}}) {
    const std::string path = dir.str() + "/" + name;
    leveldb::WritableFile* raw = nullptr;
    ASSERT_TRUE(env->NewWritableFile(path, &raw).ok());
    std::unique_ptr<leveldb::WritableFile> file(raw);
    const uint64_t paced_before = paced_chunks();
    std::string expected;
    uint64_t x = 12345;
    while (expected.size() < 9 * kPaceBytes + 777) {  // nine chunks and a bit
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      std::string piece(1 + (x >> 33) % 9000, static_cast<char>('a' + (x >> 20) % 26));
      ASSERT_TRUE(file->Append(piece).ok());
      expected += piece;
      if ((x >> 40) % 3 == 0) {
        ASSERT_TRUE(file->Flush().ok());
      }
    }
    if (end == End::kSyncClose) {
      ASSERT_TRUE(file->Sync().ok());
    }
    if (end == End::kDestroy) {
      file.reset();
    } else {
      ASSERT_TRUE(file->Close().ok());
    }
    std::ifstream in(path, std::ios::binary);
    const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(got.size(), expected.size()) << name;
    EXPECT_TRUE(got == expected) << name << ": the file differs from what was appended";
    if (name.ends_with(".ldb")) {
      // A chunk is at least kPaceBytes, and less than that plus one piece (9,000 bytes).
      EXPECT_GE(paced_chunks() - paced_before, 7u) << name << ": about nine chunks written, not paced";
    } else {
      EXPECT_EQ(paced_chunks(), paced_before) << name << " went through the paced file";
    }
  }
}

// Through that file system, a store whose memtable is flushed and compacted many times over
// (a 256 KB write buffer, 3 MB of rows) reads every row back after reopening.
TEST(LevelDbStoreTest, RowsFlushedAndCompactedIntoPacedTablesReadBackWhole) {
  TempDir dir;
  ManualClock clock;
  LevelDbStore::Options options;
  options.write_buffer_bytes = 256 << 10;
  const auto value_of = [](int i) { return fmt::format("{:04}", i) + std::string(1000, static_cast<char>('a' + i % 26)); };
  constexpr int kRows = 3000;
  {
    auto store = open_store(dir, clock, options);
    for (int i = 0; i < kRows; i += 100) {
      auto tx = store->begin();
      for (int j = i; j < i + 100; ++j) tx->put("t", fmt::format("{:06}", j), value_of(j));
      ASSERT_TRUE(store->commit(*tx, {}).has_value());
    }
  }
  size_t tables = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.str())) tables += entry.path().extension() == ".ldb";
  EXPECT_GE(tables, 1u) << "nothing was flushed: the test does not reach the paced files";
  auto store = open_store(dir, clock, options);
  auto rows = store->dump("t");
  ASSERT_TRUE(rows.has_value()) << rows.status().message();
  ASSERT_EQ(rows->size(), static_cast<size_t>(kRows));
  for (int i = 0; i < kRows; ++i) {
    ASSERT_EQ((*rows)[i].key, fmt::format("{:06}", i));
    ASSERT_TRUE((*rows)[i].value == value_of(i)) << "row " << i;
  }
}

// Group commit: fibers of a loop commit at once; their commits share synced writes, each
// learns its own outcome, a write conflicting with one still being written is refused (no
// update is lost), and every commit reported is there after reopening.
TEST(LevelDbStoreTest, GroupCommitSharesSyncedWritesAndLosesNothing) {
  TempDir dir;
  WallClock clock;
  constexpr int kFibers = 8;
  constexpr uint64_t kCommits = 40;
  Version last = 0;
  uint64_t shared_increments = 0;
  {
    auto store = open_store(dir, clock);
    // Commits that do not conflict: every write is shared by several.
    (void)run_committers(*store, "a", kFibers, kCommits, 0, &last);
    const LevelDbStore::Stats grouped = store->stats();
    EXPECT_EQ(grouped.commits, kFibers * kCommits);
    EXPECT_LE(grouped.synced_writes * 4, grouped.commits) << "commits were not grouped";
    // A counter every fiber increments: conflicts, and no increment lost.
    shared_increments = run_committers(*store, "b", kFibers, kCommits, 4, &last);
    std::cout << fmt::format("{} commits in {} synced writes without conflicts; {} in {} with\n", grouped.commits,
                             grouped.synced_writes, store->stats().commits - grouped.commits,
                             store->stats().synced_writes - grouped.synced_writes);
  }
  auto store = open_store(dir, clock);  // reopened: every commit reported is there
  EXPECT_EQ(store->last_version(), last);
  auto tx = store->begin();
  EXPECT_EQ(get(*store, *tx, "shared"), std::to_string(shared_increments));
  EXPECT_EQ(shared_increments, kFibers * kCommits / 4);
  for (int f = 0; f < kFibers; ++f) {
    EXPECT_EQ(get(*store, *tx, fmt::format("a{}", f)), std::to_string(kCommits));
    EXPECT_EQ(get(*store, *tx, fmt::format("b{}", f)), std::to_string(kCommits));
  }
}

// The disk works while the loop runs: when a write ends, the group that formed behind it is
// written before the fibers of the written group run on. Fibers A and C commit together (A
// writes their group); B commits during that write. When it ends, B's group is being written
// by the time C resumes, and A, resumed, commits again at once: that commit finds B's group
// under way and waits for a third write (had A run first, it would have joined B's).
TEST(LevelDbStoreTest, AGroupFormedDuringAWriteIsWrittenBeforeTheWrittenFibersRunOn) {
  TempDir dir;
  WallClock clock;
  auto store = open_store(dir, clock);
  RealLoop loop;
  store->set_loop(&loop);
  loop.add_node("n");
  Runtime& rt = loop.runtime("n");
  int finished = 0;
  uint64_t a_resumed_after = 0;  // synced writes when A's first commit returned
  bool c_resumed_during_write = false;
  const auto commit = [&](const std::string& key) { EXPECT_TRUE(put_and_commit(*store, key, "v").has_value()); };
  rt.spawn("a", [&] {
    commit("a1");
    a_resumed_after = store->stats().synced_writes;
    commit("a2");
    ++finished;
  });
  rt.spawn("c", [&] {
    commit("c1");  // joins A's group during A's one turn of the scheduler
    c_resumed_during_write = store->writing();
    ++finished;
  });
  rt.spawn("b", [&] {
    rt.yield();  // A and C have committed, and A's write is under way once B runs again
    commit("b1");
    ++finished;
  });
  loop.run([&] { return finished == 3; });
  store->set_loop(nullptr);
  EXPECT_EQ(a_resumed_after, 1u);
  EXPECT_TRUE(c_resumed_during_write) << "C ran on before B's group went to the disk";
  EXPECT_EQ(store->stats().synced_writes, 3u) << "A's second commit joined B's group: B's write waited for A to run on";
  EXPECT_EQ(store->stats().commits, 4u);
  EXPECT_EQ(store->stats().commit_waits, 4u);
}

// Consumed rows leave tombstones: a scan from the table's first key seeks past the range an
// earlier scan found empty, and still returns exactly what its snapshot holds: a transaction
// that began before the rows were erased sees them, a put into the range is seen at once.
TEST(LevelDbStoreTest, ScansSeekPastRangesFoundEmptyAndSeeExactlyTheirSnapshot) {
  TempDir dir;
  ManualClock clock;
  auto store = open_store(dir, clock);
  auto fill = store->begin();
  for (int i = 0; i < 1000; ++i) fill->put("t", fmt::format("p/{:04}", i), "v");
  ASSERT_TRUE(store->commit(*fill, {}).has_value());
  auto before = store->begin();  // a snapshot with every row
  auto consume = store->begin();
  for (int i = 0; i < 990; ++i) consume->erase("t", fmt::format("p/{:04}", i));
  ASSERT_TRUE(store->commit(*consume, {}).has_value());

  auto first = store->begin();
  auto rows = store->scan(*first, "t", "p/", "p/~", 5);
  ASSERT_TRUE(rows.has_value());
  ASSERT_EQ(rows->size(), 5u);
  EXPECT_EQ(rows->front().key, "p/0990");
  EXPECT_EQ(store->stats().scans_past_empty, 0u);
  auto second = store->begin();
  rows = store->scan(*second, "t", "p/", "p/~", 5);
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->front().key, "p/0990");
  EXPECT_EQ(store->stats().scans_past_empty, 1u);

  // The older snapshot still holds the erased rows.
  rows = store->scan(*before, "t", "p/", "p/~", 3);
  ASSERT_TRUE(rows.has_value());
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ(rows->front().key, "p/0000");

  // A put below the first row cuts the range: the next scan sees it.
  auto late = store->begin();
  late->put("t", "p/0500", "late");
  ASSERT_TRUE(store->commit(*late, {}).has_value());
  auto third = store->begin();
  rows = store->scan(*third, "t", "p/", "p/~", 2);
  ASSERT_TRUE(rows.has_value());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ(rows->front().key, "p/0500");
  EXPECT_EQ(rows->back().key, "p/0990");
  // A transaction that began before that put was validated, scanning now, learns no range
  // that hides it.
  auto old = store->begin();
  auto racing = store->begin();
  racing->put("t", "p/0100", "racing");
  ASSERT_TRUE(store->commit(*racing, {}).has_value());
  rows = store->scan(*old, "t", "p/", "p/~", 1);
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->front().key, "p/0500");  // its snapshot lacks the racing put
  auto fourth = store->begin();
  rows = store->scan(*fourth, "t", "p/", "p/~", 1);
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->front().key, "p/0100");
}

// A scan that reaches its end learns that nothing follows its last row: the next scan of the
// partition stops after that row instead of stepping on through the next partition's
// tombstones, and still sees every row put since, wherever it lands.
TEST(LevelDbStoreTest, ScansStopBeforeRangesFoundEmptyToTheirEndAndSeeEveryPut) {
  TempDir dir;
  ManualClock clock;
  auto store = open_store(dir, clock);
  auto fill = store->begin();
  for (int i = 0; i < 10; ++i) fill->put("t", fmt::format("p/{:04}", i), "v");
  for (int i = 0; i < 1000; ++i) fill->put("t", fmt::format("q/{:04}", i), "v");
  ASSERT_TRUE(store->commit(*fill, {}).has_value());
  auto consume = store->begin();
  for (int i = 0; i < 1000; ++i) consume->erase("t", fmt::format("q/{:04}", i));
  ASSERT_TRUE(store->commit(*consume, {}).has_value());
  const auto keys = [&](Transaction& tx) {
    std::vector<std::string> out;
    auto rows = store->scan(tx, "t", "p/", "p/~", 100);
    EXPECT_TRUE(rows.has_value());
    if (rows) {
      for (const Row& row : *rows) out.push_back(row.key);
    }
    return out;
  };
  const auto range = [](int from, int to) {
    std::vector<std::string> out;
    for (int i = from; i < to; ++i) out.push_back(fmt::format("p/{:04}", i));
    return out;
  };
  auto first = store->begin();
  EXPECT_EQ(keys(*first), range(0, 10));
  EXPECT_EQ(store->stats().scans_before_empty, 0u);
  auto second = store->begin();
  EXPECT_EQ(keys(*second), range(0, 10));
  EXPECT_EQ(store->stats().scans_before_empty, 1u);

  // A row appended after the last splits the range: the scan sees it and stops after it.
  auto older = store->begin();  // its snapshot lacks the appended row
  auto append = store->begin();
  append->put("t", "p/0010", "v");
  ASSERT_TRUE(store->commit(*append, {}).has_value());
  auto third = store->begin();
  EXPECT_EQ(keys(*third), range(0, 11));
  EXPECT_EQ(store->stats().scans_before_empty, 2u);
  EXPECT_EQ(keys(*older), range(0, 10));  // walks on: the row it stops after is not in its snapshot

  // A row put between two others, one erased: each scan still sees exactly the live rows.
  auto change = store->begin();
  change->erase("t", "p/0010");
  change->put("t", "p/0004x", "v");
  ASSERT_TRUE(store->commit(*change, {}).has_value());
  auto fourth = store->begin();
  auto want = range(0, 10);
  want.insert(want.begin() + 5, "p/0004x");
  EXPECT_EQ(keys(*fourth), want);
  auto fifth = store->begin();
  EXPECT_EQ(keys(*fifth), want);
  // A put past the last row, before the end, after a scan that stopped early.
  auto late = store->begin();
  late->put("t", "p/0500", "v");
  ASSERT_TRUE(store->commit(*late, {}).has_value());
  auto sixth = store->begin();
  want.push_back("p/0500");
  EXPECT_EQ(keys(*sixth), want);
}

TEST(EmptyRangesTest, APutKeepsWhatScansUseOnEitherSideOfIt) {
  using Ends = EmptyRanges::Ends;
  EmptyRanges ranges;
  ranges.learn("t", "c", "m", /*tx=*/10, /*snapshot=*/5, Ends::kBoth);  // a scan from "c" to "m" found nothing
  EXPECT_EQ(ranges.tail("t", "m", 9), nullptr);  // began before the scan that learned it
  ASSERT_NE(ranges.tail("t", "m", 10), nullptr);
  EXPECT_EQ(*ranges.tail("t", "m", 10), "c");
  EXPECT_EQ(*ranges.tail("t", "k", 10), "c");  // empty beyond `to` is empty up to it
  EXPECT_EQ(ranges.tail("t", "n", 10), nullptr);  // not known up to "n"
  EXPECT_EQ(ranges.tail("t", "c", 10), nullptr);  // nothing before "c" is known
  EXPECT_EQ(ranges.tail("t", "", 10), nullptr);
  EXPECT_EQ(ranges.tail("u", "m", 10), nullptr);
  ranges.put("t", "f", 6);  // split: the head [c, f), the tail (f, m)
  EXPECT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges.start("t", "c", 10), "f");
  EXPECT_EQ(*ranges.tail("t", "m", 10), std::string("f\0", 2));
  ranges.put("t", "c", 7);  // at the head's first key: nothing of it is left
  EXPECT_EQ(ranges.start("t", "c", 10), "c");
  EXPECT_EQ(ranges.size(), 1u);
  ranges.put("t", std::string("f\0", 2), 8);  // a tail moves past each row appended to it
  EXPECT_EQ(*ranges.tail("t", "m", 10), std::string("f\0\0", 3));
  ranges.put("t", "g", 9);
  EXPECT_EQ(*ranges.tail("t", "m", 10), std::string("g\0", 2));
  EXPECT_EQ(ranges.size(), 1u);
  ranges.put("t", "l", 9);
  EXPECT_EQ(*ranges.tail("t", "m", 10), std::string("l\0", 2));
  ranges.put("t", std::string("l\0", 2), 9);
  ranges.put("t", "lz", 9);  // nothing of (lz, m) is kept: no scan starts or ends in it... 
  EXPECT_EQ(*ranges.tail("t", "m", 10), std::string("lz\0", 3));  // ...but it still reaches "m"
  // A tail learned from a scan's last row, a head from its first: a put into the head cuts it.
  ranges.learn("t", "p", "t", 11, 9, Ends::kHead);
  ranges.learn("t", "u", "z", 11, 9, Ends::kTail);
  ranges.put("t", "r", 10);
  EXPECT_EQ(ranges.start("t", "p", 11), "r");
  EXPECT_EQ(ranges.start("t", "r\0", 11), "r\0");  // nothing kept after the put into a head
  ranges.put("t", "v", 10);
  EXPECT_EQ(ranges.start("t", "u", 11), "u");  // nothing kept before the put into a tail
  EXPECT_EQ(*ranges.tail("t", "z", 11), std::string("v\0", 2));
  // A scan whose snapshot may lack a put in the range learns no tail: what it learns ends there.
  ranges.put("s", "x", 11);
  ranges.learn("s", "w", "y", 12, 10, Ends::kTail);
  EXPECT_EQ(ranges.tail("s", "y", 12), nullptr);
  EXPECT_EQ(ranges.start("s", "w", 12), "w");  // nothing learned: [w, x) would serve no scan
}

TEST(EmptyRangesTest, ARangeServesOnlyLaterTransactionsAndPutsCutIt) {
  EmptyRanges ranges;
  ranges.learn("t", "a", "m", /*tx=*/10, /*snapshot=*/5);
  EXPECT_EQ(ranges.start("t", "a", 9), "a");   // began before the scan that learned it
  EXPECT_EQ(ranges.start("t", "a", 10), "m");
  EXPECT_EQ(ranges.start("t", "b", 11), "b");  // only from the key it was learned from
  EXPECT_EQ(ranges.start("u", "a", 11), "a");  // another table
  ranges.put("t", "f", 6);
  EXPECT_EQ(ranges.start("t", "a", 11), "f");  // [a, f) is still empty
  ranges.put("t", "a", 7);
  EXPECT_EQ(ranges.start("t", "a", 11), "a");
  EXPECT_EQ(ranges.size(), 0u);
  // A scan at snapshot 6 cannot vouch for a put validated at 7 (it may not see it).
  ranges.learn("t", "a", "z", 12, 6);
  EXPECT_EQ(ranges.size(), 0u);  // the put at "a" itself
  ranges.learn("t", "b", "z", 12, 6);
  EXPECT_EQ(ranges.start("t", "b", 12), "z");  // "f", put at 6, is in that snapshot: erased since
  ranges.put("t", "k", 8);
  ranges.learn("t", "b", "z", 13, 7);
  EXPECT_EQ(ranges.start("t", "b", 13), "k");
  ranges.forget_puts(8);
  ranges.learn("t", "b", "z", 14, 8);
  EXPECT_EQ(ranges.start("t", "b", 14), "z");
  // Overlapping ranges give way: one inside the new one goes, the one before is cut.
  ranges.learn("t", "a0", "c", 15, 8);
  EXPECT_EQ(ranges.start("t", "a0", 15), "c");
  EXPECT_EQ(ranges.start("t", "b", 15), "b");
  ranges.learn("t", "b0", "d", 16, 8);
  EXPECT_EQ(ranges.start("t", "a0", 16), "b0");
  EXPECT_EQ(ranges.start("t", "b0", 16), "d");
  EXPECT_EQ(ranges.size(), 2u);
}

}  // namespace
}  // namespace onceflow::real
