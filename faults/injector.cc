#include "faults/injector.h"

#include <algorithm>
#include <fmt/format.h>

#include <cassert>

namespace onceflow::faults {

FaultInjector::FaultInjector(sim::World& world, sim::StoreData* store, PipelineHooks* hooks)
    : world_(world), store_(store), base_link_(world.network().link(0, 0)), hooks_(hooks) {}

void FaultInjector::schedule(const FaultPlan& plan) {
  sim::Scheduler& sched = world_.scheduler();
  for (const Fault& f : plan.faults) {
    assert(f.duration_us >= 0 && f.at_us >= 0);
    assert(fault_is_global(f.kind) || world_.has_node(f.node));
    assert(!fault_needs_peer(f.kind) || world_.has_node(f.peer));
    assert(f.kind != FaultKind::kStoreUnavailable || store_ != nullptr);
    assert((f.kind != FaultKind::kPipelinePause && f.kind != FaultKind::kPipelineStop &&
            f.kind != FaultKind::kSinkErrors && f.kind != FaultKind::kSinkRejects &&
            f.kind != FaultKind::kDedupEviction) ||
           hooks_ != nullptr);
    const size_t id = faults_.size();
    faults_.push_back(f);
    sched.at(f.at_us, sim::kWorldNode, [this, id] { begin(id); });
    sched.at(f.at_us + f.duration_us, sim::kWorldNode, [this, id] { end(id); });
  }
  sched.at(plan.heal_at_us, sim::kWorldNode, [this] { heal_all(); });
}

void FaultInjector::begin(size_t id) {
  const Fault& f = faults_[id];
  world_.record(sim::kWorldNode, "fault begins: " + f.describe());
  if (inert_.count(f.kind) != 0) return;  // switched off: it does nothing
  active_.insert(id);
  switch (f.kind) {
    case FaultKind::kCrash:
      if (crashed_[node(f.node)]++ == 0) world_.crash(node(f.node));
      break;
    case FaultKind::kPointCrash:  // armed: the run's fault point policy fires it (simulated/pipeline_run.cc)
      break;
    case FaultKind::kPause:
      if (paused_[node(f.node)]++ == 0) world_.pause(node(f.node));
      break;
    case FaultKind::kPartition:
    case FaultKind::kOneWayPartition:
    case FaultKind::kIsolate:
    case FaultKind::kDrop:
    case FaultKind::kDuplicate:
    case FaultKind::kDelay:
    case FaultKind::kReorder:
    case FaultKind::kLostReplies:
      recompute_links();
      break;
    case FaultKind::kStoreUnavailable:
      if (store_unavailable_++ == 0) store_->unavailable = true;
      break;
    case FaultKind::kClockSkew:
      recompute_clocks(f.kind);
      break;
    case FaultKind::kClockJump:
      jumped_us_[node(f.node)] += f.amount_us;
      recompute_clocks(f.kind);
      break;
    case FaultKind::kLeasePingLoss:
      if (ping_loss_++ == 0) store_->ignore_pings = true;
      break;
    case FaultKind::kLeaseExpiry: {
      const Micros store_now = world_.has_node("store") ? world_.node_now(world_.find("store")) : world_.now();
      world_.record(sim::kWorldNode, fmt::format("{} leases expired", store_->expire_all_leases(store_now)));
      break;
    }
    case FaultKind::kSinkErrors:
      recompute_sink_errors();
      break;
    case FaultKind::kDedupEviction:
      if (auto* log = hooks_->target(f.node)) log->evict();
      break;
    case FaultKind::kPipelinePause:
    case FaultKind::kPipelineStop:
      if (pipeline_halts_++ == 0) set_pipeline(true, f.kind);
      break;
    case FaultKind::kSinkRejects:
      recompute_sink_errors();
      break;
    case FaultKind::kRebalance:
      if (!world_.is_up(node(f.node))) world_.start(node(f.node));
      break;
  }
}

void FaultInjector::recompute_sink_errors() {
  std::map<std::string, double> errors, rejects;
  for (size_t id : active_) {
    const Fault& f = faults_[id];
    if (f.kind == FaultKind::kSinkErrors) errors[f.node] = std::max(errors[f.node], f.intensity);
    if (f.kind == FaultKind::kSinkRejects) rejects[f.node] = std::max(rejects[f.node], f.intensity);
  }
  for (const Fault& f : faults_) {
    if (f.kind != FaultKind::kSinkErrors && f.kind != FaultKind::kSinkRejects) continue;
    if (auto* log = hooks_->target(f.node)) {
      log->error_probability = errors[f.node];
      log->reject_probability = rejects[f.node];
    }
  }
}

// Stops alternate between the two an operator can ask for: every input written before the
// request drained first, or "now" (what the sources have not read stays for the restart).
void FaultInjector::set_pipeline(bool halted, FaultKind kind) {
  if (!halted) {
    hooks_->set_pipeline_state("working");
  } else if (kind == FaultKind::kPipelinePause) {
    hooks_->set_pipeline_state("paused");
  } else {
    hooks_->set_pipeline_state(stops_++ % 2 == 0 ? "stopped" : "stopped now");
  }
}

void FaultInjector::end(size_t id) {
  if (active_.erase(id) == 0) return;  // already lifted by the heal phase
  const Fault& f = faults_[id];
  world_.record(sim::kWorldNode, "fault ends: " + f.describe());
  switch (f.kind) {
    case FaultKind::kCrash:
      if (--crashed_[node(f.node)] == 0 && !world_.is_up(node(f.node))) world_.start(node(f.node));
      break;
    case FaultKind::kPause:
      if (--paused_[node(f.node)] == 0) world_.resume(node(f.node));
      break;
    case FaultKind::kStoreUnavailable:
      if (--store_unavailable_ == 0) store_->unavailable = false;
      break;
    case FaultKind::kClockSkew:
    case FaultKind::kClockJump:
      recompute_clocks(f.kind);
      break;
    case FaultKind::kLeasePingLoss:
      if (--ping_loss_ == 0) store_->ignore_pings = false;
      break;
    case FaultKind::kLeaseExpiry:
    case FaultKind::kDedupEviction:
      break;  // instant: nothing to lift
    case FaultKind::kSinkErrors:
    case FaultKind::kSinkRejects:
      recompute_sink_errors();
      break;
    case FaultKind::kPipelinePause:
    case FaultKind::kPipelineStop:
      if (--pipeline_halts_ == 0) set_pipeline(false, f.kind);
      break;
    case FaultKind::kRebalance:
      world_.crash(node(f.node));  // the spare worker leaves again
      break;
    case FaultKind::kPointCrash:  // a node it crashed restarts on the policy's own timer
      break;
    default:
      recompute_links();
      break;
  }
}

void FaultInjector::heal_all() {
  world_.record(sim::kWorldNode, "heal: every fault lifted");
  while (!active_.empty()) end(*active_.begin());
}

void FaultInjector::recompute_links() {
  sim::SimNetwork& net = world_.network();
  net.heal();
  net.clear_link_overrides();
  const auto n = static_cast<sim::NodeIndex>(world_.node_count());
  std::map<sim::NodeIndex, sim::LinkOptions> from_node;  // options of links leaving a node
  for (size_t id : active_) {
    const Fault& f = faults_[id];
    if (fault_is_global(f.kind) || f.node.empty()) continue;
    const sim::NodeIndex a = node(f.node);
    switch (f.kind) {
      case FaultKind::kPartition: net.partition(a, node(f.peer), "partition"); break;
      case FaultKind::kOneWayPartition: net.block(a, node(f.peer), "one_way_partition"); break;
      case FaultKind::kIsolate: net.isolate(a, "isolate"); break;
      default: break;
    }
    auto [it, inserted] = from_node.try_emplace(a, base_link_);
    sim::LinkOptions& link = it->second;
    switch (f.kind) {
      case FaultKind::kDrop: link.drop_probability = std::max(link.drop_probability, f.intensity); break;
      case FaultKind::kDuplicate:
        link.duplicate_probability = std::max(link.duplicate_probability, f.intensity);
        break;
      case FaultKind::kDelay:
        link.latency_us_min += f.amount_us / 2;
        link.latency_us_mean += f.amount_us;
        break;
      case FaultKind::kReorder:
        link.reorder_probability = std::max(link.reorder_probability, f.intensity);
        link.reorder_delay_us_max = std::max(link.reorder_delay_us_max, f.amount_us);
        break;
      case FaultKind::kLostReplies:
        link.reply_drop_probability = std::max(link.reply_drop_probability, f.intensity);
        break;
      default: break;
    }
  }
  for (const auto& [a, link] : from_node) {
    for (sim::NodeIndex b = 0; b < n; ++b) {
      if (b != a) net.set_link(a, b, link);
    }
  }
}

void FaultInjector::recompute_clocks(FaultKind cause) {
  std::map<sim::NodeIndex, Micros> offset = jumped_us_;
  for (size_t id : active_) {
    const Fault& f = faults_[id];
    if (f.kind == FaultKind::kClockSkew) offset[node(f.node)] += f.amount_us;
  }
  for (sim::NodeIndex i = 0; i < world_.node_count(); ++i) {
    const Micros want = offset.count(i) != 0 ? offset[i] : 0;
    if (world_.clock_offset(i) != want) world_.set_clock_offset(i, want, std::string(fault_kind_name(cause)));
  }
}

sim::StoreOptions store_options(const BugSwitches& bugs) {
  sim::StoreOptions o;
  o.resolve_without_fence = bugs.store_resolve_without_fence;
  o.delete_not_a_write = bugs.store_delete_not_a_write;
  o.forget_ended_leases = bugs.store_forgets_ended_leases;
  return o;
}

std::map<std::string, FaultEffect> measure_world_effects(const FaultPlan& plan, sim::World& world,
                                                        const sim::StoreData& store_data) {
  const auto& net = world.network().stats();
  const auto& store = store_data.fault_effects;
  // Crashes and pauses that happened where and when a fault of the plan asked for them.
  const auto node_events = [&](FaultKind kind, const std::vector<std::pair<sim::NodeIndex, Micros>>& events) {
    uint64_t n = 0;
    for (const auto& event : events) {
      n += std::any_of(plan.faults.begin(), plan.faults.end(), [&](const Fault& f) {
        return f.kind == kind && f.at_us == event.second && world.has_node(f.node) && world.find(f.node) == event.first;
      });
    }
    return n;
  };
  const auto cut = [&](const char* cause) {
    auto it = net.dropped_at_cut.find(cause);
    return it == net.dropped_at_cut.end() ? uint64_t{0} : it->second;
  };
  const auto clock = [&](FaultKind kind) {
    auto it = world.clock_changes().find(std::string(fault_kind_name(kind)));
    return it == world.clock_changes().end() ? uint64_t{0} : it->second;
  };
  std::map<std::string, FaultEffect> out;
  for (const Fault& f : plan.faults) {
    FaultEffect e;
    switch (f.kind) {
      case FaultKind::kCrash: e = {"node restarts", node_events(f.kind, world.crashes())}; break;
      case FaultKind::kPause: e = {"running nodes paused", node_events(f.kind, world.pauses())}; break;
      case FaultKind::kPartition: e = {"packets lost to cut links", cut("partition")}; break;
      case FaultKind::kOneWayPartition: e = {"packets lost to cut links", cut("one_way_partition")}; break;
      case FaultKind::kIsolate: e = {"packets lost to cut links", cut("isolate")}; break;
      case FaultKind::kDrop: e = {"packets dropped", net.dropped_at_random}; break;
      case FaultKind::kDuplicate: e = {"packets duplicated", net.duplicated}; break;
      case FaultKind::kDelay: e = {"packets delayed", net.delayed}; break;
      case FaultKind::kReorder: e = {"packets reordered", net.reordered}; break;
      case FaultKind::kLostReplies:
        e = {"replies lost", net.replies_lost,
             {{"transactions resolved committed", store_data.resolved_committed()},
              {"transactions resolved not committed", store_data.resolved_not_committed()}}};
        break;
      case FaultKind::kStoreUnavailable: e = {"store requests refused", store.requests_refused}; break;
      case FaultKind::kClockSkew:
      case FaultKind::kClockJump: e = {"clock offsets changed", clock(f.kind)}; break;
      case FaultKind::kLeasePingLoss: e = {"Lease pings lost", store.pings_lost}; break;
      case FaultKind::kLeaseExpiry: e = {"Leases expired", store.leases_expired}; break;
      case FaultKind::kSinkErrors:
      case FaultKind::kSinkRejects:
      case FaultKind::kDedupEviction:
      case FaultKind::kPipelinePause:
      case FaultKind::kPipelineStop:
      case FaultKind::kRebalance: e = {"no such target in this world", 0}; break;
      case FaultKind::kPointCrash: e = {"crashes at the fault point", 0}; break;  // counted by the run
    }
    out[std::string(fault_kind_name(f.kind))] = std::move(e);
  }
  return out;
}

}  // namespace onceflow::faults
