// Running scenario seeds, shared by the command line (cli/cli.cc, cli/explore.cc) and the
// test helpers of testing/testing.h: one seed checked, many seeds in worker processes, and
// the replay command a failure names.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cli/explore.h"
#include "cli/scenario.h"
#include "core/computation.h"
#include "core/engine.h"
#include "simulated/run_outcome.h"

namespace onceflow::cli {

// The largest seed the command line takes (--seed, --first-seed): every seed run anywhere can
// be replayed with it.
inline constexpr uint64_t kMaxSeed = (uint64_t{1} << 63) - 1;

// Bad input or usage: the command line prints the message on one line and exits 2.
struct UsageError {
  std::string message;
};

// What one invocation runs with.
struct Invocation {
  const ComputationRegistry& registry;
  BugSwitches bugs;      // --bug: one deliberate engine mistake, for checking the checkers
  std::string bug_name;
  std::set<faults::FaultKind> inert_faults;  // --inert-fault: kinds whose injector does nothing
  std::set<std::string> user_bugs = {};  // --bug naming a switch of the program's own (ComputationRegistry::add_bug)
};

// The name this program was invoked by (argv[0]): a user's own binary, which registers the
// user's computations, names itself in the replay lines it prints, so they work when pasted.
// cli_main and testing::main set it; "onceflow" until one does.
std::string& program_name();
// What its error lines start with: the file name of program_name(), "onceflow" for the stock
// binary, a user's own program's name for theirs.
std::string error_prefix();

// `program_name() replay PATH --seed N` with the flags that make it the same run.
std::string replay_command(const Invocation& inv, const Scenario& s, uint64_t seed, bool swarm);

// Loads a scenario file; a UsageError when it does not load.
Scenario load_or_fail(const std::string& path);
// A pipeline's functions must be registered in this program: a UsageError naming the first
// that is not.
void check_functions(const ComputationRegistry& registry, const std::string& spec_path, const PipelineSpec& spec);
// A scenario's: its pipeline's functions and check_catches.
void check_functions(const ComputationRegistry& registry, const Scenario& s);
// The bug switches a scenario catches (`catches:`) must be onceflow's or this program's own: a
// UsageError naming the first that is neither.
void check_catches(const ComputationRegistry& registry, const Scenario& s);
// The scenario files in `dir` (not its subdirectories), sorted by path; pipeline specs kept
// beside them (a YAML file with sources or computations and no kind) are passed over; a file
// that does not load is a UsageError.
std::vector<Scenario> load_library(const std::string& dir);

// One seed, checked; `keep_lines` of the trace are kept (SIZE_MAX: all). With `twice`, the
// seed runs again and a determinism check compares the two traces.
simulated::RunOutcome run_seed_once(const Invocation& inv, const Scenario& s, uint64_t seed, bool swarm, size_t keep_lines);
// The options run_seed_once runs a pipeline scenario's seed with (explain draws the same run).
simulated::PipelineRunOptions pipeline_run_options(const Invocation& inv, const Scenario& s, uint64_t seed, bool swarm,
                                                size_t keep_lines);
simulated::RunOutcome run_seed(const Invocation& inv, const Scenario& s, uint64_t seed, bool swarm, size_t keep_lines,
                            bool twice);
// A copy of `s` that runs `plan` as scripted faults (fault points kept on when the original
// run was a swarm run, so the run is the same); `knobs`, when given, are the values the run
// used (a swarm run draws its own), kept explicit so that the copy runs with them.
Scenario scripted_copy(const Scenario& s, const faults::FaultPlan& plan, bool was_swarm,
                       const std::map<std::string, int64_t>* knobs = nullptr);
// A seed's first failure (SeedSummary::first_failure) without the replay command its check's
// detail ends with, for a report that prints the command on a line of its own.
std::string_view without_replay(const std::string& failure);

// Explore checks same-seed determinism on every tenth seed: it costs a second run.
bool determinism_sampled(uint64_t seed);

// Runs `run(i)` for i in [0, count) in `jobs` worker processes (forked: each sees this
// process's state as it was; 1: in this one), worker j taking i = j, j + jobs, ...; calls
// `done(i, line)` with what run(i) returned (one line, no newline) as each finishes.
void run_in_workers(uint64_t count, int jobs, const std::function<std::string(uint64_t)>& run,
                    const std::function<void(uint64_t, const std::string&)>& done);
// Runs seeds [first, first + count) in `jobs` worker processes (forked; 1: in this one) and
// calls `done` per seed, in the order they finish.
void explore_seeds(const Invocation& inv, const Scenario& s, uint64_t first, uint64_t count, int jobs, bool swarm,
                   const std::function<void(const SeedSummary&)>& done);

// The wall clock, for the figures the command line prints (never inside a simulation).
Micros wall_now();
double wall_ms_since(Micros start);
// The largest resident set of this process or, after they ended, its worker processes.
double peak_rss_mb();

}  // namespace onceflow::cli
