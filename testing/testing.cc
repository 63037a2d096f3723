#include "testing/testing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "cli/scenario.h"
#include "core/env/random.h"
#include "faults/pipeline_run.h"
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
void showValue(const PipelineWorkload& w, std::ostream& os) {
  os << w.messages << " messages over " << w.keys << " keys, one every " << w.interval_us << "us";
}
}  // namespace onceflow::faults

namespace onceflow::testing {

PlanTargets plan_targets(const PipelineSpec& spec, int workers, int spare_workers) {
  PlanTargets t;
  for (int i = 1; i <= workers; ++i) t.workers.push_back(fmt::format("worker-{}", i));
  for (int i = 1; i <= spare_workers; ++i) t.spare_workers.push_back(fmt::format("worker-spare-{}", i));
  for (const auto& sink : spec.sinks) {
    // Queue targets and http receivers are nodes; the other sinks write the store.
    if (sink.type == SinkType::kAsyncQueue || sink.type == SinkType::kHttp) t.sink_targets.push_back(sink_target_node(sink.name));
  }
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
  std::vector<faults::FaultKind> kinds = shape.kinds;
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

// run_case on a spec already loaded from c.spec_path.
CaseResult run_loaded(const PipelineCase& c, const PipelineSpec& spec, const ComputationRegistry& registry,
                      const std::string& name) {
  faults::PipelineRunOptions o;
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

  const std::string file = (std::filesystem::path(repro_dir()) / file_name(name)).string();
  const std::string replay =
      fmt::format("onceflow run {} --seed {}{}", file, c.seed, c.bug_name.empty() ? "" : " --bug " + c.bug_name);
  o.replay_command = replay;
  const faults::PipelineRun run = faults::run_pipeline(o, registry);

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
  for (const auto& sink : spec.sinks) s.pipeline.sink_guarantees.try_emplace(sink.name, faults::default_guarantee(sink));
  std::ofstream out(file);
  if (out) {
    out << "# A failing case of property " << name << "; replay with: " << replay << "\n"
        << cli::scenario_yaml(s, name, "a failing case found by a RapidCheck property") << "\n";
    r.replay_file = file;
  }
  r.replay = replay;
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
  c.bug_name = options.bug_name;
  c.workload = *gen::workload(options.max_messages).as("workload");
  c.plan = *gen::fault_plan(plan_targets(*spec, c.workers, c.spare_workers), options.plan).as("faults");
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
    os << "\nrerun just this case: RC_PARAMS=\"reproduce="
       << rc::detail::reproduceMapToString({{test_id, failure.reproduce}}) << "\"";
  }
  return os.str();
}

}  // namespace onceflow::testing
