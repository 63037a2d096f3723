// The user's code under test (core/user_code.h): assertions, fault points, bug switches and
// checks of the user's own, and calls to the machine's clock and randomness caught.
#include "core/user_code.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <algorithm>
#include <map>
#include <random>
#include <sys/random.h>
#include <cstdlib>

#include "checkers/history.h"
#include "core/builtin.h"
#include "cli/cli.h"
#include "testing/testing.h"
#include "tests/scenario_runs.h"

namespace onceflow::testing {
namespace {

// Counts each key's words, as a user would instrument it.
class CountWords final : public ProcessFunction {
 public:
  void init(const InitContext& init) override { init.init_state_client(count_, "count"); }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    int64_t n = std::stoll(count_.get(m.key).value_or("0")) + 1;
    if (ONCEFLOW_BUG("count-twice")) n += 1;
    if (ONCEFLOW_BUG("count-in-two-steps")) n = std::stoll(count_.get(m.key).value_or("0")) + (n - n) + 1;
    ONCEFLOW_ALWAYS(n >= 1, "a count is at least one", fmt::format("count {}", n));
    ONCEFLOW_SOMETIMES(n >= 3, "a key is counted three times");
    ONCEFLOW_SOMETIMES(n > 1'000'000, "a key is counted a million times");
    ONCEFLOW_REACHABLE("a word is counted");
    count_.set(m.key, std::to_string(n));
    if (ONCEFLOW_BUGGIFY("the count goes out twice")) out.add_message(m.key, fmt::format("again {}", n));
    out.add_message(m.key, fmt::format("count {}", n));
  }

 private:
  StateClient count_;
};

// CountWords with a catch-all around a state read the engine did not fetch ahead (a row no
// key has), as extending.md warns against: it also catches the simulator's unwinding of a
// crashed node's calls.
class CountsCatchingEverything final : public ProcessFunction {
 public:
  void init(const InitContext& init) override { init.init_state_client(count_, "count"); }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    try {
      (void)count_.get(m.key + 1'000'000);
    } catch (...) {
    }
    const int64_t n = std::stoll(count_.get(m.key).value_or("0")) + 1;
    count_.set(m.key, std::to_string(n));
    out.add_message(m.key, fmt::format("count {}", n));
  }

 private:
  StateClient count_;
};

class ShortWordsOnly final : public ProcessFunction {
 public:
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    ONCEFLOW_ALWAYS(m.payload.size() <= 3, "every word is short", fmt::format("word '{}'", m.payload));
    out.add_message(m.key, m.payload);
  }
};

class NoKeyFive final : public ProcessFunction {
 public:
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    if (m.key == 5) ONCEFLOW_UNREACHABLE("key five is never seen", fmt::format("payload {}", m.payload));
    out.add_message(m.key, m.payload);
  }
};

// A rare path that loses a word, reached only through a fault point of the user's own.
class LosesWordsOnTheSlowPath final : public ProcessFunction {
 public:
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    if (ONCEFLOW_BUGGIFY("the slow path")) {
      ONCEFLOW_UNREACHABLE("the slow path drops a word", m.payload);
      return;
    }
    out.add_message(m.key, m.payload);
  }
};

// Reads the machine's clock and randomness, which differ on every attempt.
class StampsTheMachine final : public ProcessFunction {
 public:
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    std::random_device device;
    const auto now = std::chrono::system_clock::now().time_since_epoch().count();
    unsigned char entropy[4] = {};
    (void)getrandom(entropy, sizeof entropy, 0);
    out.add_message(m.key, fmt::format("{} at {} / {} lucky {} {} {}", m.payload, std::time(nullptr), now, device(),
                                       std::rand(), entropy[0]));
  }
};

// The user's invariant: each key's count is the number of its inputs.
checkers::Verdict counts_match_inputs(const checkers::PipelineHistory& h) {
  const auto table = h.tables.find("state/LongestSoFar/count");
  if (table == h.tables.end()) return checkers::Verdict::not_applicable("", "nothing counted");
  std::map<std::string, int64_t> inputs;
  for (const auto& m : h.source_inputs) ++inputs[fmt::format("{:016x}", m.key)];
  for (const auto& [key, n] : inputs) {
    const auto it = table->second.find(key);
    const int64_t counted = it == table->second.end() ? 0 : std::stoll(it->second);
    if (counted != n) return checkers::Verdict::fail("", fmt::format("key {}: counted {}, {} inputs", key, counted, n));
  }
  return checkers::Verdict::pass("");
}

ComputationRegistry user_registry() {
  ComputationRegistry r = builtin_registry();
  r.add("CountWords", [] { return std::make_unique<CountWords>(); });
  r.add("ShortWordsOnly", [] { return std::make_unique<ShortWordsOnly>(); });
  r.add("CountsCatchingEverything", [] { return std::make_unique<CountsCatchingEverything>(); });
  r.add("NoKeyFive", [] { return std::make_unique<NoKeyFive>(); });
  r.add("StampsTheMachine", [] { return std::make_unique<StampsTheMachine>(); });
  r.add("LosesWordsOnTheSlowPath", [] { return std::make_unique<LosesWordsOnTheSlowPath>(); });
  r.add_bug("count-twice", "each word counts twice");
  r.add_check("counts match inputs", counts_match_inputs);
  r.add_check("a check that throws", [](const checkers::PipelineHistory& h) -> checkers::Verdict {
    if (h.seed == 99) throw std::runtime_error("no such table");
    return checkers::Verdict::pass("");
  });
  return r;
}

simulated::PipelineRunOptions with_function(const std::string& function, uint64_t seed, bool swarm) {
  simulated::PipelineRunOptions o = options_of("user_longest_so_far.yaml");
  o.spec.computations.front().processing_function = function;
  o.seed = seed;
  o.swarm = swarm;
  return o;
}

const checkers::Verdict* verdict(const simulated::RunOutcome& r, const std::string& check) {
  for (const auto& v : r.verdicts) {
    if (v.check == check) return &v;
  }
  return nullptr;
}

const simulated::UserSiteCount* site(const simulated::RunOutcome& r, const std::string& name) {
  for (const auto& s : r.user_sites) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

TEST(UserCodeTest, AFalseAlwaysFailsTheRunNamingTheAssertionComputationJobEpochAndMessage) {
  const ComputationRegistry registry = user_registry();
  const simulated::RunOutcome r = simulated::run_pipeline(with_function("ShortWordsOnly", 1, false), registry).outcome;
  EXPECT_FALSE(r.passed);
  const checkers::Verdict* v = verdict(r, "assertions");
  ASSERT_NE(v, nullptr);
  EXPECT_FALSE(v->passed);
  for (const char* part : {"always \"every word is short\" false", "computation LongestSoFar", "job computation/LongestSoFar/",
                           "epoch ", "message ", "word '"}) {
    EXPECT_NE(v->detail.find(part), std::string::npos) << part << " in " << v->detail;
  }
  // The engine did its part: only the assertion fails.
  for (const auto& other : r.verdicts) {
    if (other.check != "assertions") {
      EXPECT_TRUE(other.passed) << other.check << ": " << other.detail;
    }
  }
}

// A store read that failed answers "no such row" to the function, and the engine gives the
// epoch up: what the function asserts after it is not counted (an assertion that state set
// earlier is still there would fail on what it was told, not on the store).
TEST(UserCodeTest, AnAssertionAfterAFailedStoreReadIsNotCounted) {
  struct Counting final : UserCodeHooks {
    int assertions = 0;
    void assertion(uint32_t, bool, std::string_view, const UserCall&) override { ++assertions; }
    bool buggify(uint32_t, const UserCall&) override { return false; }
    bool bug(uint32_t) override { return false; }
    bool simulated() const override { return true; }
    void nondeterministic(std::string_view, const UserCall&) override {}
  } hooks;
  const user_code::HooksScope with_hooks(&hooks);
  Status reads = Status::ok();
  UserCall call{"Window", "computation/Window/0", 3, 0, 7, true, 0, 1, nullptr, false};
  call.reads = &reads;
  const auto run = [&] {
    const user_code::CallScope scope(call);
    ONCEFLOW_ALWAYS(false, "an open window's state is there when its timer fires");
  };
  run();
  EXPECT_EQ(hooks.assertions, 1);
  reads = Status::unavailable("read timed out");
  run();
  EXPECT_EQ(hooks.assertions, 1) << "counted after a failed read";
}

// A function that swallows the unwinding of its crashed node is told (a warning the run lists,
// and explore tallies), and the crash stands; a function that lets it through is not told.
TEST(UserCodeTest, AFunctionThatSwallowsItsNodesCrashIsWarnedOf) {
  const ComputationRegistry registry = user_registry();
  const auto swallowed = [](const simulated::RunOutcome& r) {
    return std::any_of(r.warnings.begin(), r.warnings.end(),
                       [](const std::string& w) { return w.starts_with("UserCodeSwallowedCrash Computation=LongestSoFar"); });
  };
  int warned = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const simulated::RunOutcome catching = simulated::run_pipeline(with_function("CountsCatchingEverything", seed, true), registry).outcome;
    EXPECT_TRUE(catching.passed) << "seed " << seed;
    warned += swallowed(catching) ? 1 : 0;
    const simulated::RunOutcome letting = simulated::run_pipeline(with_function("CountWords", seed, true), registry).outcome;
    EXPECT_FALSE(swallowed(letting)) << "seed " << seed;
  }
  EXPECT_GT(warned, 0);
}

TEST(UserCodeTest, AReachedUnreachableFailsTheRun) {
  const ComputationRegistry registry = user_registry();
  const simulated::RunOutcome r = simulated::run_pipeline(with_function("NoKeyFive", 1, false), registry).outcome;
  const checkers::Verdict* v = verdict(r, "assertions");
  ASSERT_NE(v, nullptr);
  EXPECT_FALSE(v->passed);
  EXPECT_NE(v->detail.find("unreachable \"key five is never seen\" reached"), std::string::npos) << v->detail;
  EXPECT_NE(v->detail.find("(key 5)"), std::string::npos) << v->detail;
}

TEST(UserCodeTest, AnInstrumentedCorrectComputationPassesAndItsAssertionsAreCounted) {
  const ComputationRegistry registry = user_registry();
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const simulated::RunOutcome r = simulated::run_pipeline(with_function("CountWords", seed, true), registry).outcome;
    for (const auto& v : r.verdicts) EXPECT_TRUE(v.passed) << "seed " << seed << ": " << v.check << ": " << v.detail;
    ASSERT_NE(verdict(r, "counts match inputs"), nullptr);
    EXPECT_TRUE(verdict(r, "counts match inputs")->applicable);
    const auto* three = site(r, "a key is counted three times");
    const auto* million = site(r, "a key is counted a million times");
    const auto* reached = site(r, "a word is counted");
    ASSERT_TRUE(three && million && reached);
    EXPECT_EQ(three->kind, "sometimes");
    EXPECT_GT(three->held, 0u);
    EXPECT_GT(million->evaluated, 0u);
    EXPECT_EQ(million->held, 0u);
    EXPECT_GE(reached->evaluated, 400u);  // every input at least once (a retried epoch runs again)
    EXPECT_TRUE(verdict(r, "assertions")->passed);
  }
}

// explore --require-sometimes exits 1 when an assertion was never met, and its JUnit report
// says so in a case of its own (it said every scenario passed).
TEST(UserCodeTest, AnAssertionNeverMetFailsTheJUnitReportOfRequireSometimes) {
  const ComputationRegistry registry = user_registry();
  const std::string dir = ::testing::TempDir() + "/require_sometimes_";
  std::ofstream(dir + "pipeline.yaml")
      << "name: counts\nsources:\n  words: {type: queue, partitions: 2, output_stream: word}\n"
         "computations:\n  Count: {type: process_function, processing_function: CountWords, input_streams: [word], "
         "output_streams: [counted], partitions: 2}\nsinks:\n  out: {type: async_queue, input_stream: counted, partitions: 1}\n";
  std::ofstream(dir + "scenario.yaml") << "name: counts\nkind: pipeline\npipeline: " << dir
                                       << "pipeline.yaml\nworkload: {messages: 60, keys: 4, interval: 4ms}\n";
  const std::string xml = dir + "report.xml";
  std::vector<std::string> args = {"onceflow", "explore", dir + "scenario.yaml", "--seeds", "2", "--jobs", "1",
                                   "--require-sometimes", "--junit", xml};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  const int rc = cli_main(static_cast<int>(argv.size()), argv.data(), registry);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 1) << out;
  std::ifstream in(xml);
  const std::string report((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(report.find("tests=\"2\" failures=\"1\""), std::string::npos) << report;
  EXPECT_NE(report.find("type=\"coverage\">assertions never met: sometimes &quot;a key is counted a million times&quot;"),
            std::string::npos)
      << report;
}

TEST(UserCodeTest, BuggifyFiresOnSomeSeedsInSimulationAndTheReexecutionGetsTheSameAnswers) {
  const ComputationRegistry registry = user_registry();
  int fired_seeds = 0, quiet_seeds = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const simulated::PipelineRun run = simulated::run_pipeline(with_function("CountWords", seed, true), registry);
    // The outputs the site adds are the re-execution's too: every check holds.
    EXPECT_TRUE(run.outcome.passed) << "seed " << seed << ": " << run.outcome.verdicts.front().detail;
    const auto e = run.outcome.effects.find("buggify");
    if (e == run.outcome.effects.end()) {
      ++quiet_seeds;
      continue;
    }
    ++fired_seeds;
    EXPECT_GT(e->second.count, 0u) << "seed " << seed;
    bool again = false;
    for (const auto& epoch : run.history.epochs) {
      for (const auto& m : epoch.produced) again |= m.payload.rfind("again ", 0) == 0;
    }
    EXPECT_TRUE(again) << "seed " << seed << ": the site fired, and no output shows it";
  }
  EXPECT_GT(fired_seeds, 0);
  EXPECT_GT(quiet_seeds, 0);
  // Never without faults.
  const auto calm = simulated::run_pipeline(with_function("CountWords", 1, false), registry).outcome;
  EXPECT_EQ(calm.effects.count("buggify"), 0u);
}

TEST(UserCodeTest, AUserBugSwitchIsCaughtByTheUsersOwnCheckAndNotByTheEngines) {
  const ComputationRegistry registry = user_registry();
  simulated::PipelineRunOptions o = with_function("CountWords", 3, false);
  o.user_bugs = {"count-twice"};
  const simulated::RunOutcome r = simulated::run_pipeline(o, registry).outcome;
  const checkers::Verdict* v = verdict(r, "counts match inputs");
  ASSERT_NE(v, nullptr);
  EXPECT_FALSE(v->passed);
  EXPECT_NE(v->detail.find("counted"), std::string::npos) << v->detail;
  for (const auto& other : r.verdicts) {
    if (other.check != "counts match inputs") {
      EXPECT_TRUE(other.passed) << other.check << ": " << other.detail;
    }
  }
}

TEST(UserCodeTest, AUserCheckThatThrowsFailsNamingWhatItThrew) {
  const ComputationRegistry registry = user_registry();
  const simulated::RunOutcome r = simulated::run_pipeline(with_function("CountWords", 99, false), registry).outcome;
  const checkers::Verdict* v = verdict(r, "a check that throws");
  ASSERT_NE(v, nullptr);
  EXPECT_FALSE(v->passed);
  EXPECT_NE(v->detail.find("the check threw std::runtime_error \"no such table\""), std::string::npos) << v->detail;
}

TEST(UserCodeTest, TheMachinesClockAndRandomnessAreAnsweredFromTheSimulationAndFailDeterminism) {
  const ComputationRegistry registry = user_registry();
  const auto o = with_function("StampsTheMachine", 2, false);
  const simulated::RunOutcome a = simulated::run_pipeline(o, registry).outcome;
  const simulated::RunOutcome b = simulated::run_pipeline(o, registry).outcome;
  const checkers::Verdict* v = verdict(a, "determinism");
  ASSERT_NE(v, nullptr) << "a computation reading the machine's clock passed";
  EXPECT_FALSE(v->passed);
  for (const char* call : {"clock_gettime from computation LongestSoFar", "time from computation LongestSoFar",
                           "std::random_device from computation LongestSoFar", "rand from computation LongestSoFar",
                           "getrandom from computation LongestSoFar"}) {
    EXPECT_NE(v->detail.find(call), std::string::npos) << call << " in " << v->detail;
  }
  // The re-execution, which calls the function again, gets the same answers: only the
  // determinism check names the calls.
  ASSERT_NE(verdict(a, "re-execution"), nullptr);
  EXPECT_TRUE(verdict(a, "re-execution")->passed) << verdict(a, "re-execution")->detail;
  // Answered from the simulation: the run is the same every time, so it can be replayed.
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.content_hash, b.content_hash);
  // Outside a simulated call, the machine answers.
  EXPECT_GT(std::time(nullptr), 1'700'000'000);
}

// The slow-path pipeline's spec and a swarm scenario for it, written to the temp dir under the
// running test's name (ctest runs tests in parallel processes: each writes its own files).
struct SlowPathFiles {
  std::string spec, scenario;
};
SlowPathFiles slow_path_files() {
  const std::string dir =
      ::testing::TempDir() + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_";
  SlowPathFiles f{dir + "slow_path_pipeline.yaml", dir + "slow_path.yaml"};
  std::ifstream in(std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/pipelines/longest_so_far.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string from = "processing_function: LongestSoFar";
  text.replace(text.find(from), from.size(), "processing_function: LosesWordsOnTheSlowPath");
  std::ofstream(f.spec) << text;
  std::ofstream(f.scenario) << "name: slow-path\nkind: pipeline\npipeline: " << f.spec
                            << "\nworkload: {messages: 200, keys: 8, interval: 5ms}\nfaults: {swarm: true, heal_at: 3s}\n";
  return f;
}

int run_cli(const ComputationRegistry& registry, std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return cli_main(static_cast<int>(argv.size()), argv.data(), registry);
}

// shrink keeps the user's fault points a failure needs, pinned by name, like the engine's.
// mutants holds a harmless switch to every seed passing: one that computes the same holds, one
// that does not (count-twice, declared harmless by mistake) fails mutants naming its seed.
TEST(UserCodeTest, MutantsWantsAHarmlessSwitchGreenAndFailsOneThatIsNot) {
  const std::string dir = ::testing::TempDir() + "/harmless_switches";
  std::filesystem::create_directories(dir);
  std::ifstream in(std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/pipelines/longest_so_far.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string from = "processing_function: LongestSoFar";
  text.replace(text.find(from), from.size(), "processing_function: CountWords");
  std::ofstream(dir + "/count_words_pipeline.yaml") << text;
  std::ofstream(dir + "/count_words.yaml") << "name: count-words\nkind: pipeline\npipeline: count_words_pipeline.yaml\n"
                                              "workload: {messages: 100, keys: 4, interval: 5ms}\n"
                                              "faults: {swarm: true, heal_at: 2s}\n";
  ComputationRegistry registry = builtin_registry();
  registry.add("CountWords", [] { return std::make_unique<CountWords>(); });
  registry.add_check("counts match inputs", counts_match_inputs);
  registry.add_harmless_switch("count-in-two-steps", "reads the count again to add one");
  EXPECT_EQ(run_cli(registry, {"prog", "mutants", "--scenarios", dir, "--max-seeds", "5"}), 0);
  registry.add_harmless_switch("count-twice", "each word counts twice, declared harmless by mistake");
  EXPECT_EQ(run_cli(registry, {"prog", "mutants", "--scenarios", dir, "--max-seeds", "5"}), 1);
  EXPECT_THROW(registry.add_harmless_switch("count-twice", "again"), std::invalid_argument);
}

// A scenario's buggify list names the program's sites: a name it has no site of (a typo) is
// bad input naming the sites it has, not a run that silently tests no fault point.
TEST(UserCodeTest, ABuggifyNameTheProgramHasNoSiteOfIsRefused) {
  const SlowPathFiles files = slow_path_files();
  const auto with = [&](const std::string& names) {
    const std::string path = files.scenario + "." + std::to_string(names.size()) + ".yaml";
    std::ofstream(path) << "name: slow-path\nkind: pipeline\npipeline: " << files.spec
                        << "\nworkload: {messages: 20, keys: 2, interval: 5ms}\nfaults: {swarm: false, plan: [], "
                           "buggify: ["
                        << names << "]}\n";
    return cli::load_scenario(path);
  };
  ASSERT_TRUE(with("the slow path").has_value());
  const auto typo = with("the slow pth");
  ASSERT_FALSE(typo.has_value());
  EXPECT_NE(typo.error().message().find("faults.buggify: no ONCEFLOW_BUGGIFY site of this program is named 'the slow "
                                        "pth'"),
            std::string::npos)
      << typo.error().message();
  EXPECT_NE(typo.error().message().find("'the slow path'"), std::string::npos) << typo.error().message();
}

TEST(UserCodeTest, ShrinkPinsTheBuggifySitesAFailureNeeds) {
  const ComputationRegistry registry = user_registry();
  const SlowPathFiles files = slow_path_files();
  const std::string& scenario = files.scenario;
  const std::string out = ::testing::TempDir() + "/slow_path_shrunk.yaml";
  uint64_t failing = 0;
  for (uint64_t seed = 1; seed <= 40 && failing == 0; ++seed) {
    simulated::PipelineRunOptions o = cli::load_scenario(scenario)->pipeline;
    o.seed = seed;
    o.swarm = true;
    if (!simulated::run_pipeline(o, registry).outcome.passed) failing = seed;
  }
  ASSERT_NE(failing, 0u) << "no seed enabled the slow path in 40";
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run_cli(registry, {"prog", "shrink", scenario, "--seed", std::to_string(failing), "--out", out}), 1);
  const std::string said = ::testing::internal::GetCapturedStdout();
  // The crashes' "of them kept" ends the crashes' line, not the fault points' one.
  EXPECT_NE(said.find("user fault points (ONCEFLOW_BUGGIFY) kept: 1\n"), std::string::npos) << said;
  std::ifstream in(out);
  const std::string shrunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(shrunk.find("buggify: [the slow path]"), std::string::npos) << shrunk;
  const auto again = cli::load_scenario(out);
  ASSERT_TRUE(again.has_value()) << again.error().message();
  simulated::PipelineRunOptions o = again->pipeline;
  o.seed = failing;
  o.swarm = false;
  const simulated::RunOutcome r = simulated::run_pipeline(o, registry).outcome;
  const checkers::Verdict* v = verdict(r, "assertions");
  ASSERT_NE(v, nullptr);
  EXPECT_FALSE(v->passed) << "the shrunk scenario does not fail";
  // Without the pinned site the failure is gone: the site is what it needs.
  o.buggify_sites = std::set<std::string>{};
  EXPECT_TRUE(verdict(simulated::run_pipeline(o, registry).outcome, "assertions")->passed);
}

// A small case of the slow-path pipeline at `seed`, no faults scripted.
testing::PipelineCase slow_path_case(const SlowPathFiles& files, uint64_t seed) {
  testing::PipelineCase c;
  c.spec_path = files.spec;
  c.workload.messages = 100;
  c.workload.keys = 4;
  c.plan.heal_at_us = 3 * kSeconds;
  c.seed = seed;
  return c;
}

// The testing helpers fire the program's fault points too, and a failing case's file pins the
// sites that fired, so its replay line reproduces it.
TEST(UserCodeTest, APropertyCaseFiresBuggifyAndItsReplayFileReproducesIt) {
  const ComputationRegistry registry = user_registry();
  const SlowPathFiles files = slow_path_files();
  ::setenv("ONCEFLOW_REPRO_DIR", ::testing::TempDir().c_str(), 1);
  testing::CaseResult failed;
  uint64_t seed = 0;
  for (uint64_t s = 1; s <= 60 && failed.replay_file.empty(); ++s) {
    const testing::CaseResult r = testing::run_case(slow_path_case(files, s), registry, "slow-path-case");
    if (!r.passed) {
      failed = r;
      seed = s;
    }
  }
  ::unsetenv("ONCEFLOW_REPRO_DIR");
  ASSERT_FALSE(failed.replay_file.empty()) << "no case in 60 seeds fired the slow path";
  EXPECT_NE(failed.failures.find("the slow path drops a word"), std::string::npos) << failed.failures;
  std::ifstream in(failed.replay_file);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(file.find("buggify: [the slow path]"), std::string::npos) << file;
  EXPECT_EQ(run_cli(registry, {"prog", "run", failed.replay_file, "--seed", std::to_string(seed)}), 1);
  // Without the program's fault points the same case passes.
  testing::PipelineCase c = slow_path_case(files, seed);
  c.buggify = false;
  EXPECT_TRUE(testing::run_case(c, registry, "slow-path-case-quiet").passed);
}

// A site's answers depend on its own calls only: pinning or dropping another site (as shrink
// does) leaves them as they were.
TEST(UserCodeTest, ASitesBuggifyAnswersDoNotDependOnOtherSites) {
  const uint32_t a = user_code::register_site("test: site a", UserSiteKind::kBuggify, __FILE__, __LINE__);
  const uint32_t b = user_code::register_site("test: site b", UserSiteKind::kBuggify, __FILE__, __LINE__);
  std::map<uint32_t, uint32_t> alone_calls, mixed_calls;
  const UserCall alone{"C", "computation/C/0", 1, 7, 7, false, 0, 99, &alone_calls, false};
  const UserCall mixed{"C", "computation/C/0", 1, 7, 7, false, 0, 99, &mixed_calls, false};
  std::vector<bool> by_itself, among_others;
  for (int i = 0; i < 64; ++i) {
    by_itself.push_back(user_code::buggify_fires(a, alone));
    (void)user_code::buggify_fires(b, mixed);
    among_others.push_back(user_code::buggify_fires(a, mixed));
  }
  EXPECT_EQ(by_itself, among_others);
  const auto fired = std::count(by_itself.begin(), by_itself.end(), true);
  EXPECT_GT(fired, 4);   // about a quarter of 64
  EXPECT_LT(fired, 32);
}

TEST(UserCodeTest, RegisteringABadCheckOrBugSwitchIsRefused) {
  ComputationRegistry r;
  r.add_bug("ok-name", "");
  EXPECT_THROW(r.add_bug("ok-name", ""), std::invalid_argument);
  EXPECT_THROW(r.add_bug("Bad Name", ""), std::invalid_argument);
  r.add_check("mine", counts_match_inputs);
  EXPECT_THROW(r.add_check("mine", counts_match_inputs), std::invalid_argument);
  EXPECT_THROW(r.add_check("delivery", counts_match_inputs), std::invalid_argument);
  EXPECT_THROW(r.add_check("determinism", counts_match_inputs), std::invalid_argument);
  EXPECT_THROW(r.add_bug("no-lease-prerequisite", ""), std::invalid_argument);
}

// A function under a name a built-in has (or one added before) is refused, naming it: it used
// to stop the program on an assert, or, without asserts, keep the built-in in its place.
TEST(UserCodeTest, AFunctionUnderATakenNameIsRefusedNamingIt) {
  ComputationRegistry r;
  builtin::register_all(r);
  try {
    r.add("Normalize", [] { return std::unique_ptr<ProcessFunction>(); });
    ADD_FAILURE() << "a built-in's name was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'Normalize' is registered already"), std::string::npos) << e.what();
  }
  r.add("Mine", [] { return std::unique_ptr<ProcessFunction>(); });
  EXPECT_THROW(r.add("Mine", [] { return std::unique_ptr<ProcessFunction>(); }), std::invalid_argument);
  EXPECT_THROW(r.add("", [] { return std::unique_ptr<ProcessFunction>(); }), std::invalid_argument);
}

}  // namespace
}  // namespace onceflow::testing
