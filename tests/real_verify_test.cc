// onceflow real --verify holds a run to its own committed history: a user's order-dependent
// computation passes, and damage to what the run delivered, to its state or to its recorded
// history fails the check that owns it.
#include "real/verify.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/builtin.h"
#include "core/reexecute.h"
#include "core/user_code.h"
#include "real/data_dir.h"
#include "real/run.h"
#include "real/wall_clock.h"
#include "tests/temp_dir.h"

namespace onceflow::real {
namespace {

struct Verified {
  int rc = -1;
  std::string json;
};

class RealVerifyTest : public ::testing::Test {
 protected:
  void run_pipeline(const std::string& name, uint64_t messages, const std::string& bug = "") {
    path_ = std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/pipelines/" + name + ".yaml";
    auto parsed = load_pipeline_spec(path_);
    ASSERT_TRUE(parsed.has_value()) << parsed.error().message();
    spec_ = *parsed;
    builtin::register_all(registry_);
    ASSERT_EQ(life(messages, bug), 0);
  }
  // Another life of the run on the same store; its exit code.
  int life(uint64_t messages, const std::string& bug = "", bool verify = false) {
    RealOptions o;
    o.data_dir = dir_.str();
    o.messages = messages;
    o.progress = false;
    o.bug = bug;
    o.verify = verify;
    o.keys = keys_;
    o.seed = seed_;
    return run_real(path_, spec_, registry_, o);
  }
  // A pipeline of the test's own: `yaml` written as `file` in a temporary folder the fixture
  // keeps, loaded, and `functions` registered.
  void use_spec(const std::string& file, const std::string& yaml,
                std::vector<std::pair<std::string, ProcessFunctionFactory>> functions) {
    std::filesystem::create_directories(spec_dir_.str());
    path_ = spec_dir_.str() + "/" + file;
    std::ofstream(path_) << yaml;
    auto parsed = load_pipeline_spec(path_);
    ASSERT_TRUE(parsed.has_value()) << parsed.error().message();
    spec_ = *parsed;
    for (auto& [name, factory] : functions) registry_.add(name, std::move(factory));
  }
  testing::TempDir spec_dir_;
  int keys_ = 16;      // life()'s --keys
  uint64_t seed_ = 1;  // life()'s --seed
  // Runs `damage` on the stopped run's store, then verifies it.
  template <typename Damage>
  Verified verify_after(Damage damage, const std::string& bug = "") {
    WallClock clock;
    auto store = open_data_dir(dir_.str(), spec_, clock);
    EXPECT_TRUE(store.has_value()) << store.error().message();
    damage(**store);
    ::testing::internal::CaptureStdout();
    VerifyOptions options;
    options.bug = bug;
    auto rc = verify_run(spec_, registry_, **store, KafkaConfig{}, options);
    Verified out{rc.has_value() ? *rc : 2, ::testing::internal::GetCapturedStdout()};
    return out;
  }
  static void erase_first(LevelDbStore& store, const std::string& table) {
    auto rows = store.dump(table);
    ASSERT_TRUE(rows.has_value() && !rows->empty()) << table;
    auto tx = store.begin();
    tx->erase(table, rows->front().key);
    ASSERT_TRUE(store.commit(*tx, {}).has_value());
  }

  testing::TempDir dir_;
  std::string path_;
  PipelineSpec spec_;
  ComputationRegistry registry_;
};

// A user's computation that throws while a service it calls is down (its first three calls,
// in this process): each throw gives the epoch up and the job retries it; the run drains, says
// on stderr what threw and in --stats how many calls did, and verifies.
int g_flaky_calls_left = 0;
class FlakyCounter final : public ProcessFunction {
 public:
  explicit FlakyCounter(std::unique_ptr<ProcessFunction> inner) : inner_(std::move(inner)) {}
  void init(const InitContext& context) override { inner_->init(context); }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext& context) override {
    if (g_flaky_calls_left > 0) {
      --g_flaky_calls_left;
      throw std::runtime_error("the rates service is down");
    }
    inner_->process_message(m, out, context);
  }

 private:
  std::unique_ptr<ProcessFunction> inner_;
};

TEST_F(RealVerifyTest, AComputationThatThrowsForAWhileIsRetriedCountedAndVerified) {
  path_ = std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/pipelines/keyed_aggregation.yaml";
  auto parsed = load_pipeline_spec(path_);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message();
  spec_ = *parsed;
  builtin::register_all(registry_);
  registry_.add("FlakyCounter", [this] { return std::make_unique<FlakyCounter>(registry_.create("Counter")); });
  for (ComputationSpec& c : spec_.computations) {
    if (c.name == "Counter") c.processing_function = "FlakyCounter";
  }
  g_flaky_calls_left = 3;
  RealOptions o;
  o.data_dir = dir_.str();
  o.messages = 500;
  o.progress = false;
  o.stats = true;
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int rc = run_real(path_, spec_, registry_, o);
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(rc, 0) << err;
  EXPECT_EQ(g_flaky_calls_left, 0);
  EXPECT_NE(out.find("\"computation_exceptions\":3"), std::string::npos) << out;
  EXPECT_NE(err.find("threw std::runtime_error \"the rates service is down\""), std::string::npos) << err;
  EXPECT_NE(err.find("the epoch is given up and retried"), std::string::npos) << err;
  const Verified v = verify_after([](LevelDbStore&) {});
  EXPECT_EQ(v.rc, 0) << v.json;
}

// A pipeline of the tests' own: the queue source `events` (2 partitions), then each stage in
// order (function, the stream it writes; 2 partitions, reading the stream before it), then the
// sink `out` on the last stream.
std::string chain_spec(const std::string& name, const std::vector<std::pair<std::string, std::string>>& stages) {
  std::string yaml = "name: " + name + "\nsources:\n  events: {type: queue, partitions: 2, output_stream: event}\n" +
                     "computations:\n";
  std::string stream = "event";
  for (const auto& [function, output] : stages) {
    yaml += fmt::format("  {0}: {{type: process_function, processing_function: {0}, input_streams: [{1}], "
                        "output_streams: [{2}], partitions: 2}}\n",
                        function, stream, output);
    stream = output;
  }
  return yaml + "sinks:\n  out: {type: async_queue, input_stream: " + stream + ", partitions: 1}\n";
}

// A first stage's mistake that a later stage hides reaches no sink: Stamp numbers its outputs
// from a counter all its jobs share (the calls' interleaving, which no re-execution repeats),
// and Strip drops the number. The run records each epoch's outputs by digest, so --verify
// names the first stage's epoch; stamped with a constant instead, the run verifies.
int g_stamped = 0;
bool g_stamp_counts = false;
class Stamp final : public ProcessFunction {
 public:
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    out.add_message(m.key, fmt::format("{}|{}", m.payload, g_stamp_counts ? ++g_stamped : 0));
  }
};
class Strip final : public ProcessFunction {
 public:
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    out.add_message(m.key, m.payload.substr(0, m.payload.rfind('|')));
  }
};

class RealVerifyDigestTest : public RealVerifyTest, public ::testing::WithParamInterface<bool> {};

TEST_P(RealVerifyDigestTest, AnEarlierStagesOutputsAreComparedByTheirDigest) {
  g_stamp_counts = GetParam();
  ASSERT_NO_FATAL_FAILURE(use_spec("stamped.yaml", chain_spec("stamped", {{"Stamp", "stamped"}, {"Strip", "stripped"}}),
           {{"Stamp", [] { return std::make_unique<Stamp>(); }}, {"Strip", [] { return std::make_unique<Strip>(); }}}));
  ASSERT_EQ(life(2000), 0);
  const Verified v = verify_after([](LevelDbStore&) {});
  if (!g_stamp_counts) {
    EXPECT_EQ(v.rc, 0) << v.json;
    EXPECT_NE(v.json.find("committed the outputs their re-execution gives (by digest)"), std::string::npos) << v.json;
    EXPECT_EQ(v.json.find("(the others kept no digest"), std::string::npos) << v.json;
    return;
  }
  EXPECT_EQ(v.rc, 1) << v.json;
  EXPECT_NE(v.json.find("computation Stamp (job computation/Stamp/"), std::string::npos) << v.json;
  EXPECT_NE(v.json.find("committed outputs other than the"), std::string::npos) << v.json;
  // The sink got what the re-execution gives it: nothing else fails.
  const nlohmann::json verdict = nlohmann::json::parse(v.json);
  for (const auto& check : verdict.at("checks")) {
    if (check.at("name") != "re-execution") {
      EXPECT_NE(check.at("verdict"), "fail") << check.dump();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CounterOrConstant, RealVerifyDigestTest, ::testing::Bool());

// The same mistake with no stage to hide it: the sink holds the counter's outputs, which the
// re-execution does not give, so delivery fails beside re-execution, and --verify says which
// to read first, as `run` does.
TEST_F(RealVerifyTest, AReexecutionFailureOthersFollowFromIsToldToBeReadFirst) {
  g_stamp_counts = true;
  ASSERT_NO_FATAL_FAILURE(use_spec("stamped_out.yaml", chain_spec("stamped_out", {{"Stamp", "stamped"}}),
           {{"Stamp", [] { return std::make_unique<Stamp>(); }}}));
  ASSERT_EQ(life(500), 0);
  const Verified v = verify_after([](LevelDbStore&) {});
  EXPECT_EQ(v.rc, 1) << v.json;
  const nlohmann::json verdict = nlohmann::json::parse(v.json);
  ASSERT_TRUE(verdict.contains("read_first")) << v.json;
  const std::string first = verdict.at("read_first");
  EXPECT_TRUE(first.starts_with("re-execution: ")) << first;
  EXPECT_NE(first.find("the delivery failures may follow from it"), std::string::npos) << first;
}

// The program's assertions hold in every committed epoch, as the re-execution evaluates them:
// a failed `always` fails --verify's `assertions` (it passed, every other check green, the
// failure said only on the run's stderr: a user's probe); holding, it passes with a count.
bool g_words_are_short = false;
class ShortWords final : public ProcessFunction {
 public:
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    ONCEFLOW_ALWAYS(!g_words_are_short || m.payload.size() <= 5, "a word is at most 5 letters",
                    fmt::format("{} has {}", m.payload, m.payload.size()));
    out.add_message(m.key, m.payload);
  }
};

class RealVerifyAssertionsTest : public RealVerifyTest, public ::testing::WithParamInterface<bool> {};

TEST_P(RealVerifyAssertionsTest, AFailedAssertionInACommittedEpochFailsVerify) {
  g_words_are_short = GetParam();
  ASSERT_NO_FATAL_FAILURE(use_spec("short_words.yaml", chain_spec("short-words", {{"ShortWords", "words"}}),
           {{"ShortWords", [] { return std::make_unique<ShortWords>(); }}}));
  ::testing::internal::CaptureStderr();
  const int rc = life(2000);
  (void)::testing::internal::GetCapturedStderr();
  ASSERT_EQ(rc, 0);
  const Verified v = verify_after([](LevelDbStore&) {});
  const nlohmann::json verdict = nlohmann::json::parse(v.json);
  const auto checks = verdict.at("checks");
  const auto it = std::find_if(checks.begin(), checks.end(), [](const auto& c) { return c.at("name") == "assertions"; });
  ASSERT_NE(it, checks.end()) << v.json;
  if (!g_words_are_short) {
    EXPECT_EQ(v.rc, 0) << v.json;
    EXPECT_EQ(it->at("verdict"), "pass") << v.json;
    EXPECT_NE(it->at("detail").get<std::string>().find("held over 2000 evaluations"), std::string::npos) << v.json;
    return;
  }
  EXPECT_EQ(v.rc, 1) << v.json;
  EXPECT_EQ(it->at("verdict"), "fail") << v.json;
  const std::string detail = it->at("detail");
  EXPECT_NE(detail.find("always \"a word is at most 5 letters\" false"), std::string::npos) << detail;
  EXPECT_NE(detail.find("first in computation ShortWords, job computation/ShortWords/"), std::string::npos) << detail;
}

INSTANTIATE_TEST_SUITE_P(HoldingOrNot, RealVerifyAssertionsTest, ::testing::Bool());

TEST_F(RealVerifyTest, AnOrderDependentComputationPasses) {
  run_pipeline("longest_so_far", 3000);
  const Verified v = verify_after([](LevelDbStore&) {});
  EXPECT_EQ(v.rc, 0) << v.json;
  EXPECT_NE(v.json.find("\"oracle\": \"the committed history, re-executed\""), std::string::npos) << v.json;
}

// A timer's output carries the timer's event time, which no input of its epoch may have: the
// history rows' fired timers go into the record the checks read (consumption failed on every
// Escalation batch before they did).
TEST_F(RealVerifyTest, ATimersOutputPassesWithItsTimersEventTime) {
  run_pipeline("escalation", 3000);
  const Verified v = verify_after([](LevelDbStore&) {});
  EXPECT_EQ(v.rc, 0) << v.json;
  EXPECT_NE(v.json.find("\"name\": \"consumption\""), std::string::npos) << v.json;
}

// A queue sink with at_most_once_strategy promises at most once, as in the simulator: the
// messages its full in-memory queue gave up (counted by the run) are in doubt, not lost. It
// was held to exactly once, and failed (a user's probe).
TEST_F(RealVerifyTest, AnAtMostOnceQueueSinkIsHeldToAtMostOnce) {
  run_pipeline("telemetry", 20000);  // unpaced: its queue fills and gives messages up
  const Verified v = verify_after([](LevelDbStore&) {});
  EXPECT_EQ(v.rc, 0) << v.json;
  EXPECT_NE(v.json.find("\"guarantee\": \"at_most_once\""), std::string::npos) << v.json;
  EXPECT_NE(v.json.find("\"lost\": 0"), std::string::npos) << v.json;
}

// What a life cut short may have held is bounded by the most partitions the sink ever ran with:
// a life under an earlier layout, repartitioned since, held a queue in each of its partitions.
// Here the lives are rewritten to account for all but 300 of the messages given up and to have
// been cut once: the sink's 2 queues of 65 messages cannot hold 300, 8 of them (a partition
// 7 that once ran) can.
TEST_F(RealVerifyTest, AnAtMostOnceSinksInDoubtBoundCountsThePartitionsItEverHad) {
  run_pipeline("telemetry", 20000);  // unpaced: its queue fills and gives messages up
  const Verified clean = verify_after([](LevelDbStore&) {});
  ASSERT_EQ(clean.rc, 0) << clean.json;
  const std::string marker = "\"in_doubt\": ";
  const size_t at = clean.json.find(marker);
  ASSERT_NE(at, std::string::npos) << clean.json;
  const uint64_t in_doubt = std::stoull(clean.json.substr(at + marker.size()));
  ASSERT_GT(in_doubt, 300u);
  const auto relive = [&](bool partition_seven) {
    return [=](LevelDbStore& store) {
      auto rows = store.dump(kProcessLives);
      ASSERT_TRUE(rows.has_value());
      auto tx = store.begin();
      for (const Row& row : *rows) tx->erase(kProcessLives, row.key);
      tx->put(kProcessLives, "a", "ended " + std::to_string(in_doubt - 300) + " 0");
      tx->put(kProcessLives, "b", "cut 0 0");
      if (partition_seven) {
        auto metas = store.dump(tables::kJobMeta);
        ASSERT_TRUE(metas.has_value());
        const auto zero = std::find_if(metas->begin(), metas->end(), [](const Row& r) { return r.key == "sink/telemetry/0"; });
        ASSERT_NE(zero, metas->end());
        tx->put(tables::kJobMeta, "sink/telemetry/7", zero->value);  // as if it had run
      }
      ASSERT_TRUE(store.commit(*tx, {}).has_value());
    };
  };
  const Verified two = verify_after(relive(false));
  EXPECT_EQ(two.rc, 1) << two.json;
  const Verified eight = verify_after(relive(true));
  EXPECT_EQ(eight.rc, 0) << eight.json;
}

TEST_F(RealVerifyTest, AnOutputMissingFromTheTargetIsALostWrite) {
  run_pipeline("longest_so_far", 3000);
  const Verified v = verify_after([](LevelDbStore& store) { erase_first(store, "target/longest_out"); });
  EXPECT_EQ(v.rc, 1) << v.json;
  EXPECT_NE(v.json.find("lost-write"), std::string::npos) << v.json;
}

TEST_F(RealVerifyTest, StateTheHistoryDoesNotGiveFailsTheStateCheck) {
  run_pipeline("running_max", 3000);
  const Verified v = verify_after([](LevelDbStore& store) {
    auto tx = store.begin();
    tx->put("state/RunningMax/max", "00000000000000ff", "12345");
    ASSERT_TRUE(store.commit(*tx, {}).has_value());
  });
  EXPECT_EQ(v.rc, 1) << v.json;
  EXPECT_NE(v.json.find("re-executed"), std::string::npos) << v.json;
}

TEST_F(RealVerifyTest, ACommittedEpochMissingFromTheHistoryIsCaught) {
  run_pipeline("running_max", 3000);
  const Verified v = verify_after([](LevelDbStore& store) { erase_first(store, "history/RunningMax"); });
  EXPECT_EQ(v.rc, 1) << v.json;
}

// The timers stored at the end are those the re-executed history holds: sessions still open
// when the input ended pass, and one of their timers gone from the store fails `timers` (an
// engine that deleted a timer without running it would leave the same trace).
TEST_F(RealVerifyTest, ATimerGoneFromTheStoreFailsTheTimersCheck) {
  run_pipeline("session_window", 3000);
  const Verified clean = verify_after([](LevelDbStore&) {});
  EXPECT_EQ(clean.rc, 0) << clean.json;
  EXPECT_NE(clean.json.find("timers stored at the end, as the committed epochs re-executed hold them"), std::string::npos)
      << clean.json;
  EXPECT_EQ(clean.json.find("\"detail\": \"0 timers stored"), std::string::npos) << "no session left open: " << clean.json;
  const Verified v = verify_after([](LevelDbStore& store) { erase_first(store, "timers/SessionWindow/gap"); });
  EXPECT_EQ(v.rc, 1) << v.json;
  EXPECT_NE(v.json.find("of computation SessionWindow is not stored at the end"), std::string::npos) << v.json;
}

// Each history row keeps a reading of its process's clock as the epoch committed: an engine that
// tells an epoch a time its clock has not reached (system-time timers then fire early) fails
// the re-execution, and the same pipeline without the bug passes it.
TEST_F(RealVerifyTest, AnEpochToldATimeAheadOfItsClockFailsReexecution) {
  run_pipeline("session_window", 3000, "epoch-time-ahead");
  const Verified v = verify_after([](LevelDbStore&) {}, "epoch-time-ahead");
  EXPECT_EQ(v.rc, 1) << v.json;
  EXPECT_NE(v.json.find("past the furthest the clock of its process had read by its commit"), std::string::npos) << v.json;
}

TEST_F(RealVerifyTest, AnEpochsTimeWithinItsClockPassesReexecution) {
  run_pipeline("session_window", 3000);
  const Verified v = verify_after([](LevelDbStore&) {});
  EXPECT_EQ(v.rc, 0) << v.json;
  EXPECT_NE(v.json.find("committed epochs re-executed: each timer they fired held, and due"), std::string::npos) << v.json;
  EXPECT_EQ(v.json.find("kept no clock reading"), std::string::npos) << v.json;
}

// A history row that fires a timer again (as an engine that fired a timer and lost its deletion
// would record it) fails the re-execution: its re-execution holds that timer no more.
TEST_F(RealVerifyTest, ATimerFiredTwiceFailsReexecution) {
  run_pipeline("deadlines", 3000);
  const Verified v = verify_after([](LevelDbStore& store) {
    auto rows = store.dump("history/Deadline");
    ASSERT_TRUE(rows.has_value());
    const Row* firing = nullptr;  // a row that fired timers and took nothing
    std::map<std::string, std::string> last;  // partition prefix -> its last row key
    for (const Row& row : *rows) {
      const auto decoded = decode_history_row(row.value);
      ASSERT_TRUE(decoded.has_value()) << row.key;
      if (firing == nullptr && decoded->consumed.empty() && !decoded->timers_fired.empty()) firing = &row;
      last[row.key.substr(0, row.key.find('/') + 1)] = row.key;
    }
    ASSERT_NE(firing, nullptr) << "no epoch fired timers alone";
    const std::string prefix = firing->key.substr(0, firing->key.find('/') + 1);
    const uint64_t next = tables::parse_hex16(last[prefix].substr(prefix.size())) + 1;
    auto tx = store.begin();
    tx->put("history/Deadline", prefix + tables::hex16(next), firing->value);
    ASSERT_TRUE(store.commit(*tx, {}).has_value());
  });
  EXPECT_EQ(v.rc, 1) << v.json;
  EXPECT_NE(v.json.find("which its re-execution does not hold"), std::string::npos) << v.json;
}

// --verify re-executes the whole history with the program's functions under one of its own bug
// switches: a store whose lives ran with another is refused (exit 2, one line naming them),
// before the verifying life adds its row.
TEST_F(RealVerifyTest, LivesWithAnotherOwnBugSwitchAreRefused) {
  registry_.add_bug("my-bug", "a switch of the program's own that changes nothing");
  run_pipeline("longest_so_far", 2000, "my-bug");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(life(2000, "", true), 2);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("its lives ran with --bug my-bug in 1 life"), std::string::npos) << err;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(life(2000, "", true), 2);  // the refused life left no row: still the same one life
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("in 1 life"), std::string::npos) << err;
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(life(2000, "my-bug", true), 0);  // the same switch: verified
  ::testing::internal::GetCapturedStdout();
}

// The engine's switches change what the run committed, which --verify holds to account whatever
// each life ran with: lives that differ in them are verified, and the bug caught.
TEST_F(RealVerifyTest, LivesWithDifferentEngineSwitchesAreVerified) {
  run_pipeline("longest_so_far", 2000, "epoch-time-ahead");
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(life(2000, "", true), 1);
  const std::string json = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(json.find("past the furthest the clock"), std::string::npos) << json;
}

// Once a life wrote all its inputs, the queue sources were told nothing more comes: a later life
// asking for more is refused before it writes any (they would stay in the streams, and its drain
// would wait for ever); one asking for fewer writes none and does not lower the count; the
// store still verifies with the inputs it has.
TEST_F(RealVerifyTest, MoreInputsAfterTheEndAreRefused) {
  run_pipeline("longest_so_far", 2000);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(life(3000), 2);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("had all its inputs at 2000"), std::string::npos) << err;
  EXPECT_NE(err.find("--messages 3000 would add 1000"), std::string::npos) << err;
  EXPECT_EQ(life(1000), 0);
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(life(2000, "", true), 0);
  const std::string json = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(json.find("\"inputs\": 2000"), std::string::npos) << json;
}

// A later life's inputs continue the workload the store's first life generated: another --keys
// or --seed is refused (exit 2, one line naming both) before it writes any; the same ones go on.
TEST_F(RealVerifyTest, AnotherWorkloadInALaterLifeIsRefused) {
  run_pipeline("longest_so_far", 2000);
  keys_ = 32;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(life(3000), 2);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("was started with --keys 16 --seed 1, and this run gives --keys 32 --seed 1"), std::string::npos) << err;
  keys_ = 16;
  seed_ = 7;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(life(2000, "", true), 2);
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("this run gives --keys 16 --seed 7"), std::string::npos) << err;
  seed_ = 1;
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(life(2000, "", true), 0);
  const std::string json = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(json.find("\"inputs\": 2000"), std::string::npos) << json;
}

// A timer fired before it was due, by what the run recorded: an event-time one before its
// computation took an event as new as its trigger, a system-time one before its process's clock
// reached its trigger by the commit. At its trigger, each is due; with no clock reading kept,
// a system-time one is not judged.
TEST(FiredBeforeDueTest, ATimerIsDueByTheEventsTakenOrTheClockRead) {
  ComputationSpec c;
  c.name = "C";
  c.timer_streams = {{"due", Watermark::kEventTime}, {"tick", Watermark::kSystemTime}};
  const auto fired = [](const std::string& stream, Micros trigger) {
    EngineObserver::Epoch::FiredTimer f;
    f.timer = Timer{7, trigger, trigger, stream};
    f.row = timer_row(f.timer, true, 0);
    return f;
  };
  EpochHistoryRow row;
  row.timers_fired = {fired("due", 100)};
  EXPECT_EQ(fired_before_due(c, 100, row), "");
  EXPECT_NE(fired_before_due(c, 99, row).find("fired event-time timer"), std::string::npos);
  EXPECT_NE(fired_before_due(c, INT64_MIN, row).find("(the newest: none)"), std::string::npos);
  row.timers_fired = {fired("tick", 100)};
  EXPECT_EQ(fired_before_due(c, INT64_MIN, row), "");  // no clock reading kept
  row.clock_at_commit = 100;
  EXPECT_EQ(fired_before_due(c, INT64_MIN, row), "");
  row.clock_at_commit = 99;
  EXPECT_NE(fired_before_due(c, INT64_MIN, row).find("its process's clock read 0.000099s"), std::string::npos);
}

}  // namespace
}  // namespace onceflow::real
