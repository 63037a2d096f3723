// Swarm fault plans: per seed, a random subset of fault kinds, each with its own intensity.
//
// Swarm testing (Groce et al., 2012) finds more bugs than one fixed mix of everything, since
// some bugs hide when, say, crashes keep interrupting the partition that would expose them.
// The mix is drawn from the generator given, so the same seed always yields the same mix
// and the same plan; SwarmMix::describe() prints it for the run summary.
#pragma once

#include <string>
#include <vector>

#include "core/env/random.h"
#include "faults/fault.h"

namespace onceflow::faults {

struct SwarmOptions {
  Micros start_us = 0;        // no fault before
  Micros heal_at_us = 0;      // every fault over by then
  std::vector<std::string> nodes;  // nodes that node faults may hit
  std::string store_node;          // may also be crashed, paused or partitioned; may be empty
  std::vector<FaultKind> kinds;    // kinds to choose from (empty: all kernel kinds)
  std::vector<std::string> sink_targets;   // nodes that sink-target faults may hit
  std::vector<std::string> spare_workers;  // nodes that rebalance faults bring in
  int max_faults_per_kind = 6;
};

struct SwarmMix {
  struct Entry {
    FaultKind kind;
    double intensity;  // in (0, 1]
  };
  std::vector<Entry> entries;

  std::string describe() const;  // "crash@0.62 partition@0.31 lost_replies@0.90"
};

// One fault of `kind` at a random time in [start, heal), on a node the kind may hit, longer
// and stronger as `intensity` (in (0, 1]) grows. The node may be empty when the options name
// nothing of the sort the kind needs (a sink target, a spare worker).
Fault draw_fault(Random& rng, const SwarmOptions& options, FaultKind kind, double intensity);
// Whether `f` (drawn) is of a kind that needs a sink target or a spare worker and found none
// to hit: such a fault is left out of a plan.
bool lacks_target(const Fault& f);

// Draws a mix and a plan from `rng`. REQUIRES: options.heal_at_us > options.start_us, and
// at least one node.
FaultPlan generate_swarm(Random& rng, const SwarmOptions& options, SwarmMix* mix);

}  // namespace onceflow::faults
