// One seeded run of a pipeline under faults, recorded as a history and checked.
//
// The seed decides the workload, every network draw, the swarm mix and plan, which named
// fault points are enabled and when they fire. The run lasts past the heal time (so that
// zombies come back and try their luck), then until everything drains or the liveness
// bound passes; then the checkers read the history.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checkers/history.h"
#include "core/computation.h"
#include "core/engine.h"
#include "core/spec.h"
#include "faults/fault.h"
#include "simulated/knobs.h"
#include "simulated/pipeline_world.h"
#include "simulated/run_outcome.h"

namespace onceflow::simulated {

struct PipelineRunOptions {
  PipelineSpec spec;
  int workers = 3;
  int controllers = 1;    // one leads, the others stand by
  int spare_workers = 1;  // for rebalance faults: a worker that joins and leaves
  PipelineWorkload workload;
  std::map<std::string, checkers::Guarantee> sink_guarantees;  // unset sinks: from the spec
  uint64_t seed = 1;
  bool swarm = true;
  faults::FaultPlan scripted;                 // when !swarm
  std::vector<faults::FaultKind> swarm_kinds;  // empty: every kernel kind
  Micros faults_start_us = 100 * kMillis;
  Micros heal_at_us = 5 * kSeconds;
  // After the heal (or the last input, when later) everything must drain within this; 0: the
  // rule of liveness_bound_rule().
  Micros liveness_bound_us = 0;
  double fault_point_probability = 0.01;  // per visit of an enabled point, before the heal
  bool fault_points_when_scripted = false;  // fault points also without swarm (shrunk scenarios)
  BugSwitches bugs;
  std::set<std::string> user_bugs;  // the user's own bug switches on (ComputationRegistry::add_bug)
  // The user's ONCEFLOW_BUGGIFY sites enabled: exactly these when given (a shrunk scenario's
  // `buggify` list); else drawn from the seed whenever fault points are (swarm, or
  // fault_points_when_scripted).
  std::optional<std::set<std::string>> buggify_sites;
  bool buggify_when_scripted = false;  // draw buggify sites from the seed in a scripted run too
  std::set<faults::FaultKind> inert_faults;  // faults of these kinds do nothing (checking the effects)
  // Knobs (simulated/knobs.h): `knobs` are set as given; with random_knobs the others are drawn
  // from the seed.
  bool random_knobs = false;
  KnobValues knobs;
  size_t trace_keep_lines = 0;
  std::string replay_command;  // put into violation reports
  std::map<std::string, bool> http_honours_idempotency_key;  // http sinks' receivers (default: yes)
  bool kafka_epoch_per_transaction = true;  // the simulated broker has KIP-890's epoch bump
  std::map<std::string, sim::ClickHouseTargetConfig> clickhouse_targets;  // clickhouse sinks' targets
  // Operator actions at given times: repartitions (name -> partitions), asked of the
  // controller as core/controller.h describes, retried until it takes them.
  struct Repartition {
    Micros at_us = 0;
    std::map<std::string, int> partitions;
  };
  std::vector<Repartition> repartitions;
  // Static spec changes, made by stopping the pipeline (PipelineWorldOptions::respecs).
  std::vector<PipelineWorldOptions::Respec> respecs;
  // Settings changed live ("epoch_period=20ms epoch_batch_limit=8"), asked at the given times.
  std::vector<std::pair<Micros, std::string>> reconfigures;
  // Reshards of sharded sink targets (PipelineWorld::reshard_target), at the given times.
  struct TargetReshard {
    Micros at_us = 0;
    std::string sink;
    int tablets = 0;
  };
  std::vector<TargetReshard> target_reshards;
  // An operator's state requests ("stopped", "paused", "working"), at the given times.
  std::vector<std::pair<Micros, std::string>> state_requests;
};

// The guarantee a sink promises by its spec (and, for ClickHouse, its target's engine):
// at-most-once when its strategy is enabled or it says so; at-least-once for http sinks (a
// POST whose answer is lost goes again), at_least_once Kafka and ClickHouse sinks, ArkFlow
// outputs without exactly_once, and an exactly-once ClickHouse sink whose engine does not
// deduplicate blocks; else exactly-once (ArkFlow's exactly_once output claims it); and
// at-least-once instead of exactly-once downstream of an at_least_once_consistent computation
// (core/spec.h: pipeline_delivery).
checkers::Guarantee default_guarantee(const PipelineSpec& spec, const SinkSpec& sink,
                                      const sim::ClickHouseTargetConfig* clickhouse = nullptr);

// The calm, from which the liveness bound counts: every fault lifted (`heal_at`), every input
// written, and the operator's last state request and operation made (a stop halts the
// pipeline on purpose; a run is not drained before its last operation is asked for).
Micros calm(const PipelineRunOptions& o, Micros heal_at, Micros last_write);

// The liveness bound a run gets unless its scenario names one: the time the engine needs at
// worst to get going again once every fault is lifted, plus the time each stage may lag.
//   3 x lease_ttl                    a restarted controller waits out its previous Lease, then
//                                    the jobs' Leases, which nobody pinged meanwhile, run out
//   + 2 x worker_timeout             workers' own Leases run out and are started again
//   + start_grace + 4 x scheduling_period   jobs are reassigned and reported running
//   + (computations + 2) x (idle_epoch_periods x epoch_period + clock_jump)
//                                    every stage (sources, computations, sinks) may sit in its
//                                    longest idle wait and lag by the largest clock jump
//   + 2 x messages / (epoch_batch_limit x the fewest partitions) x epoch_period
//                                    the whole input may still wait at one stage
//   + 2 x messages / (timers_per_epoch x the fewest partitions) x epoch_period
//                                    with timer streams: two timers per input may still wait
//   + 2 s                            settling
// clock_jump is the largest clock skew or jump the run may inject (swarm: 2 s), else 0. A
// computation's or sink's partitions count as keys / (keys in its busiest partition), keys
// being spread over hash ranges (key_partition); `keys` 0: as many as partitions, evenly.
Micros liveness_bound_rule(const PipelineSpec& spec, const EngineOptions& engine, Micros clock_jump_us,
                           uint64_t messages, uint64_t keys = 0);
// The fault kinds swarm mode draws from for `options`: its swarm_kinds (default: every
// pipeline kind) without those its sinks' guarantees exclude (`duplicate` with an
// at-most-once sink).
std::vector<faults::FaultKind> swarm_kinds_for(const PipelineRunOptions& options);
// The largest clock skew or jump `plan` injects.
Micros largest_clock_fault(const faults::FaultPlan& plan);

// What happened to the nodes, for pictures of the run (onceflow explain).
struct NodeEvent {
  std::string node;
  Micros at_us = 0;
  std::string what;  // "crash", "rejected commit"
  std::string detail;
};

struct PipelineRun {
  RunOutcome outcome;
  checkers::PipelineHistory history;
  std::vector<std::string> nodes;        // every node of the world, in creation order
  std::vector<NodeEvent> node_events;    // crashes and fenced commits, in time order
  std::map<uint64_t, std::pair<std::string, std::string>> lease_owners;  // Lease -> (node, job)
};

PipelineRun run_pipeline(const PipelineRunOptions& options, const ComputationRegistry& registry);

// Referenced so that simulated/intercept.cc, which intercepts the clock and randomness of user
// code in simulation, is linked into every program that simulates.
bool interception_linked();

}  // namespace onceflow::simulated
