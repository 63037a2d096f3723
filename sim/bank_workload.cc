#include "sim/bank_workload.h"

#include <fmt/format.h>

#include <cassert>
#include <charconv>

namespace onceflow::sim {

namespace {

constexpr const char* kAccounts = "accounts";
constexpr const char* kLog = "log";
constexpr const char* kProgress = "progress";
constexpr const char* kParked = "parked";  // client -> "<account>,<balance>" of the account it closed

std::string account_name(int i) { return fmt::format("acct-{:02}", i); }
std::string log_key(const std::string& client, uint64_t seq) {
  return fmt::format("{}/{:08}", client, seq);
}

int64_t parse_i64(const std::string& s) {
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  assert(ec == std::errc() && ptr == s.data() + s.size());
  (void)ptr, (void)ec;
  return v;
}

}  // namespace

// One client process: its volatile memory is this object.
class BankWorkload::Client {
 public:
  Client(BankWorkload& workload, NodeContext& node)
      : w_(workload),
        name_(node.name),
        runtime_(node.runtime),
        network_(node.network),
        random_(node.random),
        store_(node.network, kStoreNode, workload.options_.rpc_timeout_us) {
    node.network.serve("audit", [](const std::string&, std::string_view req) {
      return Result<std::string>("ok:" + std::string(req));
    });
    runtime_.spawn("lease", [this] { keep_lease(); });
    runtime_.spawn("transfers", [this] { transfer_loop(); });
  }

 private:
  void keep_lease() {
    while (true) {
      if (lease_ == 0) {
        auto lease = store_.start_lease(w_.options_.lease_ttl_us);
        if (lease) lease_ = *lease;
      } else if (store_.ping_lease(lease_).is_prerequisite_failed()) {
        lease_ = 0;  // lost: the next round starts a new one
        continue;
      }
      runtime_.sleep_for(w_.options_.ping_interval_us);
    }
  }

  void transfer_loop() {
    const auto& o = w_.options_;
    while (true) {
      if (lease_ == 0) {
        runtime_.sleep_for(o.retry_backoff_us);
        continue;
      }
      auto tx = store_.begin();
      if (!tx) {
        runtime_.sleep_for(o.retry_backoff_us);
        continue;
      }
      auto progress = store_.get(*tx, kProgress, name_);
      auto parked = o.close_percent > 0 ? store_.get(*tx, kParked, name_) : Result<std::optional<std::string>>(std::nullopt);
      if (!progress || !parked) {
        runtime_.sleep_for(o.retry_backoff_us);
        continue;
      }
      const uint64_t seq = progress->has_value() ? static_cast<uint64_t>(parse_i64(**progress)) : 0;
      if (seq >= o.transfers_per_client) {
        store_.abort(*tx);
        return;  // done
      }
      bool committed = false;
      if (parked->has_value()) {
        committed = reopen(*tx, lease_, seq, **parked);
      } else if (o.close_percent > 0 && static_cast<int>(random_.uniform(100)) < o.close_percent) {
        committed = close(*tx, lease_, account_name(static_cast<int>(random_.uniform(o.accounts))));
      } else {
        const int from = static_cast<int>(random_.uniform(o.accounts));
        int to = static_cast<int>(random_.uniform(o.accounts - 1));
        if (to >= from) ++to;
        const int64_t amount = random_.uniform_range(1, 10);
        // A transaction belongs to the Lease held when it began, as an epoch belongs to its job.
        committed = transfer(*tx, lease_, seq, account_name(from), account_name(to), amount);
      }
      if (!committed) runtime_.sleep_for(o.retry_backoff_us);
      audit(seq);
      runtime_.sleep_for(random_.uniform_range(0, o.think_time_us_max));
    }
  }

  // One attempt; true when it committed.
  bool transfer(Transaction& tx, LeaseId lease, uint64_t seq, const std::string& from, const std::string& to,
                int64_t amount) {
    auto a = store_.get(tx, kAccounts, from);
    auto b = store_.get(tx, kAccounts, to);
    if (!a || !b || !a->has_value() || !b->has_value()) return false;  // closed: try another
    tx.put(kAccounts, from, std::to_string(parse_i64(**a) - amount));
    tx.put(kAccounts, to, std::to_string(parse_i64(**b) + amount));
    tx.put(kLog, log_key(name_, seq), fmt::format("{},{},{}", from, to, amount));
    tx.put(kProgress, name_, std::to_string(seq + 1));
    return commit(tx, lease);
  }

  // Deletes `account`'s row and parks its balance under the client: a transfer that read the
  // account before must now conflict, or the account comes back beside its parked money.
  bool close(Transaction& tx, LeaseId lease, const std::string& account) {
    auto a = store_.get(tx, kAccounts, account);
    if (!a || !a->has_value()) return false;
    tx.erase(kAccounts, account);
    tx.put(kParked, name_, fmt::format("{},{}", account, **a));
    return commit(tx, lease);
  }

  // Re-creates the account the client closed, logged as a transfer of 0 to itself.
  bool reopen(Transaction& tx, LeaseId lease, uint64_t seq, const std::string& parked) {
    const auto comma = parked.find(',');
    const std::string account = parked.substr(0, comma);
    tx.erase(kParked, name_);
    tx.put(kAccounts, account, parked.substr(comma + 1));
    tx.put(kLog, log_key(name_, seq), fmt::format("{},{},0", account, account));
    tx.put(kProgress, name_, std::to_string(seq + 1));
    return commit(tx, lease);
  }

  bool commit(Transaction& tx, LeaseId lease) {
    auto result = store_.commit(tx, {lease});
    Observations& seen = w_.seen_;
    if (result) {
      ++seen.commits_ok;
      return true;
    }
    const Status& error = result.error();
    if (error.is_ambiguous()) {
      ++seen.ambiguous;
      return resolve(tx.id());
    }
    if (error.is_prerequisite_failed()) {
      ++seen.fenced;
      if (lease_ == lease) lease_ = 0;
    } else if (error.is_conflict()) {
      ++seen.conflicts;
    } else {
      ++seen.unavailable;
    }
    return false;
  }

  // Asks the store until it answers whether `tx` committed, and records the answer.
  bool resolve(TxId tx) {
    while (true) {
      auto outcome = store_.resolve(tx);
      if (outcome) {
        const bool committed = *outcome == TxOutcome::kCommitted;
        w_.seen_.resolutions.push_back({name_, tx, committed});
        return committed;
      }
      runtime_.sleep_for(w_.options_.retry_backoff_us);
    }
  }

  void audit(uint64_t seq) {
    const auto& peers = w_.clients_;
    const std::string& peer = peers[random_.uniform(peers.size())];
    auto reply = network_.call(peer, "audit", std::to_string(seq), w_.options_.rpc_timeout_us);
    if (reply) {
      ++w_.seen_.audits_ok;
    } else {
      ++w_.seen_.audits_failed;
    }
  }

  BankWorkload& w_;
  std::string name_;
  Runtime& runtime_;
  Network& network_;
  Random& random_;
  SimStoreClient store_;
  LeaseId lease_ = 0;
};

BankWorkload::BankWorkload(World& world, StoreData& data, Options options)
    : world_(world), data_(data), options_(options) {
  assert(options_.clients >= 1 && options_.accounts >= 2);
  assert(options_.ping_interval_us < options_.lease_ttl_us);
}

BankWorkload::~BankWorkload() = default;

void BankWorkload::start() {
  for (int i = 0; i < options_.accounts; ++i) {
    data_.load(kAccounts, account_name(i), std::to_string(options_.initial_balance));
  }
  const NodeIndex store = world_.add_node(kStoreNode, StoreServer::boot(data_, options_.store));
  world_.start(store);
  for (int i = 1; i <= options_.clients; ++i) clients_.push_back(fmt::format("client-{}", i));
  for (const std::string& name : clients_) {
    const NodeIndex n = world_.add_node(name, [this](NodeContext& node) -> std::shared_ptr<void> {
      return std::make_shared<Client>(*this, node);
    });
    world_.start(n);
  }
}

bool BankWorkload::drained() const {
  for (const std::string& client : clients_) {
    const auto progress = data_.latest(kProgress, client);
    if (!progress || static_cast<uint64_t>(parse_i64(*progress)) < options_.transfers_per_client) {
      return false;
    }
  }
  return true;
}

checkers::KernelHistory BankWorkload::history(Micros heal_at_us, Micros liveness_bound_us,
                                              Micros drained_at_us) const {
  checkers::KernelHistory h;
  h.seed = world_.seed();
  h.initial_balance = options_.initial_balance;
  h.heal_at_us = heal_at_us;
  h.liveness_bound_us = liveness_bound_us;
  h.drained_at_us = drained_at_us;
  for (int i = 0; i < options_.accounts; ++i) h.accounts.push_back(account_name(i));
  for (const Row& row : data_.read_range(kAccounts, "", "", data_.last_version(), SIZE_MAX)) {
    h.balances[row.key] = parse_i64(row.value);
  }
  for (const Row& row : data_.read_range(kParked, "", "", data_.last_version(), SIZE_MAX)) {
    const auto comma = row.value.find(',');
    h.parked[row.value.substr(0, comma)] = parse_i64(row.value.substr(comma + 1));
  }
  for (const Row& row : data_.read_range(kLog, "", "", data_.last_version(), SIZE_MAX)) {
    checkers::KernelHistory::Transfer t;
    const auto slash = row.key.rfind('/');
    t.client = row.key.substr(0, slash);
    t.seq = static_cast<uint64_t>(parse_i64(row.key.substr(slash + 1)));
    const auto c1 = row.value.find(',');
    const auto c2 = row.value.rfind(',');
    t.from = row.value.substr(0, c1);
    t.to = row.value.substr(c1 + 1, c2 - c1 - 1);
    t.amount = parse_i64(row.value.substr(c2 + 1));
    h.log.push_back(std::move(t));
  }
  for (const std::string& client : clients_) {
    const auto progress = data_.latest(kProgress, client);
    h.progress[client] = progress ? static_cast<uint64_t>(parse_i64(*progress)) : 0;
    h.target[client] = options_.transfers_per_client;
  }
  h.resolutions = seen_.resolutions;
  for (const auto& c : data_.commit_log()) {
    h.commits.push_back({c.tx, c.store_time, {c.prerequisites.begin(), c.prerequisites.end()}});
  }
  for (const auto& [id, lease] : data_.leases()) {
    // A Lease still marked active is valid only until its last ping plus TTL.
    const bool ended = lease.state != LeaseState::kActive;
    h.leases[id] = {lease.started_at, ended ? lease.ended_at : lease.last_ping + lease.ttl_us};
  }
  return h;
}

}  // namespace onceflow::sim
