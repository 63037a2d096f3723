#include "cli/cli.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <set>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/input_checks.h"
#include "checkers/kernel_checks.h"
#include "checkers/pipeline_checks.h"
#include "checkers/verdict.h"
#include "cli/explain.h"
#include "cli/explore.h"
#include "cli/replay_filter.h"
#include "cli/runner.h"
#include "real/run.h"
#include "cli/scenario.h"
#include "core/builtin.h"
#include "core/probes.h"
#include "simulated/selftest.h"
#include "real/wall_clock.h"

namespace onceflow {

namespace {

using json = nlohmann::json;
using cli::check_functions;
using cli::explore_seeds;
using cli::Invocation;
using cli::load_library;
using cli::load_or_fail;
using cli::peak_rss_mb;
using cli::program_name;
using cli::replay_command;
using cli::run_seed;
using cli::run_seed_once;
using cli::UsageError;
using cli::wall_ms_since;
using cli::wall_now;

constexpr int kExitPass = 0;
constexpr int kExitViolation = 1;
constexpr int kExitUsage = 2;
constexpr size_t kTraceTailLines = 40;

std::string hex(uint64_t v) { return fmt::format("{:016x}", v); }

// Limits of the numbers on the command line (docs/cli.md).
using cli::kMaxSeed;
constexpr uint64_t kMaxSeeds = 100'000'000;  // per explore
constexpr uint64_t kMaxJobs = 64;             // worker processes
constexpr uint64_t kMaxWorkers = 64;                          // onceflow real's worker nodes
constexpr Micros kMaxTraceTimeUs = 365LL * 86'400 * kSeconds;  // replay --from/--to
constexpr uint64_t kMaxMessages = 1'000'000'000;

// A whole decimal number in [min, max], checked on the text before CLI11 converts it (which
// would wrap "-1" round to 2^64-1); the error names the value and the range.
CLI::Validator whole(uint64_t min, uint64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        uint64_t v = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        const std::string shown = text.size() > 24 ? text.substr(0, 24) + "..." : text;
        if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || v < min || v > max) {
          return fmt::format("'{}' is not a whole number in [{}, {}]", shown, min, max);
        }
        return std::string();
      },
      fmt::format("UINT in [{}, {}]", min, max));
}

// Worker processes when --jobs is not given: the cores this process may run on.
int default_jobs() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  if (cores <= 0) cores = static_cast<int>(std::thread::hardware_concurrency());
  return static_cast<int>(std::clamp<int64_t>(cores, 1, static_cast<int64_t>(kMaxJobs)));
}

// A path to write to: an empty one would write nothing and say nothing.
const CLI::Validator kPathToWrite(
    [](std::string& text) -> std::string { return text.empty() ? "an empty path (nothing would be written)" : ""; },
    "PATH");

Micros duration_option(const std::string& name, const std::string& text, Micros min_us, Micros max_us) {
  const auto us = parse_duration(text);
  if (!us || *us < min_us || *us > max_us) {
    throw UsageError{fmt::format("{} {}: expected a duration from {} to {} (e.g. 500ms, 30s)", name,
                                 text.substr(0, 32), format_duration(min_us), format_duration(max_us))};
  }
  return *us;
}

// --role: one process of a deployment on a shared store needs that store to be PostgreSQL.
real::RealOptions::Role real_role_of(const std::string& role, const real::RealOptions& o, bool workers_given) {
  using Role = real::RealOptions::Role;
  Role r = Role::kAll;
  if (role == "controller") {
    r = Role::kController;
  } else if (role == "worker") {
    r = Role::kWorker;
  } else if (role != "all") {
    throw UsageError{fmt::format("--role {}: expected all, controller or worker", role.substr(0, 32))};
  }
  if (r == Role::kAll && !o.name.empty()) throw UsageError{"--name names the process of --role controller or worker"};
  if (r == Role::kAll) return r;
  if (o.store.empty()) {
    throw UsageError{fmt::format("--role {}: processes share a deployment through a PostgreSQL --store; a LevelDB "
                                 "--data directory belongs to one process (use --role all)", role)};
  }
  if (workers_given) throw UsageError{"--workers counts the worker fibers of --role all; start more worker processes instead"};
  if (o.name.size() > 100 || o.name.find_first_of(" /\t\n") != std::string::npos) {
    throw UsageError{"--name: at most 100 characters, no spaces or slashes"};
  }
  return r;
}

// Ok when `bug` names a bug switch, the program's own or the engine's; else why not, with the
// names known.
Status known_bug(const ComputationRegistry& registry, const std::string& bug) {
  if (registry.bug(bug) != nullptr || BugSwitches().enable(bug)) return Status::ok();
  std::string known;
  for (const auto& b : registry.bugs()) known += (known.empty() ? "" : ", ") + b.name;
  for (const auto& name : BugSwitches::names()) known += (known.empty() ? "" : ", ") + name;
  return Status::invalid_argument(fmt::format("unknown bug switch '{}' (known: {})", bug.substr(0, 64), known));
}

// onceflow real: the pipeline on the real backends (real/run.h).
int cmd_real(const ComputationRegistry& registry, const std::string& spec_path, real::RealOptions options,
             const std::string& kafka_timeout, const std::string& progress_every, const std::string& drain_timeout,
             const std::string& sink_timeout) {
  auto spec = load_pipeline_spec(spec_path);
  if (!spec) throw UsageError{spec.error().message()};
  check_functions(registry, spec_path, *spec);
  if (options.data_dir.empty() == options.store.empty()) {
    throw UsageError{"onceflow real needs one of --data DIR (LevelDB) or --store CONNINFO (PostgreSQL)"};
  }
  if (options.workers < 1) throw UsageError{"--workers must be at least 1"};
  if (!options.bug.empty()) {
    if (Status known = known_bug(registry, options.bug); !known.is_ok()) throw UsageError{known.message()};
    if (registry.bug(options.bug) == nullptr && BugSwitches::simulated_only(options.bug)) {
      throw UsageError{fmt::format("--bug {}: a bug of a simulated component (the store, the Kafka broker), which "
                                   "onceflow real does not use", options.bug)};
    }
  }
  if (options.keys < 1) throw UsageError{"--keys must be at least 1"};
  if (!kafka_timeout.empty()) options.kafka_timeout_us = duration_option("--kafka-timeout", kafka_timeout, kSeconds, 86'400 * kSeconds);
  if (!drain_timeout.empty()) options.drain_timeout_us = duration_option("--drain-timeout", drain_timeout, 0, 3'600 * kSeconds);
  if (!sink_timeout.empty()) options.sink_timeout_us = duration_option("--sink-timeout", sink_timeout, kSeconds, 86'400 * kSeconds);
  if (!progress_every.empty()) {
    options.progress_every_us = duration_option("--progress-every", progress_every, 10 * kMillis, 3'600 * kSeconds);
  }
  return real::run_real(spec_path, *spec, registry, options);
}

// onceflow explain: the run drawn as a self-contained HTML page (cli/explain.h).
int cmd_explain(const Invocation& inv, const std::string& path, uint64_t seed, std::optional<bool> swarm_flag,
                const std::string& html_path) {
  const cli::Scenario s = load_or_fail(path);
  if (s.kind != "pipeline") {
    throw UsageError{fmt::format("{}: explain draws pipeline runs; this scenario is of kind '{}'", path, s.kind)};
  }
  check_functions(inv.registry, s);
  const bool swarm = swarm_flag.value_or(s.swarm);
  // The very run that `run` and `replay` report for this seed (the same knobs, bugs, inert faults).
  // With the trace kept (its lines show what targets answered to outputs that went missing);
  // keeping lines changes nothing of the run.
  const simulated::PipelineRunOptions options = cli::pipeline_run_options(inv, s, seed, swarm, SIZE_MAX);
  const simulated::PipelineRun run = simulated::run_pipeline(options, inv.registry);
  std::ofstream out(html_path);
  if (!out) throw UsageError{"cannot write " + html_path};
  out << cli::render_explain_html({path, options.replay_command, &run});
  out.close();
  if (!out) throw UsageError{"cannot write " + html_path};
  fmt::print("scenario {} seed {}: {}; wrote {} ({} epochs, {} deliveries)\n", path, seed,
             run.outcome.passed ? "PASS" : "FAIL", html_path, run.history.epochs.size(), run.history.deliveries.size());
  return run.outcome.passed ? kExitPass : kExitViolation;
}

// The scenario library: ./scenarios when there is one (the repository's root), else
// $ONCEFLOW_SCENARIOS, else the installed one next to this binary (<prefix>/bin/..
// /share/onceflow/scenarios), else the one of the prefix it was configured for, else the one
// of the source tree it was built from.
std::string default_library_dir() {
  std::error_code ec;
  if (std::filesystem::is_directory("scenarios", ec)) return "scenarios";
  if (const char* env = std::getenv("ONCEFLOW_SCENARIOS"); env != nullptr && *env != '\0') return env;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto beside = exe.parent_path().parent_path() / "share" / "onceflow" / "scenarios";
    if (std::filesystem::is_directory(beside, ec)) return beside.string();
  }
  if (std::filesystem::is_directory(ONCEFLOW_INSTALLED_SCENARIOS_DIR, ec)) return ONCEFLOW_INSTALLED_SCENARIOS_DIR;
  return ONCEFLOW_SCENARIOS_DIR;
}

// The commit attempts (transactions) that consumed or produced any of `ids`.
std::set<uint64_t> commit_txs(const simulated::RunOutcome& r, const std::set<uint64_t>& ids) {
  std::set<uint64_t> out;
  for (const uint64_t id : ids) {
    if (auto txs = r.txs_by_id.find(id); txs != r.txs_by_id.end()) out.insert(txs->second.begin(), txs->second.end());
  }
  return out;
}

// The trace lines that show a failed run's violations: those naming an id (16 hex digits) the
// failing checks name (or, when no line names one, a key they name) and the commits that took
// or made those messages, the first kExcerptNamedLines of them; with the faults that began,
// ended or fired from a second before the first of them to the last, at most kExcerptFaultLines,
// those nearest to a named line. Else the last lines.
std::vector<std::string> trace_excerpt(const simulated::RunOutcome& r) {
  constexpr size_t kExcerptNamedLines = 28, kExcerptFaultLines = 12;
  if (r.passed || r.trace.empty()) return {};
  std::set<std::string> ids = checkers::ids_named_by_failures(r.verdicts);
  const auto names_one_of = [](const std::string& line, const std::set<std::string>& texts) {
    return std::any_of(texts.begin(), texts.end(), [&](const std::string& t) { return line.find(t) != std::string::npos; });
  };
  std::set<uint64_t> named_ids;
  for (const std::string& id : ids) named_ids.insert(tables::parse_hex16(id));
  const std::set<uint64_t> commits = commit_txs(r, named_ids);
  if (std::none_of(r.trace.begin(), r.trace.end(), [&](const std::string& line) { return names_one_of(line, ids); })) {
    ids.clear();  // a check that names keys only: the lines of messages of those keys
    for (const uint64_t key : checkers::keys_named_by_failures(r.verdicts)) ids.insert(fmt::format("(key {},", key));
  }
  const auto time_of = [](const std::string& line) { return cli::trace_line_time(line).value_or(0); };
  std::vector<const std::string*> named;
  for (const auto& line : r.trace) {
    if (named.size() < kExcerptNamedLines && (names_one_of(line, ids) || cli::names_commit_tx(line, commits))) named.push_back(&line);
  }
  if (named.empty()) {
    return {r.trace.end() - static_cast<long>(std::min(r.trace.size(), kTraceTailLines)), r.trace.end()};
  }
  std::vector<Micros> named_times;
  for (const std::string* line : named) named_times.push_back(time_of(*line));
  const auto is_fault = [](const std::string& line) {
    return line.find(" fault begins: ") != std::string::npos || line.find(" fault ends: ") != std::string::npos ||
           line.find(" heal: ") != std::string::npos || line.find(" fires: crash") != std::string::npos;
  };
  // How far a fault line is from the nearest named line (named_times is in trace order).
  const auto distance = [&](Micros t) {
    const auto after = std::lower_bound(named_times.begin(), named_times.end(), t);
    Micros best = INT64_MAX;
    if (after != named_times.end()) best = *after - t;
    if (after != named_times.begin()) best = std::min(best, t - *std::prev(after));
    return best;
  };
  std::vector<std::pair<Micros, const std::string*>> faults;
  for (const auto& line : r.trace) {
    const Micros t = time_of(line);
    if (is_fault(line) && t >= named_times.front() - kSeconds && t <= named_times.back()) faults.emplace_back(distance(t), &line);
  }
  std::stable_sort(faults.begin(), faults.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  if (faults.size() > kExcerptFaultLines) faults.resize(kExcerptFaultLines);
  std::set<const std::string*> kept(named.begin(), named.end());
  for (const auto& f : faults) kept.insert(f.second);
  std::vector<std::string> out;
  for (const auto& line : r.trace) {
    if (kept.count(&line) > 0) out.push_back(line);
  }
  return out;
}

json plan_json(const faults::FaultPlan& plan, const std::string& mix) {
  json faults = json::array();
  for (const auto& f : plan.faults) {
    json item{{"kind", std::string(faults::fault_kind_name(f.kind))},
              {"at_us", f.at_us},
              {"for_us", f.duration_us}};
    if (!f.node.empty()) item["node"] = f.node;
    if (!f.peer.empty()) item["peer"] = f.peer;
    if (f.intensity > 0) item["probability"] = f.intensity;
    if (f.amount_us != 0) item["amount_us"] = f.amount_us;
    faults.push_back(item);
  }
  return json{{"mix", mix}, {"heal_at_us", plan.heal_at_us}, {"plan", faults}};
}

// What each configured or drawn fault kind did: its measure and count, and details.
json effects_json(const simulated::RunOutcome& r) {
  json out = json::object();
  for (const auto& [kind, e] : r.effects) {
    json details = json::object();
    for (const auto& [what, n] : e.details) details[what] = n;
    out[kind] = {{"measure", e.measure}, {"count", e.count}, {"details", details}};
  }
  return out;
}

// The user's assertions (core/user_code.h): how often each was evaluated and held.
json assertions_json(const simulated::RunOutcome& r) {
  json out = json::array();
  for (const auto& c : r.user_sites) {
    out.push_back({{"name", c.name}, {"kind", c.kind}, {"evaluated", c.evaluated}, {"held", c.held}});
  }
  return out;
}

json run_json(const Invocation& inv, const cli::Scenario& s, const simulated::RunOutcome& r, bool swarm, double wall_ms) {
  json checks = json::array();
  json violations = json::array();
  for (const auto& v : r.verdicts) {
    checks.push_back({{"name", v.check}, {"verdict", v.verdict_name()}, {"detail", v.detail}});
    if (!v.passed) {
      violations.push_back({{"check", v.check},
                            {"detail", v.detail},
                            {"seed", r.seed},
                            {"replay", replay_command(inv, s, r.seed, swarm)}});
    }
  }
  return json{{"scenario", s.path},   {"seed", r.seed},
              {"verdict", r.passed ? "pass" : "fail"},
              {"trace_hash", hex(r.trace_hash)},
              {"events", r.events},   {"sim_time_us", r.sim_time_us},
              {"wall_ms", wall_ms},   {"faults", plan_json(r.plan, r.fault_mix)},
              {"checks", checks},     {"violations", violations},
              {"observed", r.observed},
              {"drain_us", r.drain_us},
              {"liveness_bound_us", r.liveness_bound_us},
              {"effects", effects_json(r)},
              {"probes", r.probes},
              {"assertions", assertions_json(r)},
              {"knobs", r.knobs},
              {"warnings", r.warnings},
              {"trace_excerpt", trace_excerpt(r)}};
}

void print_run(const Invocation& inv, const cli::Scenario& s, const simulated::RunOutcome& r, bool swarm, double wall_ms,
               bool with_excerpt) {
  fmt::print("scenario {} seed {}: {}\n", s.path, r.seed, r.passed ? "PASS" : "FAIL");
  fmt::print("  trace_hash {}  events {}  simulated {}  wall {:.0f}ms\n", hex(r.trace_hash), r.events,
             format_time(r.sim_time_us), wall_ms);
  fmt::print("  faults: {}\n", r.fault_mix);
  std::string observed;
  for (const auto& [what, n] : r.observed) observed += fmt::format("{}{} {}", observed.empty() ? "" : ", ", n, what);
  if (!observed.empty()) fmt::print("  observed: {}\n", observed);
  for (const auto& [kind, e] : r.effects) fmt::print("  effect: {} {} {}\n", kind, e.count, e.measure);
  for (const auto& w : r.warnings) fmt::print("  warning: {}\n", w);
  for (const auto& c : r.user_sites) {
    fmt::print("  assertion: {} \"{}\" evaluated {}, held {}\n", c.kind, c.name, c.evaluated, c.held);
  }
  size_t width = 22;  // a program's own checks may have longer names
  for (const auto& v : r.verdicts) width = std::max(width, std::min<size_t>(v.check.size(), 64));
  for (const auto& v : r.verdicts) {
    fmt::print("  {:<{}} {:<4}  {}\n", v.check.substr(0, 64), width, !v.passed ? "FAIL" : v.applicable ? "pass" : "n/a",
               v.detail);
  }
  if (r.passed) return;
  if (const std::string first = checkers::read_first(r.verdicts); !first.empty()) fmt::print("  read first: {}\n", first);
  fmt::print("  replay: {}\n", replay_command(inv, s, r.seed, swarm));
  if (!with_excerpt) return;
  const auto excerpt = trace_excerpt(r);
  if (!excerpt.empty()) fmt::print("  trace excerpt ({} lines):\n", excerpt.size());
  for (const auto& line : excerpt) fmt::print("    {}\n", line);
}

// `replay`: print the trace, the lines it lets through (onceflow replay); null for run.
int cmd_run(const Invocation& inv, const std::string& path, uint64_t seed, std::optional<bool> swarm_flag, bool as_json,
            const std::string& trace_file, cli::ReplayFilter* replay) {
  const cli::Scenario s = load_or_fail(path);
  check_functions(inv.registry, s);
  const bool swarm = swarm_flag.value_or(s.swarm);
  const Micros start = wall_now();
  // The whole trace is kept: a violation is reported with the lines that show it.
  const simulated::RunOutcome r = run_seed(inv, s, seed, swarm, SIZE_MAX, true);
  const double wall_ms = wall_ms_since(start);
  if (!trace_file.empty()) {
    std::ofstream out(trace_file);
    if (!out) throw UsageError{"cannot write trace file " + trace_file};
    for (const auto& line : r.trace) out << line << '\n';
  }
  if (replay != nullptr) {
    if (const std::string unknown = replay->unknown_in(r.trace); !unknown.empty()) throw UsageError{unknown};
    if (replay->key) {
      const auto ids = r.ids_by_key.find(*replay->key);
      if (ids == r.ids_by_key.end()) {
        throw UsageError{fmt::format("--key {}: no message of this run has that key (keys are decimal, as checks "
                                     "print them: \"key 13\")", *replay->key)};
      }
      replay->key_ids = ids->second;
      replay->key_txs = commit_txs(r, ids->second);
    }
    if (!replay->id.empty()) {
      // A whole MessageId: its commits too (a part of one only finds lines).
      if (replay->id.size() == 16) replay->id_txs = commit_txs(r, {tables::parse_hex16(replay->id)});
      if (replay->id_txs.empty() && std::none_of(r.trace.begin(), r.trace.end(), [&](const std::string& line) {
            return line.find(replay->id) != std::string::npos;
          })) {
        throw UsageError{fmt::format("--id {}: no message of this run has that MessageId, and no line names it", replay->id)};
      }
    }
    fmt::print("fault plan ({}):\n{}", r.fault_mix, r.plan.describe());
    std::vector<const std::string*> shown;
    for (const auto& line : r.trace) {
      if (replay->matches(line)) shown.push_back(&line);
    }
    if (replay->any()) {
      fmt::print("trace ({} of {} lines: {}):\n", shown.size(), r.trace.size(), replay->describe());
    } else {
      fmt::print("trace ({} lines):\n", r.trace.size());
    }
    for (const std::string* line : shown) fmt::print("{}\n", *line);
  }
  if (as_json) {
    fmt::print("{}\n", run_json(inv, s, r, swarm, wall_ms).dump(2));
  } else {
    print_run(inv, s, r, swarm, wall_ms, replay == nullptr);  // replay printed the trace already
  }
  return r.passed ? kExitPass : kExitViolation;
}

// --- shrink ---------------------------------------------------------------------------

// The first check that failed, or "" when the run passed.
std::string first_failure(const simulated::RunOutcome& r) {
  for (const auto& v : r.verdicts) {
    if (!v.passed) return v.check;
  }
  return "";
}

using cli::scripted_copy;

// The workload's size: input messages of a pipeline, transfers per client of the kernel.
uint64_t workload_size(const cli::Scenario& s) {
  return s.kind == "pipeline" ? static_cast<uint64_t>(s.pipeline.workload.messages) : s.kernel.workload.transfers_per_client;
}
void set_workload_size(cli::Scenario& s, uint64_t n) {
  if (s.kind == "pipeline") {
    s.pipeline.workload.messages = static_cast<int>(n);
  } else {
    s.kernel.workload.transfers_per_client = n;
  }
}

void write_shrunk(const cli::Scenario& s, uint64_t seed, const std::string& check, const std::string& out_path,
                  const std::string& bug) {
  const std::string yaml = cli::scenario_yaml(s, fmt::format("{}-shrunk-seed-{}", s.name, seed),
                                              fmt::format("shrunk from {} seed {}: still fails {}", s.path, seed, check));
  std::ofstream out(out_path);
  if (!out) throw UsageError{"cannot write " + out_path};
  out << "# Written by onceflow shrink; replay with: " << program_name() << " run " << out_path << " --seed " << seed
      << (bug.empty() ? "" : " --bug " + bug) << "\n"
      << yaml << "\n";
}

// Reduces the fault plan and the workload of a failing seed to a smaller scenario that still
// fails the same check: drops faults one by one, then halves the workload, keeping each step
// that still fails.
int cmd_shrink(const Invocation& inv, const std::string& path, uint64_t seed, std::optional<bool> swarm_flag,
               const std::string& out_path) {
  const cli::Scenario original = load_or_fail(path);
  check_functions(inv.registry, original);
  const bool swarm = swarm_flag.value_or(original.swarm);
  const simulated::RunOutcome first = run_seed_once(inv, original, seed, swarm, 0);
  const std::string check = first_failure(first);
  if (check.empty()) throw UsageError{fmt::format("seed {} of {} passes: nothing to shrink", seed, path)};
  cli::Scenario best = scripted_copy(original, first.plan, swarm, &first.knobs);
  const auto still_fails = [&](const cli::Scenario& candidate) {
    const simulated::RunOutcome r = run_seed_once(inv, candidate, seed, false, 0);
    for (const auto& v : r.verdicts) {
      if (!v.passed && v.check == check) return true;
    }
    return false;
  };
  if (!still_fails(best)) throw UsageError{"the failure does not reproduce from its scripted plan"};
  int runs = 1;
  // The program's own fault points: the sites that fired, pinned by name before anything else
  // changes the run (they stay as drawn when pinning them loses the failure).
  if (best.kind == "pipeline" && !best.pipeline.buggify_sites && !first.buggify_fired.empty()) {
    cli::Scenario candidate = best;
    candidate.pipeline.buggify_sites = std::set<std::string>(first.buggify_fired.begin(), first.buggify_fired.end());
    ++runs;
    if (still_fails(candidate)) best = std::move(candidate);
  }
  // The crashes at fault points, written down: each a scripted point_crash at its point and
  // time, in place of the random fault points (kept only if the run does not fail without).
  std::string points_note;  // what became of the crashes at fault points
  bool scripted_points = false;
  if (best.kind == "pipeline" && !first.point_hits.empty()) {
    points_note = fmt::format("\n  {} crashes at fault points: ", first.point_hits.size());
    cli::Scenario candidate = best;
    for (const faults::PointHit& hit : first.point_hits) {
      faults::Fault f;
      f.kind = faults::FaultKind::kPointCrash;
      f.node = hit.node;
      f.point = hit.point;
      f.at_us = hit.at_us;
      f.duration_us = simulated::PipelineWorldOptions{}.fault_point_restart_us;
      candidate.scripted.faults.push_back(f);
    }
    std::stable_sort(candidate.scripted.faults.begin(), candidate.scripted.faults.end(),
                     [](const faults::Fault& a, const faults::Fault& b) { return a.at_us < b.at_us; });
    candidate = scripted_copy(candidate, candidate.scripted, false);
    candidate.pipeline.fault_points_when_scripted = false;
    ++runs;
    if (still_fails(candidate)) {
      best = std::move(candidate);
      points_note += "scripted as point_crash faults";
      scripted_points = true;
    } else {
      points_note += "kept as random fault points (the failure did not reproduce with them scripted)";
    }
  }
  // The program's own fault points (ONCEFLOW_BUGGIFY) that fired, pinned by name, then each
  // dropped that the failure does not need.
  std::string buggify_note;
  if (best.pipeline.buggify_sites) {
    cli::Scenario candidate = best;
    for (const std::string& site : std::set<std::string>(*best.pipeline.buggify_sites)) {
      candidate = best;
      candidate.pipeline.buggify_sites->erase(site);
      ++runs;
      if (still_fails(candidate)) best = std::move(candidate);
    }
    buggify_note = fmt::format("\n  user fault points (ONCEFLOW_BUGGIFY) kept: {}", best.pipeline.buggify_sites->size());
  }
  const size_t faults_before = best.scripted.faults.size();
  const uint64_t workload_before = workload_size(best);
  for (size_t i = best.scripted.faults.size(); i-- > 0;) {
    cli::Scenario candidate = best;
    auto& plan = candidate.scripted.faults;
    plan.erase(plan.begin() + static_cast<long>(i));
    candidate = scripted_copy(candidate, candidate.scripted, false);
    ++runs;
    if (still_fails(candidate)) best = std::move(candidate);
  }
  while (workload_size(best) > 1) {
    cli::Scenario candidate = best;
    set_workload_size(candidate, workload_size(candidate) / 2);
    ++runs;
    if (!still_fails(candidate)) break;
    best = std::move(candidate);
  }
  if (best.kind == "pipeline" && best.pipeline.fault_points_when_scripted) {
    cli::Scenario candidate = best;
    candidate.pipeline.fault_points_when_scripted = false;
    ++runs;
    if (still_fails(candidate)) best = std::move(candidate);
  }
  if (scripted_points) {  // the shrink below may have found the failure needs none of them
    const auto kept = std::count_if(best.scripted.faults.begin(), best.scripted.faults.end(),
                                    [](const faults::Fault& f) { return f.kind == faults::FaultKind::kPointCrash; });
    points_note += fmt::format(", {} of them kept", kept);
  }
  points_note += buggify_note;  // after the crashes' line, which the count above ends
  write_shrunk(best, seed, check, out_path, inv.bug_name);
  fmt::print("shrink {} seed {}: fails {}{}\n  faults {} -> {}, workload {} -> {} ({} runs)\n  wrote {}\n  replay: {} run {} --seed {}{}\n",
             path, seed, check, points_note, faults_before, best.scripted.faults.size(), workload_before, workload_size(best), runs,
             out_path, program_name(), out_path, seed, inv.bug_name.empty() ? "" : " --bug " + inv.bug_name);
  return kExitViolation;
}

std::vector<std::string> fault_kinds_of(const cli::Scenario& s) {
  std::set<std::string> kinds;
  const bool pipeline = s.kind == "pipeline";
  if (s.swarm) {
    const auto& chosen = pipeline ? s.pipeline.swarm_kinds : std::vector<faults::FaultKind>{};
    if (chosen.empty()) {
      for (auto k : faults::kAllKernelFaultKinds) kinds.insert(std::string(faults::fault_kind_name(k)));
    }
    for (auto k : chosen) kinds.insert(std::string(faults::fault_kind_name(k)));
    if (pipeline && s.pipeline.fault_point_probability > 0) kinds.insert("fault_points");
  }
  for (const auto& f : s.scripted.faults) kinds.insert(std::string(faults::fault_kind_name(f.kind)));
  return {kinds.begin(), kinds.end()};
}

// The probes of core/probes.h: name and the branch it marks.
int cmd_list_probes(bool as_json) {
  if (as_json) {
    json probes = json::array();
    for (const ProbeInfo& p : kProbes) probes.push_back({{"name", p.name}, {"marks", p.what}});
    fmt::print("{}\n", json{{"probes", probes}}.dump(2));
    return kExitPass;
  }
  for (const ProbeInfo& p : kProbes) fmt::print("{:<32} {}\n", p.name, p.what);
  return kExitPass;
}

// The scenarios of `dirs`, in order (the program's own folder first).
int cmd_list(const std::vector<std::string>& dirs, bool as_json) {
  std::vector<cli::Scenario> library;
  for (const std::string& dir : dirs) {
    for (auto& s : load_library(dir)) library.push_back(std::move(s));
  }
  json scenarios = json::array();
  for (const auto& s : library) {
    scenarios.push_back({{"path", s.path},
                         {"name", s.name},
                         {"kind", s.kind},
                         {"guarantees", s.guarantees},
                         {"fault_kinds", fault_kinds_of(s)},
                         {"demonstrates_failure", s.demonstrates_failure},
                         {"regression_seeds", s.regression_seeds},
                         {"catches", s.catches}});
  }
  if (as_json) {
    fmt::print("{}\n", json{{"scenarios", scenarios}}.dump(2));
    return kExitPass;
  }
  for (const auto& s : library) {
    fmt::print("{:<44} {:<9} {}{}\n", s.path, s.kind, s.description.empty() ? s.name : s.description,
               s.demonstrates_failure ? "  [demonstrates a known-bad design: must fail]" : "");
  }
  return kExitPass;
}

// The bug switches `--bug` and `mutants` know: the program's own first, then the engine's
// (with `engine`, or when the program has none).
int cmd_list_bugs(const ComputationRegistry& registry, bool engine, bool as_json) {
  const bool show_engine = engine || registry.bugs().empty();
  json own = json::array(), engines = json::array();
  for (const UserBug& b : registry.bugs()) {
    own.push_back({{"name", b.name}, {"description", b.description}, {"harmless", b.harmless}});
  }
  if (show_engine) {
    for (const std::string& name : BugSwitches::names()) {
      engines.push_back({{"name", name}, {"mistake", BugSwitches::mistake(name)}, {"caught_by", BugSwitches::catchers(name)}});
    }
  }
  if (as_json) {
    fmt::print("{}\n", json{{"own", own}, {"engine", show_engine ? engines : json(nullptr)}}.dump(2));
    return kExitPass;
  }
  for (const UserBug& b : registry.bugs()) fmt::print("{:<32} {}{}\n", b.name, b.description, b.harmless ? " (harmless: must stay green)" : "");
  if (!show_engine) return kExitPass;
  if (!registry.bugs().empty()) fmt::print("\nengine bug switches:\n");
  for (const std::string& name : BugSwitches::names()) {
    std::string by;
    for (const std::string& c : BugSwitches::catchers(name)) by += (by.empty() ? "" : ", ") + c;
    fmt::print("{:<32} {} (caught by {})\n", name, BugSwitches::mistake(name), by);
  }
  return kExitPass;
}

// Seeds of each pipeline scenario a harmless switch must pass (at most --max-seeds).
constexpr uint64_t kHarmlessSeeds = 30;

// Runs every bug switch against the pipeline scenarios of `dir` until a checker catches it:
// the program's own switches (ComputationRegistry::add_bug) when it has any, the engine's
// when it has none or `engine_bugs` asks for them too.
int cmd_mutants(const ComputationRegistry& registry, const std::string& dir, uint64_t max_seeds, int jobs,
                bool as_json, bool engine_bugs) {
  // Engine bugs run on pipeline scenarios; store bugs on kernel scenarios first, whose
  // workload talks to the store alone, then on pipelines.
  std::vector<cli::Scenario> pipelines, kernels;
  for (auto& s : load_library(dir)) {
    check_catches(registry, s);
    if (s.demonstrates_failure) continue;
    if (s.kind == "pipeline") check_functions(registry, s);
    (s.kind == "pipeline" ? pipelines : kernels).push_back(std::move(s));
  }
  if (pipelines.empty()) throw UsageError{dir + ": no pipeline scenarios"};
  std::vector<const cli::Scenario*> engine_order, store_order;
  for (const auto& s : pipelines) engine_order.push_back(&s);
  for (const auto& s : kernels) store_order.push_back(&s);
  store_order.insert(store_order.end(), engine_order.begin(), engine_order.end());
  struct Switch {
    std::string name;
    bool own = false;       // the program's: any failing check catches it
    bool harmless = false;  // the program's, that must stay green (UserBug::harmless)
  };
  std::vector<Switch> switches;
  for (const UserBug& b : registry.bugs()) switches.push_back({b.name, true, b.harmless});
  if (registry.bugs().empty() || engine_bugs) {
    for (const std::string& name : BugSwitches::names()) switches.push_back({name, false});
  }
  // The table's columns are as wide as their longest entry (a program's switch or check may
  // have a long name), known before the first row is printed.
  size_t bug_width = 30, checker_width = 20, scenario_width = 44;
  for (const Switch& sw : switches) bug_width = std::max(bug_width, sw.name.size());
  for (const auto& c : checkers::all_pipeline_checkers()) checker_width = std::max(checker_width, c->name().size());
  for (const auto& c : checkers::all_kernel_checkers()) checker_width = std::max(checker_width, c->name().size());
  for (const auto& entry : registry.checks()) checker_width = std::max(checker_width, entry.first.size());
  for (const cli::Scenario* s : store_order) scenario_width = std::max(scenario_width, s->path.size());
  const auto print_row = [&](const std::string& bug, const std::string& result, const std::string& checker,
                             const std::string& scenario, const std::string& seed, const std::string& tried) {
    fmt::print("{:<{}} {:<7} {:<{}} {:<{}} {:>6} {:>6}\n", bug, bug_width, result, checker, checker_width, scenario,
               scenario_width, seed, tried);
  };
  const Micros start = wall_now();
  json results = json::array();
  bool all_caught = true, all_held = true;  // every bug switch caught; every harmless one held
  const uint64_t batch = 10;
  const Invocation clean{registry, {}, "", {}};
  uint64_t baseline_failures = 0;  // seeds that failed with the switch and without it too
  std::vector<std::string> baseline_seeds;  // which ("<scenario> --seed N")
  if (!as_json) {
    const auto harmless_switches =
        std::count_if(switches.begin(), switches.end(), [](const Switch& sw) { return sw.harmless; });
    fmt::print("mutants: {} bug switches{} against the {} scenarios in {}, up to {} seeds each, {} worker process{}\n\n",
               switches.size() - static_cast<size_t>(harmless_switches),
               harmless_switches == 0 ? std::string() : fmt::format(" and {} harmless switches", harmless_switches),
               store_order.size(), dir, max_seeds, jobs, jobs == 1 ? "" : "es");
    print_row("bug switch", "result", "caught by", "scenario", "seed", "tried");
    std::fflush(stdout);
  }
  size_t harmless = 0, held = 0;
  for (const Switch& sw : switches) {
    const std::string& bug = sw.name;
    Invocation inv{registry, {}, bug, {}};
    if (sw.own) {
      inv.user_bugs.insert(bug);
    } else {
      (void)inv.bugs.enable(bug);
    }
    if (sw.harmless) {
      // Every seed must pass with it on; a failure counts only on a seed that passes without.
      ++harmless;
      const uint64_t seeds = std::min<uint64_t>(max_seeds, kHarmlessSeeds);
      json row{{"bug", bug}, {"own", true}, {"harmless", true}, {"held", true}, {"seeds_per_scenario", seeds}};
      uint64_t tried = 0;
      for (const cli::Scenario* s : engine_order) {
        std::map<uint64_t, cli::SeedSummary> failed;
        explore_seeds(inv, *s, 1, seeds, jobs, s->swarm, [&](const cli::SeedSummary& r) {
          ++tried;
          if (!r.passed) failed.emplace(r.seed, r);
        });
        for (const auto& [seed, r] : failed) {
          if (!run_seed(clean, *s, seed, s->swarm, 0, false).passed) continue;  // fails without it too
          const std::string check = r.first_failure.substr(0, r.first_failure.find(':'));
          row.update(json{{"held", false}, {"checker", check}, {"scenario", s->path}, {"seed", seed},
                          {"detail", r.read_first.empty() ? r.first_failure : r.read_first}});
          break;
        }
        if (!row["held"].get<bool>()) break;
      }
      row["seeds_tried"] = tried;
      const bool ok = row["held"].get<bool>();
      held += ok ? 1 : 0;
      all_held &= ok;
      if (!as_json) {
        if (!ok) {
          fmt::print(stderr, "{} mutants: {} is declared harmless, but {} --seed {} fails with it on and passes without: {}\n",
                     cli::error_prefix(), bug, row["scenario"].get<std::string>(), row["seed"].get<uint64_t>(),
                     row["detail"].get<std::string>());
        }
        print_row(bug, ok ? "held" : "FAILED", ok ? "-" : row["checker"].get<std::string>(),
                  ok ? "(harmless)" : row["scenario"].get<std::string>(),
                  ok ? std::string("-") : std::to_string(row["seed"].get<uint64_t>()), std::to_string(tried));
        std::fflush(stdout);
      }
      results.push_back(row);
      continue;
    }
    json row{{"bug", bug}, {"caught", false}, {"checker", nullptr}, {"scenario", nullptr}, {"seed", nullptr}};
    uint64_t tried = 0;
    // A catch is a failure of a check named for the switch (for the program's own switches,
    // of any check); any other failure is remembered.
    const std::vector<std::string> catchers = sw.own ? std::vector<std::string>{} : BugSwitches::catchers(bug);
    const auto catches = [&](const std::string& check) {
      return sw.own || std::find(catchers.begin(), catchers.end(), check) != catchers.end();
    };
    const auto named_check_failed = [&](const cli::SeedSummary& r) {
      return std::any_of(r.checks.begin(), r.checks.end(),
                         [&](const auto& check) { return check.second == "fail" && catches(check.first); });
    };
    std::string other_failure;  // the first seed failing only checks not named for the switch
    // The scenarios built to catch this switch first, then the others in order.
    std::vector<const cli::Scenario*> order = !sw.own && BugSwitches::store_bug(bug) ? store_order : engine_order;
    std::stable_partition(order.begin(), order.end(), [&](const cli::Scenario* s) {
      return std::find(s->catches.begin(), s->catches.end(), bug) != s->catches.end();
    });
    for (const cli::Scenario* scenario : order) {
      const cli::Scenario& s = *scenario;
      std::optional<cli::SeedSummary> caught;
      // A seed that once caught an engine bug first, then the range.
      for (const uint64_t seed : s.regression_seeds) {
        if (caught) break;
        ++tried;
        cli::SeedSummary r = cli::parse_summary(cli::summary_json(run_seed(inv, s, seed, s.swarm, 0, false)));
        if (!r.passed && named_check_failed(r) && run_seed(clean, s, seed, s.swarm, 0, false).passed) caught = std::move(r);
      }
      for (uint64_t first = 1; first <= max_seeds && !caught; first += batch) {
        const uint64_t count = std::min(batch, max_seeds - first + 1);
        const uint64_t tried_before = tried;
        std::map<uint64_t, cli::SeedSummary> found;
        explore_seeds(inv, s, first, count, jobs, s.swarm, [&](const cli::SeedSummary& r) {
          ++tried;
          if (r.passed) return;
          if (named_check_failed(r)) {
            found.emplace(r.seed, r);
          } else if (other_failure.empty()) {
            other_failure = fmt::format("{} --seed {}: {}", s.path, r.seed, r.first_failure);
          }
        });
        // A catch counts only on a seed that passes with no switch on: the switch made the
        // difference, not the seed.
        for (const auto& [seed, r] : found) {
          if (!run_seed(clean, s, seed, s.swarm, 0, false).passed) {
            ++baseline_failures;
            baseline_seeds.push_back(fmt::format("{} --seed {}", s.path, seed));
            if (!as_json) fmt::print(stderr, "{} mutants: {} seed {} fails with no bug switch on\n", cli::error_prefix(), s.path, seed);
            continue;
          }
          caught = r;
          // Seeds tried: up to the catching one (the batch ran the rest beside it).
          tried = tried_before + (seed - first + 1);
          break;
        }
      }
      if (!caught) continue;
      std::string checker;
      for (const auto& [name, verdict] : caught->checks) {
        if (verdict == "fail" && catches(name) && checker.empty()) checker = name;
      }
      // The program's own switch breaks its own function: a run that differs from itself
      // (determinism: the function read the machine's clock or randomness, named first), a
      // swift map giving other outputs for one input (swift-determinism) or epochs the function
      // does not give again (re-execution) say so; delivery or state fail only as a
      // consequence. Unless the run's "read first" names state (a read of another key's row),
      // as explore says.
      for (const char* cause : {"re-execution", "swift-determinism", "determinism"}) {
        const auto failed = [&](const auto& check) { return check.first == cause && check.second == "fail"; };
        if (sw.own && std::any_of(caught->checks.begin(), caught->checks.end(), failed)) checker = cause;
      }
      if (sw.own && checker == "re-execution" && caught->read_first.starts_with("state:")) checker = "state";
      // The detail of the check named, where the run kept it: its "read first" one, else the
      // first failure.
      const std::string& detail = caught->read_first.starts_with(checker + ":") ? caught->read_first : caught->first_failure;
      row = json{{"bug", bug}, {"caught", true}, {"checker", checker}, {"scenario", s.path},
                 {"seed", caught->seed}, {"seed_passes_without_the_switch", true}, {"detail", detail}};
      break;
    }
    row["seeds_tried"] = tried;
    row["own"] = sw.own;
    row["must_be_caught_by"] = sw.own ? json("any check") : json(catchers);
    if (!row["caught"].get<bool>() && !other_failure.empty()) row["failed_only_other_checks"] = other_failure;
    all_caught &= row["caught"].get<bool>();
    if (!as_json) {
      if (!row["caught"].get<bool>()) {
        std::string named = sw.own ? "any check" : "";
        for (const std::string& c : catchers) named += (named.empty() ? "" : ", ") + c;
        fmt::print(stderr, "{} mutants: {} must be caught by {}; {}\n", cli::error_prefix(), bug, named,
                   other_failure.empty() ? "no seed failed" : "only other checks failed, first: " + other_failure);
      }
      print_row(bug, row["caught"].get<bool>() ? "caught" : "MISSED",
                row["checker"].is_null() ? "-" : row["checker"].get<std::string>(),
                row["scenario"].is_null() ? "-" : row["scenario"].get<std::string>(),
                row["seed"].is_null() ? std::string("-") : std::to_string(row["seed"].get<uint64_t>()), std::to_string(tried));
      std::fflush(stdout);
    }
    results.push_back(row);
  }
  const double wall_ms = wall_ms_since(start);
  if (as_json) {
    fmt::print("{}\n", json{{"mutants", results},
                            {"all_caught", all_caught},
                            {"harmless", harmless},
                            {"harmless_held", held},
                            {"all_harmless_held", all_held},
                            {"max_seeds_per_scenario", max_seeds},
                            {"caught_only_on_seeds_that_pass_without_the_switch", true},
                            {"seeds_failing_without_the_switch", baseline_failures},
                            {"failing_without_any_switch", baseline_seeds},
                            {"wall_ms", wall_ms}}
                           .dump(2));
  } else {
    const std::string harmless_held = fmt::format("{} of {} harmless switches held", held, harmless);
    if (results.size() == harmless) {
      fmt::print("\n{} ({:.1f}s)\n", harmless_held, wall_ms / 1e3);
    } else {
      fmt::print("\n{} of {} bug switches caught ({:.1f}s), each on a seed that passes without it ({} failing seeds "
                 "failed without the switch too and did not count){}\n",
                 std::count_if(results.begin(), results.end(), [](const json& r) { return r.value("caught", false); }),
                 results.size() - harmless, wall_ms / 1e3, baseline_failures, harmless == 0 ? "" : "; " + harmless_held);
    }
  }
  return all_caught && all_held ? kExitPass : kExitViolation;
}

}  // namespace

// Every subcommand cli_run defines, and "help".
constexpr std::string_view kCommands[] = {"run",  "explore", "replay",     "shrink",  "explain", "real",
                                          "ctl",  "list",    "kafka-mock", "mutants", "help"};

bool is_cli_command(std::string_view word) {
  return std::find(std::begin(kCommands), std::end(kCommands), word) != std::end(kCommands);
}

int cli_main(int argc, char** argv) {
  ComputationRegistry registry;
  builtin::register_all(registry);
  return cli_main(argc, argv, registry);
}

namespace {
int cli_run(int argc, char** argv, const ComputationRegistry& registry, bool execute);
}  // namespace

int cli_main(int argc, char** argv, const ComputationRegistry& registry) {
  // `real`'s stop signals are caught from the first moment, not once its spec is read.
  if (argc > 1 && std::string_view(argv[1]) == "real") real::catch_stop_signals_early();
  return cli_run(argc, argv, registry, true);
}

int cli_check_arguments(int argc, char** argv) {
  ComputationRegistry registry;
  builtin::register_all(registry);
  return cli_run(argc, argv, registry, false);
}

namespace {
int cli_run(int argc, char** argv, const ComputationRegistry& registry, bool execute) {
  if (argc > 0 && argv[0] != nullptr && argv[0][0] != '\0') program_name() = argv[0];
  CLI::App app{"onceflow: deterministic simulation and verification of exactly-once pipelines"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every command");
  app.set_version_flag("--version", std::string("onceflow ") + ONCEFLOW_VERSION);
  app.option_defaults()->always_capture_default();  // --help shows every default

  std::string path;
  uint64_t seed = 1, seeds = 100, first_seed = 1;
  int jobs = 1;
  std::optional<bool> swarm;
  bool as_json = false;
  std::string trace_file;
  std::string bug;

  const auto add_bug = [&](CLI::App* cmd) {
    cmd->add_option("--bug", bug, "Switch on one bug: the program's own or the engine's (see list --bugs, mutants)");
  };
  const auto add_swarm = [&](CLI::App* cmd) {
    cmd->add_flag_function(
        "--swarm,!--no-swarm", [&](int64_t count) { swarm = count > 0; },
        "Swarm faults (a random mix per seed) instead of the scenario's scripted plan");
  };

  CLI::App* run = app.add_subcommand("run", "Run one seed of a scenario and check it");
  run->add_option("scenario", path, "Scenario file (YAML)")->required()->check(CLI::ExistingFile);
  run->add_option("--seed", seed, "Seed of the run")->check(whole(0, kMaxSeed));
  add_swarm(run);
  run->add_flag("--json", as_json, "Print one JSON object");
  run->add_option("--trace", trace_file, "Write the run's trace to FILE")->check(kPathToWrite);
  add_bug(run);

  cli::ExploreOptions explore_options;
  std::string time_budget;
  CLI::App* explore = app.add_subcommand("explore", "Run many seeds and tabulate the checks");
  explore->add_option("scenario", explore_options.paths, "Scenario files, or folders of them (every *.yaml in each)")
      ->required()
      ->check(CLI::ExistingPath);
  explore->add_option("--seeds", seeds, "How many seeds per scenario (with --time-budget: at most)")
      ->check(whole(1, kMaxSeeds));
  explore->add_option("--first-seed", first_seed, "The first seed")->check(whole(0, kMaxSeed));
  explore->add_option("--jobs,-j", jobs, "Worker processes [the machine's cores]")->check(whole(1, kMaxJobs));
  add_swarm(explore);
  explore->add_flag("--json", as_json, "Print one JSON object");
  explore->add_option("--junit", explore_options.junit_path,
                      "Also write a JUnit XML report: a test case per scenario and seed range")
      ->check(kPathToWrite);
  explore->add_option("--time-budget", time_budget,
                      "Explore until this much wall time is spent (e.g. 10m), shared by the scenarios; no seed bound "
                      "unless --seeds is given");
  explore->add_flag("--require-effects", explore_options.require_effects,
                    "Exit 1 when a fault kind configured or drawn had no effect in any seed");
  explore->add_flag("--require-probes", explore_options.require_probes,
                    "Exit 1 when a probe of core/probes.h was never reached");
  explore->add_flag("--continuous", explore_options.continuous,
                    "Fresh seeds round after round until --time-budget ends or SIGINT/SIGTERM; each new failure "
                    "written as a scenario file that replays it");
  explore->add_option("--failures-dir", explore_options.failures_dir,
                      "Where --continuous and --guided write the scenario files of failures [onceflow-failures]")
      ->check(kPathToWrite);
  explore->add_flag("--require-sometimes", explore_options.require_sometimes,
                    "Exit 1 when an ONCEFLOW_SOMETIMES of your code was never true or an ONCEFLOW_REACHABLE never reached");
  explore->add_flag("--guided", explore_options.guided,
                    "Spend the seeds on mutants (faults, knobs, workload, seed) of the runs that reached something new, "
                    "and some on fresh seeds; every failing run written as a scenario file to --failures-dir");
  explore->add_flag("--stop-on-first-failure", explore_options.stop_on_first_failure,
                    "Start no more seeds once one has failed unexpectedly (seeds run in rounds of 4 per worker process; "
                    "--guided runs in batches of 8)");
  std::vector<std::string> inert;
  explore->add_option("--inert-fault", inert,
                      "Checking the checks: faults of this kind are scheduled but do nothing (repeatable)");
  add_bug(explore);

  CLI::App* replay = app.add_subcommand("replay", "Run one seed and print its full trace");
  replay->add_option("scenario", path, "Scenario file (YAML)")->required()->check(CLI::ExistingFile);
  replay->add_option("--seed", seed, "Seed of the run")->required()->check(whole(0, kMaxSeed));
  add_swarm(replay);
  add_bug(replay);
  std::string replay_node, replay_job, replay_id, replay_from, replay_to, replay_grep;
  replay->add_option("--node", replay_node, "Only the lines of this node (worker-1, controller, store, ...)");
  replay->add_option("--job", replay_job, "Only the lines naming this job (source/events/0, sink/out/1, ...)");
  replay->add_option("--id", replay_id, "Only the lines naming this MessageId (16 hex digits)");
  uint64_t replay_key = 0;
  CLI::Option* key_option =
      replay->add_option("--key", replay_key, "Only the lines naming this key or one of its messages (decimal, as checks print it)")
          ->check(whole(0, std::numeric_limits<uint64_t>::max()));
  replay->add_option("--from", replay_from, "Only the lines at or after this simulated time (e.g. 0.35s, 350ms)");
  replay->add_option("--to", replay_to, "Only the lines at or before this simulated time");
  replay->add_option("--grep", replay_grep, "Only the lines in which this regular expression (ECMAScript) is found");

  std::string library_dir;  // default_library_dir() when not given
  uint64_t max_seeds = 200;
  std::string out_path;
  CLI::App* shrink = app.add_subcommand("shrink", "Reduce a failing seed to a smaller scenario that fails the same check");
  shrink->add_option("scenario", path, "Scenario file (YAML)")->required()->check(CLI::ExistingFile);
  shrink->add_option("--seed", seed, "The failing seed")->required()->check(whole(0, kMaxSeed));
  shrink->add_option("--out", out_path, "Where to write the shrunk scenario")->required()->check(kPathToWrite);
  add_swarm(shrink);
  add_bug(shrink);

  std::string html_path;
  CLI::App* explain = app.add_subcommand("explain", "Draw one seeded run as a self-contained HTML timeline");
  explain->add_option("scenario", path, "Scenario file (YAML)")->required()->check(CLI::ExistingFile);
  explain->add_option("--seed", seed, "Seed of the run")->required()->check(whole(0, kMaxSeed));
  explain->add_option("--html", html_path, "Where to write the page")->required()->check(kPathToWrite);
  add_swarm(explain);
  add_bug(explain);

  real::RealOptions real_options;
  bool no_progress = false;
  std::string kafka_timeout, progress_every, drain_timeout, sink_timeout;
  CLI::App* real = app.add_subcommand("real", "Run a pipeline for real: LevelDB store, wall clock, one process");
  real->add_option("pipeline", path, "Pipeline spec (YAML)")->required()->check(CLI::ExistingFile);
  real->add_option("--data", real_options.data_dir, "Directory of the run's data (LevelDB); a rerun resumes from it");
  real->add_option("--store", real_options.store,
                   "A PostgreSQL store instead of --data: a libpq connection string or postgresql:// URI");
  CLI::Option* real_workers =
      real->add_option("--workers", real_options.workers, "Worker nodes in the process (--role all)")->check(whole(1, kMaxWorkers));
  std::string real_role = "all";
  real->add_option("--role", real_role,
                   "all: the whole deployment in this process [all]; on a --store shared by several processes: "
                   "controller (one leads, others stand by; also writes the test input) or worker");
  real->add_option("--name", real_options.name,
                   "This process's engine name under --role controller|worker [the role, the host name, the process id]");
  real->add_option("--messages", real_options.messages, "Input messages to produce in all (across restarts)")
      ->check(whole(0, kMaxMessages));
  real->add_option("--rate", real_options.rate, "Inputs the producer writes per second at most; 0: as fast as it can [0]")
      ->check(whole(0, kMaxMessages));
  real->add_option("--keys", real_options.keys, "Distinct keys in the input")->check(whole(1, kMaxMessages));
  real->add_option("--seed", real_options.seed, "Seed of the input workload")->check(whole(0, kMaxSeed));
  real->add_flag("--verify", real_options.verify, "When done, hold outputs and state to the run's committed history, re-executed (JSON)");
  real->add_option("--bug", real_options.bug,
                   "Switch on one bug, the program's own or the engine's (list --bugs), to see --verify catch it");
  bool no_history = false;
  real->add_flag("--no-history", no_history,
                 "Do not record each committed epoch's inputs for --verify (saves a few bytes a message)");
  real->add_flag("--no-progress", no_progress, "No progress line on stderr");
  real->add_flag("--stats", real_options.stats, "Print figures (wall time, commits, writes) as JSON at the end");
  real->add_option("--kafka", real_options.kafka, "Kafka brokers (host:port,...) or 'mock' for an in-process mock");
  real->add_option("--kafka-config", real_options.kafka_config_file,
                   "librdkafka settings for every Kafka client (name=value lines: security.protocol, sasl.*, ssl.*)");
  real->add_option("--kafka-timeout", kafka_timeout, "Stop (exit 2) once no Kafka broker has answered this long [60s]");
  real->add_option("--sink-timeout", sink_timeout,
                   "Stop (exit 2) once an http or clickhouse sink's server has not answered this long [30s]");
  real->add_option("--drain-timeout", drain_timeout,
                   "On SIGINT or SIGTERM, wait this long for the pipeline to drain and stop [30s]; a second signal ends at once");
  real->add_option("--progress-every", progress_every, "Between progress lines [1s on a terminal, else 5s]");
  real->add_option("--metrics-port", real_options.metrics_port,
                   "Serve Prometheus metrics at http://ADDRESS:PORT/metrics (0: a free port, printed) [off]")
      ->check(whole(0, 65535));
  real->add_option("--metrics-address", real_options.metrics_address, "Where --metrics-port listens [0.0.0.0]");

  CLI::App* ctl = app.add_subcommand("ctl", "Operate a deployment of onceflow real through its store")->require_subcommand(1);
  CLI::App* ctl_status = ctl->add_subcommand(
      "status", "The pipeline's state, layout, controller, workers, jobs with their Leases, sources' lag, sinks' outboxes");
  std::string ctl_path;
  real::RealOptions ctl_options;
  bool ctl_json = false;
  ctl_status->add_option("pipeline", ctl_path, "Pipeline spec (YAML) of the deployment")->required()->check(CLI::ExistingFile);
  ctl_status->add_option("--data", ctl_options.data_dir, "The run's data directory (LevelDB; not while a run has it open)");
  ctl_status->add_option("--store", ctl_options.store, "The deployment's PostgreSQL store (libpq connection string)");
  ctl_status->add_flag("--json", ctl_json, "Print one JSON object");
  ctl_status->add_option("--kafka", ctl_options.kafka,
                         "The cluster's brokers (host:port,...), asked for Kafka sources' topic ends: their lag");
  ctl_status->add_option("--kafka-config", ctl_options.kafka_config_file,
                         "librdkafka properties (name=value lines) for --kafka")
      ->check(CLI::ExistingFile);
  std::string ctl_rates_over = "1s";
  ctl_status->add_option("--rates-over", ctl_rates_over,
                         "PostgreSQL: read the store twice this far apart for rates (messages, epochs, lag's change "
                         "per second); 0: no rates. A LevelDB directory is a run that ended: no rates")
      ->capture_default_str();
  // The requests, applied by whichever controller's process leads (real/operator_requests.h).
  real::CtlRequest ctl_request;
  std::string ctl_timeout;
  bool ctl_no_wait = false;
  std::vector<CLI::App*> ctl_requests;
  const auto add_request = [&](const char* verb, const char* what, const char* args, const char* args_help) {
    CLI::App* cmd = ctl->add_subcommand(verb, what);
    cmd->add_option("pipeline", ctl_path, "Pipeline spec (YAML) of the deployment")->required()->check(CLI::ExistingFile);
    if (args != nullptr) cmd->add_option(args, ctl_request.args, args_help)->required();
    cmd->add_option("--store", ctl_options.store, "The deployment's PostgreSQL store (libpq connection string)");
    cmd->add_option("--data", ctl_options.data_dir,
                    "A LevelDB data directory (refused: its run has ended, so no controller answers)");
    cmd->add_option("--timeout", ctl_timeout,
                    "How long to wait for a controller to take the request, and for a stop or a repartition to finish [60s]");
    if (std::string_view(verb) == "stop" || std::string_view(verb) == "repartition") {
      cmd->add_flag("--no-wait", ctl_no_wait, "Return once the controller took the request, without following the drain");
    }
    ctl_requests.push_back(cmd);
  };
  add_request("pause", "Pause the pipeline: its jobs end where they are, nothing drains; resume starts them again", nullptr,
              nullptr);
  add_request("resume", "Set a paused pipeline working again", nullptr, nullptr);
  add_request("stop", "Stop the pipeline: drain what is in flight, then every process of onceflow real ends", nullptr,
              nullptr);
  add_request("repartition", "Change computations' and queue sinks' partition counts while it runs (a drain, then work)",
              "NAME=COUNT", "Each computation or queue sink to repartition, and its new count");
  add_request("set", "Change settings live (epoch_period, epoch_batch_limit, max_batch_messages); no drain",
              "SETTING=VALUE", "Each setting and its value");

  int mock_brokers = 3;
  std::vector<std::string> mock_topics;
  CLI::App* kafka_mock = app.add_subcommand("kafka-mock", "Run librdkafka's mock Kafka cluster; prints its bootstrap servers");
  kafka_mock->add_option("--brokers", mock_brokers, "Brokers in the mock cluster")->check(CLI::Range(1, 16));
  kafka_mock->add_option("--topic", mock_topics, "A topic to create, NAME or NAME:PARTITIONS (repeatable)");

  CLI::App* list = app.add_subcommand("list", "List the scenario library");
  list->add_option("--scenarios", library_dir,
                   "Directory of scenario files (default: the program's own folder (set_scenario_dir), else ./scenarios, else $ONCEFLOW_SCENARIOS, else the installed library, else the one this binary was built from)");
  list->add_flag("--json", as_json, "Print one JSON object");
  bool list_probes = false, list_bugs = false, with_library = false;
  list->add_flag("--probes", list_probes, "List the engine's probes (core/probes.h) instead of the scenarios");
  list->add_flag("--bugs", list_bugs, "List the bug switches (the program's own, then with --library the engine's)");
  list->add_flag("--library", with_library,
                 "Also the onceflow library's scenarios (and engine bug switches), after the program's own");
  CLI::App* mutants = app.add_subcommand("mutants", "Check that every bug switch is caught by a checker");
  mutants->add_option("--scenarios", library_dir,
                   "Directory of scenario files (default: the program's own folder (set_scenario_dir), else ./scenarios, else $ONCEFLOW_SCENARIOS, else the installed library, else the one this binary was built from)");
  mutants->add_option("--max-seeds", max_seeds, "Seeds to try per scenario before giving up")
      ->check(whole(1, 1'000'000));
  mutants->add_option("--jobs,-j", jobs, "Worker processes")->check(whole(1, kMaxJobs));
  mutants->add_flag("--json", as_json, "Print one JSON object");
  bool engine_bugs = false;
  mutants->add_flag("--engine-bugs", engine_bugs,
                    "Also the engine's bug switches (run by default only when the program registers none of its own)");

  for (const CLI::App* sub : app.get_subcommands({})) assert(is_cli_command(sub->get_name()));
  // "help [COMMAND]", and an unknown command named as such (CLI11 would only say that a
  // subcommand is required).
  if (argc >= 2 && argv[1][0] != '-') {
    const std::string first = argv[1];
    std::string known;
    for (const CLI::App* sub : app.get_subcommands({})) known += (known.empty() ? "" : ", ") + sub->get_name();
    const auto command = [&](const std::string& name) -> CLI::App* {
      for (CLI::App* sub : app.get_subcommands({})) {
        if (sub->get_name() == name) return sub;
      }
      return nullptr;
    };
    if (first == "help") {
      if (argc == 2) {
        std::cout << app.help();
        return kExitPass;
      }
      if (CLI::App* sub = command(argv[2])) {
        std::cout << sub->help();
        return kExitPass;
      }
      fmt::print(stderr, "{}: help: unknown command '{}' (commands: {})\n", cli::error_prefix(), bounded_message(argv[2]), known);
      return kExitUsage;
    }
    if (command(first) == nullptr) {
      fmt::print(stderr, "{}: unknown command '{}' (commands: {})\n", cli::error_prefix(), bounded_message(first), known);
      return kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << "\n";
    return kExitPass;
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return kExitPass;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return kExitPass;
  } catch (const CLI::ParseError& e) {
    // CLI11 puts the subcommand's help behind --help; one line is enough here.
    std::string what = e.what();
    if (what.empty()) what = e.get_name();
    // An option the command does not have: CLI11 takes its value for a positional argument and
    // may report that first ("Path does not exist: 100" for `explore X --seed 100`).
    const CLI::App* command = nullptr;
    for (const CLI::App* sub : std::as_const(app).get_subcommands([](const CLI::App*) { return true; })) {
      if (argc > 1 && sub->check_name(argv[1])) command = sub;
    }
    for (int i = 2; command != nullptr && i < argc; ++i) {
      const std::string_view arg = argv[i];
      if (arg == "--") break;
      if (!arg.starts_with("--") || arg.size() < 3) continue;
      const std::string name(arg.substr(0, arg.find('=')));
      if (command->get_option_no_throw(name) == nullptr && app.get_option_no_throw(name) == nullptr) {
        what = fmt::format("{}: unknown option '{}'", argv[1], bounded_message(name));
        break;
      }
    }
    fmt::print(stderr, "{}: {} (see {} --help)\n", cli::error_prefix(), bounded_message(what), program_name());
    return kExitUsage;
  }

  Invocation inv{registry, {}, bug, {}};
  if (registry.bug(bug) != nullptr) {
    inv.user_bugs.insert(bug);
  } else if (!bug.empty() && !inv.bugs.enable(bug)) {
    fmt::print(stderr, "{}: {}\n", cli::error_prefix(), known_bug(registry, bug).message());
    return kExitUsage;
  }
  for (const std::string& kind : inert) {
    const auto parsed = faults::parse_fault_kind(kind);
    if (!parsed) {
      fmt::print(stderr, "{}: --inert-fault: unknown fault kind '{}'\n", cli::error_prefix(), kind.substr(0, 64));
      return kExitUsage;
    }
    inv.inert_faults.insert(*parsed);
  }
  if (!execute) return kExitPass;
  try {
    if (run->parsed()) return cmd_run(inv, path, seed, swarm, as_json, trace_file, nullptr);
    if (explore->parsed()) {
      explore_options.seeds = seeds;
      explore_options.seeds_given = explore->count("--seeds") > 0;
      explore_options.first_seed = first_seed;
      // CI sets the seeds in the environment (as for the testing helpers); the flags win.
      const auto from_env = [](const char* name, uint64_t min, uint64_t max) -> std::optional<uint64_t> {
        const char* text = std::getenv(name);
        if (text == nullptr || *text == '\0') return std::nullopt;
        std::string value = text;
        if (const std::string problem = whole(min, max)(value); !problem.empty()) {
          throw UsageError{fmt::format("{}={}", name, problem)};
        }
        return std::stoull(value);
      };
      explore_options.first_seed_given = explore->count("--first-seed") > 0;
      if (explore->count("--first-seed") == 0) {
        if (const auto env = from_env("ONCEFLOW_SEED", 0, kMaxSeed)) {
          explore_options.first_seed = *env;
          explore_options.first_seed_given = true;
          explore_options.seeds_from = fmt::format("ONCEFLOW_SEED={}", *env);
        }
      }
      if (explore->count("--seeds") == 0) {
        if (const auto env = from_env("ONCEFLOW_SEEDS", 1, kMaxSeeds)) {
          explore_options.seeds = *env;
          explore_options.seeds_given = true;
          explore_options.seeds_from += fmt::format("{}ONCEFLOW_SEEDS={}", explore_options.seeds_from.empty() ? "" : " ", *env);
        }
      }
      // Every core by default: seeds are independent, and the report does not depend on how
      // many processes ran them.
      explore_options.jobs = explore->count("--jobs") > 0 ? jobs : default_jobs();
      explore_options.swarm = swarm;
      explore_options.as_json = as_json;
      if (!time_budget.empty()) {
        explore_options.time_budget_us = duration_option("--time-budget", time_budget, kSeconds, 30 * 86'400 * kSeconds);
      }
      if (explore_options.continuous && (as_json || explore_options.stop_on_first_failure || !explore_options.junit_path.empty())) {
        throw UsageError{"--continuous reports as it goes: no --json, --junit or --stop-on-first-failure"};
      }
      if (explore->count("--failures-dir") > 0 && !explore_options.continuous && !explore_options.guided) {
        throw UsageError{"--failures-dir goes with --guided or --continuous, which write failures there"};
      }
      if (explore_options.continuous && explore_options.guided) {
        throw UsageError{"--guided runs a bounded search (--seeds, --time-budget); it does not combine with --continuous"};
      }
      return cli::explore_command(inv, explore_options);
    }
    if (replay->parsed()) {
      cli::ReplayFilter filter;
      filter.node = replay_node;
      filter.job = replay_job;
      filter.id = replay_id;
      if (key_option->count() > 0) filter.key = replay_key;
      if (!replay_id.empty() && (replay_id.size() > 16 || replay_id.find_first_not_of("0123456789abcdef") != std::string::npos)) {
        throw UsageError{fmt::format("--id {}: expected a MessageId, up to 16 lowercase hex digits", replay_id.substr(0, 32))};
      }
      if (!replay_from.empty()) filter.from_us = duration_option("--from", replay_from, 0, kMaxTraceTimeUs);
      if (!replay_to.empty()) filter.to_us = duration_option("--to", replay_to, 0, kMaxTraceTimeUs);
      if (filter.from_us >= 0 && filter.to_us >= 0 && filter.to_us < filter.from_us) {
        throw UsageError{"--to comes before --from"};
      }
      if (!replay_grep.empty()) {
        try {
          filter.grep.emplace(replay_grep, std::regex::ECMAScript | std::regex::optimize);
        } catch (const std::regex_error& e) {
          throw UsageError{fmt::format("--grep {}: not a regular expression ({})", replay_grep.substr(0, 64), e.what())};
        }
        filter.grep_text = replay_grep;
      }
      return cmd_run(inv, path, seed, swarm, false, "", &filter);
    }
    if (kafka_mock->parsed()) return real::run_kafka_mock(mock_brokers, mock_topics);
    if (ctl_status->parsed()) {
      auto spec = load_pipeline_spec(ctl_path);
      if (!spec) throw UsageError{spec.error().message()};
      if (ctl_options.data_dir.empty() == ctl_options.store.empty()) {
        throw UsageError{"onceflow ctl status needs one of --data DIR (LevelDB) or --store CONNINFO (PostgreSQL)"};
      }
      const auto rates_over = parse_duration(ctl_rates_over);
      if (!rates_over || (*rates_over != 0 && (*rates_over < 100 * kMillis || *rates_over > 600 * kSeconds))) {
        throw UsageError{fmt::format("--rates-over {}: expected 0 (no rates) or a duration from 100ms to 10m",
                                     ctl_rates_over.substr(0, 64))};
      }
      return real::run_ctl_status(*spec, ctl_options, ctl_json, *rates_over);
    }
    for (CLI::App* cmd : ctl_requests) {
      if (!cmd->parsed()) continue;
      auto spec = load_pipeline_spec(ctl_path);
      if (!spec) throw UsageError{spec.error().message()};
      ctl_request.verb = cmd->get_name();
      if (!ctl_options.data_dir.empty() && !ctl_options.store.empty()) {
        throw UsageError{"onceflow ctl " + ctl_request.verb + ": --data and --store name two stores; give one"};
      }
      if (ctl_options.data_dir.empty() && ctl_options.store.empty()) {
        throw UsageError{"onceflow ctl " + ctl_request.verb + " needs --store CONNINFO (a PostgreSQL deployment)"};
      }
      if (!ctl_timeout.empty()) ctl_request.timeout_us = duration_option("--timeout", ctl_timeout, kMillis, 86'400 * kSeconds);
      ctl_request.wait = !ctl_no_wait;
      return real::run_ctl_request(*spec, ctl_options, ctl_request);
    }
    if (real->parsed()) {
      real_options.progress = !no_progress;
      real_options.record_history = !no_history;
      if (no_history && real_options.verify) {
        throw UsageError{"--verify re-executes the run's committed history, which --no-history does not record"};
      }
      real_options.role = real_role_of(real_role, real_options, real_workers->count() > 0);
      if (real_options.verify && real_options.role == real::RealOptions::Role::kWorker) {
        throw UsageError{"--verify is a controller's: a worker's process ends when the pipeline stops and verifies "
                         "nothing (give --verify to --role controller or all)"};
      }
      return cmd_real(registry, path, real_options, kafka_timeout, progress_every, drain_timeout, sink_timeout);
    }
    if (explain->parsed()) return cmd_explain(inv, path, seed, swarm, html_path);
    if (list->parsed()) {
      if (list_probes) return cmd_list_probes(as_json);
      if (list_bugs) return cmd_list_bugs(registry, with_library, as_json);
      // The program's own scenarios first; the library's after them only when asked.
      std::vector<std::string> dirs;
      if (!library_dir.empty()) {
        dirs.push_back(library_dir);
      } else if (!registry.scenario_dir().empty()) {
        dirs.push_back(registry.scenario_dir());
      }
      if (dirs.empty() || with_library) dirs.push_back(default_library_dir());
      return cmd_list(dirs, as_json);
    }
    if (library_dir.empty()) library_dir = registry.scenario_dir().empty() ? default_library_dir() : registry.scenario_dir();
    if (shrink->parsed()) return cmd_shrink(inv, path, seed, swarm, out_path);
    if (mutants->parsed()) return cmd_mutants(registry, library_dir, max_seeds, jobs, as_json, engine_bugs);
  } catch (const UsageError& e) {
    fmt::print(stderr, "{}: {}\n", cli::error_prefix(), bounded_message(e.message));
    return kExitUsage;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the system refuses (too long, not permitted...): bad input, not a crash.
    fmt::print(stderr, "{}: {}\n", cli::error_prefix(), bounded_message(e.what()));
    return kExitUsage;
  }
  return kExitUsage;
}

}  // namespace

}  // namespace onceflow
