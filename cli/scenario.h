// Scenario files (YAML): what to simulate, under which faults, and what must hold.
//
// See docs/scenarios.md for the format. A scenario that cannot be loaded yields a one-line
// error naming the file, the line and the key at fault.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/env/status.h"
#include "faults/fault.h"
#include "simulated/pipeline_run.h"
#include "simulated/selftest.h"

namespace onceflow::cli {

struct Scenario {
  std::string path;
  std::string name;
  std::string description;
  std::string kind;  // "kernel": the simulator's self-test; "pipeline": a pipeline spec
  bool demonstrates_failure = false;
  // Seeds that once caught an engine bug (`regression_seeds:`): `mutants` tries them first,
  // and the library test runs them on every change.
  std::vector<uint64_t> regression_seeds;
  // Bug switches the scenario is built to catch (`catches:`): mutants try it first for them.
  std::vector<std::string> catches;
  simulated::SelftestOptions kernel;  // for kind "kernel"; seed and swarm are set per run
  bool swarm = true;               // default for runs that do not say --swarm/--no-swarm
  faults::FaultPlan scripted;      // faults written in the file (used when not swarming)
  simulated::PipelineRunOptions pipeline;  // for kind "pipeline"; seed and swarm are set per run
  // `knobs:` "random" (drawn per seed), "fixed" (the scenario's values, even under swarm), or
  // "" (random under swarm faults, fixed otherwise). Explicit values are in pipeline.knobs.
  std::string knobs;
  std::string pipeline_path;
  std::vector<std::string> guarantees;
};

// Whether a run of `s` with or without swarm faults draws its knobs at random.
bool random_knobs(const Scenario& s, bool swarm);

// Loads and validates a scenario file.
Result<Scenario> load_scenario(const std::string& path);

// Every key load_scenario accepts, by where it may stand: "" (the top level), "topology",
// "workload" (pipelines), "workload (kernel)", "http_receivers.SINK",
// "clickhouse_targets.SINK", "kafka_broker", "operations", "operations.reshard_target",
// "faults", "faults.plan" (an entry). Any other key is refused, naming these; docs/scenarios.md
// documents each (scenario_test checks).
const std::map<std::string, std::set<std::string>>& scenario_keys();

// A scenario as YAML that load_scenario reads back: a scripted plan (s.scripted), the
// pipeline named by its absolute path, so the file can be written anywhere.
std::string scenario_yaml(const Scenario& s, const std::string& name, const std::string& description);

}  // namespace onceflow::cli
