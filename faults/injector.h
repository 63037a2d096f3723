// FaultInjector: applies a FaultPlan to a simulated World.
//
// Faults may overlap. Node faults are counted (a node crashed by two overlapping faults
// restarts when the later one ends); link faults, partitions and clock skews are recomputed
// from the set of active faults whenever one starts or ends, so ending one never lifts
// another. At the plan's heal time every fault still active is lifted.
//
// Thread-safety: none; it schedules its actions on the world's scheduler and must outlive
// the run.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/engine.h"
#include "faults/fault.h"
#include "sim/queue_target.h"
#include "sim/store.h"
#include "sim/world.h"

namespace onceflow::faults {

// What engine-level faults act on, provided by the pipeline's simulated deployment.
struct PipelineHooks {
  // Asks the controller to move the pipeline to "paused", "stopped" (it drains first) or "working".
  std::function<void(const std::string& state)> set_pipeline_state;
  // The fault switches of the external system on node `node`, or null.
  std::function<sim::TargetFaults*(const std::string& node)> target;
};

class FaultInjector {
 public:
  // `store` may be null when the plan has no store faults; `hooks` when it has no
  // engine-level faults.
  FaultInjector(sim::World& world, sim::StoreData* store, PipelineHooks* hooks = nullptr);

  // Schedules every fault of `plan` and its heal phase. REQUIRES: every node named exists.
  void schedule(const FaultPlan& plan);

  size_t active_faults() const { return active_.size(); }
  // Makes faults of `kind` inert: they are scheduled and reported as usual, and do nothing.
  // For checking the checks: an exploration must notice (its effects say 0).
  void make_inert(FaultKind kind) { inert_.insert(kind); }

 private:
  void begin(size_t id);
  void end(size_t id);
  void heal_all();
  void recompute_links();
  void recompute_clocks(FaultKind cause);
  void recompute_sink_errors();
  void set_pipeline(bool halted, FaultKind kind);
  sim::NodeIndex node(const std::string& name) const { return world_.find(name); }

  sim::World& world_;
  sim::StoreData* store_;
  sim::LinkOptions base_link_;
  std::vector<Fault> faults_;
  std::set<size_t> active_;
  uint64_t stops_ = 0;  // pipeline stops asked for so far
  std::set<FaultKind> inert_;
  std::map<sim::NodeIndex, int> crashed_;
  std::map<sim::NodeIndex, int> paused_;
  std::map<sim::NodeIndex, Micros> jumped_us_;  // permanent clock jumps per node
  int store_unavailable_ = 0;
  int ping_loss_ = 0;
  int pipeline_halts_ = 0;
  PipelineHooks* hooks_;
};

// The simulated store's options for the store bugs switched on in `bugs` (store-*).
sim::StoreOptions store_options(const BugSwitches& bugs);

// What each fault kind of `plan` did, measured where it lands (the node, the network, the
// store), not where it is injected: an injector that stopped injecting shows 0.
std::map<std::string, FaultEffect> measure_world_effects(const FaultPlan& plan, sim::World& world,
                                                        const sim::StoreData& store);

}  // namespace onceflow::faults
