// Guided exploration (`explore --guided`): a search that keeps the runs that reached something
// no earlier run had (a probe, a count of one in a new power-of-two range, a fault's effect, a
// fault point crashed at, a knob's range, a shape of the committed history) and spends most
// of its runs on mutants of them (a fault added, moved, stretched or removed, a knob or the
// workload changed, the seed changed), the rest on fresh seeds of the scenario as written.
// AFL's corpus and Antithesis' branching from interesting states, over onceflow's runs.
//
// Deterministic: the inputs of a batch depend only on the search's seed and the reports of
// the batches before, merged in run order, so the same command gives the same runs whatever
// the number of worker processes.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/explore.h"
#include "cli/scenario.h"
#include "core/env/random.h"
#include "faults/fault.h"
#include "simulated/knobs.h"
#include "simulated/run_outcome.h"
#include "faults/swarm.h"

namespace onceflow::cli {

// What a run reached, as names: "probe P", "probe P x2^k" (its hits in [2^k, 2^(k+1))),
// "effect KIND x2^k", "effect KIND: DETAIL x2^k", "crash at POINT", "knob K ~2^k",
// "history C x2^k" (the run's counters: commits, epochs given up by cause, fenced...),
// "check C n/a" or "check C fail". Sorted, no repeats.
std::vector<std::string> run_features(const simulated::RunOutcome& r);

// One run of a guided search.
struct GuidedInput {
  uint64_t seed = 0;
  bool fresh = true;  // the scenario as written; else a mutant with its own plan, knobs, workload
  faults::FaultPlan plan;
  simulated::KnobValues knobs;
  PipelineWorkload workload;
  int64_t parent = -1;   // the run (0-based) it was mutated from
  std::string mutation;  // what changed, for the report
};

// What a run reports back to the search.
struct GuidedReport {
  SeedSummary summary;  // with its features
  faults::FaultPlan plan;
  simulated::KnobValues knobs;
  std::vector<faults::PointHit> point_hits;
  std::optional<faults::SwarmOptions> space;  // sent by a search's first run only
};

// The report of `r` as one JSON line's object, with the run's fault space when `with_space`
// (the search's first run: every run of a scenario has the same), and back.
nlohmann::json guided_report_json(const simulated::RunOutcome& r, bool with_space);
GuidedReport parse_guided_report(const nlohmann::json& j);

class GuidedSearch {
 public:
  // `s` a pipeline scenario; `swarm` whether its fresh seeds draw swarm plans; fresh seeds
  // from `first_seed` on, as an unguided exploration would run them.
  GuidedSearch(const Scenario& s, bool swarm, uint64_t first_seed);

  // The inputs of the next `n` runs, from what the search knows.
  std::vector<GuidedInput> next_batch(size_t n);
  // A finished run; runs are added in their order.
  void add(const GuidedInput& input, const GuidedReport& report);

  // The scenario a run of `input` runs (the scenario itself for a fresh seed, else a
  // scripted copy: fault points as the scenario has them, knobs explicit) and whether it
  // draws a swarm plan.
  Scenario scenario_for(const GuidedInput& input) const;
  bool swarm_for(const GuidedInput& input) const { return input.fresh && swarm_; }

  uint64_t runs() const { return inputs_.size(); }
  uint64_t fresh_runs() const { return fresh_; }
  size_t corpus_size() const { return corpus_.size(); }
  size_t features() const { return seen_.size(); }
  const GuidedInput& input(uint64_t run) const { return inputs_.at(run); }

 private:
  struct Entry {
    uint64_t run;
    GuidedInput input;  // as it ran: a fresh run's plan and knobs are what it drew
    std::vector<faults::PointHit> point_hits;
    std::vector<std::string> features;
    uint64_t picked = 0;
  };
  size_t pick_parent();
  GuidedInput mutate(const Entry& parent, uint64_t parent_run);
  // One change to `in`; false when it does not apply (nothing to remove, no point hit...).
  bool mutate_once(GuidedInput& in, const Entry& parent, std::string& what);

  Scenario s_;
  bool swarm_;
  uint64_t next_fresh_;
  Xoshiro256StarStar rng_;
  std::optional<faults::SwarmOptions> space_;  // from the first run's report
  std::vector<Entry> corpus_;
  std::map<std::string, uint64_t> seen_;  // feature -> runs that reached it
  std::map<std::string, std::vector<size_t>> holders_;  // reached feature -> corpus entries
  std::vector<GuidedInput> inputs_;       // every run's, in order
  uint64_t fresh_ = 0;
};

// How the runs' features grew an exploration's coverage: features reached after each run, in
// run order. Features are held as hashes (feature_hashes).
class CoverageCurve {
 public:
  void add(const std::vector<uint64_t>& feature_hashes);
  size_t features() const { return seen_.size(); }
  // Features reached after ceil(k * runs / points) runs, k = 1..points.
  std::vector<std::pair<uint64_t, size_t>> curve(size_t points) const;
  // New features in each of `parts` equal shares of the runs, in order.
  std::vector<size_t> new_per_share(size_t parts) const;
  nlohmann::json json() const;
  // "coverage: 312 features after 300 runs; new ones in each tenth of the runs: ▇▃▂▁▁▁▁·· (201 54 ...)".
  std::string line() const;

 private:
  std::set<uint64_t> seen_;
  std::vector<size_t> after_;  // features after run i
};
std::vector<uint64_t> feature_hashes(const std::vector<std::string>& features);

}  // namespace onceflow::cli
