// `onceflow explore`: many seeds of one scenario or of every scenario in a folder, tabulated,
// with an optional time budget and a JUnit report (docs/cli.md).
#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <set>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "cli/explore.h"
#include "cli/guided.h"
#include "cli/runner.h"
#include "core/delivery.h"
#include "core/env/random.h"
#include "core/probes.h"
#include "core/spec.h"
#include "faults/fault.h"

namespace onceflow::cli {

namespace {

using json = nlohmann::json;

// With a time budget and no --seeds, seeds go on until the budget is spent.
constexpr uint64_t kUnboundedSeeds = 100'000'000;
// Failing seeds listed per scenario: in the text (then a count) and in the JUnit report.
constexpr size_t kListedFailures = 10;
constexpr size_t kJunitFailures = 50;

// How many seeds each scenario gets at most: --seeds, or unbounded under a time budget
// without --seeds; never past the largest seed.
uint64_t seed_limit(const ExploreOptions& eo) {
  const uint64_t asked = eo.time_budget_us > 0 && !eo.seeds_given ? kUnboundedSeeds : eo.seeds;
  return std::min(asked, kMaxSeed - eo.first_seed + 1);
}

// The probes (core/probes.h) a scenario cannot reach: the branches of stages, sinks,
// sources and operations its pipeline does not have, and of operator requests neither its
// faults nor its operations make. Kernel scenarios run no engine: every probe.
std::set<std::string> unreachable_probes(const Scenario& s, bool swarm) {
  std::set<std::string> out;
  if (s.kind != "pipeline") {
    for (const ProbeInfo& p : kProbes) out.emplace(p.name);
    return out;
  }
  const PipelineSpec& spec = s.pipeline.spec;
  const auto any_computation = [&](auto pred) { return std::any_of(spec.computations.begin(), spec.computations.end(), pred); };
  const auto any_sink = [&](auto pred) { return std::any_of(spec.sinks.begin(), spec.sinks.end(), pred); };
  const bool swift = any_computation([](const ComputationSpec& c) { return c.type == ComputationType::kSwiftMap; });
  const bool timers = any_computation([](const ComputationSpec& c) { return !c.timer_streams.empty(); });
  const bool computation_dedup = any_computation([](const ComputationSpec& c) {
    return c.type != ComputationType::kSwiftMap && c.processing_mode == ProcessingMode::kExactlyOnce;
  });
  const bool sink_dedup = any_sink([](const SinkSpec& k) {
    return !k.at_most_once_strategy.enabled &&
           !(k.type == SinkType::kAsyncQueue && k.delivery_guarantee == SinkDelivery::kAtLeastOnce);
  });
  const bool amo = any_sink([](const SinkSpec& k) { return k.at_most_once_strategy.enabled; });
  const bool outbox = any_sink([](const SinkSpec& k) { return k.type != SinkType::kSyncQueue && !writes_before_commit(k); });
  const bool sync_writes = any_sink([](const SinkSpec& k) { return k.type == SinkType::kSyncQueue || writes_before_commit(k); });
  const bool kafka_sink = any_sink([](const SinkSpec& k) { return k.type == SinkType::kKafka || k.type == SinkType::kArkflowKafka; });
  const bool external_source = std::any_of(spec.sources.begin(), spec.sources.end(), [](const SourceSpec& k) { return k.type != "queue"; });
  // Operator requests: from the swarm's kinds, the plan, or the scenario's operations.
  std::set<faults::FaultKind> kinds;
  if (swarm) {
    if (s.pipeline.swarm_kinds.empty()) {
      kinds.insert(std::begin(faults::kAllPipelineSwarmKinds), std::end(faults::kAllPipelineSwarmKinds));
    } else {
      kinds.insert(s.pipeline.swarm_kinds.begin(), s.pipeline.swarm_kinds.end());
    }
  }
  for (const faults::Fault& f : s.scripted.faults) kinds.insert(f.kind);
  const auto requested = [&](const char* state) {
    return std::any_of(s.pipeline.state_requests.begin(), s.pipeline.state_requests.end(),
                       [&](const auto& r) { return r.second == state; });
  };
  const bool pauses = kinds.count(faults::FaultKind::kPipelinePause) != 0 || requested("paused");
  const bool stops = kinds.count(faults::FaultKind::kPipelineStop) != 0 || requested("stopped") || !s.pipeline.respecs.empty();
  const auto out_if = [&](bool absent, std::initializer_list<Probe> probes) {
    if (!absent) return;
    for (const Probe p : probes) out.emplace(probe_name(p));
  };
  out_if(!swift, {Probe::kSwiftAcknowledge, Probe::kSwiftRecompute});
  out_if(!timers, {Probe::kTimerFired, Probe::kTimerFiredAfterRestart, Probe::kTimerMerged, Probe::kTimerReadAheadFull});
  out_if(!computation_dedup, {Probe::kInputDedupHit});
  out_if(!sink_dedup, {Probe::kSinkDedupHit});
  out_if(!computation_dedup && !sink_dedup, {Probe::kDedupCleanupForgot, Probe::kDedupCleanupWrapped});
  out_if(!amo, {Probe::kAmoQueueFull, Probe::kAmoNotSent, Probe::kAmoInDoubt, Probe::kAmoSinkDestroyed, Probe::kAmoAckAmbiguous});
  out_if(!outbox, {Probe::kOutboxAcknowledged, Probe::kOutboxResend, Probe::kOutboxBehindTarget, Probe::kOutboxTargetDuplicate,
                   Probe::kOutboxDeliveryFailed, Probe::kOutboxPermanentError});
  out_if(!sync_writes, {Probe::kSyncWriteFailed});
  const bool bounded = spec.max_in_flight > 0 || !s.pipeline.respecs.empty();  // a new spec may set it
  out_if(!bounded, {Probe::kSourceHeldBack, Probe::kComputationHeldBack});
  out_if(!bounded || !any_sink([](const SinkSpec& k) { return held_by_target(k); }), {Probe::kSinkHeldBack});
  out_if(!kafka_sink, {Probe::kKafkaMarkerSkip});
  out_if(!external_source, {Probe::kSourceReadFailed});
  out_if(!pauses, {Probe::kControllerPaused});
  out_if(!stops, {Probe::kControllerStopping, Probe::kControllerDrained});
  out_if(!pauses && !stops, {Probe::kControllerStateChanged});
  out_if(kinds.count(faults::FaultKind::kRebalance) == 0, {Probe::kControllerRebalance});
  out_if(s.pipeline.repartitions.empty(), {Probe::kControllerRepartitioned});
  out_if(s.pipeline.reconfigures.empty(), {Probe::kControllerReconfigured});
  out_if(s.pipeline.target_reshards.empty(), {Probe::kControllerTargetResharded});
  out_if(s.pipeline.respecs.empty(), {Probe::kControllerRespecified});
  return out;
}

// One scenario's exploration.
struct Explored {
  Scenario s;
  bool swarm = false;
  ExploreTally tally;
  bool started = false;
  std::string stopped;  // "", "first failure" or "time budget"
  double wall_ms = 0;
  std::unique_ptr<GuidedSearch> guided;  // explore --guided, on a pipeline scenario
  uint64_t written = 0;                  // failing runs written as scenario files

  uint64_t ran() const { return tally.results().size(); }
  uint64_t failed() const { return tally.failing().size(); }
  // An ordinary scenario passes every seed; a demonstration fails on some.
  bool as_expected() const { return started && (s.demonstrates_failure ? failed() > 0 : failed() == 0); }
  std::string outcome() const {
    if (!started) return "not run";
    if (s.demonstrates_failure) return failed() > 0 ? "failed as expected" : "did not fail (a demonstration must)";
    return failed() == 0 ? "passed" : "FAILED";
  }
  std::string seed_range(uint64_t first) const {
    return ran() == 0 ? "no seeds" : fmt::format("seeds {}-{}", first, first + ran() - 1);
  }
};

// The scenarios named: files as they are, folders by every scenario file in them.
std::vector<Scenario> scenarios_named(const std::vector<std::string>& paths) {
  std::vector<Scenario> out;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      std::vector<Scenario> library = load_library(path);
      if (library.empty()) throw UsageError{path + ": no scenario files (*.yaml) in this folder"};
      for (auto& s : library) out.push_back(std::move(s));
    } else {
      out.push_back(load_or_fail(path));
    }
  }
  return out;
}

// Writes `copy` (a scripted copy of a scenario that failed with `seed`) as `file_name` in
// `dir`, its first line "# Written by onceflow explore HEADER; replay with: ..."; returns the
// replay line.
std::string write_failure_scenario(const Invocation& inv, const std::string& dir, const std::string& file_name,
                                   const Scenario& copy, uint64_t seed, const std::string& header,
                                   const std::string& description) {
  const std::string bug = inv.bug_name.empty() ? "" : " --bug " + inv.bug_name;
  const std::string file = dir + "/" + file_name;  // FailuresDir made `dir`
  const std::string replay = fmt::format("{} run {} --seed {}{}", program_name(), file, seed, bug);
  std::ofstream out(file);
  out << "# Written by onceflow explore " << header << "; replay with: " << replay << "\n"
      << scenario_yaml(copy, file_name.substr(0, file_name.rfind('.')), description) << "\n";
  if (!out) throw UsageError{"cannot write " + file};
  return replay;
}

// --failures-dir, made before any run so that a folder that cannot be made is exit 2 at
// once, not after an hour of exploring; taken away again (the folders it made, if still
// empty) when nothing failed.
class FailuresDir {
 public:
  explicit FailuresDir(const std::string& dir) : dir_(std::filesystem::absolute(dir).lexically_normal()) {
    std::error_code ec;
    std::filesystem::path top = dir_;
    while (!std::filesystem::exists(top, ec) && top.has_parent_path() && top.parent_path() != top) {
      made_top_ = top;
      top = top.parent_path();
    }
    std::filesystem::create_directories(dir_, ec);
    if (ec || !std::filesystem::is_directory(dir_, ec) || access(dir_.c_str(), W_OK) != 0) {
      throw UsageError{"--failures-dir " + dir + ": cannot make or write this folder"};
    }
  }
  FailuresDir(const FailuresDir&) = delete;
  FailuresDir& operator=(const FailuresDir&) = delete;
  ~FailuresDir() {
    std::error_code ec;
    if (made_top_.empty()) return;
    for (std::filesystem::path at = dir_; !at.empty(); at = at.parent_path()) {
      if (!std::filesystem::is_empty(at, ec) || ec || !std::filesystem::remove(at, ec)) break;
      if (at == made_top_) break;
    }
  }

 private:
  std::filesystem::path dir_;
  std::filesystem::path made_top_;  // the highest folder it made ("": none)
};

// The line that replays a failing run of `e`.
std::string replay_of(const Invocation& inv, const Explored& e, const SeedSummary& r) {
  return r.replay.empty() ? replay_command(inv, e.s, r.seed, e.swarm) : r.replay;
}

// Runs written as scenario files per scenario, at most: a search that fails everywhere does
// not fill the disk.
constexpr uint64_t kWrittenFailures = 100;
// Runs a guided search chooses at once: its inputs depend on the reports before them, so the
// batch, not the number of worker processes, fixes the sequence of runs.
constexpr size_t kGuidedBatch = 8;

// Runs of `e`'s guided search until `limit` runs, a failure (with --stop-on-first-failure)
// or `deadline` (-1: none); the first batch always runs. Each failing run is written as a
// scenario file.
void explore_guided(const Invocation& inv, const ExploreOptions& eo, Explored& e, Micros deadline, uint64_t limit,
                    const std::function<void(const SeedSummary&)>& seen) {
  if (!e.guided) e.guided = std::make_unique<GuidedSearch>(e.s, e.swarm, eo.first_seed);
  GuidedSearch& g = *e.guided;
  for (bool first = true; g.runs() < limit; first = false) {
    if (eo.stop_on_first_failure && e.failed() > 0) {
      e.stopped = "first failure";
      break;
    }
    if (!first && deadline >= 0 && wall_now() >= deadline) {
      e.stopped = "time budget";
      break;
    }
    const std::vector<GuidedInput> batch = g.next_batch(std::min<uint64_t>(kGuidedBatch, limit - g.runs()));
    if (batch.empty()) break;
    std::vector<Scenario> scenarios;
    for (const GuidedInput& in : batch) scenarios.push_back(g.scenario_for(in));
    const uint64_t base = g.runs();
    std::vector<std::string> lines(batch.size());
    run_in_workers(
        batch.size(), eo.jobs,
        [&](uint64_t i) {
          const uint64_t run = base + i + 1;
          return guided_report_json(run_seed(inv, scenarios[i], batch[i].seed, g.swarm_for(batch[i]), 0,
                                             determinism_sampled(run)),
                                    run == 1)
              .dump();
        },
        [&](uint64_t i, const std::string& line) { lines[i] = line; });
    // In run order, whatever order the workers finished in.
    for (size_t i = 0; i < batch.size(); ++i) {
      GuidedReport report = parse_guided_report(json::parse(lines[i]));
      SeedSummary& r = report.summary;
      r.run = base + i + 1;
      g.add(batch[i], report);
      const GuidedInput& in = batch[i];
      if (!r.passed && (e.s.demonstrates_failure || e.written >= kWrittenFailures) && !in.fresh) {
        // Nothing replays a mutant but its file.
        r.replay = e.s.demonstrates_failure
                       ? "not written: a demonstration of a known-bad design fails by design"
                       : fmt::format("not written: the first {} failing runs of this scenario were", kWrittenFailures);
        r.first_failure = std::string(without_replay(r.first_failure));
      } else if (!r.passed && !e.s.demonstrates_failure && e.written < kWrittenFailures) {
        const Scenario copy = in.fresh ? scripted_copy(e.s, report.plan, e.swarm, &report.knobs) : scenarios[i];
        const std::string origin = in.fresh ? fmt::format("seed {} of {}", in.seed, e.s.path)
                                            : fmt::format("a mutant of run {} of {} ({})", in.parent + 1, e.s.path, in.mutation);
        const std::string check = r.first_failure.substr(0, r.first_failure.find(':'));
        r.replay = write_failure_scenario(
            inv, eo.failures_dir, fmt::format("{}-run-{}.yaml", e.s.name, r.run), copy, in.seed,
            fmt::format("--guided: run {}, {}, failed {}", r.run, origin, check),
            fmt::format("guided run {} ({}) fails {}", r.run, origin, check));
        r.first_failure = std::string(without_replay(r.first_failure)) + " — replay: " + r.replay;
        ++e.written;
      }
      seen(r);
    }
  }
}

// Runs seeds of `e` from where it stopped (its first seed, or past those it ran) until its
// limit (or `stop_at` seeds in all, if fewer), a failure (with --stop-on-first-failure) or
// `deadline` (-1: none); the first round always runs. `end_line`: end the progress line.
void explore_one(const Invocation& inv, const ExploreOptions& eo, Explored& e, Micros deadline, const std::string& label,
                 uint64_t stop_at = UINT64_MAX, bool end_line = true) {
  const uint64_t limit = std::min(seed_limit(eo), stop_at);
  const uint64_t done_before = e.ran();
  if (done_before >= limit) return;
  const Micros start = wall_now();
  const bool progress = !eo.as_json && isatty(STDERR_FILENO) != 0;
  e.started = true;
  const auto seen = [&](const SeedSummary& r) {
    e.tally.add(r);
    if (!progress) return;
    const uint64_t done = e.ran();
    if (deadline >= 0) {
      fmt::print(stderr, "\r{}{} seeds, {:.0f}s of the budget left   ", label, done,
                 static_cast<double>(std::max<Micros>(0, deadline - wall_now())) / 1e6);
      return;
    }
    const uint64_t width = 40;
    const uint64_t filled = done * width / limit;
    fmt::print(stderr, "\r{}[{}{}] {}/{} seeds", label, std::string(filled, '#'), std::string(width - filled, '.'), done,
               limit);
  };
  const uint64_t begin = eo.first_seed + done_before;
  const uint64_t end = eo.first_seed + limit;
  e.stopped.clear();
  if (eo.guided && e.s.kind == "pipeline") {
    explore_guided(inv, eo, e, deadline, limit, seen);
  } else if (!eo.stop_on_first_failure && deadline < 0) {
    explore_seeds(inv, e.s, begin, end - begin, eo.jobs, e.swarm, seen);
  } else {
    // In rounds, so that no round starts once a seed failed or the budget is spent; the
    // first round always runs.
    const uint64_t round = static_cast<uint64_t>(eo.jobs) * 4;
    for (uint64_t first = begin; first < end; first += round) {
      if (eo.stop_on_first_failure && e.failed() > 0) {
        e.stopped = "first failure";
        break;
      }
      if (first != begin && deadline >= 0 && wall_now() >= deadline) {
        e.stopped = "time budget";
        break;
      }
      explore_seeds(inv, e.s, first, std::min(round, end - first), eo.jobs, e.swarm, seen);
    }
  }
  if (progress && end_line) fmt::print(stderr, "\n");
  e.wall_ms += wall_ms_since(start);
}

// A time budget over several scenarios is shared by seeds, not by time: each round goes to
// the scenario that has run the fewest seeds so far, so every scenario gets as many seeds as
// the others whatever its seeds cost, and a slow spell of the machine cannot starve one.
// Every scenario runs its first round, even past the budget.
void explore_sharing_budget(const Invocation& inv, const ExploreOptions& eo, std::vector<Explored>& all, Micros start) {
  const Micros deadline = start + eo.time_budget_us;
  const uint64_t round = eo.guided ? kGuidedBatch : static_cast<uint64_t>(eo.jobs) * 4;
  const bool progress = !eo.as_json && isatty(STDERR_FILENO) != 0;
  std::vector<bool> exhausted(all.size(), false);  // a guided search with nothing left to run
  for (;;) {
    if (eo.stop_on_first_failure &&
        std::any_of(all.begin(), all.end(), [](const Explored& e) { return e.started && !e.as_expected(); })) {
      for (Explored& e : all) {
        if (e.started && !e.as_expected() && e.stopped.empty()) e.stopped = "first failure";
      }
      break;
    }
    Explored* next = nullptr;
    size_t index = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      if (!exhausted[i] && all[i].ran() < seed_limit(eo) && (next == nullptr || all[i].ran() < next->ran())) {
        next = &all[i];
        index = i;
      }
    }
    if (next == nullptr || (next->started && wall_now() >= deadline)) break;
    const std::string label = fmt::format("{}/{} {}: ", index + 1, all.size(), next->s.path);
    const uint64_t before = next->ran();
    explore_one(inv, eo, *next, deadline, label, before + round, false);
    exhausted[index] = next->ran() == before;
  }
  if (progress) fmt::print(stderr, "\n");
  for (Explored& e : all) {
    if (e.stopped.empty() && e.ran() < seed_limit(eo)) e.stopped = "time budget";
  }
}

// Whether --require-effects / --require-probes hold for `e`; the reason when not.
std::string unmet_requirement(const ExploreOptions& eo, const Explored& e) {
  const auto joined = [](const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  };
  if (eo.require_effects && !e.tally.kinds_without_effect().empty()) {
    return "fault kinds with no effect in any seed: " + joined(e.tally.kinds_without_effect());
  }
  if (eo.require_probes && e.s.kind == "pipeline" && !e.tally.probes_never_hit().empty()) {
    return "probes never reached: " + joined(e.tally.probes_never_hit());
  }
  return "";
}

std::string joined_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The program's `sometimes` assertions true in no scenario and `reachable` ones reached in
// none: a site of a computation one scenario does not run is met, or not, in another.
std::vector<std::string> never_met_anywhere(const std::vector<Explored>& all) {
  std::map<std::string, size_t> in;
  size_t pipelines = 0;
  for (const Explored& e : all) {
    if (!e.started || e.s.kind != "pipeline") continue;
    ++pipelines;
    for (const std::string& site : e.tally.assertions_never_met()) ++in[site];
  }
  std::vector<std::string> out;
  for (const auto& [site, n] : in) {
    if (n == pipelines) out.push_back(site);
  }
  return out;
}

json explored_json(const Invocation& inv, const ExploreOptions& eo, const Explored& e) {
  const std::string unmet = unmet_requirement(eo, e);
  json failing_seeds = json::array();
  for (const auto* r : e.tally.failing()) {
    json f{{"seed", r->seed}, {"failure", r->first_failure}, {"faults", r->mix}, {"replay", replay_of(inv, e, *r)}};
    if (!r->read_first.empty()) f["read_first"] = r->read_first;
    if (e.guided) {
      const GuidedInput& in = e.guided->input(r->run - 1);
      f["run"] = r->run;
      f["mutant_of_run"] = in.fresh ? json(nullptr) : json(in.parent + 1);
      f["mutation"] = in.fresh ? json(nullptr) : json(in.mutation);
    }
    failing_seeds.push_back(std::move(f));
  }
  // Runs before the first failure, counting it: the figure a search is judged by.
  json first_failure_run = nullptr;
  uint64_t position = 0;
  for (const auto& [key, r] : e.tally.results()) {
    ++position;
    if (!r.passed) {
      first_failure_run = position;
      break;
    }
  }
  json guided = nullptr;
  if (e.guided) {
    guided = json{{"fresh_seeds", e.guided->fresh_runs()},
                  {"mutants", e.guided->runs() - e.guided->fresh_runs()},
                  {"corpus", e.guided->corpus_size()},
                  {"failures_written", e.written},
                  {"failures_dir", eo.failures_dir}};
  }
  return json{{"scenario", e.s.path},
              {"seeds", e.ran()},
              {"first_seed", eo.first_seed},
              {"seeds_from", eo.seeds_from.empty() ? json(nullptr) : json(eo.seeds_from)},
              {"passed", e.ran() - e.failed()},
              {"failed", e.failed()},
              {"demonstrates_failure", e.s.demonstrates_failure},
              {"expected", e.s.demonstrates_failure ? "fail" : "pass"},
              {"outcome", e.outcome()},
              {"as_expected", e.as_expected()},
              {"stopped_by", e.stopped.empty() ? json(nullptr) : json(e.stopped)},
              {"unmet_requirement", unmet.empty() ? json(nullptr) : json(unmet)},
              {"failing_seeds", failing_seeds},
              {"first_failure_run", first_failure_run},
              {"guided", guided},
              {"coverage", e.tally.coverage().json()},
              {"checks", e.tally.checks_json()},
              {"drain_us", e.tally.drains_json()},
              {"effects", e.tally.effects_json()},
              {"warnings", e.tally.warnings_json()},
              {"assertions", e.tally.assertions_json()},
              {"assertions_never_met", e.tally.assertions_never_met()},
              {"events_total", e.tally.events()},
              {"sim_time_us_total", e.tally.sim_time_us()},
              {"wall_ms", e.wall_ms}};
}

void print_explored(const Invocation& inv, const ExploreOptions& eo, const Explored& e) {
  std::string stopped;
  if (e.stopped == "first failure") {
    stopped = fmt::format(" (stopped at the first failure, {} of {} seeds run)", e.ran(), seed_limit(eo));
  } else if (e.stopped == "time budget") {
    stopped = fmt::format(" (its share of the time budget spent after {} seeds)", e.ran());
  } else if (eo.time_budget_us > 0) {
    stopped = " (every seed asked for, within the time budget)";
  }
  if (e.guided) {
    const GuidedSearch& g = *e.guided;
    fmt::print("explore {} --guided: {} runs ({} fresh seeds from {}{} ({}), {} mutants of a corpus of {} runs), {} "
               "passed, {} failed{}\n",
               e.s.path, e.ran(), g.fresh_runs(), eo.first_seed, eo.seeds_from.empty() ? "" : " (" + eo.seeds_from + ")",
               e.swarm ? "swarm faults" : "scripted faults", g.runs() - g.fresh_runs(), g.corpus_size(),
               e.ran() - e.failed(), e.failed(), stopped);
  } else {
    fmt::print("explore {}: {} seeds from {}{} ({}), {} passed, {} failed{}{}\n", e.s.path, e.ran(), eo.first_seed,
               eo.seeds_from.empty() ? "" : " (" + eo.seeds_from + ")", e.swarm ? "swarm faults" : "scripted faults",
               e.ran() - e.failed(), e.failed(), stopped,
               eo.guided ? " (a kernel scenario: --guided mutates pipeline scenarios, this one ran its seeds)" : "");
  }
  fmt::print("{:.1f}s wall, {} events, {:.0f} seeds/s\n\n", e.wall_ms / 1e3, e.tally.events(),
             static_cast<double>(e.ran()) / std::max(e.wall_ms / 1e3, 1e-3));
  e.tally.print(e.ran(), e.s.kind == "pipeline");
  const auto failing = e.tally.failing();
  if (!failing.empty()) {
    fmt::print("\nfailing {} ({}):\n", e.guided ? "runs" : "seeds", failing.size());
    for (size_t i = 0; i < failing.size() && i < kListedFailures; ++i) {
      const auto* r = failing[i];
      if (e.guided) {
        const GuidedInput& in = e.guided->input(r->run - 1);
        fmt::print("  run {} (seed {}{}) {}\n    faults: {}\n    replay: {}\n", r->run, r->seed,
                   in.fresh ? "" : fmt::format(", a mutant of run {}: {}", in.parent + 1, in.mutation),
                   without_replay(r->first_failure), r->mix, replay_of(inv, e, *r));
      } else {
        fmt::print("  seed {:<6} {}\n    faults: {}\n    replay: {}\n", r->seed, without_replay(r->first_failure), r->mix,
                   replay_of(inv, e, *r));
      }
      if (!r->read_first.empty()) fmt::print("    read first: {}\n", r->read_first);
    }
    if (failing.size() > kListedFailures) {
      fmt::print("  ... and {} more (--json lists them all)\n", failing.size() - kListedFailures);
    }
  }
  if (e.s.demonstrates_failure) {
    fmt::print("\nthis scenario demonstrates a known-bad design: it is expected to fail{}\n",
               failing.empty() ? ", and no seed did" : ", as it did");
  }
}

// A JUnit XML report: one test case per scenario and seed range.
void write_junit(std::ofstream& out, const Invocation& inv, const ExploreOptions& eo, const std::vector<Explored>& all,
                 double wall_ms) {
  size_t failures = 0, skipped = 0;
  for (const auto& e : all) {
    if (!e.started) {
      ++skipped;
    } else if (!e.as_expected() || !unmet_requirement(eo, e).empty()) {
      ++failures;
    }
  }
  // --require-sometimes holds the program's assertions over all the scenarios: a case of its own.
  const std::vector<std::string> never_met = eo.require_sometimes ? never_met_anywhere(all) : std::vector<std::string>{};
  failures += never_met.empty() ? 0 : 1;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  const std::string totals = fmt::format("tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3f}\"",
                                         all.size() + (eo.require_sometimes ? 1 : 0), failures, skipped, wall_ms / 1e3);
  out << "<testsuites name=\"onceflow explore\" " << totals << ">\n";
  out << "  <testsuite name=\"onceflow explore\" " << totals << ">\n";
  for (const auto& e : all) {
    const std::string name = fmt::format("{} {} ({})", e.s.path, e.seed_range(eo.first_seed),
                                         e.swarm ? "swarm faults" : "scripted faults");
    out << fmt::format("    <testcase classname=\"onceflow.explore.{}\" name=\"{}\" time=\"{:.3f}\">\n",
                       xml_escape(e.s.name), xml_escape(name), e.wall_ms / 1e3);
    const auto failing = e.tally.failing();
    std::string listed;
    for (size_t i = 0; i < failing.size() && i < kJunitFailures; ++i) {
      const auto* r = failing[i];
      listed += fmt::format("seed {}: {}\n  faults: {}\n  replay: {}\n", r->seed, without_replay(r->first_failure), r->mix,
                            replay_of(inv, e, *r));
    }
    if (failing.size() > kJunitFailures) listed += fmt::format("... and {} more\n", failing.size() - kJunitFailures);
    const std::string unmet = unmet_requirement(eo, e);
    if (!e.started) {
      out << "      <skipped message=\"not run: the exploration stopped at an earlier failure\"/>\n";
    } else if (!e.as_expected()) {
      const std::string message =
          e.s.demonstrates_failure
              ? fmt::format("a demonstration of a known-bad design must fail, and none of {} seeds did", e.ran())
              : fmt::format("{} of {} seeds failed; first: seed {}: {}", failing.size(), e.ran(), failing[0]->seed,
                            without_replay(failing[0]->first_failure));
      out << "      <failure message=\"" << xml_escape(message) << "\" type=\"violation\">" << xml_escape(listed)
          << "</failure>\n";
    } else if (!unmet.empty()) {
      out << "      <failure message=\"" << xml_escape(unmet) << "\" type=\"coverage\">" << xml_escape(unmet)
          << "</failure>\n";
    }
    std::string summary = fmt::format("{}: {} seeds, {} passed, {} failed{}\n", e.outcome(), e.ran(), e.ran() - e.failed(),
                                      e.failed(), e.stopped.empty() ? "" : " (stopped by the " + e.stopped + ")");
    if (e.started && e.as_expected() && e.s.demonstrates_failure) summary += listed;
    out << "      <system-out>" << xml_escape(summary) << "</system-out>\n";
    out << "    </testcase>\n";
  }
  if (eo.require_sometimes) {
    out << "    <testcase classname=\"onceflow.explore.assertions\" name=\"--require-sometimes: every sometimes "
           "assertion true and every reachable one reached in some seed\" time=\"0.000\">\n";
    if (!never_met.empty()) {
      const std::string unmet = "assertions never met: " + joined_names(never_met);
      out << "      <failure message=\"" << xml_escape(unmet) << "\" type=\"coverage\">" << xml_escape(unmet)
          << "</failure>\n";
    }
    out << "    </testcase>\n";
  }
  out << "  </testsuite>\n</testsuites>\n";
}

volatile std::sig_atomic_t g_stop_continuous = 0;
extern "C" void stop_continuous(int) { g_stop_continuous = 1; }

// `explore --continuous`, TigerBeetle's VOPR way: fresh seeds until stopped.
int explore_continuous(const Invocation& inv, const ExploreOptions& eo, std::vector<Explored>& all, Micros start) {
  uint64_t first = eo.first_seed;
  if (!eo.first_seed_given) {  // a fresh stream of seeds; the first line says how to rerun it
    first = mix64(static_cast<uint64_t>(wall_now()) ^ (static_cast<uint64_t>(getpid()) << 32)) % 1'000'000'000'000 + 1;
  }
  if (std::none_of(all.begin(), all.end(), [](const Explored& e) { return !e.s.demonstrates_failure; })) {
    throw UsageError{"--continuous: every scenario named demonstrates a known-bad design (they fail by design)"};
  }
  const uint64_t round = static_cast<uint64_t>(eo.jobs) * 4;
  if (first > kMaxSeed - round) throw UsageError{fmt::format("--continuous: seeds from {} would pass the largest seed, {}", first, kMaxSeed)};
  // Its own handlers while it runs, the previous ones back however it ends.
  struct Handlers {
    void (*interrupt)(int) = std::signal(SIGINT, stop_continuous);
    void (*terminate)(int) = std::signal(SIGTERM, stop_continuous);
    ~Handlers() {
      std::signal(SIGINT, interrupt);
      std::signal(SIGTERM, terminate);
    }
  } handlers;
  g_stop_continuous = 0;
  // No coverage line: an endless exploration keeps no features of its seeds.
  for (Explored& e : all) e.tally.set_keeps_coverage(false);
  const Micros deadline = eo.time_budget_us > 0 ? start + eo.time_budget_us : -1;
  fmt::print("explore --continuous: {} scenarios, seeds from {} (rerun this stream with ONCEFLOW_SEED={}), {}; "
             "new failures go to {}/\n",
             all.size(), first, first, deadline < 0 ? "until SIGINT or SIGTERM" : "for " + format_duration(eo.time_budget_us),
             eo.failures_dir);
  std::fflush(stdout);
  const std::string bug = inv.bug_name.empty() ? "" : " --bug " + inv.bug_name;
  std::set<std::pair<std::string, std::string>> known;  // (scenario, check) already written
  uint64_t seeds = 0, failures = 0, written = 0;
  for (uint64_t from = first; g_stop_continuous == 0 && (deadline < 0 || wall_now() < deadline) && from <= kMaxSeed - round;
       from += round) {
    for (Explored& e : all) {
      if (g_stop_continuous != 0 || e.s.demonstrates_failure) continue;  // a demonstration fails by design
      e.started = true;
      std::vector<SeedSummary> failed;
      explore_seeds(inv, e.s, from, round, eo.jobs, e.swarm, [&](const SeedSummary& r) {
        ++seeds;
        e.tally.add(r);
        if (!r.passed) failed.push_back(r);
      });
      std::sort(failed.begin(), failed.end(), [](const SeedSummary& a, const SeedSummary& b) { return a.seed < b.seed; });
      for (const SeedSummary& r : failed) {
        ++failures;
        // One file per (scenario, cause): the check the run's "read first" names (a state read
        // or a re-execution that explains the rest), else the first failing one.
        const std::string& cause = r.read_first.empty() ? r.first_failure : r.read_first;
        const std::string check = cause.substr(0, cause.find(':'));
        if (!known.emplace(e.s.path, check).second) continue;
        // The failing run again here, for its plan and knobs, written down as a scenario.
        const simulated::RunOutcome again = run_seed_once(inv, e.s, r.seed, e.swarm, 0);
        const Scenario copy = scripted_copy(e.s, again.plan, e.swarm, &again.knobs);
        const std::string file = fmt::format("{}/{}-seed-{}.yaml", eo.failures_dir, e.s.name, r.seed);
        write_failure_scenario(inv, eo.failures_dir, fmt::format("{}-seed-{}.yaml", e.s.name, r.seed), copy, r.seed,
                               fmt::format("--continuous: seed {} of {} failed {}", r.seed, e.s.path, check),
                               fmt::format("seed {} of {} under continuous exploration: fails {}", r.seed, e.s.path, check));
        ++written;
        fmt::print("new failure: {} seed {}: {}\n{}  faults: {}\n  wrote {}\n  replay: {} run {} --seed {}{}\n  or: {}\n",
                   e.s.path, r.seed, without_replay(r.first_failure),
                   r.read_first.empty() ? "" : "  read first: " + r.read_first + "\n", r.mix, file, program_name(), file,
                   r.seed, bug, replay_command(inv, e.s, r.seed, e.swarm));
        std::fflush(stdout);
      }
    }
  }
  fmt::print("explore --continuous: {} seeds in {:.1f}s ({}), {} failed, {} new failure{} written to {}/\n", seeds,
             wall_ms_since(start) / 1e3, g_stop_continuous != 0 ? "stopped by a signal" : "time budget spent", failures,
             written, written == 1 ? "" : "s", eo.failures_dir);
  return failures > 0 ? 1 : 0;
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 allows no control characters but tab, newline and carriage return.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n' || c == '\r') out += c;
    }
  }
  return out;
}

int explore_command(const Invocation& inv, const ExploreOptions& eo) {
  if (eo.paths.empty()) throw UsageError{"explore: name a scenario file or folder"};
  if (eo.seeds == 0) throw UsageError{"--seeds must be at least 1"};
  if (eo.jobs < 1) throw UsageError{"--jobs must be at least 1"};
  if (eo.first_seed > kMaxSeed || (eo.seeds_given && eo.seeds - 1 > kMaxSeed - eo.first_seed)) {
    throw UsageError{fmt::format("--first-seed {} with --seeds {} goes past the largest seed, {}", eo.first_seed,
                                 eo.seeds, kMaxSeed)};
  }
  std::vector<Explored> all;
  for (auto& s : scenarios_named(eo.paths)) {
    check_functions(inv.registry, s);
    Explored e;
    e.swarm = eo.swarm.value_or(s.swarm);
    e.tally.set_out_of_reach(unreachable_probes(s, e.swarm));
    e.s = std::move(s);
    all.push_back(std::move(e));
  }
  // The report's file is opened first: a path that cannot be written is bad input, found
  // before any seed runs.
  // It is written whole to a file beside it, renamed over FILE at the end: an exploration
  // that ends in an error leaves no half report.
  std::ofstream junit;
  const std::string junit_partial = eo.junit_path + ".partial";
  struct RemovePartial {
    std::string path;  // "": nothing to remove
    ~RemovePartial() {
      std::error_code ignored;
      if (!path.empty()) std::filesystem::remove(path, ignored);
    }
  } remove_partial{eo.junit_path.empty() ? std::string() : junit_partial};
  if (!eo.junit_path.empty()) {
    junit.open(junit_partial);
    if (!junit) throw UsageError{"--junit: cannot write " + eo.junit_path};
  }
  std::optional<FailuresDir> failures_dir;
  if (eo.guided || eo.continuous) failures_dir.emplace(eo.failures_dir);
  std::error_code ec;
  const bool one_file = eo.paths.size() == 1 && !std::filesystem::is_directory(eo.paths[0], ec);
  const Micros start = wall_now();
  if (eo.continuous) return explore_continuous(inv, eo, all, start);
  const bool shared = eo.time_budget_us > 0 && all.size() > 1;
  if (shared) explore_sharing_budget(inv, eo, all, start);
  for (size_t i = 0; i < all.size(); ++i) {
    if (!shared) {
      if (eo.stop_on_first_failure && std::any_of(all.begin(), all.begin() + static_cast<long>(i),
                                                  [](const Explored& e) { return !e.as_expected(); })) {
        break;
      }
      const Micros deadline = eo.time_budget_us > 0 ? start + eo.time_budget_us : -1;
      const std::string label = all.size() > 1 ? fmt::format("{}/{} {}: ", i + 1, all.size(), all[i].s.path) : "";
      explore_one(inv, eo, all[i], deadline, label);
    }
    if (!eo.as_json && (!shared || all[i].started)) {
      if (i > 0) fmt::print("\n");
      print_explored(inv, eo, all[i]);
      std::fflush(stdout);
    }
  }
  const double wall_ms = wall_ms_since(start);
  size_t as_expected = 0;
  bool requirements_met = true;
  for (const auto& e : all) {
    as_expected += e.as_expected() ? 1 : 0;
    requirements_met &= !e.started || unmet_requirement(eo, e).empty();
  }
  const std::vector<std::string> never_met = never_met_anywhere(all);
  if (eo.require_sometimes && !never_met.empty()) requirements_met = false;
  if (eo.as_json) {
    if (one_file) {
      json j = explored_json(inv, eo, all[0]);
      j["peak_rss_mb"] = peak_rss_mb();
      if (eo.require_sometimes && !never_met.empty()) j["unmet_requirement"] = "assertions never met: " + joined_names(never_met);
      fmt::print("{}\n", j.dump(2));
    } else {
      json scenarios = json::array();
      for (const auto& e : all) scenarios.push_back(explored_json(inv, eo, e));
      fmt::print("{}\n", json{{"scenarios", scenarios},
                              {"explored", all.size()},
                              {"as_expected", as_expected},
                              {"not_as_expected", all.size() - as_expected},
                              {"assertions_never_met", never_met},
                              {"peak_rss_mb", peak_rss_mb()},
                              {"wall_ms", wall_ms}}
                             .dump(2));
    }
  } else if (all.size() > 1) {
    fmt::print("\nexplored {} scenarios in {:.1f}s: {} as expected, {} not\n", all.size(), wall_ms / 1e3, as_expected,
               all.size() - as_expected);
    for (const auto& e : all) {
      const std::string unmet = e.started ? unmet_requirement(eo, e) : "";
      fmt::print("  {:<48} {:>8} seeds  {:>6} failed  {}{}\n", e.s.path, e.ran(), e.failed(), e.outcome(),
                 unmet.empty() ? "" : "; " + unmet);
    }
  }
  if (!eo.as_json && !never_met.empty()) {
    fmt::print("\n{}: {} ({})\n", all.size() > 1 ? "assertions met in no scenario" : "assertions never met",
               joined_names(never_met), eo.require_sometimes ? "--require-sometimes: exit 1" : "a coverage gap");
  }
  if (junit.is_open()) {
    write_junit(junit, inv, eo, all, wall_ms);
    junit.close();
    std::error_code renamed;
    if (junit) std::filesystem::rename(junit_partial, eo.junit_path, renamed);
    if (!junit || renamed) throw UsageError{"--junit: cannot write " + eo.junit_path};
  }
  if (as_expected != all.size()) return 1;
  return requirements_met ? 0 : 1;
}

}  // namespace onceflow::cli
