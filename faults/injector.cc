#include "faults/injector.h"

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

void FaultInjector::set_pipeline(bool halted, FaultKind kind) {
  hooks_->set_pipeline_state(!halted ? "running" : kind == FaultKind::kPipelinePause ? "paused" : "stopped");
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

}  // namespace onceflow::faults
