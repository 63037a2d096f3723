// RunOutcome: what one seeded simulation run yields, whatever it simulated.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "checkers/verdict.h"
#include "faults/fault.h"
#include "faults/swarm.h"

namespace onceflow::simulated {


// An assertion site of the user's code (core/user_code.h) in one run: how often it was
// evaluated, and how often it held (always: true; sometimes: true; reachable: reached;
// unreachable: never).
struct UserSiteCount {
  std::string name;
  std::string kind;  // "always", "sometimes", "reachable", "unreachable"
  uint64_t evaluated = 0;
  uint64_t held = 0;
};

struct RunOutcome {
  uint64_t seed = 0;
  uint64_t trace_hash = 0;
  // What the run committed and delivered, by id and payload: the trace does not hash payloads,
  // so a computation stamping the machine's clock into them shows here only.
  uint64_t content_hash = 0;
  // A computation's function made a call its spec does not allow (CollectingOutput::misuse):
  // the scenario is bad input, not a verdict. Empty when none.
  std::string usage_error;
  uint64_t events = 0;
  Micros sim_time_us = 0;
  std::string fault_mix;  // the swarm mix, "scripted" or "none"
  faults::FaultPlan plan;
  // What a swarm plan of this run may hit and draw (a pipeline run's, scripted or not): where
  // explore --guided adds faults to a plan.
  faults::SwarmOptions fault_space;
  std::vector<checkers::Verdict> verdicts;
  bool passed = false;
  std::map<std::string, uint64_t> observed;  // counters worth showing (commits, fenced...)
  Micros drain_us = -1;  // from the heal (or the last input, if later) to drained; -1: never
  Micros liveness_bound_us = 0;  // what the run allowed for that
  std::map<std::string, faults::FaultEffect> effects;  // by fault kind configured or drawn ("fault_points" too)
  std::map<std::string, uint64_t> probes;      // core/probes.h: name -> hits
  std::map<std::string, int64_t> knobs;        // simulated/knobs.h: the values this run used
  std::vector<std::string> warnings;         // connectors' structured warnings, distinct
  std::deque<std::string> trace;             // kept lines, when asked for
  // A pipeline run's MessageIds by key, when its trace lines are kept (replay --key).
  std::map<uint64_t, std::set<uint64_t>> ids_by_key;
  // ... and the transactions (trace lines "commits tx T") that consumed or produced each.
  std::map<uint64_t, std::set<uint64_t>> txs_by_id;
  std::vector<faults::PointHit> point_hits;          // crashes at fault points, in order
  std::vector<UserSiteCount> user_sites;     // every assertion site of the program
  std::vector<std::string> buggify_fired;    // the user's buggify sites that fired, by name
};

}  // namespace onceflow::simulated
