#include "cli/runner.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "checkers/verdict.h"
#include "simulated/pipeline_run.h"
#include "simulated/selftest.h"
#include "real/wall_clock.h"

namespace onceflow::cli {

using json = nlohmann::json;

// The name this binary was invoked by (argv[0]): a user's own binary, which registers the
// user's computations, names itself in the replay lines it prints, so they work when pasted.
std::string& program_name() {
  static std::string name = "onceflow";
  return name;
}

std::string error_prefix() {
  const std::string& name = program_name();
  const size_t slash = name.rfind('/');
  return slash == std::string::npos || slash + 1 == name.size() ? name : name.substr(slash + 1);
}

std::string replay_command(const Invocation& inv, const Scenario& s, uint64_t seed, bool swarm) {
  return fmt::format("{} replay {} --seed {}{}{}", program_name(), s.path, seed,
                     swarm == s.swarm ? "" : (swarm ? " --swarm" : " --no-swarm"),
                     inv.bug_name.empty() ? "" : " --bug " + inv.bug_name);
}

Scenario load_or_fail(const std::string& path) {
  auto scenario = load_scenario(path);
  if (!scenario) throw UsageError{scenario.error().message()};
  return *scenario;
}

// A pipeline's functions must be registered in this program (see examples/own_computation).
void check_functions(const ComputationRegistry& registry, const std::string& spec_path, const PipelineSpec& spec) {
  for (const auto& c : spec.computations) {
    if (registry.has(c.processing_function)) {
      const std::vector<std::string>& reads = registry.contract(c.processing_function).reads;
      for (const std::string& stream : c.input_streams) {
        if (reads.empty() || std::find(reads.begin(), reads.end(), stream) != reads.end()) continue;
        std::string names;
        for (const std::string& r : reads) names += (names.empty() ? "" : " and ") + r;
        throw UsageError{fmt::format("{}: computations.{}.input_streams: {} reads only {}, not '{}'", spec_path, c.name,
                                     c.processing_function, names, stream.substr(0, 64))};
      }
      continue;
    }
    std::string known;
    for (const auto& name : registry.names()) known += (known.empty() ? "" : ", ") + name;
    throw UsageError{fmt::format("{}: computations.{}.processing_function: '{}' is not registered in this program "
                                 "(registered: {})",
                                 spec_path, c.name, c.processing_function, known)};
  }
}
void check_functions(const ComputationRegistry& registry, const Scenario& s) {
  if (s.kind == "pipeline") check_functions(registry, s.pipeline_path, s.pipeline.spec);
  check_catches(registry, s);
}

void check_catches(const ComputationRegistry& registry, const Scenario& s) {
  const auto engine = BugSwitches::names();
  for (const std::string& bug : s.catches) {
    if (std::find(engine.begin(), engine.end(), bug) != engine.end() || registry.bug(bug) != nullptr) continue;
    std::string own;
    for (const UserBug& b : registry.bugs()) own += (own.empty() ? "" : ", ") + b.name;
    throw UsageError{fmt::format("{}: catches: unknown bug switch '{}': not one of onceflow (onceflow list --bugs) nor "
                                 "of this program ({})",
                                 s.path, bug, own.empty() ? "it registers none" : "it registers " + own)};
  }
}

// The scenario files in `dir`, sorted by path; a file that does not load is an error.
namespace {
// A pipeline spec kept beside its scenarios (it has sources or computations and no kind).
bool is_pipeline_spec(const std::string& path) {
  try {
    const YAML::Node root = YAML::LoadFile(path);
    return root.IsMap() && !root["kind"] && (root["sources"] || root["computations"]);
  } catch (const YAML::Exception&) {
    return false;  // the scenario reader names the problem
  }
}
}  // namespace

std::vector<Scenario> load_library(const std::string& dir) {
  if (!std::filesystem::is_directory(dir)) throw UsageError{dir + ": no such directory"};
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") paths.push_back(entry.path().string());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<Scenario> out;
  for (const auto& path : paths) {
    auto scenario = load_scenario(path);
    if (scenario) {
      out.push_back(std::move(*scenario));
    } else if (!is_pipeline_spec(path)) {  // a spec is read a second time only when it is not a scenario
      throw UsageError{scenario.error().message()};
    }
  }
  return out;
}

simulated::PipelineRunOptions pipeline_run_options(const Invocation& inv, const Scenario& s, uint64_t seed, bool swarm,
                                                size_t keep_lines) {
  simulated::PipelineRunOptions options = s.pipeline;
  options.seed = seed;
  options.swarm = swarm;
  options.random_knobs = random_knobs(s, swarm);
  options.trace_keep_lines = keep_lines;
  options.bugs = inv.bugs;
  options.user_bugs = inv.user_bugs;
  options.inert_faults = inv.inert_faults;
  options.replay_command = replay_command(inv, s, seed, swarm);
  return options;
}

simulated::RunOutcome run_seed_once(const Invocation& inv, const Scenario& s, uint64_t seed, bool swarm,
                                 size_t keep_lines) {
  if (s.kind == "pipeline") {
    simulated::RunOutcome r = simulated::run_pipeline(pipeline_run_options(inv, s, seed, swarm, keep_lines), inv.registry).outcome;
    // The function and its spec disagree: bad input (exit 2), whatever the seed.
    if (!r.usage_error.empty()) throw UsageError{fmt::format("{}: {}", s.pipeline_path, r.usage_error)};
    return r;
  }
  simulated::SelftestOptions options = s.kernel;
  options.seed = seed;
  options.swarm = swarm;
  options.scripted = s.scripted;
  options.trace_keep_lines = keep_lines;
  options.bugs = inv.bugs;
  options.inert_faults = inv.inert_faults;
  return simulated::run_kernel_selftest(options);
}

// One seed, checked; with `twice`, run again and check that the run was the same.
simulated::RunOutcome run_seed(const Invocation& inv, const Scenario& s, uint64_t seed, bool swarm,
                            size_t keep_lines, bool twice) {
  simulated::RunOutcome r = run_seed_once(inv, s, seed, swarm, keep_lines);
  const bool judged = std::any_of(r.verdicts.begin(), r.verdicts.end(), [](const checkers::Verdict& v) {
    return v.check == checkers::DeterminismCheck::kName;  // user code read the machine's clock
  });
  if (!twice || judged) return r;
  const simulated::RunOutcome again = run_seed_once(inv, s, seed, swarm, 0);
  r.verdicts.push_back(checkers::DeterminismCheck().check(seed, r.trace_hash, again.trace_hash, r.content_hash,
                                                          again.content_hash, replay_command(inv, s, seed, swarm)));
  r.passed = checkers::all_passed(r.verdicts);
  return r;
}

Scenario scripted_copy(const Scenario& s, const faults::FaultPlan& plan, bool was_swarm,
                       const std::map<std::string, int64_t>* knobs) {
  Scenario out = s;
  out.swarm = false;
  if (knobs != nullptr) {
    out.pipeline.knobs = *knobs;
    out.knobs = "fixed";
  }
  out.scripted = plan;
  out.kernel.scripted = plan;
  out.pipeline.scripted = plan;
  out.pipeline.fault_points_when_scripted = s.pipeline.fault_points_when_scripted || was_swarm;
  return out;
}

std::string_view without_replay(const std::string& failure) {
  return std::string_view(failure).substr(0, failure.find(" — replay: "));
}

// Explore checks same-seed determinism on every tenth seed: it costs a second run.
bool determinism_sampled(uint64_t seed) { return seed % 10 == 0; }

void run_in_workers(uint64_t count, int jobs, const std::function<std::string(uint64_t)>& run,
                    const std::function<void(uint64_t, const std::string&)>& done) {
  if (jobs <= 1 || count <= 1) {
    for (uint64_t i = 0; i < count; ++i) done(i, run(i));
    return;
  }
  struct Worker {
    pid_t pid;
    int fd;
    std::string buffer;
    uint64_t next;  // the index of its next line
  };
  std::vector<Worker> workers;
  const uint64_t step = static_cast<uint64_t>(jobs);
  for (uint64_t j = 0; j < step && j < count; ++j) {
    int fds[2];
    if (pipe(fds) != 0) throw UsageError{"pipe() failed"};
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) throw UsageError{"fork() failed"};
    if (pid == 0) {
      close(fds[0]);
      FILE* out = fdopen(fds[1], "w");
      for (uint64_t i = j; i < count; i += step) {
        const std::string line = run(i) + "\n";
        std::fputs(line.c_str(), out);
        std::fflush(out);
      }
      std::fclose(out);
      _exit(0);
    }
    close(fds[1]);
    workers.push_back({pid, fds[0], "", j});
  }
  size_t open = workers.size();
  while (open > 0) {
    std::vector<pollfd> fds;
    for (const auto& w : workers) {
      if (w.fd >= 0) fds.push_back({w.fd, POLLIN, 0});
    }
    if (poll(fds.data(), fds.size(), -1) < 0) continue;
    for (auto& w : workers) {
      if (w.fd < 0) continue;
      pollfd* p = nullptr;
      for (auto& f : fds) if (f.fd == w.fd) p = &f;
      if (p == nullptr || p->revents == 0) continue;
      char chunk[65536];
      const ssize_t n = read(w.fd, chunk, sizeof chunk);
      if (n <= 0) {
        close(w.fd);
        w.fd = -1;
        --open;
        continue;
      }
      w.buffer.append(chunk, static_cast<size_t>(n));
      size_t nl;
      while ((nl = w.buffer.find('\n')) != std::string::npos) {
        done(w.next, w.buffer.substr(0, nl));
        w.next += step;
        w.buffer.erase(0, nl + 1);
      }
    }
  }
  for (const auto& w : workers) {
    int status = 0;
    waitpid(w.pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      throw UsageError{fmt::format("worker process {} failed (status {})", w.pid, status)};
    }
  }
}

// Runs seeds [first, first + count) in `jobs` worker processes; calls `done` per seed.
void explore_seeds(const Invocation& inv, const Scenario& s, uint64_t first, uint64_t count, int jobs, bool swarm,
                   const std::function<void(const SeedSummary&)>& done) {
  run_in_workers(
      count, jobs,
      [&](uint64_t i) {
        const uint64_t seed = first + i;
        return summary_json(run_seed(inv, s, seed, swarm, 0, determinism_sampled(seed))).dump();
      },
      [&](uint64_t, const std::string& line) { done(parse_summary(json::parse(line))); });
}

// The largest resident set this process (and, after they ended, its worker processes) had.
double peak_rss_mb() {
  rusage self {}, children {};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  return static_cast<double>(std::max(self.ru_maxrss, children.ru_maxrss)) / 1024.0;
}

double wall_ms_since(Micros start) { return static_cast<double>(real::WallClock().now() - start) / 1e3; }
Micros wall_now() { return real::WallClock().now(); }

}  // namespace onceflow::cli
