// Computations as users write them (core/user_style.h): correct ones pass under faults although
// their outputs depend on order, timer timing, randomness and the system time; planted bugs in
// them are caught, named by the user's computation.
#include "core/user_style.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <stdexcept>

#include "core/user_code.h"
#include "tests/scenario_runs.h"

namespace onceflow::testing {
namespace {

// The planted bug: the maximum lives in the instance, which a restarted job does not have.
class RunningMaxInMember final : public ProcessFunction {
 public:
  void init(const InitContext& init) override { init.init_state_client(armed_, "armed"); }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext& context) override {
    auto [it, fresh] = max_.try_emplace(m.key, user_style::value_of(m));
    if (!fresh) it->second = std::max(it->second, user_style::value_of(m));
    if (armed_.get(m.key)) return;
    armed_.set(m.key, "1");
    out.add_timer(context.current_timestamp() + user_style::kReportDelay);
  }
  void process_timer(const Timer& t, OutputCollector& out, RuntimeContext&) override {
    armed_.clear(t.key);
    out.add_message(t.key, fmt::format("key={} max={}", t.key, max_[t.key]));
  }

 private:
  std::map<uint64_t, int64_t> max_;
  StateClient armed_;
};

// A session gap as production sets it, far longer than the liveness bound: each key's report
// waits 20 s of processing time after its first message. With `renew`, every report arms the
// next one 20 s later, for ever: a pipeline that never drains.
template <bool renew>
class ReportsAfterALongGap final : public ProcessFunction {
 public:
  static constexpr Micros kGap = 20 * kSeconds;
  void init(const InitContext& init) override { init.init_state_client(armed_, "armed"); }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext& context) override {
    if (armed_.get(m.key)) return;
    armed_.set(m.key, "1");
    out.add_timer(context.current_timestamp() + kGap);
  }
  void process_timer(const Timer& t, OutputCollector& out, RuntimeContext& context) override {
    out.add_message(t.key, fmt::format("key={} report", t.key));
    if (renew) {
      out.add_timer(context.current_timestamp() + kGap);
    } else {
      armed_.clear(t.key);
    }
  }

 private:
  StateClient armed_;
};

// The planted bug: a swift map's output depends on what earlier runs in the process did.
class ProcessCounterStamp final : public ProcessFunction {
 public:
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    static uint64_t calls = 0;  // lives as long as the process: a second run starts elsewhere
    out.add_message(m.key, fmt::format("{} call {}", m.payload, ++calls));
  }
};

// The planted bug: a swift map's output depends on the machine's clock.
class WallClockStamp final : public ProcessFunction {
 public:
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    out.add_message(m.key, fmt::format("{} seen at {}", m.payload, std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()));
  }
};

// The planted bug: a join whose waiting payments live in the instance; after a restart the
// orders they would have met wait, and expire, instead.
class JoinPaymentsInMember final : public ProcessFunction {
 public:
  void init(const InitContext& init) override { init.init_state_client(orders_, "orders"); }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    const std::string entry = fmt::format("{} {}", m.event_ts, m.payload);
    std::string orders = orders_.get(m.key).value_or("");
    if (m.stream == "payment" && !orders.empty()) {
      const size_t end = orders.find(';');
      out.add_message(m.key, fmt::format("key={} matched order=[{}] payment=[{}]", m.key, orders.substr(0, end), entry));
      orders.erase(0, end + 1);
      orders.empty() ? orders_.clear(m.key) : orders_.set(m.key, orders);
    } else if (m.stream == "payment") {
      payments_[m.key].push_back(entry);
    } else if (auto& waiting = payments_[m.key]; !waiting.empty()) {
      out.add_message(m.key, fmt::format("key={} matched order=[{}] payment=[{}]", m.key, entry, waiting.front()));
      waiting.erase(waiting.begin());
    } else {
      orders_.set(m.key, orders + entry + ";");
      out.add_timer(m.event_ts + user_style::kJoinWindow);
    }
  }
  void process_timer(const Timer& t, OutputCollector& out, RuntimeContext&) override {
    std::string orders = orders_.get(t.key).value_or(""), kept;
    for (size_t at = 0, end; (end = orders.find(';', at)) != std::string::npos; at = end + 1) {
      const std::string entry = orders.substr(at, end - at);
      if (std::stoll(entry) + user_style::kJoinWindow > t.trigger_ts) {
        kept += entry + ";";
      } else {
        out.add_message(t.key, fmt::format("key={} expired order=[{}]", t.key, entry));
      }
    }
    kept.empty() ? orders_.clear(t.key) : orders_.set(t.key, kept);
  }

 private:
  StateClient orders_;
  std::map<uint64_t, std::vector<std::string>> payments_;
};

// The planted bug: a parser that throws on a word it does not know, as a user's may.
class ThrowsOnHoneydew final : public ProcessFunction {
 public:
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    if (m.payload == "honeydew") throw std::runtime_error("cannot parse '" + m.payload + "'");
    out.add_message(m.key, m.payload);
  }
};

// The planted bug: an init() that throws (a configuration it cannot parse, say).
class ThrowsInInit final : public ProcessFunction {
 public:
  void init(const InitContext&) override { throw std::invalid_argument("no such table"); }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override { out.add_message(m.key, m.payload); }
};

// The planted bug: a function that throws only when its epoch is re-executed (it asks whether
// it is, which no function should).
class ThrowsWhenReexecuted final : public ProcessFunction {
 public:
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    if (user_code::call() != nullptr && user_code::call()->replay && m.payload == "fig") throw 42;
    out.add_message(m.key, m.payload);
  }
};

// Reads its key's row, another row, then its key's row again in each call, and counts the
// calls where the two answers differ (a test's own counter, outside any run's state).
class ReadsTwice final : public ProcessFunction {
 public:
  static inline int disagreements = 0;
  void init(const InitContext& init) override { init.init_state_client(count_, "count"); }
  void process_message(const Message& m, OutputCollector& out, RuntimeContext&) override {
    const auto first = count_.get(m.key);
    out.add_message(m.key, m.payload);
    (void)count_.get(m.key + 1000);  // a row not prefetched: a read from the store, which may fail
    const auto second = count_.get(m.key);
    if (first != second) ++disagreements;
    count_.set(m.key, std::to_string(std::stoll(second.value_or("0")) + 1));
  }

 private:
  StateClient count_;
};

ComputationRegistry with_planted_bugs() {
  ComputationRegistry r = builtin_registry();
  r.add("RunningMaxInMember", [] { return std::make_unique<RunningMaxInMember>(); });
  r.add("WallClockStamp", [] { return std::make_unique<WallClockStamp>(); });
  r.add("ProcessCounterStamp", [] { return std::make_unique<ProcessCounterStamp>(); });
  r.add("JoinPaymentsInMember", [] { return std::make_unique<JoinPaymentsInMember>(); });
  r.add("ThrowsOnHoneydew", [] { return std::make_unique<ThrowsOnHoneydew>(); });
  r.add("ReadsTwice", [] { return std::make_unique<ReadsTwice>(); });
  r.add("ThrowsInInit", [] { return std::make_unique<ThrowsInInit>(); });
  r.add("ThrowsWhenReexecuted", [] { return std::make_unique<ThrowsWhenReexecuted>(); });
  r.add("ReportsAfterALongGap", [] { return std::make_unique<ReportsAfterALongGap<false>>(); });
  r.add("ReportsAfterALongGapForEver", [] { return std::make_unique<ReportsAfterALongGap<true>>(); });
  return r;
}

// Runs `file` with computation `name`'s function replaced by `function` over seeds 1..seeds;
// returns the failing verdicts.
std::vector<checkers::Verdict> failures_with(const std::string& file, const std::string& name,
                                             const std::string& function, int seeds, bool swarm) {
  simulated::PipelineRunOptions o = options_of(file);
  for (auto& c : o.spec.computations) {
    if (c.name == name) c.processing_function = function;
  }
  o.swarm = swarm;
  const ComputationRegistry registry = with_planted_bugs();
  std::vector<checkers::Verdict> out;
  for (int seed = 1; seed <= seeds; ++seed) {
    o.seed = static_cast<uint64_t>(seed);
    for (const auto& v : simulated::run_pipeline(o, registry).outcome.verdicts) {
      if (!v.passed) out.push_back(v);
    }
  }
  return out;
}

TEST(UserStyleTest, CorrectComputationsPassUnderFaults) {
  for (const char* file : {"user_longest_so_far.yaml", "user_running_max.yaml", "user_session_window.yaml",
                           "user_lottery.yaml", "user_escalation.yaml", "user_order_payment_join.yaml",
                           "user_fan_out.yaml", "user_fan_out_alo.yaml"}) {
    const Tally t = run_seeds(options_of(file), 10);
    EXPECT_EQ(t.passed, t.runs) << file << ": " << (t.failures.empty() ? "" : t.failures.front());
  }
}

// A system-time timer set beyond the liveness bound cannot fire earlier: the run waits for it,
// as `onceflow real` does, and liveness gives the bound again after it (it failed such a
// pipeline as "stuck, not busy"). One that sets timers for ever still fails liveness.
TEST(UserStyleTest, ATimerSetBeyondTheLivenessBoundIsWaitedFor) {
  EXPECT_TRUE(failures_with("user_running_max.yaml", "RunningMax", "ReportsAfterALongGap", 2, false).empty());
  simulated::PipelineRunOptions o = options_of("user_running_max.yaml");
  for (auto& c : o.spec.computations) c.processing_function = "ReportsAfterALongGap";
  o.swarm = false;
  o.seed = 1;
  for (const auto& v : simulated::run_pipeline(o, with_planted_bugs()).outcome.verdicts) {
    if (v.check != "liveness") continue;
    EXPECT_TRUE(v.passed && v.applicable) << v.detail;
    EXPECT_NE(v.detail.find("when the last system-time timer the function set beyond the bound fell due"),
              std::string::npos)
        << v.detail;
  }
  const auto failed = failures_with("user_running_max.yaml", "RunningMax", "ReportsAfterALongGapForEver", 1, false);
  const bool liveness = std::any_of(failed.begin(), failed.end(), [](const auto& v) { return v.check == "liveness"; });
  EXPECT_TRUE(liveness) << (failed.empty() ? "nothing failed" : failed.front().check + ": " + failed.front().detail);
}

TEST(UserStyleTest, StateKeptInAMemberIsCaughtNamingTheComputation) {
  // Without faults no job restarts, so the member holds what the state client would have.
  EXPECT_TRUE(failures_with("user_running_max.yaml", "RunningMax", "RunningMaxInMember", 3, false).empty());
  const auto failed = failures_with("user_running_max.yaml", "RunningMax", "RunningMaxInMember", 10, true);
  ASSERT_FALSE(failed.empty()) << "a member that forgets on restart went unnoticed in 10 seeds under faults";
  bool named = false;
  for (const auto& v : failed) {
    named = named || (v.check == "re-execution" && v.detail.find("computation RunningMax") != std::string::npos);
  }
  EXPECT_TRUE(named) << failed.front().check << ": " << failed.front().detail;
}

TEST(UserStyleTest, AJoinThatKeepsOneSideInAMemberIsCaughtNamingTheComputation) {
  EXPECT_TRUE(failures_with("user_order_payment_join.yaml", "OrderPaymentJoin", "JoinPaymentsInMember", 3, false).empty());
  const auto failed = failures_with("user_order_payment_join.yaml", "OrderPaymentJoin", "JoinPaymentsInMember", 10, true);
  ASSERT_FALSE(failed.empty()) << "payments kept in a member, lost on a restart, went unnoticed in 10 seeds under faults";
  bool named = false;
  for (const auto& v : failed) {
    named = named || (v.check == "re-execution" && v.detail.find("computation OrderPaymentJoin") != std::string::npos);
  }
  EXPECT_TRUE(named) << failed.front().check << ": " << failed.front().detail;
}

TEST(UserStyleTest, AWallClockInASwiftMapIsCaughtNamingTheComputation) {
  const auto failed = failures_with("user_lottery.yaml", "Normalize", "WallClockStamp", 1, false);
  ASSERT_FALSE(failed.empty()) << "a swift map stamping the machine's clock passed";
  // The clock is answered from the simulation (so the run replays) and the call is named.
  EXPECT_EQ(failed.front().check, "determinism");
  EXPECT_NE(failed.front().detail.find("clock_gettime from computation Normalize"), std::string::npos) << failed.front().detail;
}

TEST(UserStyleTest, TheDeterminismSelfCheckHashesPayloads) {
  simulated::PipelineRunOptions o = options_of("user_lottery.yaml");
  o.swarm = false;
  const ComputationRegistry registry = with_planted_bugs();
  const auto twice = [&](const simulated::PipelineRunOptions& options) {
    const simulated::RunOutcome a = simulated::run_pipeline(options, registry).outcome;
    const simulated::RunOutcome b = simulated::run_pipeline(options, registry).outcome;
    return checkers::DeterminismCheck().check(1, a.trace_hash, b.trace_hash, a.content_hash, b.content_hash, "");
  };
  EXPECT_TRUE(twice(o).passed) << twice(o).detail;  // random() and current_timestamp(): from the seed
  for (auto& c : o.spec.computations) {
    if (c.name == "Normalize") c.processing_function = "ProcessCounterStamp";
  }
  const checkers::Verdict v = twice(o);
  EXPECT_FALSE(v.passed) << "payloads that differ between two runs of a seed passed the determinism self-check";
  EXPECT_NE(v.detail.find("other payloads"), std::string::npos) << v.detail;
}

// An exception out of the user's function gives its epoch up (the job retries it, and the
// input throws again): the run goes on to its end and fails, naming the computation, the
// exception and the message first, instead of ending the process.
TEST(UserStyleTest, AFunctionThatThrowsFailsTheRunNamingTheExceptionFirst) {
  simulated::PipelineRunOptions o = options_of("user_lottery.yaml");
  for (auto& c : o.spec.computations) {
    if (c.name == "Lottery") c.processing_function = "ThrowsOnHoneydew";
  }
  o.swarm = false;
  o.replay_command = "replay-me";
  const simulated::RunOutcome r = simulated::run_pipeline(o, with_planted_bugs()).outcome;
  EXPECT_FALSE(r.passed);
  ASSERT_FALSE(r.verdicts.empty());
  const checkers::Verdict& first = r.verdicts.front();
  EXPECT_EQ(first.check, "exceptions");
  EXPECT_FALSE(first.passed);
  for (const char* part : {"computation Lottery threw std::runtime_error \"cannot parse 'honeydew'\" taking message",
                           "in epoch", "replay: replay-me"}) {
    EXPECT_NE(first.detail.find(part), std::string::npos) << part << " not in: " << first.detail;
  }
  // Without the word, nothing throws and nothing is said of exceptions.
  for (auto& c : o.spec.computations) {
    if (c.name == "Lottery") c.processing_function = "Lottery";
  }
  for (const auto& v : simulated::run_pipeline(o, with_planted_bugs()).outcome.verdicts) EXPECT_NE(v.check, "exceptions");
  // An init() that throws: no epoch of the computation runs, and the run says why.
  for (auto& c : o.spec.computations) {
    if (c.name == "Lottery") c.processing_function = "ThrowsInInit";
  }
  const simulated::RunOutcome init = simulated::run_pipeline(o, with_planted_bugs()).outcome;
  ASSERT_FALSE(init.verdicts.empty());
  EXPECT_EQ(init.verdicts.front().check, "exceptions");
  EXPECT_NE(init.verdicts.front().detail.find("computation Lottery threw std::invalid_argument \"no such table\" in init()"),
            std::string::npos)
      << init.verdicts.front().detail;
}

// A row read once answers the same for the rest of its epoch, even once another read of the
// epoch failed (the epoch is given up then): a function need not guard against its own state
// changing under it.
TEST(UserStyleTest, ARowReadTwiceInACallAnswersTheSameUnderStoreFaults) {
  simulated::PipelineRunOptions o = options_of("user_running_max.yaml");
  for (auto& c : o.spec.computations) {
    if (c.name == "RunningMax") c.processing_function = "ReadsTwice";
  }
  const ComputationRegistry registry = with_planted_bugs();
  ReadsTwice::disagreements = 0;
  uint64_t failed_reads = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    o.seed = seed;
    const auto probes = simulated::run_pipeline(o, registry).outcome.probes;
    if (const auto it = probes.find("epoch.read_failed"); it != probes.end()) failed_reads += it->second;
  }
  ASSERT_GT(failed_reads, 0u) << "no store read failed: the test tests nothing";
  EXPECT_EQ(ReadsTwice::disagreements, 0);
}

TEST(UserStyleTest, AFunctionThatThrowsOnlyWhenReexecutedFailsReexecution) {
  const auto failed = failures_with("user_lottery.yaml", "Lottery", "ThrowsWhenReexecuted", 1, false);
  ASSERT_FALSE(failed.empty()) << "a function that threw re-executing a committed epoch passed";
  bool named = false;
  for (const auto& v : failed) {
    named = named || (v.check == "re-execution" &&
                      v.detail.find("computation Lottery threw an exception of type int re-executing message") != std::string::npos);
  }
  EXPECT_TRUE(named) << failed.front().check << ": " << failed.front().detail;
}

}  // namespace
}  // namespace onceflow::testing
