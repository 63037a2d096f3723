#include "cli/scenario.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/runner.h"
#include "core/builtin.h"
#include "core/spec.h"

namespace onceflow::cli {
namespace {

std::string write_temp(const std::string& text) {
  static int counter = 0;
  // Test cases run as processes of their own, in parallel: the test's name keeps them apart.
  const std::string path = fmt::format("{}scenario_{}_{}.yaml", ::testing::TempDir(),
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name(), counter++);
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::string& text) {
  auto s = load_scenario(write_temp(text));
  EXPECT_FALSE(s.has_value());
  return s.has_value() ? "" : s.error().message();
}

TEST(ScenarioTest, LibraryScenariosLoad) {
  for (const char* name : {"kernel_bank.yaml", "kernel_zombie.yaml"}) {
    auto s = load_scenario(std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/" + name);
    ASSERT_TRUE(s.has_value()) << s.error().message();
    EXPECT_EQ(s->kind, "kernel");
  }
}

// bench/run.sh reports it next to the headline as "the same work on a slower clock".
TEST(ScenarioTest, TheBenchSlowClockScenarioIsTheHeadlineOnASlowerClock) {
  auto headline = load_scenario(std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/retryable_request.yaml");
  auto slow = load_scenario(std::string(ONCEFLOW_SOURCE_DIR) + "/bench/scenarios/retryable_request_slow.yaml");
  ASSERT_TRUE(headline.has_value()) << headline.error().message();
  ASSERT_TRUE(slow.has_value()) << slow.error().message();
  const PipelineSpec& a = headline->pipeline.spec;
  const PipelineSpec& b = slow->pipeline.spec;
  ASSERT_EQ(a.computations.size(), b.computations.size());
  for (size_t i = 0; i < a.computations.size(); ++i) {
    EXPECT_EQ(a.computations[i].processing_function, b.computations[i].processing_function);
    EXPECT_EQ(a.computations[i].partitions, b.computations[i].partitions);
  }
  ASSERT_EQ(a.sources.size(), b.sources.size());
  EXPECT_EQ(a.sources[0].partitions, b.sources[0].partitions);
  EXPECT_EQ(headline->pipeline.workload.messages, slow->pipeline.workload.messages);
  EXPECT_EQ(headline->pipeline.workload.keys, slow->pipeline.workload.keys);
  EXPECT_EQ(headline->pipeline.workers, slow->pipeline.workers);
  EXPECT_EQ(headline->pipeline.swarm, slow->pipeline.swarm);
  EXPECT_GT(b.epoch_period_us, a.epoch_period_us);
  EXPECT_GT(b.lease_ttl_us, a.lease_ttl_us);
  EXPECT_GT(slow->pipeline.workload.interval_us, headline->pipeline.workload.interval_us);
  EXPECT_GT(slow->pipeline.heal_at_us, headline->pipeline.heal_at_us);
}

TEST(ScenarioTest, AWrittenScenarioKeepsItsExternalSystems) {
  for (const char* name : {"clickhouse_short_window.yaml", "http_ignores_key.yaml"}) {
    auto s = load_scenario(std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/" + name);
    ASSERT_TRUE(s.has_value()) << s.error().message();
    auto again = load_scenario(write_temp(scenario_yaml(*s, "copy", "a copy")));
    ASSERT_TRUE(again.has_value()) << again.error().message();
    EXPECT_EQ(again->pipeline.http_honours_idempotency_key, s->pipeline.http_honours_idempotency_key) << name;
    ASSERT_EQ(again->pipeline.clickhouse_targets.size(), s->pipeline.clickhouse_targets.size()) << name;
    for (const auto& [sink, c] : s->pipeline.clickhouse_targets) {
      const auto& d = again->pipeline.clickhouse_targets.at(sink);
      EXPECT_EQ(std::tie(d.database, d.engine, d.window_us, d.window_blocks, d.same_table_on_all_hosts),
                std::tie(c.database, c.engine, c.window_us, c.window_blocks, c.same_table_on_all_hosts));
    }
    EXPECT_EQ(again->pipeline.sink_guarantees, s->pipeline.sink_guarantees) << name;
  }
}

TEST(ScenarioTest, AWrittenScenarioKeepsItsOperations) {
  for (const char* name : {"repartition.yaml", "reconfigure.yaml", "source_swap.yaml", "target_reshard.yaml",
                           "pipeline_stop_long.yaml", "pipeline_stop_now.yaml"}) {
    auto s = load_scenario(std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/" + name);
    ASSERT_TRUE(s.has_value()) << s.error().message();
    auto again = load_scenario(write_temp(scenario_yaml(*s, "copy", "a copy")));
    ASSERT_TRUE(again.has_value()) << name << ": " << again.error().message();
    const auto& a = s->pipeline;
    const auto& b = again->pipeline;
    ASSERT_EQ(b.repartitions.size(), a.repartitions.size()) << name;
    for (size_t i = 0; i < a.repartitions.size(); ++i) {
      EXPECT_EQ(b.repartitions[i].at_us, a.repartitions[i].at_us);
      EXPECT_EQ(b.repartitions[i].partitions, a.repartitions[i].partitions);
    }
    EXPECT_EQ(b.reconfigures, a.reconfigures) << name;
    ASSERT_EQ(b.respecs.size(), a.respecs.size()) << name;
    for (size_t i = 0; i < a.respecs.size(); ++i) EXPECT_EQ(b.respecs[i].yaml, a.respecs[i].yaml);
    ASSERT_EQ(b.target_reshards.size(), a.target_reshards.size()) << name;
    for (size_t i = 0; i < a.target_reshards.size(); ++i) {
      EXPECT_EQ(std::tie(b.target_reshards[i].at_us, b.target_reshards[i].sink, b.target_reshards[i].tablets),
                std::tie(a.target_reshards[i].at_us, a.target_reshards[i].sink, a.target_reshards[i].tablets));
    }
    EXPECT_EQ(b.state_requests, a.state_requests) << name;
  }
  const std::string head = "name: t\nkind: pipeline\npipeline: " + std::string(ONCEFLOW_SOURCE_DIR) +
                           "/scenarios/pipelines/keyed_aggregation.yaml\noperations:\n";
  EXPECT_NE(error_of(head + "  - {at: 1s, set_state: halted}\n")
                .find(":5: operations.set_state: expected stopped, 'stopped now', paused or working, got 'halted'"),
            std::string::npos);
}

TEST(ScenarioTest, AServiceLogNeedsMaxCyclesInTheSimulator) {
  const std::string pipeline = write_temp(
      "name: p\nsources:\n  log: {type: service_log, output_stream: e}\nsinks:\n  out: {input_stream: e}\n");
  const std::string message = error_of("name: s\nkind: pipeline\npipeline: " + pipeline + "\n");
  EXPECT_NE(message.find("sources.log: the simulator needs max_cycles on a service_log source"), std::string::npos)
      << message;
}

// More jobs than the simulated deployment keeps alive is refused at load, naming the count,
// rather than run into a liveness failure that blames nothing (2,000 service-log partitions on
// 3 workers once did); the same partitions on enough workers load.
TEST(ScenarioTest, MoreJobsThanTheWorkersCanRunAreRefused) {
  const std::string pipeline = write_temp(
      "name: p\nsources:\n  log: {type: service_log, partitions: 2000, output_stream: e, max_cycles: 1}\n"
      "sinks:\n  out: {input_stream: e, partitions: 2}\n");
  const std::string message =
      error_of("name: s\nkind: pipeline\npipeline: " + pipeline + "\ntopology: {workers: 3}\n");
  EXPECT_NE(message.find("has 2002 jobs (partitions of its sources, computations and sinks) for 3 workers"),
            std::string::npos)
      << message;
  auto enough = load_scenario(write_temp("name: s\nkind: pipeline\npipeline: " + pipeline + "\ntopology: {workers: 5}\n"));
  EXPECT_TRUE(enough.has_value()) << enough.error().message();
}

// A function that parses what it reads states which streams those are (its contract); a
// spec that gives it another is refused when read, naming the computation and the stream,
// rather than reaching the function's assertion on a payload it cannot parse (RequestProcessor
// given the source's stream once aborted).
TEST(ScenarioTest, AFunctionGivenAStreamItDoesNotReadIsRefused) {
  ComputationRegistry registry;
  builtin::register_all(registry);
  size_t contracts = 0;
  for (const std::string& name : registry.names()) {
    const FunctionContract& contract = registry.contract(name);
    if (contract.reads.empty()) continue;
    ++contracts;
    auto spec = parse_pipeline_spec(YAML::Load(fmt::format(R"(
name: p
sources: {{events: {{type: queue, partitions: 1, output_stream: other}}}}
computations:
  C: {{type: process_function, processing_function: {}, input_streams: [other], output_streams: [out]}}
sinks: {{out: {{type: async_queue, input_stream: out}}}}
)", name)), "test");
    ASSERT_TRUE(spec.has_value()) << spec.error().message();
    try {
      cli::check_functions(registry, "p.yaml", *spec);
      ADD_FAILURE() << name << " was given a stream it does not read";
    } catch (const cli::UsageError& e) {
      EXPECT_NE(e.message.find("computations.C.input_streams: " + name + " reads only"), std::string::npos) << e.message;
      EXPECT_NE(e.message.find("not 'other'"), std::string::npos) << e.message;
    }
    // The streams it reads are accepted.
    auto right = parse_pipeline_spec(YAML::Load(fmt::format(R"(
name: p
sources: {{events: {{type: queue, partitions: 1, output_stream: {}}}}}
computations:
  C: {{type: process_function, processing_function: {}, input_streams: [{}], output_streams: [out]}}
sinks: {{out: {{type: async_queue, input_stream: out}}}}
)", contract.reads.front(), name, contract.reads.front())), "test");
    ASSERT_TRUE(right.has_value()) << right.error().message();
    EXPECT_NO_THROW(cli::check_functions(registry, "p.yaml", *right)) << name;
  }
  EXPECT_EQ(contracts, 2u) << "StateKeeper and RequestProcessor parse their inputs";
}

// An operation due after the pipeline would have drained still happens before the run counts
// as drained: a respec at 8 s (the inputs written for its new queue) once never came, and the
// consumption check reported those inputs lost (found by tests/campaign_test.sh).
TEST(ScenarioTest, AnOperationDueAfterTheDrainStillHappens) {
  ComputationRegistry registry;
  builtin::register_all(registry);
  Scenario s = cli::load_or_fail(std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/source_swap.yaml");
  ASSERT_EQ(s.pipeline.respecs.size(), 1u);
  s.pipeline.respecs[0].at_us = 8 * kSeconds;
  const cli::Invocation inv{registry, {}, "", {}};
  const simulated::RunOutcome r = cli::run_seed_once(inv, s, 1, false, 0);
  for (const auto& v : r.verdicts) EXPECT_TRUE(v.passed) << v.check << ": " << v.detail;
  EXPECT_TRUE(r.passed);
}

TEST(ScenarioTest, RefusesAnAliasInsideItselfAndDeepNesting) {
  EXPECT_NE(error_of("a: &a [*a]\n").find(":1: an alias refers to a node that contains it"), std::string::npos);
  EXPECT_NE(error_of("name: s\nkind: kernel\nworkload: " + std::string(80, '[') + std::string(80, ']') + "\n")
                .find(":3: nested deeper than 64 levels"),
            std::string::npos);
}

TEST(ScenarioTest, RefusesDuplicateKeysUnboundedValuesAndEchoesOnlyAPrefix) {
  const std::string kernel = "name: s\nkind: kernel\n";
  EXPECT_NE(error_of(kernel + "workload: {clients: 2}\nworkload: {clients: 3}\n").find(":4: key 'workload' appears twice"),
            std::string::npos);
  EXPECT_NE(error_of(kernel + "faults:\n  heal_at: 2147483648s\n").find("faults.heal_at: must be at most"),
            std::string::npos);
  EXPECT_NE(error_of(kernel + "workload: {transfers_per_client: 100001}\n").find("must be in [0, 100000]"),
            std::string::npos);
  const std::string huge = error_of("name: s\nkind: " + std::string(100'000, 'k') + "\n");
  EXPECT_NE(huge.find("unknown kind 'kkkk"), std::string::npos) << huge.substr(0, 200);
  EXPECT_LT(huge.size(), 200u);
  const std::string path = error_of("name: s\nkind: pipeline\npipeline: " + std::string(300, 'p') + ".yaml\n");
  EXPECT_NE(path.find("File name too long"), std::string::npos) << path;
  const std::string slow = write_temp(
      "name: p\nlease_ttl: 360000s\nsources:\n  events: {type: queue, output_stream: e}\nsinks:\n  out: {input_stream: e}\n");
  EXPECT_NE(error_of("name: s\nkind: pipeline\npipeline: " + slow + "\n").find("lease_ttl is 6000m"), std::string::npos);
}

TEST(ScenarioTest, ReadsWorkloadFaultsAndDurations) {
  auto s = load_scenario(write_temp(R"(
name: t
kind: kernel
workload: {clients: 3, transfers_per_client: 7, lease_ttl: 1.5s, ping_interval: 250ms}
faults:
  swarm: false
  heal_at: 4s
  plan:
    - {kind: partition, node: client-1, peer: store, at: 1s, for: 500ms}
    - {kind: clock_jump, node: client-2, at: 2s, amount: -300ms}
    - {kind: store_unavailable, at: 3s, for: 100ms}
)"));
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->kernel.workload.clients, 3);
  EXPECT_EQ(s->kernel.workload.transfers_per_client, 7u);
  EXPECT_EQ(s->kernel.workload.lease_ttl_us, 1'500'000);
  EXPECT_FALSE(s->swarm);
  ASSERT_EQ(s->scripted.faults.size(), 3u);
  EXPECT_EQ(s->scripted.faults[0].peer, "store");
  EXPECT_EQ(s->scripted.faults[1].amount_us, -300'000);
  EXPECT_EQ(s->scripted.heal_at_us, 4'000'000);
}

TEST(ScenarioTest, AWrittenScenarioKeepsItsWorkloadWithItsEventTimeDisorder) {
  auto s = load_scenario(std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/user_session_window.yaml");
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->pipeline.workload.event_disorder_us, 40'000);
  auto again = load_scenario(write_temp(scenario_yaml(*s, "copy", "a copy")));
  ASSERT_TRUE(again.has_value()) << again.error().message();
  EXPECT_EQ(again->pipeline.workload.event_disorder_us, 40'000);
  EXPECT_EQ(again->pipeline.workload.interval_us, s->pipeline.workload.interval_us);
  EXPECT_EQ(again->pipeline.workload.messages, s->pipeline.workload.messages);
  // Left out, an input is up to 1 ms older than its write, as before the key existed.
  auto plain = load_scenario(std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/keyed_aggregation.yaml");
  ASSERT_TRUE(plain.has_value());
  EXPECT_EQ(plain->pipeline.workload.event_disorder_us, 1'000);
}

TEST(ScenarioTest, ErrorsNameTheFileLineAndKey) {
  EXPECT_NE(error_of("name: t\nkind: kernel\nworkload:\n  clients: many\n").find(":4: workload.clients"),
            std::string::npos);
  EXPECT_NE(error_of("name: t\nkind: kernel\nwrkload: {}\n").find(":3: wrkload: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of("name: t\nkind: pipeline-of-dreams\n").find("unknown kind"), std::string::npos);
  EXPECT_NE(error_of("kind: kernel\n").find("name: missing"), std::string::npos);
  EXPECT_NE(error_of("name: t\nkind: kernel\nfaults:\n  plan:\n    - {kind: meteor, at: 1s}\n")
                .find(":5: faults.plan[0].kind: unknown fault kind 'meteor'"),
            std::string::npos);
  EXPECT_NE(error_of("name: t\nkind: kernel\nfaults:\n  plan:\n    - {kind: crash, node: nobody, at: 1s}\n")
                .find("no node 'nobody'"),
            std::string::npos);
  EXPECT_NE(error_of("name: [oops\n").find("malformed YAML"), std::string::npos);
  EXPECT_NE(error_of("name: t\nkind: kernel\nliveness_bound: 0s\n").find(":3: liveness_bound: must be above 0"),
            std::string::npos);
  // A plan that swarm faults would silently replace is refused.
  EXPECT_NE(error_of("name: t\nkind: kernel\nfaults:\n  plan:\n    - {kind: store_unavailable, at: 1s, for: 1s}\n")
                .find(":5: faults.plan: runs only with swarm: false"),
            std::string::npos);
  EXPECT_NE(error_of("name: t\nkind: kernel\nfaults:\n  swarm: true\n  plan: []\n").find("runs only with swarm: false"),
            std::string::npos);
  auto missing = load_scenario("/nonexistent/x.yaml");
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message().find("no such file"), std::string::npos);
}

TEST(ScenarioTest, ARespecNamesASpecTheSimulatorCanCheck) {
  const std::string pipelines = std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/pipelines/";
  const std::string head = "name: t\nkind: pipeline\npipeline: " + pipelines + "keyed_aggregation.yaml\noperations:\n";
  auto swap = load_scenario(write_temp(head + "  - {at: 1s, respec: " + pipelines + "keyed_aggregation_swapped.yaml}\n"));
  ASSERT_TRUE(swap.has_value()) << swap.error().message();
  ASSERT_EQ(swap->pipeline.respecs.size(), 1u);
  EXPECT_EQ(swap->pipeline.respecs[0].at_us, 1 * kSeconds);
  EXPECT_NE(swap->pipeline.respecs[0].yaml.find("events_v2"), std::string::npos);
  EXPECT_NE(error_of(head + "  - {at: 1s, respec: nowhere.yaml}\n").find(":5: operations.respec"), std::string::npos);
  // Another processing: the expected outputs would no longer be the scenario pipeline's.
  std::string renamed = *read_pipeline_spec_file(pipelines + "keyed_aggregation.yaml");
  renamed.replace(renamed.find("  Counter:"), 10, "  Counted:");
  const std::string other = write_temp(renamed);
  EXPECT_NE(error_of(head + "  - {at: 1s, respec: " + other + "}\n")
                .find("a respec may change only the tables its queue sources read"),
            std::string::npos);
  // Other counts: a repartition's business.
  EXPECT_NE(error_of(head + "  - {at: 1s, respec: " + pipelines + "repartition.yaml}\n")
                .find("computation Counter: 1 partitions in the new spec, 3 in force"),
            std::string::npos);
  EXPECT_NE(error_of(head + "  - {at: 1s, respec: x.yaml, repartition: {Counter: 2}}\n")
                .find("one of repartition, respec, reconfigure, reshard_target and set_state"),
            std::string::npos);
}

TEST(ScenarioTest, AReshardNamesASinkWithAShardedTarget) {
  const std::string head = "name: t\nkind: pipeline\npipeline: " + std::string(ONCEFLOW_SOURCE_DIR) +
                           "/scenarios/pipelines/target_reshard.yaml\noperations:\n";
  auto s = load_scenario(write_temp(head + "  - {at: 1s, reshard_target: {sink: clicks_out, tablets: 5}}\n"));
  ASSERT_TRUE(s.has_value()) << s.error().message();
  ASSERT_EQ(s->pipeline.target_reshards.size(), 1u);
  EXPECT_EQ(s->pipeline.target_reshards[0].at_us, 1 * kSeconds);
  EXPECT_EQ(s->pipeline.target_reshards[0].sink, "clicks_out");
  EXPECT_EQ(s->pipeline.target_reshards[0].tablets, 5);
  EXPECT_NE(error_of(head + "  - {at: 1s, reshard_target: {sink: nowhere, tablets: 5}}\n")
                .find(":5: operations.reshard_target.sink: 'nowhere' is not a sink with a sharded target"),
            std::string::npos);
  EXPECT_NE(error_of(head + "  - {at: 1s, reshard_target: {sink: clicks_out, tablets: 0}}\n").find("must be in [1, 1024], got 0"),
            std::string::npos);
  EXPECT_NE(error_of(head + "  - {at: 1s, reshard_target: {sink: clicks_out}}\n")
                .find("operations.reshard_target.tablets: missing"),
            std::string::npos);
  EXPECT_NE(error_of(head + "  - {at: 1s, reshard_target: {sink: clicks_out, tablets: 2, shards: 3}}\n")
                .find("operations.reshard_target.shards: unknown key (known: sink, tablets)"),
            std::string::npos);
}

TEST(ScenarioTest, AReconfigureNamesSettingsThatChangeLive) {
  const std::string head = "name: t\nkind: pipeline\npipeline: " + std::string(ONCEFLOW_SOURCE_DIR) +
                           "/scenarios/pipelines/keyed_aggregation.yaml\noperations:\n";
  auto s = load_scenario(write_temp(head + "  - {at: 1s, reconfigure: {epoch_period: 20ms, epoch_batch_limit: 8}}\n"));
  ASSERT_TRUE(s.has_value()) << s.error().message();
  ASSERT_EQ(s->pipeline.reconfigures.size(), 1u);
  EXPECT_EQ(s->pipeline.reconfigures[0], std::make_pair(1 * kSeconds, std::string("epoch_period=20ms epoch_batch_limit=8")));
  EXPECT_NE(error_of(head + "  - {at: 1s, reconfigure: {lease_ttl: 1s}}\n")
                .find(":5: operations.reconfigure: no setting 'lease_ttl' changes live"),
            std::string::npos);
  EXPECT_NE(error_of(head + "  - {at: 1s, reconfigure: {epoch_batch_limit: 0}}\n").find("expected 1 to 1000000"),
            std::string::npos);
}

TEST(ScenarioTest, ParsesDurations) {
  EXPECT_EQ(*parse_duration("250us"), 250);
  EXPECT_EQ(*parse_duration("20ms"), 20'000);
  EXPECT_EQ(*parse_duration("1.5s"), 1'500'000);
  EXPECT_EQ(*parse_duration("42"), 42);
  EXPECT_FALSE(parse_duration("soon").has_value());
  EXPECT_FALSE(parse_duration("5 parsecs").has_value());
}

}  // namespace
}  // namespace onceflow::cli

// docs/scenarios.md documents every key the parser accepts: in prose or a table (`key`), or
// written as YAML in its examples ("  key: ..." or "{key: ...}").
TEST(ScenarioTest, TheDocDocumentsEveryKeyTheParserAccepts) {
  std::ifstream in(std::string(ONCEFLOW_SOURCE_DIR) + "/docs/scenarios.md");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const auto documented = [&](const std::string& key) {
    if (doc.find("`" + key + "`") != std::string::npos) return true;
    // As YAML: "key:" opening a line, or after "{" or ", " of a flow mapping.
    for (size_t at = doc.find(key + ":"); at != std::string::npos; at = doc.find(key + ":", at + 1)) {
      const size_t line = doc.rfind('\n', at) + 1;
      if (doc.find_first_not_of(' ', line) == at) return true;
      if (at > 0 && doc[at - 1] == '{') return true;
      if (at > 1 && doc.compare(at - 2, 2, ", ") == 0) return true;
    }
    return false;
  };
  size_t keys = 0;
  for (const auto& [section, allowed] : onceflow::cli::scenario_keys()) {
    for (const std::string& key : allowed) {
      ++keys;
      EXPECT_TRUE(documented(key)) << "the scenario key " << (section.empty() ? "" : section + ".") << key
                                   << " is accepted but docs/scenarios.md does not document it";
    }
  }
  EXPECT_GE(keys, 50u);  // the table was read at all
}

#include "checkers/kernel_checks.h"
#include "checkers/pipeline_checks.h"
#include "core/engine.h"

namespace onceflow::cli {
namespace {

// Every bug switch names the checks that must catch it (onceflow mutants counts no other
// failure as its catch), and they are checks that exist.
TEST(BugSwitchCatchersTest, EverySwitchNamesChecksThatExist) {
  std::set<std::string> checks;
  for (const auto& c : checkers::all_pipeline_checkers()) checks.emplace(c->name());
  for (const auto& c : checkers::all_kernel_checkers()) checks.emplace(c->name());
  for (const std::string& bug : BugSwitches::names()) {
    const std::vector<std::string> catchers = BugSwitches::catchers(bug);
    EXPECT_FALSE(catchers.empty()) << bug;
    for (const std::string& c : catchers) EXPECT_EQ(checks.count(c), 1u) << bug << " names check '" << c << "'";
  }
  EXPECT_TRUE(BugSwitches::catchers("no-such-switch").empty());
}

}  // namespace
}  // namespace onceflow::cli

namespace onceflow::cli {
namespace {

// `catches:` names onceflow's bug switches or the program's own (ONCEFLOW_BUG): the reader
// takes any well-formed name, and the program, which knows its own, refuses one it lacks.
// (A program's own switch was refused as unknown: the reader has no registry.)
TEST(ScenarioTest, CatchesNamesOnceflowsBugSwitchesOrTheProgramsOwn) {
  const std::string head = "name: c\nkind: pipeline\npipeline: " + std::string(ONCEFLOW_SOURCE_DIR) +
                           "/scenarios/pipelines/keyed_aggregation.yaml\n";
  EXPECT_NE(error_of(head + "catches: [Not_A_Name]\n").find("'Not_A_Name' is no bug switch name"), std::string::npos);
  auto s = load_scenario(write_temp(head + "catches: [stop-without-drain, my-own-bug]\n"));
  ASSERT_TRUE(s.has_value()) << s.error().message();
  ComputationRegistry registry;
  builtin::register_all(registry);
  try {
    check_functions(registry, *s);
    ADD_FAILURE() << "a switch the program lacks was taken";
  } catch (const UsageError& e) {
    EXPECT_NE(e.message.find("catches: unknown bug switch 'my-own-bug'"), std::string::npos) << e.message;
  }
  registry.add_bug("my-own-bug", "a mistake of the program's own");
  EXPECT_NO_THROW(check_functions(registry, *s));
}

}  // namespace
}  // namespace onceflow::cli
