// The kernel self-test: the bank workload under a (swarm) fault plan, then its checkers.
//
// One seed decides everything: the workload's choices, the network's draws, the fault mix
// and plan. The same seed and build give the same trace_hash.
#pragma once

#include <deque>
#include <set>
#include <string>
#include <vector>

#include "checkers/verdict.h"
#include "core/engine.h"
#include "faults/fault.h"
#include "simulated/run_outcome.h"
#include "sim/bank_workload.h"

namespace onceflow::simulated {

struct SelftestOptions {
  uint64_t seed = 1;
  bool swarm = true;  // false: run `scripted` instead (which may be empty)
  faults::FaultPlan scripted;
  sim::BankWorkload::Options workload;
  Micros faults_start_us = 100 * kMillis;
  Micros heal_at_us = 6 * kSeconds;
  Micros liveness_bound_us = 30 * kSeconds;
  uint64_t max_events = 20'000'000;  // a run past this is a liveness failure
  size_t trace_keep_lines = 0;
  BugSwitches bugs;                   // the store-* switches reach the kernel's store
  std::set<faults::FaultKind> inert_faults;   // kinds scheduled but doing nothing (checking the checks)
};

RunOutcome run_kernel_selftest(const SelftestOptions& options);

}  // namespace onceflow::simulated
