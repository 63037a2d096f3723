#include "real/leveldb_store.h"

#include <fmt/format.h>
#include <leveldb/db.h>
#include <leveldb/env.h>
#include <leveldb/write_batch.h>

#include <sys/resource.h>

#include <algorithm>
#include <cassert>
#include <filesystem>
#include <utility>

#include "core/env/codec.h"
#include "fibers/scheduler.h"
#include "real/commit_point.h"
#include "real/leveldb_env.h"
#include "real/loop.h"

namespace onceflow::real {
namespace {

// Layout: data rows under "d" + table + '\0' + key; the store's own records under "m".
constexpr char kGenerationKey[] = "m:generation";
constexpr char kVersionKey[] = "m:version";
constexpr size_t kRetainedOutcomes = 1 << 20;
// Commits between prunings of the conflict index. A pruning costs what it drops (and a look
// at the open transactions): often keeps the index small enough to stay in the caches (every
// 256, it grew to 100,000 entries between prunings in the bench pipeline, and its lookups
// missed).
constexpr uint64_t kPruneEvery = 8;

std::string data_key(const std::string& table, const std::string& key) {
  std::string out = "d" + table;
  out.push_back('\0');
  out += key;
  return out;
}
std::string table_prefix(const std::string& table) { return data_key(table, ""); }

std::string u64_bytes(uint64_t v) {
  Encoder e;
  e.u64(v);
  return e.take();
}

// Every read checks the checksums of what it reads.
leveldb::ReadOptions checked_reads() {
  leveldb::ReadOptions ro;
  ro.verify_checksums = true;
  return ro;
}

Status store_error(const std::string& dir, const leveldb::Status& s) {
  const std::string text = fmt::format("the store in {}: {}", dir, s.ToString());
  return s.IsCorruption() ? Status::corruption(text) : Status::unavailable(text);
}

Result<uint64_t> read_u64(leveldb::DB& db, const std::string& dir, const char* key) {
  std::string value;
  const leveldb::Status s = db.Get(checked_reads(), key, &value);
  if (s.IsNotFound()) return uint64_t{0};
  if (!s.ok()) return store_error(dir, s);
  Decoder d(value);
  const uint64_t v = d.u64();
  if (!d.done()) return Status::corruption(fmt::format("the store in {}: {} does not decode", dir, key));
  return v;
}

// A file LevelDB writes into its directory (CURRENT aside).
bool is_leveldb_file(const std::string& name) {
  return name.rfind("MANIFEST-", 0) == 0 || name.ends_with(".ldb") || name.ends_with(".sst") ||
         name.ends_with(".log");
}

// What a creation of a store leaves before LevelDB writes its CURRENT file: the first manifest
// (an empty store's) and CURRENT's temporary file. A store that ever held a row has a log or a
// table file, and a manifest numbered above 1 from its first open on.
bool left_by_creation(const std::string& name) { return name == "MANIFEST-000001" || name == "000001.dbtmp"; }

// A directory with LevelDB's files but no CURRENT is a store that was reset or damaged:
// opening it would make a new, empty store over the old one's files. One whose creation was
// cut short (the process killed between LevelDB's first manifest and its CURRENT file) held
// nothing: its files are removed and the store is created again.
Status refuse_headless_store(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || fs::exists(fs::path(dir) / "CURRENT", ec)) return Status::ok();
  std::vector<fs::path> unfinished;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (left_by_creation(name)) {
      unfinished.push_back(entry.path());
      continue;
    }
    if (!is_leveldb_file(name)) continue;
    return Status::corruption(fmt::format(
        "the store in {} has LevelDB files ({}) but no CURRENT file: it was damaged or reset; refusing to start a "
        "new store over it",
        dir, name));
  }
  if (ec) return Status::unavailable(fmt::format("cannot list {}: {}", dir, ec.message()));
  for (const fs::path& file : unfinished) {
    if (!fs::remove(file, ec) && ec) {
      return Status::unavailable(fmt::format("cannot remove {} of an unfinished store creation: {}", file.string(), ec.message()));
    }
  }
  return Status::ok();
}

uint64_t lease_generation(LeaseId lease) { return lease >> 32; }

// The conflict index's hashes of a transaction's writes, in the write set's order (sorted by
// table, so a table's name is hashed once per run of its keys).
std::vector<uint64_t> conflict_hashes(const Transaction& tx) {
  std::vector<uint64_t> out;
  out.reserve(tx.writes().size());
  const std::string* table = nullptr;
  uint64_t table_hash = 0;
  for (const auto& [where, value] : tx.writes()) {
    if (table == nullptr || *table != where.first) {
      table = &where.first;
      table_hash = std::hash<std::string_view>{}(where.first);
    }
    const uint64_t key = std::hash<std::string_view>{}(where.second);
    out.push_back(table_hash ^ (key + 0x9e3779b97f4a7c15ULL + (table_hash << 6) + (table_hash >> 2)));
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<LevelDbStore>> LevelDbStore::open(const std::string& dir, const Clock& clock, Options options) {
  if (Status headless = refuse_headless_store(dir); !headless.is_ok()) return headless;
  leveldb::Options db_options;
  db_options.create_if_missing = true;
  db_options.paranoid_checks = true;
  if (!options.compress) db_options.compression = leveldb::kNoCompression;
  if (options.env != nullptr) db_options.env = options.env;
  if (options.env == nullptr) {
    db_options.env = store_env();
    // A cached table holds a descriptor: leave most of the process's for everything else.
    rlimit files{};
    if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
      db_options.max_open_files = static_cast<int>(std::clamp<rlim_t>(files.rlim_cur / 4, 64, 1000));
    }
  }
  db_options.write_buffer_size = options.write_buffer_bytes;
  leveldb::DB* raw = nullptr;
  const leveldb::Status s = leveldb::DB::Open(db_options, dir, &raw);
  if (!s.ok()) {
    const std::string text = fmt::format("cannot open the store in {}: {}", dir, s.ToString());
    return s.IsCorruption() ? Status::corruption(text) : Status::unavailable(text);
  }
  std::unique_ptr<leveldb::DB> db(raw);
  auto generation = read_u64(*db, dir, kGenerationKey);
  if (!generation) return generation.error();
  auto version = read_u64(*db, dir, kVersionKey);
  if (!version) return version.error();
  const std::string& point_file = options.commit_point_file;
  if (!point_file.empty()) {
    auto recorded = read_commit_point(point_file);
    if (!recorded) return recorded.error();
    if (*recorded) {
      const CommitPoint held{*version, *generation};
      if (Status behind = check_commit_point(dir, point_file, held, **recorded); !behind.is_ok()) return behind;
    }
  }
  // A new life: every Lease of the previous one is over.
  const uint64_t next_generation = *generation + 1;
  leveldb::WriteOptions sync;
  sync.sync = true;
  if (leveldb::Status put = db->Put(sync, kGenerationKey, u64_bytes(next_generation)); !put.ok()) {
    return store_error(dir, put);
  }
  std::unique_ptr<LevelDbStore> store(new LevelDbStore(std::move(db), dir, clock, options, next_generation, *version));
  if (!point_file.empty()) {
    if (Status recorded = store->record_commit_point(*version); !recorded.is_ok()) return recorded;
    store->commit_point_at_ = clock.now();
  }
  return store;
}

LevelDbStore::LevelDbStore(std::unique_ptr<leveldb::DB> db, std::string dir, const Clock& clock, Options options,
                           uint64_t generation, Version version)
    : db_(std::move(db)),
      dir_(std::move(dir)),
      clock_(clock),
      options_(options),
      generation_(generation),
      version_(version),
      assigned_(version) {}

Status LevelDbStore::check(const leveldb::Status& s) {
  if (s.ok() || s.IsNotFound()) return Status::ok();
  if (failed_.is_ok()) failed_ = store_error(dir_, s);
  return failed_;
}

LevelDbStore::~LevelDbStore() {
  for (auto& [id, tx] : open_) db_->ReleaseSnapshot(tx.snapshot);
  // Unsynced writes (sync off, for benchmarks) are not recorded: a synced write now would sync
  // only the newest log, not the ones LevelDB retired unsynced, and the point must never be
  // ahead of what is durable. The point recorded at open stays, behind.
  if (options_.commit_point_file.empty() || !failed_.is_ok() || !options_.sync) return;
  // A failure leaves the last point recorded, which is behind: nothing is refused wrongly.
  (void)record_commit_point(version_);
}

bool LevelDbStore::commit_point_due() const {
  return options_.sync && !options_.commit_point_file.empty() &&
         clock_.now() - commit_point_at_ >= options_.commit_point_every_us;
}

Status LevelDbStore::record_commit_point(Version version) const {
  return write_commit_point(options_.commit_point_file, CommitPoint{version, generation_});
}

// --- Leases ---

Result<LeaseId> LevelDbStore::start_lease(Micros ttl_us) {
  const LeaseId id = (generation_ << 32) | next_lease_++;
  leases_[id] = Lease{ttl_us, clock_.now(), LeaseState::kActive};
  return id;
}

LeaseState LevelDbStore::state_of(LeaseId lease) const {
  auto it = leases_.find(lease);
  if (it == leases_.end()) {
    // A Lease of an earlier life ended with it; one never issued is unknown.
    return lease_generation(lease) < generation_ ? LeaseState::kExpired : LeaseState::kUnknown;
  }
  if (it->second.ended != LeaseState::kActive) return it->second.ended;
  return clock_.now() > it->second.last_ping + it->second.ttl_us ? LeaseState::kExpired : LeaseState::kActive;
}

Status LevelDbStore::ping_lease(LeaseId lease) {
  const LeaseState state = state_of(lease);
  if (state != LeaseState::kActive) {
    return Status::prerequisite_failed(fmt::format("lease {} is {}", lease, lease_state_name(state)));
  }
  leases_[lease].last_ping = clock_.now();
  ++stats_.lease_renewals;
  return Status::ok();
}

Status LevelDbStore::abort_lease(LeaseId lease) {
  auto it = leases_.find(lease);
  if (it != leases_.end() && state_of(lease) == LeaseState::kActive) it->second.ended = LeaseState::kAborted;
  return Status::ok();
}

Result<LeaseState> LevelDbStore::lease_state(LeaseId lease) { return state_of(lease); }

// --- Transactions ---

Result<Transaction> LevelDbStore::begin() {
  if (!failed_.is_ok()) return failed_;
  end_stale_transactions();
  const TxId id = (generation_ << 40) | next_tx_++;
  open_[id] = OpenTx{db_->GetSnapshot(), version_, clock_.now()};
  return Transaction(id, version_);
}

void LevelDbStore::end_stale_transactions() {
  const Micros now = clock_.now();
  for (auto it = open_.begin(); it != open_.end();) {
    if (now - it->second.began_at <= options_.tx_timeout_us) {
      ++it;
      continue;
    }
    db_->ReleaseSnapshot(it->second.snapshot);
    it = open_.erase(it);
  }
}

const LevelDbStore::OpenTx* LevelDbStore::find_open(const Transaction& tx) const {
  auto it = open_.find(tx.id());
  return it == open_.end() ? nullptr : &it->second;
}

void LevelDbStore::release(TxId tx) {
  auto it = open_.find(tx);
  if (it == open_.end()) return;
  db_->ReleaseSnapshot(it->second.snapshot);
  open_.erase(it);
}

Result<std::optional<std::string>> LevelDbStore::read(const Transaction& tx, const std::string& table,
                                                      const std::string& key) {
  ++stats_.reads;
  if (!failed_.is_ok()) return failed_;
  const OpenTx* open = find_open(tx);
  if (open == nullptr) return Status::aborted(fmt::format("transaction {} is over", tx.id()));
  leveldb::ReadOptions ro = checked_reads();
  ro.snapshot = open->snapshot;
  std::string value;
  const leveldb::Status s = db_->Get(ro, data_key(table, key), &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (Status bad = check(s); !bad.is_ok()) return bad;
  return std::optional<std::string>(std::move(value));
}

Result<std::vector<Row>> LevelDbStore::read_range(const Transaction& tx, const std::string& table,
                                                  const std::string& from, const std::string& to, size_t limit) {
  ++stats_.reads;
  if (!failed_.is_ok()) return failed_;
  const OpenTx* open = find_open(tx);
  if (open == nullptr) return Status::aborted(fmt::format("transaction {} is over", tx.id()));
  leveldb::ReadOptions ro = checked_reads();
  ro.snapshot = open->snapshot;
  const std::string& start = empty_.start(table, from, tx.id());
  if (&start != &from) ++stats_.scans_past_empty;
  std::vector<Row> out;
  if ((!to.empty() && start >= to) || limit == 0) return out;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ro));
  const std::string prefix = table_prefix(table);
  // No step past the last row wanted, nor past the last row before a range known to be empty
  // up to `to`: a step walks every erased row (and reads their blocks) up to the next live
  // one, wherever that is.
  const std::string* tail = empty_.tail(table, to, tx.id());
  const auto just_before_tail = [tail](const std::string& key) {
    return tail != nullptr && tail->size() == key.size() + 1 && tail->back() == '\0' &&
           tail->compare(0, key.size(), key) == 0;
  };
  bool ended = true;  // no row is left before `to`
  for (it->Seek(prefix + start); it->Valid(); it->Next()) {
    const leveldb::Slice k = it->key();
    if (!k.starts_with(prefix)) break;
    std::string key(k.data() + prefix.size(), k.size() - prefix.size());
    if (!to.empty() && key >= to) break;
    out.push_back({std::move(key), it->value().ToString()});
    if (out.size() >= limit) {
      ended = false;
      break;
    }
    if (just_before_tail(out.back().key)) {
      ++stats_.scans_before_empty;
      ended = false;  // nothing to learn: the range is known
      break;
    }
  }
  if (Status bad = check(it->status()); !bad.is_ok()) return bad;
  if (out.empty()) {
    if (!to.empty()) empty_.learn(table, from, to, tx.id(), open->version, EmptyRanges::Ends::kBoth);
  } else {
    empty_.learn(table, from, out.front().key, tx.id(), open->version, EmptyRanges::Ends::kHead);
    if (ended && !to.empty()) {
      empty_.learn(table, out.back().key + '\0', to, tx.id(), open->version, EmptyRanges::Ends::kTail);
    }
  }
  return out;
}

namespace {
void add_writes(leveldb::WriteBatch& batch, const Transaction& tx) {
  for (const auto& [where, value] : tx.writes()) {
    if (value) {
      batch.Put(data_key(where.first, where.second), *value);
    } else {
      batch.Delete(data_key(where.first, where.second));
    }
  }
}
}  // namespace

Result<Version> LevelDbStore::commit(const Transaction& tx, const std::vector<LeaseId>& prerequisites) {
  if (!failed_.is_ok()) return failed_;
  const OpenTx* open = find_open(tx);
  if (open == nullptr) return Status::aborted(fmt::format("transaction {} is over", tx.id()));
  for (const LeaseId lease : prerequisites) {
    const LeaseState state = state_of(lease);
    if (state != LeaseState::kActive) {
      release(tx.id());
      return Status::prerequisite_failed(fmt::format("lease {} is {}", lease, lease_state_name(state)));
    }
  }
  const std::vector<uint64_t> hashes = conflict_hashes(tx);
  auto hash = hashes.begin();
  for (const auto& [where, value] : tx.writes()) {
    auto it = last_write_.find(*hash++);
    if (it != last_write_.end() && it->second > open->version) {
      release(tx.id());
      ++stats_.conflicts;
      // A conflict with a commit still being written is told once that commit is written, so
      // that a retry reads it (a caller that retries at once would otherwise spin while the
      // write it waits for cannot finish).
      // Copied first: the index may be pruned while this fiber waits.
      const Version written_at = it->second;
      wait_until_written(written_at);
      return Status::conflict(fmt::format("{}/{} was written at version {} after snapshot {}", where.first,
                                          where.second, written_at, tx.snapshot()));
    }
  }
  if (loop_ != nullptr && loop_->scheduler().in_fiber()) return commit_in_group(tx, hashes);
  if (writing_ || forming_ != nullptr) {
    release(tx.id());
    return Status::unavailable("a group commit is being written: commit from a fiber of the loop");
  }
  const Version version = version_ + 1;
  assigned_ = version;
  validated(tx, version, hashes);
  leveldb::WriteBatch batch;
  add_writes(batch, tx);
  batch.Put(kVersionKey, u64_bytes(version));
  leveldb::WriteOptions wo;
  wo.sync = options_.sync;
  const Micros began = clock_.now();
  const leveldb::Status written = db_->Write(wo, &batch);
  stats_.write_us += static_cast<uint64_t>(std::max<Micros>(0, clock_.now() - began));
  if (!written.ok()) {
    // The record may be in the log and come back on reopen: nobody can say it did not apply.
    // The store is failed from now on; its owner stops, and a reopening tells.
    release(tx.id());
    return Status::ambiguous(check(written).message());
  }
  version_ = version;
  ++stats_.synced_writes;
  stats_.bytes += batch.ApproximateSize();
  committed(tx.id(), version, tx.writes().size());
  release(tx.id());
  if (commit_point_due()) {
    commit_point_at_ = clock_.now();
    // The commit stands; a store that cannot record how far it got goes no further.
    if (Status recorded = record_commit_point(version); !recorded.is_ok() && failed_.is_ok()) failed_ = recorded;
  }
  return version;
}

void LevelDbStore::committed(TxId tx, Version version, size_t writes) {
  ++stats_.commits;
  stats_.writes += writes;
  committed_[tx] = version;
  if (committed_.size() > kRetainedOutcomes) {
    forgotten_below_ = committed_.begin()->first + 1;
    committed_.erase(committed_.begin());
  }
  if (++commits_since_prune_ >= kPruneEvery) prune_conflict_index();
}

struct LevelDbStore::Group {
  leveldb::WriteBatch batch;
  std::vector<std::pair<TxId, size_t>> members;  // transaction, rows it writes
  Version last = 0;  // the last member's version; the members have consecutive versions up to it
  bool done = false;
  // Formed while a write was under way: its members had that write's time to join, so it is
  // written the moment that write ends (by the first of them to run), with no turn of the
  // scheduler first.
  bool behind_a_write = false;
  bool refused = false;  // never written: the store failed before its turn
  Status outcome;  // of the write: OK, or why it is ambiguous (refused: why the store failed)
  std::vector<fibers::Scheduler::WakeToken> waiting;
};

// A validated commit joins the forming group; its fiber writes that group when no write is
// under way, else waits for the write of its group.
Result<Version> LevelDbStore::commit_in_group(const Transaction& tx, const std::vector<uint64_t>& hashes) {
  const Micros began = clock_.now();
  const Version version = ++assigned_;
  if (forming_ == nullptr) {
    forming_ = std::make_shared<Group>();
    forming_->behind_a_write = writing_;
  }
  std::shared_ptr<Group> group = forming_;
  add_writes(group->batch, tx);
  validated(tx, version, hashes);
  group->members.emplace_back(tx.id(), tx.writes().size());
  group->last = version;
  pending_[tx.id()] = version;
  release(tx.id());
  fibers::Scheduler& scheduler = loop_->scheduler();
  bool yielded = false;
  while (!group->done) {
    if (!writing_ && group == forming_) {
      if (!failed_.is_ok()) {  // the write before this group's failed the store
        refuse_forming();
        continue;
      }
      // A group begun with the disk idle: one turn of the scheduler first, so that fibers
      // runnable now join it before it is written.
      if (!group->behind_a_write && !std::exchange(yielded, true)) {
        scheduler.yield();
        continue;
      }
      write_group();
      // The group that formed meanwhile goes to the disk before this fiber runs on.
      if (forming_ != nullptr && forming_->behind_a_write) scheduler.yield();
      continue;
    }
    group->waiting.push_back(scheduler.wake_token());
    (void)scheduler.park(fibers::kNever);
  }
  stats_.commit_wait_us += static_cast<uint64_t>(std::max<Micros>(0, clock_.now() - began));
  ++stats_.commit_waits;
  if (group->refused) return group->outcome;
  if (!group->outcome.is_ok()) return Status::ambiguous(group->outcome.message());
  return version;
}

void LevelDbStore::refuse_forming() {
  std::shared_ptr<Group> group = std::move(forming_);
  group->refused = true;
  group->outcome = failed_;
  for (const auto& [tx, writes] : group->members) pending_.erase(tx);
  group->done = true;
  for (const auto& token : group->waiting) loop_->scheduler().wake(token);
}

void LevelDbStore::set_loop(RealLoop* loop) {
  // A loop that ended waited for its write under way (RealLoop::run_blocking) and unwound
  // every fiber: nothing of it is left but a group still forming.
  assert(!writing_);
  if (loop == loop_) return;
  if (forming_ != nullptr) abandon_forming();
  written_waiters_.clear();  // the old loop's fibers, unwound
  loop_ = loop;
}

// Nobody waits for the forming group any more. Its commits took versions and told the
// conflict index of their writes; the versions are given again, and each key they wrote is
// taken as last written at the last version written, which can only refuse a commit that
// would not conflict (it is retried), never accept one that does. The empty ranges keep the
// puts they were told of (scans that could skip a range walk it instead: slower, never
// wrong).
void LevelDbStore::abandon_forming() {
  const std::shared_ptr<Group> group = std::move(forming_);
  for (const auto& [tx, writes] : group->members) pending_.erase(tx);
  group->refused = true;
  group->outcome = Status::aborted("the loop ended before the commit was written");
  group->done = true;
  std::vector<uint64_t> hashes;
  while (!written_.empty() && written_.back().first > version_) {
    hashes.push_back(written_.back().second);
    written_.pop_back();
  }
  for (const uint64_t hash : hashes) {  // pruned in turn, as any write at version_
    last_write_[hash] = version_;
    written_.emplace_back(version_, hash);
  }
  assigned_ = version_;
}

void LevelDbStore::wait_until_written(Version version) {
  if (loop_ == nullptr || !loop_->scheduler().in_fiber()) return;
  fibers::Scheduler& scheduler = loop_->scheduler();
  while (version_ < version && failed_.is_ok() && (writing_ || forming_ != nullptr)) {
    written_waiters_.push_back(scheduler.wake_token());
    (void)scheduler.park(fibers::kNever);
  }
}

// Writes the forming group as one synced WriteBatch on a helper thread of the loop; the
// bookkeeping runs even if the fiber is unwound meanwhile (the write has finished by then).
void LevelDbStore::write_group() {
  writing_ = true;
  std::shared_ptr<Group> group = std::move(forming_);  // commits from now on form the next group
  group->batch.Put(kVersionKey, u64_bytes(group->last));
  leveldb::Status written;
  Status point_recorded;
  struct Finish {
    LevelDbStore& store;
    Group& group;
    const leveldb::Status& written;
    const Status& point_recorded;
    ~Finish() {
      store.writing_ = false;
      // The group's commits stand; a store that cannot record how far it got goes no further.
      if (!point_recorded.is_ok() && store.failed_.is_ok()) store.failed_ = point_recorded;
      store.stats_.bytes += group.batch.ApproximateSize();
      ++store.stats_.synced_writes;
      if (written.ok()) {
        store.version_ = group.last;
        Version v = group.last + 1 - group.members.size();
        for (const auto& [tx, writes] : group.members) store.committed(tx, v++, writes);
      } else {
        // The record may be in the log and come back on reopen: nobody can say it did not
        // apply. The store is failed from now on.
        group.outcome = store.check(written);
      }
      for (const auto& [tx, writes] : group.members) store.pending_.erase(tx);
      group.done = true;
      fibers::Scheduler& scheduler = store.loop_->scheduler();
      // Commits that joined meanwhile run first: one of them writes their group at once.
      if (store.forming_ != nullptr) {
        for (const auto& token : store.forming_->waiting) scheduler.wake(token);
        store.forming_->waiting.clear();
      }
      for (const auto& token : group.waiting) scheduler.wake(token);
      for (const auto& token : store.written_waiters_) scheduler.wake(token);
      store.written_waiters_.clear();
    }
  } finish{*this, *group, written, point_recorded};
  leveldb::WriteOptions wo;
  wo.sync = options_.sync;
  leveldb::WriteBatch* batch = &group->batch;
  leveldb::DB* db = db_.get();
  const Micros began = clock_.now();
  const bool record_point = commit_point_due();
  if (record_point) commit_point_at_ = began;
  const Version last = group->last;
  loop_->run_blocking([&, wo, batch, db] {
    written = db->Write(wo, batch);
    if (written.ok() && record_point) point_recorded = record_commit_point(last);
  });
  stats_.write_us += static_cast<uint64_t>(std::max<Micros>(0, clock_.now() - began));
}

void LevelDbStore::validated(const Transaction& tx, Version version, const std::vector<uint64_t>& hashes) {
  auto hash = hashes.begin();
  for (const auto& [where, value] : tx.writes()) {
    // A later snapshot's writes to these keys conflict, before they are written too.
    last_write_[*hash] = version;
    written_.emplace_back(version, *hash++);
    if (value) empty_.put(where.first, where.second, version);
  }
}

// Entries no open snapshot predates can never conflict again.
void LevelDbStore::prune_conflict_index() {
  commits_since_prune_ = 0;
  Version oldest = version_;
  for (const auto& [id, tx] : open_) oldest = std::min(oldest, tx.version);
  // Each write once, in version order: a key written again since keeps its later version.
  while (!written_.empty() && written_.front().first <= oldest) {
    auto it = last_write_.find(written_.front().second);
    if (it != last_write_.end() && it->second <= oldest) last_write_.erase(it);
    written_.pop_front();
  }
  empty_.forget_puts(oldest);
}

void LevelDbStore::abort(const Transaction& tx) { release(tx.id()); }

Result<TxOutcome> LevelDbStore::resolve(TxId tx, Version* version) {
  if ((tx >> 40) != generation_) {
    return Status::not_found(fmt::format("transaction {} belongs to an earlier life of the store", tx));
  }
  if (!failed_.is_ok()) return failed_;
  if (tx < forgotten_below_) return Status::not_found(fmt::format("the outcome of transaction {} is no longer kept", tx));
  if (pending_.count(tx) != 0) return Status::unavailable(fmt::format("transaction {} is being written", tx));
  auto it = committed_.find(tx);
  if (it != committed_.end()) {
    if (version != nullptr) *version = it->second;
    return TxOutcome::kCommitted;
  }
  release(tx);  // it never commits now
  return TxOutcome::kNotCommitted;
}

Result<std::vector<Row>> LevelDbStore::dump(const std::string& table) {
  auto tx = begin();
  if (!tx) return tx.error();
  auto rows = read_range(*tx, table, "", "", SIZE_MAX);
  abort(*tx);
  return rows;
}

Result<bool> LevelDbStore::any_rows(const std::string& table_prefix) {
  if (!failed_.is_ok()) return failed_;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(checked_reads()));
  const std::string prefix = "d" + table_prefix;
  it->Seek(prefix);
  const bool any = it->Valid() && it->key().starts_with(prefix);
  if (Status bad = check(it->status()); !bad.is_ok()) return bad;
  return any;
}

Result<std::vector<std::string>> LevelDbStore::table_names(const std::string& table_prefix) {
  if (!failed_.is_ok()) return failed_;
  std::vector<std::string> out;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(checked_reads()));
  const std::string prefix = "d" + table_prefix;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);) {
    const std::string key = it->key().ToString();
    const size_t end = key.find('\0');
    if (end == std::string::npos) break;
    out.push_back(key.substr(1, end - 1));
    it->Seek(key.substr(0, end) + '\x01');  // past every row of this table
  }
  if (Status bad = check(it->status()); !bad.is_ok()) return bad;
  return out;
}

}  // namespace onceflow::real
