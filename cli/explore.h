// What `onceflow explore` keeps of each seed, and what it makes of all of them: the verdicts
// by check, the drain times, what each fault kind did and which probes were reached.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/env/clock.h"
#include "simulated/run_outcome.h"

namespace onceflow::cli {

struct Invocation;
class CoverageCurve;

// One seed's summary, as a worker process reports it to the parent (a JSON line).
struct SeedSummary {
  uint64_t seed = 0;
  bool passed = false;
  uint64_t events = 0;
  int64_t sim_time_us = 0;
  std::string mix;
  std::vector<std::pair<std::string, std::string>> checks;  // name, "pass" | "fail" | "n/a"
  std::string first_failure;
  // When re-execution failed beside checks that may follow from it (checkers::read_first):
  // the re-execution's failure, to read first; else "".
  std::string read_first;
  int64_t drain_us = -1;                     // from the calm to drained; -1: never
  std::map<std::string, uint64_t> effects;   // fault kind -> what it did (its measure's count)
  std::map<std::string, std::string> measures;  // fault kind -> what that count counts
  std::set<std::string> probes;              // probes reached
  std::vector<simulated::UserSiteCount> user_sites;  // the user's assertions (core/user_code.h)
  std::vector<std::string> features;         // what the run reached (cli/guided.h run_features)
  std::vector<std::string> warnings;         // the run's warnings (RunOutcome::warnings)
  // A run of a guided exploration: its number (1-based) and the scenario file that replays
  // a mutant's failure; 0 and "" for a seed of the scenario as written.
  uint64_t run = 0;
  std::string replay;
};

nlohmann::json summary_json(const simulated::RunOutcome& r);
SeedSummary parse_summary(const nlohmann::json& j);

// The 50th and 99th percentiles and the maximum of `us` (nearest rank), as JSON.
nlohmann::json drain_percentiles(std::vector<int64_t> us);

// Adds up the seeds of one exploration.
class ExploreTally {
 public:
  void add(const SeedSummary& r);
  // By (run, seed): the seeds of an unguided exploration in order, a guided one's runs in order.
  const std::map<std::pair<uint64_t, uint64_t>, SeedSummary>& results() const { return results_; }
  // Features reached over the runs, in that order (cli/guided.h).
  CoverageCurve coverage() const;
  // Whether add() keeps each run's features for coverage() (the default).
  void set_keeps_coverage(bool keeps) { keeps_coverage_ = keeps; }
  std::vector<const SeedSummary*> failing() const;
  // Fault kinds configured or drawn in some seed that had no effect in any: the injector of
  // such a kind may have stopped injecting.
  std::vector<std::string> kinds_without_effect() const;
  // Probes (core/probes.h) no seed reached, among those the scenario can reach.
  std::vector<std::string> probes_never_hit() const;
  // Probes the scenario's pipeline and faults cannot reach (explore's unreachable_probes):
  // left out of probes_never_hit, counted in the report.
  void set_out_of_reach(std::set<std::string> probes) { out_of_reach_ = std::move(probes); }
  // The user's `sometimes` assertions no seed saw true and `reachable` ones no seed reached,
  // as "sometimes \"name\"".
  std::vector<std::string> assertions_never_met() const;
  nlohmann::json assertions_json() const;
  uint64_t events() const { return events_; }
  int64_t sim_time_us() const { return sim_time_us_; }

  nlohmann::json checks_json() const;
  nlohmann::json effects_json() const;
  // The runs' warnings by name (the first word): in how many runs, the first run's seed and
  // its warning.
  nlohmann::json warnings_json() const;
  nlohmann::json drains_json() const { return drain_percentiles(drains_us_); }
  // The checks table, the drains, the effects and the probes, as `explore` prints them.
  void print(uint64_t seeds, bool probes_apply) const;

 private:
  std::map<std::pair<uint64_t, uint64_t>, SeedSummary> results_;  // reports go in run and seed order
  std::map<std::pair<uint64_t, uint64_t>, std::vector<uint64_t>> features_;  // hashed, kept apart
  bool keeps_coverage_ = true;
  std::vector<std::string> check_order_;
  std::map<std::string, std::map<std::string, uint64_t>> by_check_;  // name -> verdict -> seeds
  std::vector<int64_t> drains_us_;
  struct KindTally {
    std::string measure;
    uint64_t seeds = 0;  // in which the kind was configured or drawn
    uint64_t total = 0;  // what it did over them
  };
  std::map<std::string, KindTally> kinds_;
  std::map<std::string, uint64_t> probe_seeds_;  // probe -> seeds that reached it
  std::set<std::string> out_of_reach_;
  struct SiteTally {
    uint64_t seeds = 0;  // in which it was evaluated
    uint64_t evaluated = 0;
    uint64_t held = 0;
  };
  std::map<std::pair<std::string, std::string>, SiteTally> sites_;  // (kind, name)
  uint64_t events_ = 0;
  int64_t sim_time_us_ = 0;
};

// `onceflow explore`: scenario files and folders (every scenario file in a folder), seeds,
// and what to report. Exit 0 when every scenario turned out as it declares (an ordinary one
// passed every seed, a demonstration of a known-bad design failed on some), 1 otherwise.
struct ExploreOptions {
  std::vector<std::string> paths;
  uint64_t seeds = 100;       // per scenario; with a time budget, an upper bound
  bool seeds_given = false;   // --seeds was given (else a time budget has no seed bound)
  uint64_t first_seed = 1;
  std::string seeds_from;  // "ONCEFLOW_SEED=7 ONCEFLOW_SEEDS=20" when the environment set them
  int jobs = 1;
  std::optional<bool> swarm;
  bool as_json = false;
  bool require_effects = false;        // exit 1 when a configured fault kind had no effect
  bool require_probes = false;         // exit 1 when a probe was never reached
  bool require_sometimes = false;      // exit 1 when a sometimes/reachable assertion was never met
  bool stop_on_first_failure = false;  // no seeds started once one failed unexpectedly
  Micros time_budget_us = 0;           // > 0: explore until this much wall time is spent
  std::string junit_path;              // "": no JUnit report
  // Continuous: fresh seeds (from first_seed when given, else drawn) round after round over
  // the scenarios until the time budget ends or SIGINT/SIGTERM; each new failure (a check of
  // a scenario failing for the first time) is written to failures_dir as a scenario file
  // that replays it, with its replay line. Exit 1 when any seed failed.
  bool continuous = false;
  bool first_seed_given = false;
  std::string failures_dir = "onceflow-failures";
  // Guided (cli/guided.h): pipeline scenarios' runs are fresh seeds and mutants of the runs
  // that reached something new; every failing run is written to failures_dir as a scenario
  // file with its replay line.
  bool guided = false;
};
int explore_command(const Invocation& inv, const ExploreOptions& options);

// `text` with the characters XML and HTML give a meaning escaped and those XML forbids dropped.
std::string xml_escape(std::string_view text);

}  // namespace onceflow::cli
