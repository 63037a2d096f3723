#include "checkers/kernel_checks.h"
#include "core/env/clock.h"

#include <fmt/format.h>

#include <set>

namespace onceflow::checkers {

Verdict ConservationCheck::check(const KernelHistory& h) const {
  // Every account opened is in the store or closed with its balance parked, never both, and
  // the money in them is the money they started with.
  int64_t total = 0;
  for (const std::string& account : h.accounts) {
    const auto stored = h.balances.find(account);
    const auto parked = h.parked.find(account);
    if (stored == h.balances.end() && parked == h.parked.end()) {
      return Verdict::fail(std::string(name()), fmt::format("account {} is missing from the store", account));
    }
    if (stored != h.balances.end() && parked != h.parked.end()) {
      return Verdict::fail(std::string(name()), fmt::format("account {} is in the store (balance {}) and closed with "
                                                            "its balance {} parked",
                                                            account, stored->second, parked->second));
    }
    total += stored != h.balances.end() ? stored->second : parked->second;
  }
  if (h.balances.size() + h.parked.size() != h.accounts.size()) {
    return Verdict::fail(std::string(name()), fmt::format("{} accounts and {} parked balances, {} accounts opened",
                                                          h.balances.size(), h.parked.size(), h.accounts.size()));
  }
  const int64_t expected = h.initial_balance * static_cast<int64_t>(h.accounts.size());
  if (total != expected) {
    return Verdict::fail(std::string(name()), fmt::format("balances sum to {}, expected {}", total, expected));
  }
  return Verdict::pass(std::string(name()), fmt::format("{} accounts sum to {}", h.accounts.size(), total));
}

Verdict LedgerCheck::check(const KernelHistory& h) const {
  std::map<std::string, std::set<uint64_t>> seqs;
  std::map<std::string, int64_t> replayed;
  for (const std::string& account : h.accounts) replayed[account] = h.initial_balance;
  for (const auto& t : h.log) {
    if (!seqs[t.client].insert(t.seq).second) {
      return Verdict::fail(std::string(name()), fmt::format("transfer {}#{} logged twice", t.client, t.seq));
    }
    replayed[t.from] -= t.amount;
    replayed[t.to] += t.amount;
  }
  for (const auto& [client, done] : h.progress) {
    const auto& got = seqs[client];
    if (got.size() != done || (!got.empty() && *got.rbegin() != done - 1)) {
      return Verdict::fail(std::string(name()),
                           fmt::format("client {} progress is {} but its log holds {} rows", client,
                                       done, got.size()));
    }
  }
  for (const auto& [account, balance] : h.balances) {
    if (replayed[account] != balance) {
      return Verdict::fail(std::string(name()),
                           fmt::format("account {} holds {}, its log replays to {}", account,
                                       balance, replayed[account]));
    }
  }
  return Verdict::pass(std::string(name()), fmt::format("{} transfers replay exactly", h.log.size()));
}

Verdict AmbiguityResolutionCheck::check(const KernelHistory& h) const {
  std::set<uint64_t> committed;
  for (const auto& c : h.commits) committed.insert(c.tx);
  for (const auto& r : h.resolutions) {
    const bool in_log = committed.count(r.tx) != 0;
    if (in_log != r.committed) {
      return Verdict::fail(std::string(name()),
                           fmt::format("client {} concluded tx {} {}, the store says {}", r.client,
                                       r.tx, r.committed ? "committed" : "not committed",
                                       in_log ? "committed" : "not committed"));
    }
  }
  return Verdict::pass(std::string(name()),
                       fmt::format("{} ambiguous commits resolved", h.resolutions.size()));
}

Verdict LeaseFencingCheck::check(const KernelHistory& h) const {
  size_t guarded = 0;
  for (const auto& c : h.commits) {
    for (uint64_t lease : c.prerequisites) {
      ++guarded;
      auto it = h.leases.find(lease);
      if (it == h.leases.end()) {
        return Verdict::fail(std::string(name()),
                             fmt::format("tx {} committed under unknown lease {}", c.tx, lease));
      }
      const auto& span = it->second;
      const bool after_end = span.ended_at_us >= 0 && c.store_time_us > span.ended_at_us;
      if (c.store_time_us < span.started_at_us || after_end) {
        return Verdict::fail(std::string(name()),
                             fmt::format("tx {} committed at {} under lease {} that lived {}..{}",
                                         c.tx, format_time(c.store_time_us), lease, format_time(span.started_at_us),
                                         span.ended_at_us < 0 ? std::string("(still live)") : format_time(span.ended_at_us)));
      }
    }
  }
  return Verdict::pass(std::string(name()), fmt::format("{} guarded commits inside their Lease", guarded));
}

Verdict KernelLivenessCheck::check(const KernelHistory& h) const {
  const int64_t deadline = h.heal_at_us + h.liveness_bound_us;
  if (h.drained_at_us < 0 || h.drained_at_us > deadline) {
    std::string behind;
    for (const auto& [client, want] : h.target) {
      auto it = h.progress.find(client);
      const uint64_t done = it == h.progress.end() ? 0 : it->second;
      if (done < want) behind += fmt::format(" {}={}/{}", client, done, want);
    }
    return Verdict::fail(std::string(name()),
                         fmt::format("not drained by {} (heal at {}); behind:{}", format_time(deadline),
                                     format_time(h.heal_at_us), behind));
  }
  return Verdict::pass(std::string(name()), fmt::format("drained at {}", format_time(h.drained_at_us)));
}

std::vector<std::unique_ptr<KernelChecker>> all_kernel_checkers() {
  std::vector<std::unique_ptr<KernelChecker>> out;
  out.push_back(std::make_unique<ConservationCheck>());
  out.push_back(std::make_unique<LedgerCheck>());
  out.push_back(std::make_unique<AmbiguityResolutionCheck>());
  out.push_back(std::make_unique<LeaseFencingCheck>());
  out.push_back(std::make_unique<KernelLivenessCheck>());
  return out;
}

std::vector<Verdict> run_kernel_checks(const KernelHistory& history) {
  std::vector<Verdict> out;
  for (const auto& checker : all_kernel_checkers()) out.push_back(checker->check(history));
  return out;
}

}  // namespace onceflow::checkers
