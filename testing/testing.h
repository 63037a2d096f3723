// Property-based testing of your own pipelines with RapidCheck.
//
// A property for a pipeline of your own computations is one call inside RC_GTEST_PROP:
//
//   RC_GTEST_PROP(MyPipeline, KeepsItsGuaranteesUnderFaults, ()) {
//     onceflow::testing::check_under_faults("my_pipeline.yaml", my_registry());
//   }
//
// check_under_faults draws a workload and a fault plan (crashes, pauses, partitions, Lease
// loss, store outages, sink-target errors, ...), runs the pipeline in the simulator, runs the
// checkers and fails the property with the failing checks when one fails. RapidCheck then
// shrinks the workload and the plan. Each failing case is also written as a scenario file, so
// the smallest one can be replayed with the `onceflow` command line the failure names
// (`onceflow run FILE --seed N`, or your own program's cli_main for your computations).
// ONCEFLOW_PROP is RC_GTEST_PROP whose failure message also carries the
// RC_PARAMS="reproduce=..." string that reruns exactly that case, and runs at the seeds
// ONCEFLOW_SEED / ONCEFLOW_SEEDS give. explore_scenario runs a scenario file at those seeds
// inside a test, and test_main makes a test binary also serve the command line, so the
// replay lines its failures print name that binary. See docs/testing.md.
#pragma once

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/detail/TestListener.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checkers/history.h"
#include "checkers/verdict.h"
#include "core/computation.h"
#include "core/engine.h"
#include "faults/fault.h"
#include "simulated/pipeline_world.h"

namespace onceflow::testing {

// What generated fault plans may contain.
struct PlanShape {
  // Empty: the kinds `explore`'s swarm draws for the pipeline (PlanTargets::kinds): every
  // pipeline swarm kind, without `duplicate` where a sink delivers at most once (its sends
  // carry no producer id, so a network duplicating them duplicates its deliveries:
  // docs/guarantees.md).
  std::vector<faults::FaultKind> kinds;
  size_t max_faults = 8;
  Micros start_us = 100 * kMillis;
  Micros heal_at_us = 3 * kSeconds;
};

// The nodes of a pipeline world that faults can hit.
struct PlanTargets {
  std::vector<std::string> workers;        // "worker-1", ...
  std::vector<std::string> sink_targets;   // "target-<sink>" of each async sink
  std::vector<std::string> spare_workers;  // "worker-spare-1", ...
  std::vector<faults::FaultKind> kinds;    // what the swarm draws for the pipeline (empty: every pipeline kind)
};
// `guarantees`: sinks held to other guarantees than their spec's (an at-most-once one excludes
// `duplicate` from `kinds`).
PlanTargets plan_targets(const PipelineSpec& spec, int workers, int spare_workers,
                         const std::map<std::string, checkers::Guarantee>& guarantees = {});

namespace gen {
// Workloads of 1 to max_messages input messages over 1 to 32 keys.
rc::Gen<PipelineWorkload> workload(int max_messages = 200);
// Fault plans over `targets`; shrinking drops faults and weakens them.
rc::Gen<faults::FaultPlan> fault_plan(const PlanTargets& targets, const PlanShape& shape = {});
}  // namespace gen

// One simulated run: a pipeline, a workload, a scripted fault plan and a seed.
struct PipelineCase {
  std::string spec_path;  // the pipeline spec (YAML)
  PipelineWorkload workload;
  faults::FaultPlan plan;
  uint64_t seed = 1;
  int workers = 3;
  int spare_workers = 1;
  std::map<std::string, checkers::Guarantee> guarantees;  // unset sinks: from the spec
  BugSwitches bugs;
  std::set<std::string> user_bugs;  // the program's own switches on (ComputationRegistry::add_bug)
  std::string bug_name;  // for the replay command
  Micros liveness_bound_us = 0;  // 0: simulated::liveness_bound_rule
  // The program's ONCEFLOW_BUGGIFY sites, a quarter of them enabled as drawn from the seed (a
  // failing case's file pins those that fired, so it replays the same).
  bool buggify = true;
};

struct CaseResult {
  bool passed = false;
  std::vector<checkers::Verdict> verdicts;
  std::string failures;     // the failing checks, one per line
  std::string replay_file;  // on failure: a scenario file that replays the case
  std::string replay;       // on failure: the command that replays it
};

// Runs the case and checks it. On failure writes the case as a scenario file into
// $ONCEFLOW_REPRO_DIR (default: the system temp directory), named after `name`.
CaseResult run_case(const PipelineCase& c, const ComputationRegistry& registry, const std::string& name = "property");

struct FaultOptions {
  PlanShape plan;
  int max_messages = 200;
  int workers = 3;
  std::map<std::string, checkers::Guarantee> guarantees;  // unset sinks: from the spec
  BugSwitches bugs;  // to show that the property can fail
  std::set<std::string> user_bugs;  // the program's own bug switches (ComputationRegistry::add_bug)
  std::string bug_name;
  bool buggify = true;  // the program's ONCEFLOW_BUGGIFY sites fire on some cases
};

// Inside a RapidCheck property: draws a workload, a fault plan and a seed, runs `spec_path`
// with `registry`'s computations, and fails the property (with the failing checks and the
// replay command) when a check fails. Returns the result when it passed.
CaseResult check_under_faults(const std::string& spec_path, const ComputationRegistry& registry,
                              const FaultOptions& options = {});

// --- Seeds from the environment ------------------------------------------------------
//
// ONCEFLOW_SEED is the first seed (default 1) and ONCEFLOW_SEEDS how many (default: the
// test's own), as MADSIM_TEST_SEED and MADSIM_TEST_NUM are for madsim: CI sets a fresh
// ONCEFLOW_SEED per run, and a failure is rerun with ONCEFLOW_SEED=N ONCEFLOW_SEEDS=1.
struct SeedRange {
  uint64_t first = 1;
  uint64_t count = 1;
};
// The seeds from the environment; std::invalid_argument naming the variable when one is set
// to something else than a whole number (ONCEFLOW_SEEDS: at least 1).
SeedRange seeds_from_env(uint64_t default_count);

// Explores the scenario file at `path` at the seeds from the environment (default: seeds 1
// to `default_seeds`) with `registry`'s computations, in this process. It holds when the
// scenario turns out as it declares: every seed passes, or, for a demonstration of a
// known-bad design, some seed fails. A failure names the failing seeds (the first 10), each
// with its first failing check, the environment that reruns just that seed in this test, and
// the command that replays its trace:
//
//   TEST(MyPipeline, ScenarioHolds) {
//     EXPECT_TRUE(onceflow::testing::explore_scenario("my_scenario.yaml", my_registry()));
//   }
::testing::AssertionResult explore_scenario(const std::string& path, const ComputationRegistry& registry,
                                            uint64_t default_seeds = 20);

// RapidCheck's parameters for a property under ONCEFLOW_SEED (its seed) and ONCEFLOW_SEEDS
// (its number of cases), on top of RC_PARAMS; none when neither is set or RC_PARAMS
// reproduces a case. Used by ONCEFLOW_PROP.
std::optional<rc::detail::TestParams> property_params_from_env();

// How this test binary is rerun with `settings` (e.g. "ONCEFLOW_SEED=7 ONCEFLOW_SEEDS=1"),
// just the current test: "<settings> <argv[0]> --gtest_filter=<suite>.<test>".
std::string rerun_command(const std::string& settings);

// main() for a test binary of your own pipelines: given an onceflow command ("run",
// "replay", "explain", "shrink", ...) it is the onceflow command line with `registry`'s
// computations; otherwise it runs its GoogleTest tests. Either way the replay lines its
// failures print name this binary, so they work when pasted:
//
//   int main(int argc, char** argv) { return onceflow::testing::test_main(argc, argv, my_registry()); }
int test_main(int argc, char** argv, const ComputationRegistry& registry);

// RapidCheck's report of a property that did not pass, followed by the RC_PARAMS setting
// that reruns its smallest failing case; "" when it passed. Used by ONCEFLOW_PROP.
std::string failure_report(const std::string& test_id, const rc::detail::TestResult& result);

// Runs a property with fixed parameters and without RapidCheck's global reporting (its
// "properties had failures" note at exit): for tests that show a property CAN fail.
class QuietListener final : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};
template <typename Testable>
rc::detail::TestResult check_quietly(Testable&& testable, const rc::detail::TestMetadata& metadata,
                                     const rc::detail::TestParams& params) {
  QuietListener listener;
  return rc::detail::checkTestable(std::forward<Testable>(testable), metadata, params, listener);
}

}  // namespace onceflow::testing

namespace onceflow::testing {
// Checks a property as RC_GTEST_PROP does, at the seeds from the environment when set.
template <typename Testable>
rc::detail::TestResult check_property(Testable&& testable, const std::string& id, const std::string& description) {
  rc::detail::TestMetadata metadata;
  metadata.id = id;
  metadata.description = description;
  if (const auto params = property_params_from_env()) {
    return rc::detail::checkTestable(std::forward<Testable>(testable), metadata, *params);
  }
  return rc::detail::checkTestable(std::forward<Testable>(testable), metadata);
}
}  // namespace onceflow::testing

// RC_GTEST_PROP that runs at ONCEFLOW_SEED / ONCEFLOW_SEEDS when set, and whose failure
// message ends with the command that reruns just the smallest failing case
// (RC_PARAMS="reproduce=..." and this binary, filtered to this test).
#define ONCEFLOW_PROP(TestCase, Name, ArgList)                                                   \
  void onceflow_propImpl_##TestCase##_##Name ArgList;                                            \
  TEST(TestCase, Name) {                                                                         \
    const std::string id = #TestCase "/" #Name;                                                  \
    const auto result = ::onceflow::testing::check_property(&onceflow_propImpl_##TestCase##_##Name, id, #Name); \
    const std::string report = ::onceflow::testing::failure_report(id, result);                  \
    if (!report.empty()) FAIL() << report;                                                       \
  }                                                                                              \
  void onceflow_propImpl_##TestCase##_##Name ArgList
