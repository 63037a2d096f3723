#include "testing/testing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <stdexcept>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "cli/cli.h"
#include "cli/runner.h"
#include "cli/scenario.h"
#include "core/builtin.h"
#include "core/env/random.h"
#include "simulated/pipeline_run.h"
#include "faults/swarm.h"

// RapidCheck builds the RC_PARAMS reproduce string with this function of its library; it is
// not in its installed headers.
namespace rc::detail {
std::string reproduceMapToString(const std::unordered_map<std::string, Reproduce>& reproduceMap);
}  // namespace rc::detail

namespace onceflow::faults {
// How RapidCheck shows generated values in a counterexample.
void showValue(const Fault& f, std::ostream& os) { os << f.describe(); }
void showValue(const FaultPlan& p, std::ostream& os) {
  os << "plan of " << p.faults.size() << " faults, heal at " << p.heal_at_us << "us:\n" << p.describe();
}
}  // namespace onceflow::faults

namespace onceflow {
// PipelineWorkload is found by argument-dependent lookup in its own namespace.
void showValue(const PipelineWorkload& w, std::ostream& os) {
  os << w.messages << " messages over " << w.keys << " keys, one every " << w.interval_us << "us";
}
}  // namespace onceflow

namespace onceflow::testing {

PlanTargets plan_targets(const PipelineSpec& spec, int workers, int spare_workers,
                         const std::map<std::string, checkers::Guarantee>& guarantees) {
  PlanTargets t;
  for (int i = 1; i <= workers; ++i) t.workers.push_back(fmt::format("worker-{}", i));
  for (int i = 1; i <= spare_workers; ++i) t.spare_workers.push_back(fmt::format("worker-spare-{}", i));
  for (const auto& sink : spec.sinks) {
    // Queue targets and http receivers are nodes; the other sinks write the store.
    if (sink.type == SinkType::kAsyncQueue || sink.type == SinkType::kHttp) t.sink_targets.push_back(sink_target_node(sink.name));
  }
  simulated::PipelineRunOptions o;
  o.spec = spec;
  o.sink_guarantees = guarantees;
  t.kinds = simulated::swarm_kinds_for(o);
  return t;
}

namespace gen {

rc::Gen<PipelineWorkload> workload(int max_messages) {
  return rc::gen::apply(
      [](int messages, int keys, int interval_ms) {
        PipelineWorkload w;
        w.messages = messages;
        w.keys = keys;
        w.interval_us = interval_ms * kMillis;
        return w;
      },
      rc::gen::inRange(1, std::max(1, max_messages) + 1), rc::gen::inRange(1, 33), rc::gen::inRange(1, 11));
}

rc::Gen<faults::FaultPlan> fault_plan(const PlanTargets& targets, const PlanShape& shape) {
  faults::SwarmOptions o;
  o.start_us = shape.start_us;
  o.heal_at_us = shape.heal_at_us;
  o.nodes = targets.workers;
  o.nodes.push_back(EngineOptions{}.controller_node);
  o.store_node = "store";
  o.sink_targets = targets.sink_targets;
  o.spare_workers = targets.spare_workers;
  std::vector<faults::FaultKind> kinds = shape.kinds.empty() ? targets.kinds : shape.kinds;
  if (kinds.empty()) kinds.assign(std::begin(faults::kAllPipelineSwarmKinds), std::end(faults::kAllPipelineSwarmKinds));
  // A fault is a kind, a strength and a seed for where and when; shrinking weakens it.
  const auto fault = rc::gen::apply(
      [o](faults::FaultKind kind, int percent, uint64_t seed) {
        Xoshiro256StarStar rng(seed);
        faults::Fault f = faults::draw_fault(rng, o, kind, percent / 100.0);
        const bool needs_node = kind == faults::FaultKind::kSinkErrors || kind == faults::FaultKind::kSinkRejects ||
                                kind == faults::FaultKind::kDedupEviction || kind == faults::FaultKind::kRebalance;
        if (needs_node && f.node.empty()) f = faults::draw_fault(rng, o, faults::FaultKind::kCrash, percent / 100.0);
        return f;
      },
      rc::gen::elementOf(kinds), rc::gen::inRange(5, 101), rc::gen::arbitrary<uint64_t>());
  const size_t max_faults = shape.max_faults;
  const Micros heal = shape.heal_at_us;
  return rc::gen::map(rc::gen::container<std::vector<faults::Fault>>(fault), [max_faults, heal](std::vector<faults::Fault> v) {
    if (v.size() > max_faults) v.resize(max_faults);
    std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.at_us < b.at_us; });
    faults::FaultPlan plan;
    plan.faults = std::move(v);
    plan.heal_at_us = heal;
    return plan;
  });
}

}  // namespace gen

namespace {

std::string repro_dir() {
  const char* dir = std::getenv("ONCEFLOW_REPRO_DIR");
  return dir != nullptr && *dir != '\0' ? dir : std::filesystem::temp_directory_path().string();
}

std::string file_name(std::string name) {
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '-';
  }
  return "onceflow-" + name + ".yaml";
}

}  // namespace

namespace {

// This test binary's name as it was invoked.
std::string binary_name() {
  const std::string& name = cli::program_name();
  if (name != "onceflow") return name;  // set by test_main
  return program_invocation_name != nullptr ? program_invocation_name : "the test binary";
}

// A note after a replay command of the stock `onceflow` binary when the spec names functions
// it does not have: which program can run it.
std::string replay_note(const PipelineSpec& spec) {
  if (cli::program_name() != "onceflow") return "";  // this binary serves the command line
  ComputationRegistry builtins;
  builtin::register_all(builtins);
  for (const auto& c : spec.computations) {
    if (!builtins.has(c.processing_function)) {
      return fmt::format(" (the stock onceflow does not know '{}': run it with your program built on cli_main, or "
                         "make this test binary one with onceflow::testing::test_main)",
                         c.processing_function);
    }
  }
  return "";
}

// run_case on a spec already loaded from c.spec_path.
CaseResult run_loaded(const PipelineCase& c, const PipelineSpec& spec, const ComputationRegistry& registry,
                      const std::string& name) {
  simulated::PipelineRunOptions o;
  o.spec = spec;
  o.workers = c.workers;
  o.spare_workers = c.spare_workers;
  o.workload = c.workload;
  o.sink_guarantees = c.guarantees;
  o.seed = c.seed;
  o.swarm = false;
  o.scripted = c.plan;
  o.heal_at_us = c.plan.heal_at_us;
  o.liveness_bound_us = c.liveness_bound_us;
  o.bugs = c.bugs;
  o.user_bugs = c.user_bugs;
  o.buggify_when_scripted = c.buggify;

  const std::string file = (std::filesystem::path(repro_dir()) / file_name(name)).string();
  const std::string replay = fmt::format("{} run {} --seed {}{}", cli::program_name(), file, c.seed,
                                         c.bug_name.empty() ? "" : " --bug " + c.bug_name);
  o.replay_command = replay;
  const simulated::PipelineRun run = simulated::run_pipeline(o, registry);

  CaseResult r;
  r.verdicts = run.outcome.verdicts;
  r.passed = run.outcome.passed;
  if (r.passed) return r;
  for (const auto& v : r.verdicts) {
    if (!v.passed) r.failures += fmt::format("{}: {}\n", v.check, v.detail);
  }
  cli::Scenario s;
  s.name = name;
  s.kind = "pipeline";
  s.swarm = false;
  s.scripted = c.plan;
  s.pipeline = o;
  s.pipeline_path = c.spec_path;
  // The sites that fired, pinned: the file runs as this case did (a site's answers depend on
  // its own calls only).
  s.pipeline.buggify_sites = std::set<std::string>(run.outcome.buggify_fired.begin(), run.outcome.buggify_fired.end());
  for (const auto& sink : spec.sinks) s.pipeline.sink_guarantees.try_emplace(sink.name, simulated::default_guarantee(spec, sink));
  std::ofstream out(file);
  if (out) {
    out << "# A failing case of property " << name << "; replay with: " << replay << "\n"
        << cli::scenario_yaml(s, name, "a failing case found by a RapidCheck property") << "\n";
    r.replay_file = file;
  }
  r.replay = replay + replay_note(spec);
  return r;
}

}  // namespace

CaseResult run_case(const PipelineCase& c, const ComputationRegistry& registry, const std::string& name) {
  auto spec = load_pipeline_spec(c.spec_path);
  if (!spec) throw std::runtime_error(spec.error().message());
  return run_loaded(c, *spec, registry, name);
}

CaseResult check_under_faults(const std::string& spec_path, const ComputationRegistry& registry,
                              const FaultOptions& options) {
  auto spec = load_pipeline_spec(spec_path);
  if (!spec) RC_FAIL(spec.error().message());
  PipelineCase c;
  c.spec_path = spec_path;
  c.workers = options.workers;
  c.guarantees = options.guarantees;
  c.bugs = options.bugs;
  c.user_bugs = options.user_bugs;
  c.bug_name = options.bug_name;
  c.buggify = options.buggify;
  c.workload = *gen::workload(options.max_messages).as("workload");
  c.plan = *gen::fault_plan(plan_targets(*spec, c.workers, c.spare_workers, c.guarantees), options.plan).as("faults");
  c.seed = *rc::gen::inRange<uint64_t>(1, 1'000'000).as("seed");
  const auto* test = ::testing::UnitTest::GetInstance();
  const auto* info = test != nullptr ? test->current_test_info() : nullptr;
  const std::string name =
      info != nullptr ? fmt::format("{}-{}", info->test_suite_name(), info->name()) : std::string("property");
  CaseResult r = run_loaded(c, *spec, registry, name);
  if (!r.passed) {
    RC_FAIL(fmt::format("{}replay: {}{}", r.failures, r.replay,
                        r.replay_file.empty() ? "" : " (the scenario file is rewritten by each failing case; the "
                                                     "last one written is the smallest)"));
  }
  return r;
}

std::string failure_report(const std::string& test_id, const rc::detail::TestResult& result) {
  if (result.template is<rc::detail::SuccessResult>()) return "";
  std::ostringstream os;
  rc::detail::printResultMessage(result, os);
  if (result.template is<rc::detail::FailureResult>()) {
    const auto& failure = result.template get<rc::detail::FailureResult>();
    os << "\nrerun just this case: "
       << rerun_command("RC_PARAMS=\"reproduce=" + rc::detail::reproduceMapToString({{test_id, failure.reproduce}}) + "\"");
    // Under ONCEFLOW_SEED the seed of the whole property run: the same cases again.
    const char* seed = std::getenv("ONCEFLOW_SEED");
    const char* seeds = std::getenv("ONCEFLOW_SEEDS");
    if (seed != nullptr && *seed != '\0') {
      os << "\nrerun the whole property at its seed: "
         << rerun_command(fmt::format("ONCEFLOW_SEED={}{}", seed,
                                      seeds != nullptr && *seeds != '\0' ? fmt::format(" ONCEFLOW_SEEDS={}", seeds) : ""));
    }
  }
  return os.str();
}

namespace {

// A whole number from the environment variable `name`, if set.
std::optional<uint64_t> env_number(const char* name, uint64_t min) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  const std::string_view v(text);
  uint64_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc{} || end != v.data() + v.size() || n < min) {
    throw std::invalid_argument(fmt::format("{}='{}': expected a whole number of at least {}", name,
                                            v.substr(0, 32), min));
  }
  return n;
}

}  // namespace

SeedRange seeds_from_env(uint64_t default_count) {
  // Every seed run here can be replayed by the command line.
  using cli::kMaxSeed;
  SeedRange r;
  r.first = env_number("ONCEFLOW_SEED", 0).value_or(1);
  r.count = env_number("ONCEFLOW_SEEDS", 1).value_or(std::max<uint64_t>(1, default_count));
  if (r.first > kMaxSeed) {
    throw std::invalid_argument(fmt::format("ONCEFLOW_SEED={}: the largest seed is {}", r.first, kMaxSeed));
  }
  if (r.count - 1 > kMaxSeed - r.first) {
    throw std::invalid_argument(
        fmt::format("ONCEFLOW_SEED={} with ONCEFLOW_SEEDS={} goes past the largest seed, {}", r.first, r.count, kMaxSeed));
  }
  return r;
}

std::optional<rc::detail::TestParams> property_params_from_env() {
  const auto seed = env_number("ONCEFLOW_SEED", 0);
  const auto cases = env_number("ONCEFLOW_SEEDS", 1);
  // RapidCheck prints its configuration's seed once, as it first reads RC_PARAMS: given
  // ONCEFLOW_SEED's there (unless RC_PARAMS names one), the line names the seed that runs.
  static const bool told = [&] {
    const char* given = std::getenv("RC_PARAMS");
    std::string params = given == nullptr ? "" : given;
    if (!seed || params.find("seed=") != std::string::npos) return false;
    params += fmt::format("{}seed={}", params.empty() ? "" : " ", *seed);
    return ::setenv("RC_PARAMS", params.c_str(), 1) == 0;
  }();
  (void)told;
  if ((!seed && !cases) || !rc::detail::configuration().reproduce.empty()) return std::nullopt;
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  if (seed) params.seed = *seed;
  if (cases) params.maxSuccess = static_cast<int>(std::min<uint64_t>(*cases, 1'000'000'000));
  return params;
}

std::string rerun_command(const std::string& settings) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string filter;
  if (info != nullptr) {
    filter = fmt::format(" --gtest_filter={}.{}", info->test_suite_name(), info->name());
    const auto disabled = [](std::string_view name) { return name.rfind("DISABLED_", 0) == 0; };
    if (disabled(info->test_suite_name()) || disabled(info->name())) filter += " --gtest_also_run_disabled_tests";
  }
  return fmt::format("{} {}{}", settings, binary_name(), filter);
}

::testing::AssertionResult explore_scenario(const std::string& path, const ComputationRegistry& registry,
                                            uint64_t default_seeds) {
  SeedRange seeds;
  cli::Scenario s;
  try {
    seeds = seeds_from_env(default_seeds);
    auto loaded = cli::load_scenario(path);
    if (!loaded) return ::testing::AssertionFailure() << loaded.error().message();
    s = std::move(*loaded);
    cli::check_functions(registry, s);
  } catch (const std::invalid_argument& e) {
    return ::testing::AssertionFailure() << e.what();
  } catch (const cli::UsageError& e) {
    return ::testing::AssertionFailure() << e.message;
  }
  // As explore runs them, in this process.
  const cli::Invocation inv{registry, {}, "", {}};
  std::vector<cli::SeedSummary> failing;
  uint64_t failed = 0;
  cli::explore_seeds(inv, s, seeds.first, seeds.count, 1, s.swarm, [&](const cli::SeedSummary& r) {
    if (r.passed) return;
    ++failed;
    if (failing.size() < 10) failing.push_back(r);
  });
  const std::string range = fmt::format("seeds {}-{}", seeds.first, seeds.first + seeds.count - 1);
  // One line in the test's output says which seeds ran (a CI log then shows them).
  const auto passed = [&](const std::string& what) {
    fmt::print("onceflow: {}: {}\n", path, what);
    std::fflush(stdout);
    return ::testing::AssertionSuccess() << what;
  };
  if (s.demonstrates_failure) {
    if (failed > 0) return passed(fmt::format("a demonstration, failed as expected on {} of {}", failed, range));
    return ::testing::AssertionFailure() << path << ": a demonstration of a known-bad design must fail, and none of "
                                         << range << " did";
  }
  if (failed == 0) return passed(range + " passed");
  std::string out = fmt::format("{}: {} of {} seeds failed ({})\n", path, failed, seeds.count, range);
  const std::string note = s.kind == "pipeline" ? replay_note(s.pipeline.spec) : "";
  for (const auto& r : failing) {
    out += fmt::format("  seed {}: {}\n    faults: {}\n    rerun in this test: {}\n    replay its trace: {}{}\n", r.seed,
                       cli::without_replay(r.first_failure), r.mix,
                       rerun_command(fmt::format("ONCEFLOW_SEED={} ONCEFLOW_SEEDS=1", r.seed)),
                       cli::replay_command(inv, s, r.seed, s.swarm), note);
  }
  if (failed > failing.size()) out += fmt::format("  ... and {} more\n", failed - failing.size());
  return ::testing::AssertionFailure() << out;
}

int test_main(int argc, char** argv, const ComputationRegistry& registry) {
  if (argc >= 2 && (is_cli_command(argv[1]) || std::string_view(argv[1]) == "--version")) {
    return cli_main(argc, argv, registry);
  }
  if (argc > 0 && argv[0] != nullptr && argv[0][0] != '\0') cli::program_name() = argv[0];
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

}  // namespace onceflow::testing
