#include "simulated/selftest.h"

#include "checkers/kernel_checks.h"
#include "faults/injector.h"
#include "faults/swarm.h"

namespace onceflow::simulated {

RunOutcome run_kernel_selftest(const SelftestOptions& options) {
  sim::World::Options world_options;
  world_options.seed = options.seed;
  world_options.trace_keep_lines = options.trace_keep_lines;
  sim::World world(world_options);
  sim::StoreData data;
  sim::BankWorkload::Options workload_options = options.workload;
  workload_options.store = faults::store_options(options.bugs);
  sim::BankWorkload workload(world, data, workload_options);
  workload.start();

  RunOutcome result;
  result.seed = options.seed;
  if (options.swarm) {
    faults::SwarmOptions swarm;
    swarm.start_us = options.faults_start_us;
    swarm.heal_at_us = options.heal_at_us;
    swarm.nodes = workload.client_names();
    swarm.store_node = sim::BankWorkload::kStoreNode;
    Xoshiro256StarStar rng = Xoshiro256StarStar(options.seed).fork("faults");
    faults::SwarmMix mix;
    result.plan = faults::generate_swarm(rng, swarm, &mix);
    result.fault_mix = mix.describe();
  } else {
    result.plan = options.scripted;
    if (result.plan.heal_at_us == 0) result.plan.heal_at_us = options.faults_start_us;
    result.fault_mix = result.plan.faults.empty() ? "none" : "scripted";
  }
  faults::FaultInjector injector(world, &data);
  for (const faults::FaultKind kind : options.inert_faults) injector.make_inert(kind);
  injector.schedule(result.plan);

  const Micros deadline = result.plan.heal_at_us + options.liveness_bound_us;
  const Micros slice = 50 * kMillis;
  Micros drained_at = -1;
  for (Micros t = slice; t <= deadline; t += slice) {
    world.run_until(t);
    if (workload.drained()) {
      drained_at = world.now();
      break;
    }
    if (world.scheduler().events_run() > options.max_events) break;
  }
  result.verdicts = checkers::run_kernel_checks(
      workload.history(result.plan.heal_at_us, options.liveness_bound_us, drained_at));
  result.passed = checkers::all_passed(result.verdicts);
  result.effects = faults::measure_world_effects(result.plan, world, data);
  result.trace_hash = world.trace_hash();
  result.events = world.scheduler().events_run();
  result.sim_time_us = world.now();
  const auto& seen = workload.observations();
  result.observed = {{"commits", seen.commits_ok},   {"conflicts", seen.conflicts},
                     {"fenced", seen.fenced},        {"ambiguous", seen.ambiguous},
                     {"unavailable", seen.unavailable}};
  result.trace = world.trace().lines();
  return result;
}

}  // namespace onceflow::simulated
