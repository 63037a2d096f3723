#include "real/leveldb_store.h"

#include <fmt/format.h>
#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include "core/env/codec.h"

namespace onceflow::real {
namespace {

// Layout: data rows under "d" + table + '\0' + key; the store's own records under "m".
constexpr char kGenerationKey[] = "m:generation";
constexpr char kVersionKey[] = "m:version";
constexpr size_t kRetainedOutcomes = 1 << 20;
constexpr uint64_t kPruneEvery = 256;  // commits between prunings of the conflict index

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

Result<uint64_t> read_u64(leveldb::DB& db, const char* key) {
  std::string value;
  const leveldb::Status s = db.Get(leveldb::ReadOptions(), key, &value);
  if (s.IsNotFound()) return uint64_t{0};
  if (!s.ok()) return Status::unavailable(s.ToString());
  Decoder d(value);
  const uint64_t v = d.u64();
  if (!d.done()) return Status::corruption(fmt::format("{} does not decode", key));
  return v;
}

Status from_leveldb(const leveldb::Status& s) {
  if (s.ok()) return Status::ok();
  if (s.IsCorruption()) return Status::corruption(s.ToString());
  return Status::unavailable(s.ToString());
}

uint64_t lease_generation(LeaseId lease) { return lease >> 32; }

}  // namespace

Result<std::unique_ptr<LevelDbStore>> LevelDbStore::open(const std::string& dir, const Clock& clock, Options options) {
  leveldb::Options db_options;
  db_options.create_if_missing = true;
  leveldb::DB* raw = nullptr;
  const leveldb::Status s = leveldb::DB::Open(db_options, dir, &raw);
  if (!s.ok()) return Status::unavailable(fmt::format("cannot open the store in {}: {}", dir, s.ToString()));
  std::unique_ptr<leveldb::DB> db(raw);
  auto generation = read_u64(*db, kGenerationKey);
  if (!generation) return generation.error();
  auto version = read_u64(*db, kVersionKey);
  if (!version) return version.error();
  // A new life: every Lease of the previous one is over.
  const uint64_t next_generation = *generation + 1;
  leveldb::WriteOptions sync;
  sync.sync = true;
  if (Status put = from_leveldb(db->Put(sync, kGenerationKey, u64_bytes(next_generation))); !put.is_ok()) return put;
  return std::unique_ptr<LevelDbStore>(new LevelDbStore(std::move(db), clock, options, next_generation, *version));
}

LevelDbStore::LevelDbStore(std::unique_ptr<leveldb::DB> db, const Clock& clock, Options options, uint64_t generation,
                           Version version)
    : db_(std::move(db)), clock_(clock), options_(options), generation_(generation), version_(version) {}

LevelDbStore::~LevelDbStore() {
  for (auto& [id, tx] : open_) db_->ReleaseSnapshot(tx.snapshot);
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
    return Status::prerequisite_failed(fmt::format("Lease {:x} is {}", lease, lease_state_name(state)));
  }
  leases_[lease].last_ping = clock_.now();
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
  const OpenTx* open = find_open(tx);
  if (open == nullptr) return Status::aborted(fmt::format("transaction {} is over", tx.id()));
  leveldb::ReadOptions ro;
  ro.snapshot = open->snapshot;
  std::string value;
  const leveldb::Status s = db_->Get(ro, data_key(table, key), &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return from_leveldb(s);
  return std::optional<std::string>(std::move(value));
}

Result<std::vector<Row>> LevelDbStore::read_range(const Transaction& tx, const std::string& table,
                                                  const std::string& from, const std::string& to, size_t limit) {
  const OpenTx* open = find_open(tx);
  if (open == nullptr) return Status::aborted(fmt::format("transaction {} is over", tx.id()));
  leveldb::ReadOptions ro;
  ro.snapshot = open->snapshot;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(ro));
  const std::string prefix = table_prefix(table);
  std::vector<Row> out;
  for (it->Seek(prefix + from); it->Valid() && out.size() < limit; it->Next()) {
    const leveldb::Slice k = it->key();
    if (!k.starts_with(prefix)) break;
    std::string key(k.data() + prefix.size(), k.size() - prefix.size());
    if (!to.empty() && key >= to) break;
    out.push_back({std::move(key), it->value().ToString()});
  }
  if (!it->status().ok()) return from_leveldb(it->status());
  return out;
}

Result<Version> LevelDbStore::commit(const Transaction& tx, const std::vector<LeaseId>& prerequisites) {
  if (broken_) return Status::unavailable("an earlier write failed; the store must be reopened");
  const OpenTx* open = find_open(tx);
  if (open == nullptr) return Status::aborted(fmt::format("transaction {} is over", tx.id()));
  for (const LeaseId lease : prerequisites) {
    const LeaseState state = state_of(lease);
    if (state != LeaseState::kActive) {
      release(tx.id());
      return Status::prerequisite_failed(fmt::format("Lease {:x} is {}", lease, lease_state_name(state)));
    }
  }
  for (const auto& [where, value] : tx.writes()) {
    auto it = last_write_.find(where);
    if (it != last_write_.end() && it->second > open->version) {
      release(tx.id());
      return Status::conflict(fmt::format("{}/{} was written at version {} after snapshot {}", where.first,
                                          where.second, it->second, tx.snapshot()));
    }
  }
  const Version version = version_ + 1;
  leveldb::WriteBatch batch;
  for (const auto& [where, value] : tx.writes()) {
    if (value) {
      batch.Put(data_key(where.first, where.second), *value);
    } else {
      batch.Delete(data_key(where.first, where.second));
    }
  }
  batch.Put(kVersionKey, u64_bytes(version));
  leveldb::WriteOptions wo;
  wo.sync = options_.sync;
  if (Status written = from_leveldb(db_->Write(wo, &batch)); !written.is_ok()) {
    // The record may be in the log and come back on reopen: nobody can say it did not apply.
    release(tx.id());
    broken_ = true;
    return Status::ambiguous(written.message());
  }
  version_ = version;
  ++stats_.commits;
  stats_.writes += tx.writes().size();
  stats_.bytes += batch.ApproximateSize();
  for (const auto& [where, value] : tx.writes()) last_write_[where] = version;
  committed_[tx.id()] = version;
  if (committed_.size() > kRetainedOutcomes) {
    forgotten_below_ = committed_.begin()->first + 1;
    committed_.erase(committed_.begin());
  }
  release(tx.id());
  if (++commits_since_prune_ >= kPruneEvery) prune_conflict_index();
  return version;
}

// Entries no open snapshot predates can never conflict again.
void LevelDbStore::prune_conflict_index() {
  commits_since_prune_ = 0;
  Version oldest = version_;
  for (const auto& [id, tx] : open_) oldest = std::min(oldest, tx.version);
  std::erase_if(last_write_, [oldest](const auto& entry) { return entry.second <= oldest; });
}

void LevelDbStore::abort(const Transaction& tx) { release(tx.id()); }

Result<TxOutcome> LevelDbStore::resolve(TxId tx, Version* version) {
  if ((tx >> 40) != generation_) {
    return Status::not_found(fmt::format("transaction {} belongs to an earlier life of the store", tx));
  }
  if (broken_) return Status::unavailable("an earlier write failed; the store must be reopened");
  if (tx < forgotten_below_) return Status::not_found(fmt::format("the outcome of transaction {} is no longer kept", tx));
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

bool LevelDbStore::any_rows(const std::string& table_prefix) {
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  const std::string prefix = "d" + table_prefix;
  it->Seek(prefix);
  return it->Valid() && it->key().starts_with(prefix);
}

std::vector<std::string> LevelDbStore::table_names(const std::string& table_prefix) {
  std::vector<std::string> out;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  const std::string prefix = "d" + table_prefix;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix);) {
    const std::string key = it->key().ToString();
    const size_t end = key.find('\0');
    if (end == std::string::npos) break;
    out.push_back(key.substr(1, end - 1));
    it->Seek(key.substr(0, end) + '\x01');  // past every row of this table
  }
  return out;
}

}  // namespace onceflow::real
