// The whole pipeline as a property: generated pipeline shapes (one to three stages, each
// processing mode, each sink kind), generated workloads and generated fault plans; the
// guarantee the shape promises must hold. The same property with a bug switch on must fail,
// which shows that it can.
#include <gtest/gtest.h>
#include <unistd.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/builtin.h"
#include "core/env/random.h"
#include "testing/testing.h"

namespace onceflow {
namespace {

struct Stage {
  std::string function;  // Normalize (swift map), Annotate (transform), Counter, WordCount
  std::string type;
  std::string mode;  // exactly_once or at_least_once_consistent
  int partitions = 1;
};

struct Shape {
  int source_partitions = 1;
  std::vector<Stage> stages;
  std::string sink_type;  // sync_queue or async_queue
  bool at_most_once = false;
  int sink_partitions = 1;

  bool at_least_once_somewhere() const {
    for (const auto& s : stages) {
      if (s.mode == "at_least_once_consistent") return true;
    }
    return false;
  }
  checkers::Guarantee guarantee() const {
    if (at_most_once) return checkers::Guarantee::kAtMostOnce;
    return at_least_once_somewhere() ? checkers::Guarantee::kAtLeastOnce : checkers::Guarantee::kExactlyOnce;
  }

  std::string yaml() const {
    std::string y = fmt::format("name: generated\nsources:\n  in: {{type: queue, partitions: {}, output_stream: s0}}\n"
                                "computations:\n",
                                source_partitions);
    for (size_t i = 0; i < stages.size(); ++i) {
      const Stage& s = stages[i];
      y += fmt::format("  Stage{}:\n    type: {}\n    processing_function: {}\n    input_streams: [s{}]\n"
                       "    output_streams: [s{}]\n    partitions: {}\n",
                       i, s.type, s.function, i, i + 1, s.partitions);
      if (s.type != "swift_map") y += fmt::format("    processing_mode: {}\n", s.mode);
    }
    y += fmt::format("sinks:\n  out:\n    type: {}\n    input_stream: s{}\n    partitions: {}\n", sink_type,
                     stages.size(), sink_partitions);
    if (at_most_once) y += "    at_most_once_strategy: {enabled: true, total_queue_bytes_limit: 65536}\n";
    return y;
  }
};

void showValue(const Shape& s, std::ostream& os) { os << s.yaml(); }

rc::Gen<Stage> stage(bool first, bool last) {
  std::vector<std::string> kinds = {"Annotate", "Counter", "WordCount"};
  if (first && !last) kinds.push_back("Normalize");  // a swift map feeding a regular stage
  return rc::gen::apply(
      [](const std::string& function, bool at_least_once, int partitions) {
        Stage s;
        s.function = function;
        s.type = function == "Normalize" ? "swift_map" : function == "Annotate" ? "transform" : "process_function";
        // A swift map has no mode of its own (the spec refuses at-least-once on it). A stateful
        // stage at least once is left out: a replayed input updates its state again and the
        // output it then makes keeps its MessageId with another payload ("n=3" for "n=2"),
        // which downstream dedup drops, so no payload-level expectation holds for it.
        const bool stateless = s.type == "transform";
        s.mode = at_least_once && stateless ? "at_least_once_consistent" : "exactly_once";
        s.partitions = partitions;
        return s;
      },
      rc::gen::elementOf(kinds), rc::gen::weightedElement<bool>({{3, false}, {1, true}}), rc::gen::inRange(1, 4));
}

rc::Gen<Shape> shape() {
  return rc::gen::mapcat(rc::gen::inRange(1, 4), [](int n) {
    const auto stages = rc::gen::apply(
        [n](Stage a, Stage b, Stage c) {
          std::vector<Stage> out{std::move(a), std::move(b), std::move(c)};
          out.resize(static_cast<size_t>(n));
          return out;
        },
        stage(true, n == 1), stage(false, n == 2), stage(false, true));
    return rc::gen::apply(
        [](std::vector<Stage> stages, int source_partitions, bool async, bool at_most_once, int sink_partitions) {
          Shape s;
          s.stages = std::move(stages);
          s.source_partitions = source_partitions;
          // An at-most-once sink delivers each of its inputs at most once; behind an
          // at-least-once stage its inputs may repeat, and no guarantee is left to check.
          s.at_most_once = at_most_once && !s.at_least_once_somewhere();
          s.sink_type = async || s.at_most_once ? "async_queue" : "sync_queue";
          s.sink_partitions = sink_partitions;
          return s;
        },
        stages, rc::gen::inRange(1, 3), rc::gen::arbitrary<bool>(), rc::gen::weightedElement<bool>({{4, false}, {1, true}}),
        rc::gen::inRange(1, 3));
  });
}

// The generated spec, written where the failing case's scenario can name it. ctest runs the
// properties in parallel processes, which may generate the same spec: each writes a file of
// its own and renames it into place, so no reader ever sees a half-written one.
std::string write_spec(const Shape& s) {
  const std::string yaml = s.yaml();
  const auto dir = std::filesystem::temp_directory_path() / "onceflow-generated-specs";
  std::filesystem::create_directories(dir);
  const auto path = dir / fmt::format("{:016x}.yaml", hash_bytes(yaml));
  const auto partial = dir / fmt::format("{:016x}.yaml.{}", hash_bytes(yaml), ::getpid());
  {
    std::ofstream out(partial);
    out << yaml;
  }
  std::filesystem::rename(partial, path);
  return path.string();
}

const ComputationRegistry& registry() {
  static const ComputationRegistry r = [] {
    ComputationRegistry out;
    builtin::register_all(out);
    return out;
  }();
  return r;
}

void pipeline_property(const BugSwitches& bugs, const std::string& bug_name) {
  const Shape s = *shape().as("pipeline");
  testing::FaultOptions options;
  options.max_messages = 60;
  // At most once needs a transport that does not duplicate requests (docs/guarantees.md): the
  // helper draws no `duplicate` for such a sink, as explore's swarm does not
  // (TheHelpersDrawWhatTheSwarmDraws).
  options.guarantees = {{"out", s.guarantee()}};
  options.bugs = bugs;
  options.bug_name = bug_name;
  testing::check_under_faults(write_spec(s), registry(), options);
}

ONCEFLOW_PROP(PipelineProps, EveryShapeKeepsItsGuaranteeUnderFaults, ()) { pipeline_property({}, ""); }

// The helpers' fault plans draw the kinds explore's swarm draws for the pipeline: no
// `duplicate` where a sink delivers at most once (its sends carry no producer id), by its spec
// or by the guarantee the test holds it to.
TEST(PipelineProps, TheHelpersDrawWhatTheSwarmDraws) {
  Shape s;
  s.stages = {{"Counter", "process_function", "exactly_once", 1}};
  s.sink_type = "async_queue";
  const auto has_duplicate = [](const std::vector<faults::FaultKind>& kinds) {
    return std::find(kinds.begin(), kinds.end(), faults::FaultKind::kDuplicate) != kinds.end();
  };
  auto exactly_once = load_pipeline_spec(write_spec(s));
  ASSERT_TRUE(exactly_once.has_value()) << exactly_once.error().message();
  EXPECT_TRUE(has_duplicate(testing::plan_targets(*exactly_once, 2, 0).kinds));
  EXPECT_FALSE(has_duplicate(testing::plan_targets(*exactly_once, 2, 0, {{"out", checkers::Guarantee::kAtMostOnce}}).kinds));
  s.at_most_once = true;
  auto at_most_once = load_pipeline_spec(write_spec(s));
  ASSERT_TRUE(at_most_once.has_value()) << at_most_once.error().message();
  const testing::PlanTargets targets = testing::plan_targets(*at_most_once, 2, 0);
  EXPECT_FALSE(has_duplicate(targets.kinds));
  // And the plans drawn from them: 200 plans of up to 8 faults, not one duplicate.
  rc::detail::TestParams params;
  params.maxSuccess = 200;
  params.seed = 7;
  const auto result = testing::check_quietly(
      [&] {
        const faults::FaultPlan plan = *testing::gen::fault_plan(targets).as("faults");
        for (const faults::Fault& f : plan.faults) RC_ASSERT(f.kind != faults::FaultKind::kDuplicate);
      },
      rc::detail::TestMetadata{"PipelineProps/Kinds", "kinds"}, params);
  EXPECT_TRUE(result.is<rc::detail::SuccessResult>());
}

// With a bug switch on, RapidCheck must find a counterexample, and its report must name the
// onceflow command and the RC_PARAMS string that replay it.
TEST(PipelineProps, TheSamePropertyFailsWithABugSwitchOn) {
  BugSwitches bugs;
  ASSERT_TRUE(bugs.enable("no-lease-prerequisite"));
  rc::detail::TestParams params;
  params.maxSuccess = 300;
  params.seed = 1;
  params.maxSize = 100;
  params.maxDiscardRatio = 10;
  params.disableShrinking = false;
  rc::detail::TestMetadata metadata{"PipelineProps/WithBug", "with bug"};
  const auto result = testing::check_quietly([&] { pipeline_property(bugs, "no-lease-prerequisite"); }, metadata, params);
  ASSERT_TRUE(result.is<rc::detail::FailureResult>()) << "no counterexample in 300 cases with the bug on";
  const std::string report = testing::failure_report(metadata.id, result);
  EXPECT_NE(report.find("onceflow run "), std::string::npos) << report;
  EXPECT_NE(report.find("--bug no-lease-prerequisite"), std::string::npos) << report;
  EXPECT_NE(report.find("RC_PARAMS=\"reproduce="), std::string::npos) << report;
  EXPECT_EQ(report.find("rerun the whole property at its seed"), std::string::npos) << "no ONCEFLOW_SEED was set";
  std::cout << "the expected failure, as a user would see it:\n" << report << "\n";
  // A run under ONCEFLOW_SEED names that seed, which reruns the whole property.
  ::setenv("ONCEFLOW_SEED", "4242", 1);
  const std::string seeded = testing::failure_report(metadata.id, result);
  ::unsetenv("ONCEFLOW_SEED");
  EXPECT_NE(seeded.find("rerun the whole property at its seed: ONCEFLOW_SEED=4242 "), std::string::npos) << seeded;
}

}  // namespace
}  // namespace onceflow
