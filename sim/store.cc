#include "sim/store.h"

#include <fmt/format.h>

#include <cassert>

#include "core/env/codec.h"
#include "core/env/clock.h"

namespace onceflow::sim {

namespace {

enum class Op : uint64_t {
  kBegin = 1,
  kGet,
  kScan,
  kCommit,
  kAbort,
  kResolve,
  kStartLease,
  kPingLease,
  kAbortLease,
  kLeaseState,
  kGetMany,
};

Encoder request(Op op) {
  Encoder out;
  out.u64(static_cast<uint64_t>(op));
  return out;
}

Status malformed() { return Status::invalid_argument("malformed store request"); }
Status bad_reply() { return Status::corruption("malformed store reply"); }

const StoreData::Versioned* visible(const StoreData::Chain& chain, Version snapshot) {
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if (it->version <= snapshot) return &*it;
  }
  return nullptr;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// StoreData

std::optional<std::string> StoreData::read(std::string_view table, std::string_view key, Version snapshot) const {
  const std::string* value = find(table, key, snapshot);
  return value == nullptr ? std::nullopt : std::optional<std::string>(*value);
}

const std::string* StoreData::find(std::string_view table, std::string_view key, Version snapshot) const {
  auto t = tables_.find(table);
  if (t == tables_.end()) return nullptr;
  auto k = t->second.find(key);
  if (k == t->second.end()) return nullptr;
  const Versioned* v = visible(k->second, snapshot);
  return v == nullptr || !v->value.has_value() ? nullptr : &*v->value;
}

std::vector<Row> StoreData::read_range(std::string_view table, std::string_view from, std::string_view to,
                                       Version snapshot, size_t limit) const {
  std::vector<Row> rows;
  for_each_row(table, from, to, snapshot, limit,
               [&](const std::string& key, const std::string& value) { rows.push_back({key, value}); });
  return rows;
}

size_t StoreData::for_each_row(std::string_view table, std::string_view from, std::string_view to,
                               Version snapshot, size_t limit,
                               const std::function<void(const std::string&, const std::string&)>& row) const {
  auto t = tables_.find(table);
  if (t == tables_.end()) return 0;
  size_t n = 0;
  for (auto k = t->second.lower_bound(from); k != t->second.end() && (to.empty() || k->first < to) && n < limit;
       ++k) {
    const Versioned* v = visible(k->second, snapshot);
    if (v == nullptr || !v->value.has_value()) continue;
    row(k->first, *v->value);
    ++n;
  }
  return n;
}

std::optional<std::string> StoreData::latest(const std::string& table,
                                             const std::string& key) const {
  return read(table, key, last_version_);
}

void StoreData::load(const std::string& table, const std::string& key, std::string value) {
  tables_[table][key].push_back({++last_version_, std::move(value)});
}

size_t StoreData::expire_all_leases(Micros now) {
  size_t expired = 0;
  for (auto& [id, lease] : leases_) {
    if (lease_state(id, now) != LeaseState::kActive) continue;
    lease.state = LeaseState::kExpired;
    lease.ended_at = now;
    ++expired;
  }
  fault_effects.leases_expired += expired;
  return expired;
}

LeaseState StoreData::lease_state(LeaseId lease, Micros now) {
  auto it = leases_.find(lease);
  if (it == leases_.end()) return LeaseState::kUnknown;
  LeaseRecord& l = it->second;
  if (l.state == LeaseState::kActive && now > l.last_ping + l.ttl_us) {
    l.state = LeaseState::kExpired;
    l.ended_at = l.last_ping + l.ttl_us;
  }
  return l.state;
}

// ---------------------------------------------------------------------------------------
// StoreServer

StoreServer::StoreServer(NodeContext& node, StoreData& data, StoreOptions options)
    : world_(node.world), node_(node.index), clock_(node.runtime.clock()), data_(data),
      options_(options) {
  assert(options_.tx_timeout_us > 0 && options_.outcome_retention > 0);
  // The handler never suspends: it runs inline, without a fiber per request.
  node.world.network().serve_inline(node.index, kStoreService, [this](const std::string&, std::string_view req) {
    return handle(req);
  });
}

BootFn StoreServer::boot(StoreData& data, StoreOptions options) {
  return [&data, options](NodeContext& node) -> std::shared_ptr<void> {
    return std::make_shared<StoreServer>(node, data, options);
  };
}

Result<std::string> StoreServer::handle(std::string_view req) {
  if (data_.unavailable) {
    ++data_.fault_effects.requests_refused;
    return Status::unavailable("store is unavailable");
  }
  const Micros now = clock_.now();
  expire_transactions(now);
  Decoder in(req);
  const auto op = static_cast<Op>(in.u64());
  if (!in.ok()) return malformed();
  Encoder out;
  switch (op) {
    case Op::kBegin:
      return begin(now);
    case Op::kGet: {
      const TxId tx = in.u64();
      const std::string_view table = in.bytes();
      const std::string_view key = in.bytes();
      if (!in.done()) return malformed();
      if (Status s = check_active(tx, now); !s) return s;
      const std::string* value = data_.find(table, key, active_.at(tx).snapshot);
      out.boolean(value != nullptr).bytes(value != nullptr ? std::string_view(*value) : std::string_view());
      return out.take();
    }
    case Op::kGetMany: {
      const TxId tx = in.u64();
      const std::string_view table = in.bytes();
      const uint64_t count = in.u64();
      std::vector<std::string_view> keys;
      for (uint64_t i = 0; in.ok() && i < count; ++i) keys.push_back(in.bytes());
      if (!in.done() || keys.size() != count) return malformed();
      if (Status s = check_active(tx, now); !s) return s;
      const Version snapshot = active_.at(tx).snapshot;
      out.u64(count);
      for (const std::string_view key : keys) {
        const std::string* value = data_.find(table, key, snapshot);
        out.boolean(value != nullptr).bytes(value != nullptr ? std::string_view(*value) : std::string_view());
      }
      return out.take();
    }
    case Op::kScan: {
      const TxId tx = in.u64();
      const std::string_view table = in.bytes();
      const std::string_view from = in.bytes();
      const std::string_view to = in.bytes();
      const uint64_t limit = in.u64();
      if (!in.done() || limit == 0) return malformed();
      if (Status s = check_active(tx, now); !s) return s;
      Encoder rows;
      rows.buffer().reserve(4096);
      const size_t n = data_.for_each_row(table, from, to, active_.at(tx).snapshot, limit,
                                          [&](const std::string& key, const std::string& value) {
                                            rows.bytes(key).bytes(value);
                                          });
      out.u64(n);
      out.buffer() += rows.buffer();
      return out.take();
    }
    case Op::kCommit:
      return commit(in, now);
    case Op::kAbort: {
      const TxId tx = in.u64();
      if (!in.done()) return malformed();
      if (active_.count(tx) != 0) {
        snapshots_.erase(snapshots_.find(active_.at(tx).snapshot));
        active_.erase(tx);
        record_outcome(tx, false, 0);
      }
      return std::string();
    }
    case Op::kResolve: {
      const TxId tx = in.u64();
      if (!in.done()) return malformed();
      return resolve(tx);
    }
    case Op::kStartLease: {
      const Micros ttl = in.i64();
      if (!in.done() || ttl <= 0) return malformed();
      const LeaseId id = ++data_.last_lease_;
      data_.leases_[id] = StoreData::LeaseRecord{ttl, now, now, LeaseState::kActive, 0};
      world_.record(node_, fmt::format("lease {} started ttl={}", id, format_time(ttl)));
      out.u64(id);
      return out.take();
    }
    case Op::kPingLease: {
      const LeaseId id = in.u64();
      if (!in.done()) return malformed();
      if (data_.ignore_pings) {
        ++data_.fault_effects.pings_lost;
        return Status::unavailable("the ping was lost");
      }
      const LeaseState state = data_.lease_state(id, now);
      if (state != LeaseState::kActive) {
        return Status::prerequisite_failed(
            fmt::format("lease {} is {}", id, lease_state_name(state)));
      }
      data_.leases_.at(id).last_ping = now;
      return std::string();
    }
    case Op::kAbortLease: {
      const LeaseId id = in.u64();
      if (!in.done()) return malformed();
      if (data_.lease_state(id, now) == LeaseState::kActive) {
        auto& lease = data_.leases_.at(id);
        lease.state = LeaseState::kAborted;
        lease.ended_at = now;
        world_.record(node_, fmt::format("lease {} aborted", id));
      }
      return std::string();
    }
    case Op::kLeaseState: {
      const LeaseId id = in.u64();
      if (!in.done()) return malformed();
      out.u64(static_cast<uint64_t>(data_.lease_state(id, now)));
      return out.take();
    }
  }
  return malformed();
}

Result<std::string> StoreServer::begin(Micros now) {
  const TxId tx = ++data_.last_tx_;
  active_[tx] = ActiveTx{data_.last_version_, now};
  snapshots_.insert(data_.last_version_);
  Encoder out;
  out.u64(tx).u64(data_.last_version_);
  return out.take();
}

Status StoreServer::check_active(TxId tx, Micros) {
  if (active_.count(tx) != 0) return Status::ok();
  return Status::unavailable(fmt::format("transaction {} is not active", tx));
}

Result<std::string> StoreServer::commit(Decoder& in, Micros now) {
  const TxId tx = in.u64();
  const uint64_t prerequisite_count = in.u64();
  std::vector<LeaseId> prerequisites;
  for (uint64_t i = 0; in.ok() && i < prerequisite_count; ++i) prerequisites.push_back(in.u64());
  const uint64_t write_count = in.u64();
  struct Write {
    std::string_view table, key;  // into the request
    std::optional<std::string_view> value;
  };
  std::vector<Write> writes;
  writes.reserve(std::min<uint64_t>(write_count, 4096));
  for (uint64_t i = 0; in.ok() && i < write_count; ++i) {
    Write w{in.bytes(), in.bytes(), std::nullopt};
    if (in.boolean()) {
      w.value = in.bytes();
    } else {
      (void)in.bytes();
    }
    // The client sends its write set in (table, key) order, each row once; the apply below
    // (its tombstones) relies on a row being written once per commit.
    if (!writes.empty() && std::pair(w.table, w.key) <= std::pair(writes.back().table, writes.back().key)) {
      return malformed();
    }
    writes.push_back(w);
  }
  if (!in.done()) return malformed();

  // A repeated commit request (a duplicate packet or a retry) gets the first answer again.
  if (auto o = data_.outcomes_.find(tx); o != data_.outcomes_.end()) {
    if (!o->second.committed) return Status::unavailable(fmt::format("transaction {} ended", tx));
    Encoder out;
    out.u64(o->second.version);
    return out.take();
  }
  if (Status s = check_active(tx, now); !s) return s;
  const Version snapshot = active_.at(tx).snapshot;
  snapshots_.erase(snapshots_.find(snapshot));
  active_.erase(tx);

  for (LeaseId lease : prerequisites) {
    const LeaseState state = data_.lease_state(lease, now);
    if (state != LeaseState::kActive && !forgotten(lease, now)) {
      record_outcome(tx, false, 0);
      data_.rejections_.push_back({tx, lease, now, state});
      world_.record(node_, fmt::format("commit tx {} rejected: lease {} is {}", tx,
                                                  lease, lease_state_name(state)));
      return Status::prerequisite_failed(
          fmt::format("lease {} is {}", lease, lease_state_name(state)));
    }
  }
  // The rows written, looked up once for the conflict check and the apply; the writes come
  // sorted by (table, key), so each table is looked up once.
  struct Place {
    StoreData::Table* table = nullptr;
    StoreData::Table::iterator row;
    bool exists = false;
  };
  std::vector<Place> places(writes.size());
  StoreData::Table* table = nullptr;
  std::string_view table_name;
  for (size_t i = 0; i < writes.size(); ++i) {
    const Write& w = writes[i];
    if (table == nullptr || w.table != table_name) {
      auto t = data_.tables_.find(w.table);
      if (t == data_.tables_.end()) t = data_.tables_.emplace(std::string(w.table), StoreData::Table{}).first;
      table = &t->second;
      table_name = w.table;
    }
    Place& place = places[i];
    place.table = table;
    place.row = table->find(w.key);
    place.exists = place.row != table->end();
    const bool deleted = place.exists && !place.row->second.empty() && !place.row->second.back().value;
    if (place.exists && !place.row->second.empty() && place.row->second.back().version > snapshot &&
        !(deleted && options_.delete_not_a_write)) {
      record_outcome(tx, false, 0);
      return Status::conflict(fmt::format("{}/{} written after snapshot {}", w.table, w.key, snapshot));
    }
  }
  const Version version = ++data_.last_version_;
  for (size_t i = 0; i < writes.size(); ++i) {
    const Write& w = writes[i];
    Place& place = places[i];
    if (!place.exists) place.row = place.table->emplace(std::string(w.key), StoreData::Chain{}).first;
    if (!w.value) data_.tombstones_.push_back({place.table, place.row, version});
    auto& written = place.row->second.emplace_back();
    written.version = version;
    if (w.value) written.value.emplace(*w.value);
    prune(place.row->second);
  }
  forget_tombstones();
  record_outcome(tx, true, version);
  data_.commit_log_.push_back({version, tx, now, prerequisites, writes.size()});
  if (data_.after_commit) data_.after_commit(data_.commit_log_.back());
  world_.record(node_, fmt::format("commit tx {} version {} writes {}", tx, version,
                                              writes.size()));
  Encoder out;
  out.u64(version);
  return out.take();
}

Result<std::string> StoreServer::resolve(TxId tx) {
  Encoder out;
  if (auto o = data_.outcomes_.find(tx); o != data_.outcomes_.end()) {
    ++(o->second.committed ? data_.resolved_committed_ : data_.resolved_not_committed_);
    out.boolean(o->second.committed).u64(o->second.version);
    return out.take();
  }
  if (tx < data_.outcomes_forgotten_below_) {
    return Status::unavailable(fmt::format("outcome of transaction {} is forgotten", tx));
  }
  if (tx > data_.last_tx_) return Status::invalid_argument(fmt::format("no transaction {}", tx));
  // Still active, expired or lost in a store crash: fence it so that it never commits.
  if (auto a = active_.find(tx); a != active_.end()) {
    if (options_.resolve_without_fence) {  // the bug: the answer, without the fence
      ++data_.resolved_not_committed_;
      out.boolean(false).u64(0);
      return out.take();
    }
    snapshots_.erase(snapshots_.find(a->second.snapshot));
    active_.erase(a);
  }
  record_outcome(tx, false, 0);
  ++data_.resolved_not_committed_;
  out.boolean(false).u64(0);
  return out.take();
}

// The bug store-forgets-ended-leases: a Lease ended more than two TTLs ago is pruned, and a
// prerequisite the store no longer knows passes.
bool StoreServer::forgotten(LeaseId lease, Micros now) const {
  if (!options_.forget_ended_leases) return false;
  auto it = data_.leases_.find(lease);
  return it != data_.leases_.end() && it->second.state != LeaseState::kActive &&
         now > it->second.ended_at + 2 * it->second.ttl_us;
}

void StoreServer::expire_transactions(Micros now) {
  while (!active_.empty() && active_.begin()->second.began_at + options_.tx_timeout_us < now) {
    snapshots_.erase(snapshots_.find(active_.begin()->second.snapshot));
    record_outcome(active_.begin()->first, false, 0);
    active_.erase(active_.begin());
  }
}

void StoreServer::record_outcome(TxId tx, bool committed, Version version) {
  data_.outcomes_[tx] = StoreData::Outcome{committed, version};
  while (data_.outcomes_.size() > options_.outcome_retention) {
    data_.outcomes_forgotten_below_ = data_.outcomes_.begin()->first + 1;
    data_.outcomes_.erase(data_.outcomes_.begin());
  }
}

Version StoreServer::oldest_snapshot() const {
  return snapshots_.empty() ? data_.last_version_ : *snapshots_.begin();
}

void StoreServer::forget_tombstones() {
  const Version oldest = oldest_snapshot();
  auto& queue = data_.tombstones_;
  while (!queue.empty() && queue.front().version <= oldest) {
    const StoreData::Tombstone& t = queue.front();
    // Still erased by that very write: nothing before it is visible to anyone any more. (Only
    // the newest write of a row can remove it, so no older tombstone is left pointing at it.)
    const StoreData::Chain& chain = t.row->second;
    if (!chain.empty() && chain.back().version == t.version && !chain.back().value.has_value()) t.table->erase(t.row);
    queue.pop_front();
  }
}

void StoreServer::prune(StoreData::Chain& chain) const {
  // Keep the newest version every active snapshot can see, and everything after it.
  const Version oldest = oldest_snapshot();
  size_t keep_from = 0;
  for (size_t i = 0; i < chain.size(); ++i) {
    if (chain[i].version <= oldest) keep_from = i;
  }
  if (keep_from > 0) chain.erase(chain.begin(), chain.begin() + static_cast<long>(keep_from));
}

// ---------------------------------------------------------------------------------------
// SimStoreClient

SimStoreClient::SimStoreClient(Network& network, std::string store_node, Micros rpc_timeout_us)
    : network_(network), store_node_(std::move(store_node)), rpc_timeout_us_(rpc_timeout_us) {
  assert(rpc_timeout_us_ > 0);
}

Result<std::string> SimStoreClient::rpc(std::string req) {
  auto reply = network_.call(store_node_, kStoreService, std::move(req), rpc_timeout_us_);
  if (!reply && (reply.error().is_timeout() || reply.error().is_unreachable())) {
    return Status::unavailable(reply.error().to_string());
  }
  return reply;
}

Result<LeaseId> SimStoreClient::start_lease(Micros ttl_us) {
  assert(ttl_us > 0);
  Encoder req = request(Op::kStartLease);
  req.i64(ttl_us);
  auto reply = rpc(req.take());
  if (!reply) return reply.error();
  Decoder in(*reply);
  const LeaseId id = in.u64();
  if (!in.done()) return bad_reply();
  return id;
}

Status SimStoreClient::ping_lease(LeaseId lease) {
  Encoder req = request(Op::kPingLease);
  req.u64(lease);
  return rpc(req.take()).status();
}

Status SimStoreClient::abort_lease(LeaseId lease) {
  Encoder req = request(Op::kAbortLease);
  req.u64(lease);
  return rpc(req.take()).status();
}

Result<LeaseState> SimStoreClient::lease_state(LeaseId lease) {
  Encoder req = request(Op::kLeaseState);
  req.u64(lease);
  auto reply = rpc(req.take());
  if (!reply) return reply.error();
  Decoder in(*reply);
  const uint64_t state = in.u64();
  if (!in.done() || state > static_cast<uint64_t>(LeaseState::kUnknown)) return bad_reply();
  return static_cast<LeaseState>(state);
}

Result<Transaction> SimStoreClient::begin() {
  auto reply = rpc(request(Op::kBegin).take());
  if (!reply) return reply.error();
  Decoder in(*reply);
  const TxId tx = in.u64();
  const Version snapshot = in.u64();
  if (!in.done()) return bad_reply();
  return Transaction(tx, snapshot);
}

Result<std::optional<std::string>> SimStoreClient::read(const Transaction& tx,
                                                        const std::string& table,
                                                        const std::string& key) {
  Encoder req = request(Op::kGet);
  req.u64(tx.id()).bytes(table).bytes(key);
  auto reply = rpc(req.take());
  if (!reply) return reply.error();
  Decoder in(*reply);
  const bool present = in.boolean();
  std::string value = in.string();
  if (!in.done()) return bad_reply();
  return present ? std::optional<std::string>(std::move(value)) : std::nullopt;
}

Result<std::vector<std::optional<std::string>>> SimStoreClient::read_many(const Transaction& tx,
                                                                          const std::string& table,
                                                                          const std::vector<std::string>& keys) {
  Encoder req = request(Op::kGetMany);
  req.u64(tx.id()).bytes(table).u64(keys.size());
  for (const std::string& key : keys) req.bytes(key);
  auto reply = rpc(req.take());
  if (!reply) return reply.error();
  Decoder in(*reply);
  const uint64_t count = in.u64();
  std::vector<std::optional<std::string>> values;
  for (uint64_t i = 0; in.ok() && i < count && i < keys.size(); ++i) {
    const bool present = in.boolean();
    std::string value = in.string();
    values.push_back(present ? std::optional<std::string>(std::move(value)) : std::nullopt);
  }
  if (!in.done() || values.size() != keys.size()) return bad_reply();
  return values;
}

Result<std::vector<Row>> SimStoreClient::read_range(const Transaction& tx,
                                                    const std::string& table,
                                                    const std::string& from,
                                                    const std::string& to, size_t limit) {
  Encoder req = request(Op::kScan);
  req.u64(tx.id()).bytes(table).bytes(from).bytes(to).u64(limit);
  auto reply = rpc(req.take());
  if (!reply) return reply.error();
  Decoder in(*reply);
  const uint64_t count = in.u64();
  std::vector<Row> rows;
  for (uint64_t i = 0; in.ok() && i < count && i < limit; ++i) {
    Row row;
    row.key = in.string();
    row.value = in.string();
    rows.push_back(std::move(row));
  }
  if (!in.done() || rows.size() != count) return bad_reply();
  return rows;
}

Result<Version> SimStoreClient::commit(const Transaction& tx,
                                       const std::vector<LeaseId>& prerequisites) {
  Encoder req = request(Op::kCommit);
  req.u64(tx.id()).u64(prerequisites.size());
  for (LeaseId lease : prerequisites) req.u64(lease);
  req.u64(tx.write_count());
  size_t bytes = 0;
  for (const auto& [where, value] : tx.writes()) bytes += where.first.size() + where.second.size() + (value ? value->size() : 0) + 8;
  req.buffer().reserve(req.buffer().size() + bytes);
  for (const auto& [where, value] : tx.writes()) {
    req.bytes(where.first).bytes(where.second).boolean(value.has_value());
    req.bytes(value ? std::string_view(*value) : std::string_view());
  }
  auto reply = network_.call(store_node_, kStoreService, req.take(), rpc_timeout_us_);
  if (!reply) {
    // No answer: the commit may have applied. A refusal means it never reached the store.
    if (reply.error().is_timeout()) return Status::ambiguous(reply.error().to_string());
    if (reply.error().is_unreachable()) return Status::unavailable(reply.error().to_string());
    return reply.error();
  }
  Decoder in(*reply);
  const Version version = in.u64();
  if (!in.done()) return bad_reply();
  return version;
}

void SimStoreClient::abort(const Transaction& tx) {
  Encoder req = request(Op::kAbort);
  req.u64(tx.id());
  (void)rpc(req.take());
}

Result<TxOutcome> SimStoreClient::resolve(TxId tx, Version* version) {
  Encoder req = request(Op::kResolve);
  req.u64(tx);
  auto reply = rpc(req.take());
  if (!reply) return reply.error();
  Decoder in(*reply);
  const bool committed = in.boolean();
  const Version at = in.u64();
  if (!in.done()) return bad_reply();
  if (version != nullptr) *version = at;
  return committed ? TxOutcome::kCommitted : TxOutcome::kNotCommitted;
}

}  // namespace onceflow::sim
