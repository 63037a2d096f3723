#include "faults/swarm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <iterator>

namespace onceflow::faults {

std::string SwarmMix::describe() const {
  std::string out;
  for (const Entry& e : entries) {
    if (!out.empty()) out += ' ';
    out += fmt::format("{}@{:.2f}", fault_kind_name(e.kind), e.intensity);
  }
  return out.empty() ? "none" : out;
}

Fault draw_fault(Random& rng, const SwarmOptions& o, FaultKind kind, double intensity) {
  const Micros span = o.heal_at_us - o.start_us;
  Fault f;
  f.kind = kind;
  f.at_us = o.start_us + rng.uniform_range(0, span - 1);
  // Longer faults at higher intensity, never past the heal time.
  const Micros longest = std::max<Micros>(1, static_cast<Micros>(static_cast<double>(span) * 0.3 * intensity));
  f.duration_us = std::min(rng.uniform_range(1, longest), o.heal_at_us - f.at_us);

  std::vector<std::string> targets = o.nodes;
  const bool store_may_be_hit = kind == FaultKind::kCrash || kind == FaultKind::kPause ||
                                kind == FaultKind::kPartition || kind == FaultKind::kLostReplies;
  // The store's clock is left alone: Lease expiry needs a monotonic clock there.
  if (store_may_be_hit && !o.store_node.empty()) targets.push_back(o.store_node);
  f.node = targets[rng.uniform(targets.size())];
  if (fault_is_global(kind)) f.node.clear();
  if (kind == FaultKind::kSinkErrors || kind == FaultKind::kSinkRejects || kind == FaultKind::kDedupEviction) {
    f.node = o.sink_targets.empty() ? "" : o.sink_targets[rng.uniform(o.sink_targets.size())];
  }
  if (kind == FaultKind::kRebalance) {
    f.node = o.spare_workers.empty() ? "" : o.spare_workers[rng.uniform(o.spare_workers.size())];
  }

  if (fault_needs_peer(kind)) {
    std::vector<std::string> peers = o.nodes;
    if (!o.store_node.empty()) peers.push_back(o.store_node);
    peers.erase(std::remove(peers.begin(), peers.end(), f.node), peers.end());
    if (peers.empty()) {
      f.kind = FaultKind::kIsolate;
    } else {
      f.peer = peers[rng.uniform(peers.size())];
    }
  }
  switch (f.kind) {
    case FaultKind::kDrop: f.intensity = 0.05 + 0.45 * intensity; break;
    case FaultKind::kDuplicate: f.intensity = 0.05 + 0.45 * intensity; break;
    case FaultKind::kLostReplies: f.intensity = 0.1 + 0.6 * intensity; break;
    case FaultKind::kReorder:
      f.intensity = 0.1 + 0.6 * intensity;
      f.amount_us = 1'000 + static_cast<Micros>(49'000 * intensity);
      break;
    case FaultKind::kSinkErrors: f.intensity = 0.2 + 0.6 * intensity; break;
    case FaultKind::kSinkRejects: f.intensity = 0.05 + 0.25 * intensity; break;
    case FaultKind::kLeaseExpiry:
    case FaultKind::kDedupEviction: f.duration_us = 0; break;
    case FaultKind::kDelay: f.amount_us = 1'000 + static_cast<Micros>(99'000 * intensity); break;
    case FaultKind::kClockSkew:
    case FaultKind::kClockJump:
      f.amount_us = rng.uniform_range(-2 * kSeconds, 2 * kSeconds);
      break;
    default: break;
  }
  return f;
}

bool lacks_target(const Fault& f) {
  const bool needs_node = f.kind == FaultKind::kSinkErrors || f.kind == FaultKind::kSinkRejects ||
                          f.kind == FaultKind::kDedupEviction || f.kind == FaultKind::kRebalance;
  return needs_node && f.node.empty();
}

FaultPlan generate_swarm(Random& rng, const SwarmOptions& o, SwarmMix* mix) {
  assert(o.heal_at_us > o.start_us);
  assert(!o.nodes.empty());
  assert(o.max_faults_per_kind > 0);
  std::vector<FaultKind> kinds = o.kinds;
  if (kinds.empty()) kinds.assign(std::begin(kAllKernelFaultKinds), std::end(kAllKernelFaultKinds));

  SwarmMix chosen;
  for (FaultKind kind : kinds) {
    const bool pick = rng.bernoulli(0.5);
    const double intensity = 0.05 + 0.95 * rng.unit();
    if (pick) chosen.entries.push_back({kind, intensity});
  }
  if (chosen.entries.empty()) {
    chosen.entries.push_back({kinds[rng.uniform(kinds.size())], 0.05 + 0.95 * rng.unit()});
  }

  FaultPlan plan;
  plan.heal_at_us = o.heal_at_us;
  for (const auto& entry : chosen.entries) {
    const int count = 1 + static_cast<int>(entry.intensity * (o.max_faults_per_kind - 1) + 0.5);
    for (int i = 0; i < count; ++i) {
      Fault f = draw_fault(rng, o, entry.kind, entry.intensity);
      if (lacks_target(f)) continue;
      plan.faults.push_back(std::move(f));
    }
  }
  std::stable_sort(plan.faults.begin(), plan.faults.end(),
                   [](const Fault& a, const Fault& b) { return a.at_us < b.at_us; });
  if (mix != nullptr) *mix = chosen;
  return plan;
}

}  // namespace onceflow::faults
