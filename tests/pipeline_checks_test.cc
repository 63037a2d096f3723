#include "checkers/pipeline_checks.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/computation.h"

#include <initializer_list>
#include <string>
#include <string_view>

namespace onceflow::checkers {
namespace {

constexpr std::string_view kReplay = "onceflow replay --seed 42";

MessageRecord message(uint64_t id, uint64_t key, std::string stream, int64_t alignment_ts,
                      std::string payload) {
  return MessageRecord{id, key, std::move(stream), alignment_ts, std::move(payload), 0, alignment_ts};
}

EpochRecord epoch(std::string job, std::string computation, bool swift, uint64_t lease, uint64_t version,
                  int64_t commit_time, std::vector<MessageRecord> consumed, std::vector<MessageRecord> produced,
                  std::vector<std::string> timers_fired, std::string node, std::vector<std::string> timers_created) {
  EpochRecord e;
  e.job = std::move(job);
  e.computation = std::move(computation);
  e.swift = swift;
  e.lease = lease;
  e.version = version;
  e.commit_time = commit_time;
  e.consumed = std::move(consumed);
  e.produced = std::move(produced);
  e.timers_fired = std::move(timers_fired);
  e.node = std::move(node);
  e.timers_created = std::move(timers_created);
  return e;
}

// A source emits m11 and m12 (key 7); Count consumes both, creates and fires one timer and
// emits 0x21 to the exactly-once sink counts_out; the swift Double consumes m11 and emits
// 0x31. The at-most-once sink alerts consumed 0x41 and 0x42, delivered 0x41 and counted 0x42
// as dropped; the at-least-once sink log holds a duplicate.
PipelineHistory good_history() {
  PipelineHistory h;
  h.seed = 42;
  h.replay_command = std::string(kReplay);
  const MessageRecord m11 = message(0x11, 7, "in", 10, "a");
  const MessageRecord m12 = message(0x12, 7, "in", 20, "b");
  const MessageRecord out = message(0x21, 7, "counts", 20, "7:2");
  h.epochs = {
      epoch("source/numbers/0", "numbers", false, 1, 1, 100, {}, {m11, m12}, {}, "worker-1", {}),
      epoch("computation/Count/0", "Count", false, 1, 2, 200, {m11, m12}, {out}, {"Count/7/100/t"}, "worker-1",
            {"Count/7/100/t"}),
      epoch("computation/Double/0", "Double", true, 2, 3, 300, {m11}, {message(0x31, 7, "doubled", 10, "aa")}, {},
            "worker-2", {}),
      epoch("sink/counts_out/0", "counts_out", false, 2, 4, 400, {out}, {}, {}, "worker-2", {}),
      epoch("sink/alerts/0", "alerts", false, 2, 5, 410,
            {message(0x41, 7, "alerts", 10, "x"), message(0x42, 8, "alerts", 11, "y")}, {}, {}, "worker-2", {}),
  };
  h.deliveries = {{"counts_out", "sink/counts_out/0", 2, 450, out},
                  {"alerts", "", 0, 460, message(0x41, 7, "alerts", 10, "x")}};
  h.sinks = {{"counts_out", Guarantee::kExactlyOnce, {{7, "7:2"}}, {}},
             {"alerts", Guarantee::kAtMostOnce, {{7, "x"}, {8, "y"}}, {}},
             {"log", Guarantee::kAtLeastOnce, {{7, "a"}}, {}}};
  h.sink_outputs = {{"counts_out", {{7, "7:2"}}}, {"alerts", {{7, "x"}}}, {"log", {{7, "a"}, {7, "a"}}}};
  h.counted_drops = {{"alerts", {0x42}}};
  h.tables = {{"Count/state", {{std::string("\x07", 1), "2"}}}};
  h.reference_tables = h.tables;
  h.leases = {{1, {0, 10'000}}, {2, {0, -1}}, {9, {0, -1}}};
  // Controller lease 9 stored the job Leases the epochs ran under.
  h.controller_commits = {{"controller", 9, 1, 50, true,
                           {{"source/numbers/0", 1}, {"computation/Count/0", 1}, {"computation/Double/0", 2},
                            {"sink/counts_out/0", 2}, {"sink/alerts/0", 2}}}};
  h.heal_at = 1'000;
  h.liveness_bound = 5'000;
  h.drained_at = 2'000;
  return h;
}

// The verdict failed, its detail mentions every one of `mentions`, and it ends with the replay.
void expect_failure(const Verdict& v, std::initializer_list<std::string_view> mentions) {
  EXPECT_FALSE(v.passed) << v.check;
  for (std::string_view mention : mentions) {
    EXPECT_NE(v.detail.find(mention), std::string::npos) << "'" << mention << "' not in: " << v.detail;
  }
  const std::string suffix = " — replay: " + std::string(kReplay);
  EXPECT_TRUE(v.detail.ends_with(suffix)) << v.detail;
}

TEST(PipelineChecksTest, AGoodHistoryPassesEveryCheck) {
  const std::vector<Verdict> verdicts = run_pipeline_checks(good_history());
  ASSERT_EQ(verdicts.size(), 14u);
  for (const auto& v : verdicts) EXPECT_TRUE(v.passed) << v.check << ": " << v.detail;
}

TEST(PipelineChecksTest, TheUsersAssertionsFailOnlyWhenOneFailedAndAreNotApplicableWithoutAny) {
  PipelineHistory h = good_history();
  EXPECT_FALSE(AssertionsCheck().check(h).applicable);
  h.user_assertions.push_back({"totals add up", "always", 40, 0, ""});
  h.user_assertions.push_back({"never negative", "unreachable", 0, 0, ""});
  EXPECT_TRUE(AssertionsCheck().check(h).passed) << AssertionsCheck().check(h).detail;
  h.user_assertions[1].evaluated = h.user_assertions[1].failed = 2;
  h.user_assertions[1].first_failure = "computation Sum, job computation/Sum/0, epoch 3, message 00000000000000aa";
  expect_failure(AssertionsCheck().check(h), {"unreachable \"never negative\" reached 2 of 2 times", "computation Sum",
                                              "epoch 3", "00000000000000aa"});
}

TEST(PipelineChecksTest, CheckersHaveTheirNames) {
  std::vector<std::string_view> names;
  for (const auto& checker : all_pipeline_checkers()) names.push_back(checker->name());
  const std::vector<std::string_view> expected = {"delivery", "state", "consumption", "re-execution", "fencing",
                                                  "controller", "delivery-callback",
                                                  "timers", "ordering", "swift-determinism", "lifecycle", "layout",
                                                  "liveness", "assertions"};
  EXPECT_EQ(names, expected);
  // A program's own check may not take a built-in's name (core/computation.h keeps the list).
  std::vector<std::string> builtin(names.begin(), names.end());
  builtin.push_back(checkers::DeterminismCheck::kName);
  builtin.push_back(checkers::kExceptionsCheck);
  EXPECT_EQ(builtin, builtin_check_names());
  for (const auto& v : run_pipeline_checks(good_history())) EXPECT_FALSE(v.check.empty());
}

TEST(PipelineChecksTest, ControllerFailsOnACommitAfterItsLeaseEnded) {
  PipelineHistory h = good_history();
  h.leases[9] = {0, 40};  // the controller's Lease ended before its commit at 50
  expect_failure(ControllerCheck().check(h), {"controller controller", "under lease 9", "zombie"});
}

TEST(PipelineChecksTest, ControllerFailsOnAnEpochUnderALeaseNeverStored) {
  PipelineHistory h = good_history();
  h.controller_commits[0].job_leases.erase("computation/Double/0");
  h.controller_commits[0].job_leases["sink/alerts/0"] = 1;  // lease 2 is stored nowhere now
  h.controller_commits[0].job_leases.erase("sink/counts_out/0");
  expect_failure(ControllerCheck().check(h), {"under lease 2", "no controller ever stored"});
}

TEST(PipelineChecksTest, ControllerFailsOnAnEpochUnderAnotherJobsLease) {
  PipelineHistory h = good_history();
  h.epochs[2].lease = 1;  // Double's epoch under the Lease stored for numbers and Count
  expect_failure(ControllerCheck().check(h), {"job computation/Double/0 committed version 3 under lease 1",
                                              "stored for job computation/Count/0, not for it"});
}

TEST(PipelineChecksTest, ControllerFailsOnTwoLiveLeasesOfOneJob) {
  PipelineHistory h = good_history();
  // Lease 1 of Count/0 is live until 10,000us; a second commit gives the job lease 2 at 60.
  h.controller_commits.push_back({"controller", 9, 2, 60, true, {{"computation/Count/0", 2}}});
  expect_failure(ControllerCheck().check(h), {"computation/Count/0", "got lease 2", "still live"});
  h.leases[1] = {0, 55};  // ended before: fine
  EXPECT_TRUE(ControllerCheck().check(h).passed);
}

TEST(PipelineChecksTest, ControllerWithNothingToCheckIsNotApplicable) {
  PipelineHistory h = good_history();
  h.controller_commits.clear();
  const Verdict v = ControllerCheck().check(h);
  EXPECT_FALSE(v.applicable);
  EXPECT_EQ(v.verdict_name(), "n/a");
}

TEST(PipelineChecksTest, DeliveryPassDetailSummarizesTheSinks) {
  const Verdict v = DeliveryCheck().check(good_history());
  EXPECT_TRUE(v.passed);
  EXPECT_EQ(v.detail, "3 sinks: counts_out exactly-once 1 messages, alerts at-most-once 1 messages, "
                      "log at-least-once 2 messages");
}

TEST(PipelineChecksTest, DeliveryFailsOnAnExactlyOnceDuplicate) {
  PipelineHistory h = good_history();
  h.sink_outputs["counts_out"] = {{7, "7:2"}, {7, "7:2"}};
  expect_failure(DeliveryCheck().check(h),
                 {"counts_out", "exactly-once", "extra (key 7, \"7:2\")",
                  "delivered 2 times, reference 1"});
}

TEST(PipelineChecksTest, DeliveryFailsOnAnExactlyOnceLoss) {
  PipelineHistory h = good_history();
  h.sink_outputs.erase("counts_out");
  expect_failure(DeliveryCheck().check(h),
                 {"counts_out", "lost-write: 1 of 1 outputs missing; first: (key 7, \"7:2\")",
                  "delivered 0 of 1 times"});
}

TEST(PipelineChecksTest, DeliveryReportsBothTheLossAndTheExtraOfOneSink) {
  PipelineHistory h = good_history();
  h.sink_outputs["counts_out"] = {{7, "7:3"}};
  expect_failure(DeliveryCheck().check(h), {"missing; first: (key 7, \"7:2\")",
                                            "extra (key 7, \"7:3\")"});
}

TEST(PipelineChecksTest, DeliveryFailsOnAnAtLeastOnceLoss) {
  PipelineHistory h = good_history();
  h.sink_outputs["log"] = {{8, "z"}, {8, "z"}};
  expect_failure(DeliveryCheck().check(h),
                 {"log", "at-least-once", "missing; first: (key 7, \"a\")"});
}

TEST(PipelineChecksTest, DeliveryFailsOnAnAtMostOnceDuplicate) {
  PipelineHistory h = good_history();
  h.sink_outputs["alerts"] = {{7, "x"}, {7, "x"}};
  expect_failure(DeliveryCheck().check(h),
                 {"alerts", "at-most-once", "extra (key 7, \"x\")", "delivered 2 times"});
}

TEST(PipelineChecksTest, DeliveryTakesAtMostOnceLossesByIdentity) {
  // 0x41 never reached the target, and neither a drop nor a send in doubt says so.
  PipelineHistory h = good_history();
  h.sink_outputs.erase("alerts");
  h.deliveries.pop_back();
  expect_failure(DeliveryCheck().check(h), {"alerts", "message 0000000000000041", "lost without a count"});
  // A send that got no answer accounts for it: the target may or may not hold it.
  h.in_doubt["alerts"] = {0x41};
  const Verdict covered = DeliveryCheck().check(h);
  EXPECT_TRUE(covered.passed) << covered.detail;
  // One count per loss does not do: a drop must name the message that is missing (here the
  // count is right, the identity wrong).
  h.in_doubt.clear();
  h.counted_drops["alerts"] = {0x42, 0x43};
  expect_failure(DeliveryCheck().check(h), {"message 0000000000000041", "lost without a count"});
}

TEST(PipelineChecksTest, DeliveryFailsWhenADroppedMessageIsAtTheTarget) {
  PipelineHistory h = good_history();
  h.counted_drops["alerts"].insert(0x41);  // delivered at 460us
  expect_failure(DeliveryCheck().check(h), {"message 0000000000000041 counted as dropped, but the target holds it"});
}

TEST(PipelineChecksTest, DeliveryFailsWhenAnAtMostOnceMessageIsLostBeforeTheSink) {
  PipelineHistory h = good_history();
  h.epochs[4].consumed.pop_back();  // 0x42 (8, "y") never reached the sink
  h.counted_drops["alerts"].clear();
  expect_failure(DeliveryCheck().check(h), {"alerts", "before the sink", "missing; first: (key 8, \"y\")"});
}

TEST(PipelineChecksTest, DeliveryTakesAtLeastOnceExtrasOnlyAsCopies) {
  PipelineHistory h = good_history();
  const DeliveryRecord first{"log", "sink/log/0", 1, 480, message(0x51, 7, "log", 10, "a")};
  h.deliveries.push_back(first);
  h.deliveries.push_back(first);  // the same message again: a copy
  EXPECT_TRUE(DeliveryCheck().check(h).passed);
  // The same MessageId with another payload is no copy.
  PipelineHistory corrupted = h;
  corrupted.deliveries.back().message.payload = "b";
  corrupted.sink_outputs["log"] = {{7, "a"}, {7, "b"}};
  expect_failure(DeliveryCheck().check(corrupted), {"message 0000000000000051", "not a copy"});
  // An extra under a MessageId of its own was made up, even with a payload the reference has.
  PipelineHistory made_up = h;
  made_up.deliveries.back().message.id = 0x52;
  expect_failure(DeliveryCheck().check(made_up), {"log", "extra (key 7, \"a\")", "made up"});
}

TEST(PipelineChecksTest, DeliveryFailsWhenASinkMakesAMessageVisibleTwice) {
  PipelineHistory h = good_history();
  h.deliveries.push_back(h.deliveries[0]);
  h.deliveries.back().time = 470;
  expect_failure(DeliveryCheck().check(h),
                 {"message 0000000000000021 made visible twice by sink counts_out", "0.000450s", "0.000470s"});
  PipelineHistory at_most = good_history();
  at_most.deliveries.push_back(at_most.deliveries[1]);
  expect_failure(DeliveryCheck().check(at_most),
                 {"message 0000000000000041 made visible twice by sink alerts"});
}

TEST(PipelineChecksTest, DeliveryAllowsAnAtLeastOnceSinkToDeliverTwice) {
  PipelineHistory h = good_history();
  const DeliveryRecord log{"log", "computation/Count/0", 1, 480, message(0x51, 7, "log", 10, "a")};
  h.deliveries.push_back(log);
  h.deliveries.push_back(log);
  EXPECT_TRUE(DeliveryCheck().check(h).passed);
}

TEST(PipelineChecksTest, StateLeavesOutOnlyTheTablesOfAtLeastOnceConsistentComputations) {
  PipelineHistory h = good_history();
  h.tables["Sum/state"] = {{"k", "1"}};  // an at-least-once-consistent table off the reference
  h.reference_tables["Sum/state"] = {{"k", "2"}};
  h.uncompared_tables = {"Sum/state"};
  const Verdict v = StateCheck().check(h);
  EXPECT_TRUE(v.passed) << v.detail;
  EXPECT_NE(v.detail.find("1 of at-least-once-consistent computations not compared"), std::string::npos) << v.detail;
  // The exactly-once table next to it is still compared.
  h.tables["Count/state"][std::string("\x07", 1)] = "3";
  expect_failure(StateCheck().check(h), {"table Count/state"});
  // With nothing left to compare the check has nothing to say.
  PipelineHistory only = good_history();
  only.uncompared_tables = {"Count/state"};
  EXPECT_EQ(StateCheck().check(only).verdict_name(), "n/a");
}

TEST(PipelineChecksTest, StateFailsOnADifferentValue) {
  PipelineHistory h = good_history();
  h.tables["Count/state"][std::string("\x07", 1)] = std::string("3\x00\xff", 3);
  expect_failure(StateCheck().check(h),
                 {"table Count/state key \"\\x07\"", "value \"3\\x00\\xff\"", "reference \"2\""});
}

TEST(PipelineChecksTest, StateTruncatesLongValues) {
  PipelineHistory h = good_history();
  h.tables["Count/state"][std::string("\x07", 1)] = std::string(100, 'v');
  const Verdict v = StateCheck().check(h);
  expect_failure(v, {"\"" + std::string(40, 'v') + "\"...(100 bytes)"});
  EXPECT_EQ(v.detail.find(std::string(41, 'v')), std::string::npos) << v.detail;
}

TEST(PipelineChecksTest, StateFailsOnAMissingOrAnExtraKey) {
  PipelineHistory missing = good_history();
  missing.tables["Count/state"].clear();
  expect_failure(StateCheck().check(missing), {"table Count/state key \"\\x07\": missing"});
  PipelineHistory extra = good_history();
  extra.tables["Count/state"]["8"] = "1";
  expect_failure(StateCheck().check(extra), {"table Count/state key \"8\": extra"});
  PipelineHistory extra_table = good_history();
  extra_table.tables["sink/clickhouse"]["k"] = "v";
  expect_failure(StateCheck().check(extra_table), {"table sink/clickhouse key \"k\": extra"});
}

TEST(PipelineChecksTest, FencingFailsForACommitAfterItsLeaseEnded) {
  PipelineHistory h = good_history();
  h.epochs[1].commit_time = 10'001;
  expect_failure(FencingCheck().check(h),
                 {"job computation/Count/0", "version 2", "0.010001s", "lease 1", "0.000000s..0.010000s"});
}

TEST(PipelineChecksTest, FencingFailsForACommitBeforeItsLeaseStarted) {
  PipelineHistory h = good_history();
  h.leases[2].started_at = 350;
  expect_failure(FencingCheck().check(h), {"job computation/Double/0", "version 3", "lease 2"});
}

TEST(PipelineChecksTest, FencingFailsForADeliveryBeforeItsCommit) {
  PipelineHistory h = good_history();
  h.deliveries[0].time = 350;  // the sink's epoch committed it at 400
  expect_failure(FencingCheck().check(h), {"sink/counts_out/0", "message 0000000000000021", "counts_out",
                                           "0.000350s", "before the sink committed it at 0.000400s"});
}

TEST(PipelineChecksTest, FencingFailsForAFencedProducersRecordCommittedByItsSuccessor) {
  PipelineHistory h = good_history();
  h.deliveries[0].written_epoch = h.deliveries[0].committed_epoch = 3;  // its own transaction: fine
  EXPECT_TRUE(FencingCheck().check(h).passed);
  h.deliveries[0].written_epoch = 2;  // written by a fenced producer, made visible by epoch 3
  expect_failure(FencingCheck().check(h), {"fenced-write-committed", "message 0000000000000021", "producer epoch 2",
                                           "transaction of epoch 3"});
}

TEST(PipelineChecksTest, FencingFailsForADeliveryNeverCommitted) {
  PipelineHistory h = good_history();
  h.epochs[3].consumed.clear();
  expect_failure(FencingCheck().check(h), {"message 0000000000000021", "no epoch of the sink ever committed it"});
}

TEST(PipelineChecksTest, FencingFailsWhenAnOldLeaseCommitsAfterItsReplacement) {
  PipelineHistory h = good_history();
  h.leases[3] = {0, -1};
  EpochRecord replacement = h.epochs[1];  // computation/Count/0 under a newer Lease
  replacement.lease = 3;
  replacement.version = 5;
  EpochRecord old = h.epochs[1];  // then the old Lease commits again
  old.version = 6;
  old.commit_time = 500;
  h.epochs.push_back(replacement);
  h.epochs.push_back(old);
  expect_failure(FencingCheck().check(h), {"computation/Count/0", "version 6", "lease 1",
                                           "replacement committed version 5", "lease 3"});
}

TEST(PipelineChecksTest, FencingAllowsAnOutboxRedeliveryAfterTheLeaseEnded) {
  PipelineHistory h = good_history();
  h.leases[2].ended_at = 420;  // committed at 400 under the Lease, delivered at 450
  EXPECT_TRUE(FencingCheck().check(h).passed);
}

TEST(PipelineChecksTest, FencingFailsForAnUnknownLease) {
  PipelineHistory h = good_history();
  h.epochs[0].lease = 99;
  expect_failure(FencingCheck().check(h), {"job source/numbers/0", "version 1", "unknown lease 99"});
}

TEST(PipelineChecksTest, FencingIgnoresCommitsWithoutALeaseOrATime) {
  PipelineHistory h = good_history();
  h.epochs[0].lease = 0;
  h.epochs[1].commit_time = -1;
  h.leases.erase(1);
  EXPECT_TRUE(FencingCheck().check(h).passed);
}

TEST(PipelineChecksTest, TimersFailWhenATimerFiresTwice) {
  PipelineHistory h = good_history();
  h.epochs[3].timers_fired = {"Count/7/100/t"};
  expect_failure(TimerCheck().check(h), {"timer Count/7/100/t fired twice", "computation/Count/0 (version 2)",
                                         "sink/counts_out/0 (version 4)"});
}

TEST(PipelineChecksTest, TimersFailWhenATimerIsDeletedWithoutFiring) {
  PipelineHistory h = good_history();
  h.epochs[1].timers_created.push_back("Count/7/300/t");  // created, never fired, not stored at the end
  expect_failure(TimerCheck().check(h), {"timer Count/7/300/t created 1 times, fired 0 times", "deleted without firing"});
  // Still stored at the end: waiting, not lost.
  h.pending_timers = {"Count/7/300/t"};
  EXPECT_TRUE(TimerCheck().check(h).passed);
  // Created again after it fired: two firings are right then.
  PipelineHistory again = good_history();
  again.epochs[3].timers_created = {"Count/7/100/t"};
  again.epochs[3].timers_fired = {"Count/7/100/t"};
  EXPECT_TRUE(TimerCheck().check(again).passed);
}

// What the engine recorded aside, the timers stored at the end are those the re-executed
// committed epochs hold (partitions aside): one deleted with no firing the re-execution ran,
// or one stored that no committed epoch left set, fails.
TEST(PipelineChecksTest, TimersStoredAtTheEndAreThoseTheReexecutionHolds) {
  PipelineHistory h = good_history();
  h.reexecuted = true;
  const std::string row = "8000000000000064/0000000000000007/t";  // trigger 0.0001s, key 7, stream t
  h.reexecuted_timers = {{"Count", {{row, "event time 0.000020s, set by 0000000000000012"}}}, {"Other", {}}};
  expect_failure(TimerCheck().check(h), {"timer (trigger 0.000100s, key 7, stream t) of computation Count is not stored at the end",
                                         "none ran its function: deleted without firing, or the function sets it only when run again"});
  // Stored in another partition than the one that set it (a repartition moved it): the same.
  h.epochs[1].timers_created.push_back("timers/Count/t:0003/" + row);
  h.pending_timers = {"timers/Count/t:0003/" + row};
  Verdict v = TimerCheck().check(h);
  EXPECT_TRUE(v.passed) << v.detail;
  // Stored with another value than the re-execution gives it (its event time, its creation).
  h.pending_timer_values["timers/Count/t:0003/" + row] = "event time 0.000010s, set by 0000000000000011";
  expect_failure(TimerCheck().check(h), {"timer (trigger 0.000100s, key 7, stream t) of computation Count is stored with "
                                         "event time 0.000010s, set by 0000000000000011, but the committed epochs "
                                         "re-executed set it with event time 0.000020s, set by 0000000000000012"});
  h.pending_timer_values["timers/Count/t:0003/" + row] = "event time 0.000020s, set by 0000000000000012";
  v = TimerCheck().check(h);
  EXPECT_TRUE(v.passed) << v.detail;
  h.reexecuted_timers["Count"].clear();
  expect_failure(TimerCheck().check(h), {"timer (trigger 0.000100s, key 7, stream t) of computation Count is stored at the end",
                                         "no committed epoch left it set"});
  h.reexecuted = false;  // without a re-execution there is nothing to hold it to
  v = TimerCheck().check(h);
  EXPECT_TRUE(v.passed) << v.detail;
}

// A system-time timer is due by its node's clock: a firing past the furthest that clock had
// read by the commit fails whatever watermark the engine claimed for it, and so does, for the
// re-execution check, an epoch told a time its node's clock never read.
TEST(PipelineChecksTest, SystemTimeIsHeldToTheNodesClock) {
  PipelineHistory h = good_history();
  FiredTimerRecord f;
  f.row = "8000000000000064/0000000000000007/t";
  f.key = 7;
  f.trigger_ts = 100;
  f.stream = "t";
  f.watermark = 100;
  EpochRecord& e = h.epochs[1];
  e.fired = {f};
  e.now = 100;
  e.clock_bound = 100;
  Verdict v = TimerCheck().check(h);
  EXPECT_TRUE(v.passed) << v.detail;
  e.clock_bound = 99;
  expect_failure(TimerCheck().check(h), {"timer (trigger 0.000100s, key 7, stream t) of job computation/Count/0 (key 7) fired "
                                         "at version 2, before its trigger 0.000100s",
                                         "node worker-1 had read no further than 0.000099s",
                                         "the engine said its watermark was 0.000100s"});
  h.reexecuted = true;
  e.reexecuted = true;
  e.expected_produced = e.produced;
  e.expected_timers_created = {"7/100/t"};
  expect_failure(ReexecutionCheck().check(h), {"computation Count (job computation/Count/0", "was told the time 0.000100s, past "
                                               "the furthest the clock of its node worker-1 had read by its commit (0.000099s)"});
  e.clock_bound = 100;
  v = ReexecutionCheck().check(h);
  EXPECT_TRUE(v.passed) << v.detail;
}

TEST(PipelineChecksTest, TimersWithNoTimerAreNotApplicable) {
  PipelineHistory h = good_history();
  h.epochs[1].timers_created.clear();
  h.epochs[1].timers_fired.clear();
  EXPECT_EQ(TimerCheck().check(h).verdict_name(), "n/a");
  h.pending_timers = {"Count/7/9/t"};  // stored, never created by a committed epoch
  expect_failure(TimerCheck().check(h), {"pending but never created"});
}

TEST(PipelineChecksTest, OrderingFailsWhenALineageGoesBackwards) {
  PipelineHistory h = good_history();
  std::swap(h.epochs[1].consumed[0], h.epochs[1].consumed[1]);
  expect_failure(OrderingCheck().check(h), {"computation Count", "key 7", "from producer source/numbers:",
                                            "message 0000000000000011 (alignment 0.000010s)",
                                            "after message 0000000000000012 (alignment 0.000020s)"});
}

TEST(PipelineChecksTest, OrderingFailsAcrossEpochsOfOneComputation) {
  PipelineHistory h = good_history();
  EpochRecord late = h.epochs[1];
  late.job = "computation/Count/1";
  late.version = 5;
  late.consumed = {message(0x13, 7, "in", 15, "c")};
  late.produced.clear();
  h.epochs[0].produced.push_back(late.consumed[0]);
  h.epochs.push_back(late);
  expect_failure(OrderingCheck().check(h), {"message 0000000000000013", "message 0000000000000012"});
}

// A key's messages that came from two partitions of one producer (a repartition moved the key
// between them) keep one lineage.
TEST(PipelineChecksTest, OrderingFollowsAKeyAcrossTheProducersPartitions) {
  PipelineHistory h = good_history();
  EpochRecord moved = h.epochs[0];
  moved.job = "source/numbers/3";
  moved.version = 2;
  moved.produced = {message(0x15, 7, "in", 5, "e")};
  h.epochs.insert(h.epochs.begin() + 1, moved);
  for (auto& e : h.epochs) e.version = static_cast<uint64_t>(&e - h.epochs.data()) + 1;
  h.epochs.push_back(h.epochs[2]);
  h.epochs.back().version = h.epochs.size();
  h.epochs.back().consumed = {moved.produced[0]};
  h.epochs.back().produced.clear();
  h.epochs.back().timers_fired.clear();
  h.epochs.back().timers_created.clear();
  expect_failure(OrderingCheck().check(h), {"message 0000000000000015 (alignment 0.000005s)", "after message 0000000000000012"});
}

TEST(PipelineChecksTest, OrderingSkipsRedeliveriesUnknownProducersAndOtherKeys) {
  PipelineHistory h = good_history();
  auto& consumed = h.epochs[1].consumed;
  consumed.push_back(consumed[0]);                         // a re-delivery of 0x11
  consumed.push_back(message(0x99, 7, "in", 1, "?"));      // nobody produced it
  consumed.push_back(message(0x14, 8, "in", 1, "d"));      // another key
  h.epochs[0].produced.push_back(consumed.back());
  const Verdict v = OrderingCheck().check(h);
  EXPECT_TRUE(v.passed) << v.detail;
}

TEST(PipelineChecksTest, OrderingIgnoresJobsThatAreNotConsumers) {
  PipelineHistory h = good_history();
  h.epochs[1].job = "source/Count/0";
  std::swap(h.epochs[1].consumed[0], h.epochs[1].consumed[1]);
  EXPECT_TRUE(OrderingCheck().check(h).passed);
}

// A user's function that is not deterministic fails re-execution and, through its outputs and
// state, delivery and state: the run's report says to read re-execution first. Not when
// re-execution holds (an engine's lost write), nor when it fails alone.
TEST(PipelineChecksTest, ReadFirstPointsAtReexecutionWhenItFailsBesideDeliveryOrState) {
  using checkers::Verdict;
  const std::vector<Verdict> user_bug = {Verdict::fail("delivery", "unexpected"), Verdict::fail("state", "started from"),
                                        Verdict::pass("consumption"), Verdict::fail("re-execution", "committed")};
  const std::string line = checkers::read_first(user_bug);
  EXPECT_TRUE(line.starts_with("re-execution: ")) << line;
  EXPECT_NE(line.find("the delivery, state failures may follow from it"), std::string::npos) << line;
  const std::vector<Verdict> engine_bug = {Verdict::fail("delivery", "lost-write"), Verdict::pass("re-execution")};
  EXPECT_EQ(checkers::read_first(engine_bug), "");
  const std::vector<Verdict> alone = {Verdict::pass("delivery"), Verdict::fail("re-execution", "committed")};
  EXPECT_EQ(checkers::read_first(alone), "");
}

TEST(PipelineChecksTest, SwiftDeterminismFailsOnADifferentPayload) {
  PipelineHistory h = good_history();
  EpochRecord rerun = h.epochs[2];
  rerun.job = "computation/Double/1";
  rerun.version = 5;
  rerun.produced[0].payload = "ab";
  h.epochs.push_back(rerun);
  expect_failure(SwiftDeterminismCheck().check(h), {"message 0000000000000031", "\"aa\" by job computation/Double/0",
                                                    "\"ab\" by job computation/Double/1"});
}

TEST(PipelineChecksTest, SwiftDeterminismAllowsARerunWithTheSamePayloadAndIgnoresOthers) {
  PipelineHistory h = good_history();
  h.epochs.push_back(h.epochs[2]);
  EpochRecord not_swift = h.epochs[1];
  not_swift.produced[0].payload = "7:9";
  h.epochs.push_back(not_swift);
  EXPECT_TRUE(SwiftDeterminismCheck().check(h).passed);
}

TEST(PipelineChecksTest, LivenessFailsWhenNotDrainedInTime) {
  PipelineHistory h = good_history();
  h.drained_at = -1;
  expect_failure(LivenessCheck().check(h), {"not drained by 0.006000s (0.005000s after the calm at 0.001000s)", "never drained"});
  h.undrained = "timers of Count are still to fire";
  expect_failure(LivenessCheck().check(h), {"never drained (at the bound: timers of Count are still to fire)"});
  h.drained_at = 6'001;
  expect_failure(LivenessCheck().check(h), {"not drained by 0.006000s (0.005000s after the calm at 0.001000s)", "drained at 0.006001s"});
  h.drained_at = 6'000;
  EXPECT_TRUE(LivenessCheck().check(h).passed);
}

// Why a run never drained, from what committed in the second half of the bound: nothing taken
// or fired (stuck), or a computation whose timers kept setting timers (busy, for ever).
TEST(PipelineChecksTest, LivenessSaysWhetherANeverDrainedRunWasStuckOrBusy) {
  PipelineHistory h = good_history();
  h.drained_at = -1;
  h.undrained = "timers of Count are still to fire";
  expect_failure(LivenessCheck().check(h), {"no epoch took a message or fired a timer in the bound's second half (from 0.003500s on): stuck, not busy"});
  // A sink whose epochs only acknowledge what its target took is delivering, not stuck.
  PipelineHistory delivering = h;
  delivering.deliveries.push_back(h.deliveries.front());
  delivering.deliveries.back().time = 4'000;
  delivering.deliveries.back().message.id = 0x99;
  expect_failure(LivenessCheck().check(delivering),
                 {"no epoch took a message or fired a timer in the bound's second half (from 0.003500s on), but "
                  "deliveries went on: sink counts_out's target took 1 messages it did not hold before (still "
                  "delivering, not stuck)"});
  // One resending what its target held already is stuck, however many copies it sends.
  PipelineHistory resending = h;
  for (int64_t t : {3'600, 4'000, 4'400}) {
    resending.deliveries.push_back(h.deliveries.front());
    resending.deliveries.back().time = t;
  }
  expect_failure(LivenessCheck().check(resending),
                 {"and the deliveries brought nothing new: sink counts_out's target took 3 copies of messages it held "
                  "already (resending, not delivering: stuck)"});
  // Left stopped or paused by the scenario's own last request: no drain is asked for.
  PipelineHistory stopped = h;
  stopped.left_at_rest = "stopped";
  stopped.left_at_rest_at = 1'000;
  const Verdict at_rest = LivenessCheck().check(stopped);
  EXPECT_TRUE(at_rest.passed && !at_rest.applicable) << at_rest.detail;
  EXPECT_NE(at_rest.detail.find("the scenario's last state request left the pipeline stopped at 0.001000s"), std::string::npos)
      << at_rest.detail;
  for (int i = 0; i < 12; ++i) {
    EpochRecord e = epoch("computation/Count/0", "Count", false, 1, 10 + i, 4'000 + i, {}, {}, {"Count/7/100/t"}, "w",
                          {"Count/7/100/t"});
    e.timers_fired = {"Count/7/100/t"};
    h.epochs.push_back(e);
    // A few firings are no sign of timers that keep themselves going.
    if (i == 2) {
      const Verdict few = LivenessCheck().check(h);
      EXPECT_NE(few.detail.find("computation/Count 3 epochs (0 messages taken, 3 timers fired, 3 set)"), std::string::npos)
          << few.detail;
      EXPECT_EQ(few.detail.find("set timers as they fired"), std::string::npos) << few.detail;
    }
  }
  expect_failure(LivenessCheck().check(h), {"committed in the bound's second half (from 0.003500s on): computation/Count 12 epochs (0 messages taken, 12 "
                                            "timers fired, 12 set)",
                                            "computation/Count's timers set timers as they fired"});
}

// good_history() with every job Lease ended by 10,000us and the pipeline `state` at version 6.
PipelineHistory ended_as(const char* state) {
  PipelineHistory h = good_history();
  h.leases[2] = {0, 9'000};
  h.state_changes = {{"working", 1, 40, {}}, {"draining", 5, 8'000, {}}, {state, 6, 10'000, {}}};
  return h;
}

TEST(PipelineChecksTest, LifecyclePassesAStopAndACompletionWithNothingInFlight) {
  const Verdict stopped = LifecycleCheck().check(ended_as("stopped"));
  EXPECT_TRUE(stopped.passed && stopped.applicable) << stopped.detail;
  EXPECT_EQ(stopped.detail, "stopped 1 times with nothing in flight");
  const Verdict completed = LifecycleCheck().check(ended_as("completed"));
  EXPECT_TRUE(completed.passed && completed.applicable) << completed.detail;
  const Verdict none = LifecycleCheck().check(good_history());
  EXPECT_TRUE(none.passed);
  EXPECT_FALSE(none.applicable);
}

// A stop asked for and lifted before its drain ended never reaches "stopped", but the drain was
// checked: the verdict says so instead of "never stopped" beside a stop fault's "stops applied".
TEST(PipelineChecksTest, LifecycleSaysWhatBecameOfDrainsThatNeverStopped) {
  const Verdict again = LifecycleCheck().check(ended_as("working"));
  EXPECT_TRUE(again.passed && again.applicable) << again.detail;
  EXPECT_EQ(again.detail, "1 drains begun and none reached \"stopped\": 1 started again before they ended; each "
                          "within the liveness bound");
  PipelineHistory h = ended_as("working");
  h.state_changes.pop_back();  // left draining, the run drained in time
  h.drained_at = 9'000;
  const Verdict left = LifecycleCheck().check(h);
  EXPECT_TRUE(left.passed && left.applicable) << left.detail;
  EXPECT_NE(left.detail.find("0 started again before they ended, the last still draining when the run ended"),
            std::string::npos)
      << left.detail;
}

TEST(PipelineChecksTest, LifecycleFailsOnAStopWithRowsInFlight) {
  PipelineHistory h = ended_as("stopped");
  h.state_changes.back().in_flight = {"output_messages/counts_out:0000/0000000000000007"};
  expect_failure(LifecycleCheck().check(h), {"stopped at version 6", "output_messages/counts_out:0000/0000000000000007"});
}

TEST(PipelineChecksTest, LifecycleFailsOnADrainThatDoesNotEndWithinTheBound) {
  PipelineHistory h = ended_as("working");  // drained at 8,000us, started again at 10,000us
  EXPECT_TRUE(LifecycleCheck().check(h).passed);
  h.state_changes.back().commit_time = 13'000;  // the bound (5,000us) after the drain began: still in time
  EXPECT_TRUE(LifecycleCheck().check(h).passed);
  h.state_changes.back().commit_time = 13'001;
  expect_failure(LifecycleCheck().check(h), {"the drain stored at version 5 (0.008000s) had not ended by 0.013000s",
                                              "the pipeline was working at 0.013001s instead"});
  h.faults_lifted_at = 9'000;  // a drain under faults has the bound from the heal on
  EXPECT_TRUE(LifecycleCheck().check(h).passed);
  h = ended_as("working");
  h.state_changes.pop_back();  // left draining
  h.drained_at = -1;
  expect_failure(LifecycleCheck().check(h), {"had not ended by 0.013000s", "it never ended"});
}

TEST(PipelineChecksTest, LifecycleFailsOnAJobLeaseActiveAtCompletion) {
  PipelineHistory h = ended_as("completed");
  h.leases[2] = {0, 10'001};  // left to run out a moment later
  expect_failure(LifecycleCheck().check(h), {"job lease 2", "completed at version 6"});
  h.leases[2] = {0, -1};
  expect_failure(LifecycleCheck().check(h), {"job lease 2"});
}

TEST(PipelineChecksTest, LifecycleFailsOnACommitAfterCompletion) {
  PipelineHistory h = ended_as("completed");
  h.epochs.push_back(epoch("sink/counts_out/0", "counts_out", false, 2, 7, 10'500, {}, {}, {}, "worker-2", {}));
  expect_failure(LifecycleCheck().check(h), {"sink/counts_out/0", "version 7", "completed at version 6"});
  h = ended_as("completed");
  h.controller_commits.push_back({"controller", 9, 8, 11'000, true, {{"source/numbers/0", 5}}});
  expect_failure(LifecycleCheck().check(h), {"stored 1 job Leases at version 8"});
}

TEST(PipelineChecksTest, LayoutFailsOnASinkThatDidNotFollowItsResharedTarget) {
  PipelineHistory h = good_history();
  h.target_reshards = {{"counts_out", 3, 2'000}, {"counts_out", 1, 4'000}};
  h.sink_partitions_at_end = {{"counts_out", 1}};
  const Verdict followed = LayoutCheck().check(h);
  EXPECT_TRUE(followed.passed && followed.applicable) << followed.detail;
  EXPECT_EQ(followed.detail, "2 target reshards of 1 sinks followed");
  h.sink_partitions_at_end = {{"counts_out", 3}};
  expect_failure(LayoutCheck().check(h), {"the target of sink counts_out was resharded to 1 tablets at 0.004000s",
                                          "ended with 3 partitions"});
}

TEST(PipelineChecksTest, LayoutFailsOnAJobRunningOnWithAnOlderLayoutPastTheGrace) {
  PipelineHistory h = good_history();
  EXPECT_FALSE(LayoutCheck().check(h).applicable);  // no new layout
  h.layout_grace = 1'000;
  h.layout_changes.push_back({1, 3, 5'000});
  EpochRecord late = epoch("sink/counts_out/0", "counts_out", false, 2, 9, 6'500, {}, {}, {}, "worker-2", {});
  h.epochs.push_back(late);
  expect_failure(LayoutCheck().check(h), {"sink/counts_out/0", "version 9 with layout 0", "after layout 1 was stored at version 3"});
  h.epochs.back().layout_version = 1;
  const Verdict taken = LayoutCheck().check(h);
  EXPECT_TRUE(taken.passed && taken.applicable) << taken.detail;
  h.epochs.back() = late;
  h.epochs.back().commit_time = 5'800;  // within the grace: the old job may still commit
  const Verdict early = LayoutCheck().check(h);
  EXPECT_TRUE(early.passed) << early.detail;
}

TEST(PipelineChecksTest, NoReplaySuffixWithoutAReplayCommand) {
  PipelineHistory h = good_history();
  h.replay_command.clear();
  h.drained_at = -1;
  const Verdict v = LivenessCheck().check(h);
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.detail.find("replay"), std::string::npos) << v.detail;
}


// The good history as a re-executed one: the committed history is the oracle. The source holds
// m11 and m12; Count took both and its re-execution gives what it committed (0x21, and the
// timer); Count read its state row as absent; the sinks are held by MessageId.
PipelineHistory reexecuted_history() {
  PipelineHistory h = good_history();
  h.reexecuted = true;
  h.source_inputs = {h.epochs[0].produced[0], h.epochs[0].produced[1]};
  h.stream_consumers = {{"in", {{"computation/Count/", true}, {"computation/Double/", false}}},
                        {"counts", {{"sink/counts_out/", true}}},
                        {"alerts", {{"sink/alerts/", false}}}};
  EpochRecord& count = h.epochs[1];
  count.reexecuted = true;
  count.expected_produced = count.produced;
  count.expected_timers_created = {"7/100/t"};  // Count/7/100/t: table Count, partition 7
  count.state_reads = {{"Count/state", 7, false, ""}};
  count.expected_state = count.state_reads;
  EpochRecord& twice = h.epochs[2];
  twice.consumed.push_back(h.source_inputs[1]);
  twice.produced.push_back(message(0x32, 7, "doubled", 20, "bb"));
  twice.reexecuted = true;
  twice.expected_produced = twice.produced;
  // The alerts come from a computation not in this history: the sink is held to what it took.
  h.epochs[4].produced = {};
  h.epochs.insert(h.epochs.begin() + 3,
                  epoch("computation/Alerts/0", "Alerts", false, 2, 3, 310, {}, {message(0x41, 7, "alerts", 10, "x"),
                        message(0x42, 8, "alerts", 11, "y")}, {}, "worker-2", {}));
  h.epochs[3].reexecuted = true;
  h.epochs[3].expected_produced = h.epochs[3].produced;
  h.sinks[0].expected = {h.epochs[1].produced[0]};
  h.sinks[1].expected = h.epochs[3].produced;
  h.sinks[2].expected = {message(0x51, 7, "log", 10, "a")};
  h.epochs.push_back(epoch("computation/Logger/0", "Logger", false, 2, 6, 420, {}, {message(0x51, 7, "log", 10, "a")},
                           {}, "worker-2", {}));
  h.epochs.back().reexecuted = true;
  h.epochs.back().expected_produced = h.epochs.back().produced;
  h.epochs.push_back(epoch("sink/log/0", "log", false, 2, 7, 430, {message(0x51, 7, "log", 10, "a")}, {}, {},
                           "worker-2", {}));
  h.stream_consumers["log"] = {{"sink/log/", false}};
  h.deliveries.push_back({"log", "sink/log/0", 2, 470, message(0x51, 7, "log", 10, "a")});
  h.deliveries.push_back({"log", "sink/log/0", 2, 480, message(0x51, 7, "log", 10, "a")});
  h.reexecuted_tables = h.tables;
  // The controller stored the Leases of the jobs added here too.
  for (const char* job : {"computation/Alerts/0", "computation/Logger/0", "sink/log/0"}) h.controller_commits[0].job_leases[job] = 2;
  return h;
}

TEST(ReexecutedHistoryTest, AGoodHistoryPassesEveryCheck) {
  for (const auto& v : run_pipeline_checks(reexecuted_history())) EXPECT_TRUE(v.passed) << v.check << ": " << v.detail;
  EXPECT_TRUE(ConsumptionCheck().check(reexecuted_history()).applicable);
  EXPECT_TRUE(ReexecutionCheck().check(reexecuted_history()).applicable);
}

TEST(ReexecutedHistoryTest, WithoutARexecutionTheNewChecksSayNotApplicable) {
  EXPECT_FALSE(ConsumptionCheck().check(good_history()).applicable);
  EXPECT_FALSE(ReexecutionCheck().check(good_history()).applicable);
}

TEST(ReexecutedHistoryTest, ConsumptionFailsOnASourceInputNeverEmittedOrEmittedTwice) {
  PipelineHistory h = reexecuted_history();
  h.source_inputs.push_back(message(0x13, 7, "in", 30, "c"));
  expect_failure(ConsumptionCheck().check(h), {"source input 0000000000000013", "by 0 committed source epochs"});
  h = reexecuted_history();
  h.epochs.push_back(epoch("source/numbers/0", "numbers", false, 1, 9, 900, {}, {h.source_inputs[0]}, {}, "worker-1", {}));
  expect_failure(ConsumptionCheck().check(h), {"source input 0000000000000011", "by 2 committed source epochs"});
}

TEST(ReexecutedHistoryTest, ConsumptionFailsOnASourceInputEmittedChanged) {
  PipelineHistory h = reexecuted_history();
  h.source_inputs[1].payload = "B";
  expect_failure(ConsumptionCheck().check(h), {"source input 0000000000000012", "was emitted as"});
}

TEST(ReexecutedHistoryTest, ConsumptionFailsOnAMessageNeverConsumed) {
  PipelineHistory h = reexecuted_history();
  h.epochs[2].consumed.clear();  // Double never took m11
  expect_failure(ConsumptionCheck().check(h), {"0000000000000011", "never consumed by computation/Double"});
}

// A run that never drained (it stalled, or its bound came first) has inputs its sources had
// not read and messages its consumers had not taken yet: late, not lost, and liveness says
// so. Not read yet is past the last input emitted from its queue partition; one skipped below
// an emitted one is lost. Not taken yet is still in its stream. A drained run has neither.
TEST(ReexecutedHistoryTest, ConsumptionLeavesWhatAStalledRunHadNotReadOrTakenYetToLiveness) {
  const PipelineHistory good = reexecuted_history();
  PipelineHistory h = good;
  h.source_inputs.push_back(message(0x13, 7, "in", 30, "c"));  // after the two emitted
  h.source_input_lanes = {1, 1, 1};
  h.epochs[2].consumed.clear();  // Double took neither of its two
  h.in_streams_at_end = {0x11, 0x12};
  h.undrained = "source numbers partition 0 read 2 of 3 inputs";
  const Verdict v = ConsumptionCheck().check(h);
  EXPECT_TRUE(v.passed) << v.detail;
  EXPECT_NE(v.detail.find("never drained: 1 inputs not read and 2 messages not consumed yet, left to liveness"),
            std::string::npos) << v.detail;
  // Left stopped by the scenario's own request, the run is not asked to drain and liveness
  // judges nothing: what is still to do is said to be so, not left to liveness.
  PipelineHistory at_rest = h;
  at_rest.left_at_rest = "stopped";
  at_rest.left_at_rest_at = 1'000;
  const Verdict rest = ConsumptionCheck().check(at_rest);
  EXPECT_TRUE(rest.passed) << rest.detail;
  EXPECT_NE(rest.detail.find("left stopped by the scenario's request at 0.001000s: 1 inputs not read and 2 messages not "
                             "consumed yet (not asked to drain)"),
            std::string::npos) << rest.detail;
  EXPECT_EQ(rest.detail.find("liveness"), std::string::npos) << rest.detail;
  // Gone from the stream: lost.
  PipelineHistory gone = h;
  gone.in_streams_at_end = {0x12};
  expect_failure(ConsumptionCheck().check(gone), {"0000000000000011", "never consumed by computation/Double"});
  // Skipped: an input below one its source emitted.
  PipelineHistory skipped = h;
  skipped.source_inputs.insert(skipped.source_inputs.begin(), message(0x10, 7, "in", 1, "z"));
  skipped.source_input_lanes.insert(skipped.source_input_lanes.begin(), 1);
  expect_failure(ConsumptionCheck().check(skipped), {"source input 0000000000000010", "by 0 committed source epochs"});
  // Drained: nothing is late.
  PipelineHistory drained = h;
  drained.undrained.clear();
  expect_failure(ConsumptionCheck().check(drained), {"source input 0000000000000013", "by 0 committed source epochs"});
  // What was committed is still held to the guarantee.
  h.epochs.push_back(epoch("source/numbers/0", "numbers", false, 1, 9, 900, {}, {h.source_inputs[0]}, {}, "worker-1", {}));
  expect_failure(ConsumptionCheck().check(h), {"source input 0000000000000011", "by 2 committed source epochs"});
}

TEST(ReexecutedHistoryTest, ConsumptionFailsOnAnExactlyOnceConsumerTakingAMessageTwice) {
  PipelineHistory h = reexecuted_history();
  h.epochs.push_back(epoch("computation/Count/1", "Count", false, 1, 9, 900, {h.source_inputs[1]}, {}, {}, "w", {}));
  expect_failure(ConsumptionCheck().check(h), {"0000000000000012", "computation/Count", "in 2 committed epochs"});
  // A swift map may take it again (it recomputes what it did not acknowledge).
  h = reexecuted_history();
  h.epochs.push_back(epoch("computation/Double/1", "Double", true, 1, 9, 900, {h.source_inputs[0]}, {}, {}, "w", {}));
  EXPECT_TRUE(ConsumptionCheck().check(h).passed);
}

TEST(ReexecutedHistoryTest, ConsumptionFailsOnAConsumedMessageUnlikeWhatWasCommitted) {
  PipelineHistory h = reexecuted_history();
  h.epochs[1].consumed[1].payload = "changed";
  expect_failure(ConsumptionCheck().check(h), {"computation/Count/0", "0000000000000012", "but it was committed as"});
  h = reexecuted_history();
  h.epochs[1].consumed[1].event_ts = 5;
  expect_failure(ConsumptionCheck().check(h), {"0000000000000012", "event time 0.000005s"});
  h = reexecuted_history();
  h.epochs[1].consumed.push_back(message(0x99, 7, "in", 30, "made up"));
  expect_failure(ConsumptionCheck().check(h), {"0000000000000099", "no committed epoch produced"});
}

// Where the history records the alignment times producers gave (the simulator's), a consumer
// that read another one back fails: the order it kept, and `ordering` judged, was not the
// producers'. A real history's produced messages are re-executed, without times.
TEST(ReexecutedHistoryTest, ConsumptionFailsOnAnAlignmentTimeUnlikeWhatWasCommitted) {
  PipelineHistory h = reexecuted_history();
  h.epochs[1].consumed[1].alignment_ts = 15;
  Verdict v = ConsumptionCheck().check(h);
  EXPECT_TRUE(v.passed) << v.detail;
  h.produced_times_recorded = true;
  expect_failure(ConsumptionCheck().check(h), {"job computation/Count/0", "consumed message 0000000000000012",
                                               "with alignment time 0.000015s, but it was committed with alignment time 0.000020s"});
  h.epochs[1].consumed[1].alignment_ts = 20;
  v = ConsumptionCheck().check(h);
  EXPECT_TRUE(v.passed) << v.detail;
}

TEST(ReexecutedHistoryTest, ReexecutionFailsOnOutputsTheFunctionDoesNotGive) {
  PipelineHistory h = reexecuted_history();
  h.epochs[1].expected_produced[0].payload = "7:3";
  expect_failure(ReexecutionCheck().check(h), {"computation Count", "computation/Count/0", "0000000000000021", "\"7:3\""});
  h = reexecuted_history();
  h.epochs[1].expected_produced.clear();
  expect_failure(ReexecutionCheck().check(h), {"0000000000000021", "which its re-execution does not produce"});
  h = reexecuted_history();
  h.epochs[1].expected_produced.push_back(message(0x22, 7, "counts", 20, "7:1"));
  expect_failure(ReexecutionCheck().check(h), {"did not commit message 0000000000000022"});
}

TEST(ReexecutedHistoryTest, TwoLongValuesAreShownWhereTheyDiffer) {
  // Alike for their first 50 bytes: the first 40 of each would show nothing apart.
  PipelineHistory h = good_history();
  const std::string common(50, 'v');
  h.tables["Count/state"][std::string("\x07", 1)] = common + "GOT-this-tail";
  h.reference_tables["Count/state"][std::string("\x07", 1)] = common + "WANT-that-tail";
  expect_failure(StateCheck().check(h), {"value ...\"vvvvvvvvvvvvGOT-this-tail\"(63 bytes)",
                                         "reference ...\"vvvvvvvvvvvvWANT-that-tail\"(64 bytes)"});
  h = reexecuted_history();
  h.epochs[1].produced[0].payload = common + "x" + std::string(60, 'z');
  h.epochs[1].expected_produced[0].payload = common + "y" + std::string(60, 'z');
  expect_failure(ReexecutionCheck().check(h), {"(key 7, ...\"vvvvvvvvvvvvx" + std::string(27, 'z') + "\"...(111 bytes))",
                                               "gives as 0000000000000021 (key 7, ...\"vvvvvvvvvvvvy"});
  // A difference within the first 40 bytes is shown from the start, as before.
  h.epochs[1].produced[0].payload = "x" + common;
  h.epochs[1].expected_produced[0].payload = "y" + common;
  expect_failure(ReexecutionCheck().check(h), {"(key 7, \"xvvv", "(key 7, \"yvvv"});
  // Equal long payloads of messages that differ in key: from the start, too.
  h.epochs[1].produced[0].payload = h.epochs[1].expected_produced[0].payload = common;
  h.epochs[1].produced[0].key = 8;
  expect_failure(ReexecutionCheck().check(h), {"(key 8, \"vvvv", "(key 7, \"vvvv"});
}

TEST(ReexecutedHistoryTest, AnEpochWithoutAStoreVersionIsNamedByItsEpoch) {
  // onceflow real --verify reads the epochs' rows, which carry no commit version.
  PipelineHistory h = reexecuted_history();
  h.epochs[1].version = 0;
  h.epochs[1].epoch = 5;
  h.epochs[1].expected_produced[0].payload = "7:3";
  const Verdict v = ReexecutionCheck().check(h);
  expect_failure(v, {"computation Count (job computation/Count/0, committed epoch 5 at"});
  EXPECT_EQ(v.detail.find("version 0"), std::string::npos) << v.detail;
}

TEST(ReexecutedHistoryTest, ReexecutionFailsOnTimersTheFunctionDoesNotSetOrHold) {
  PipelineHistory h = reexecuted_history();
  h.epochs[1].expected_timers_created = {"7/200/t"};
  expect_failure(ReexecutionCheck().check(h), {"set timer 7/100/t, which its re-execution does not set"});
  h = reexecuted_history();
  h.epochs[1].expected_timers_created.push_back("7/300/t");
  expect_failure(ReexecutionCheck().check(h), {"did not set timer 7/300/t"});
  h = reexecuted_history();
  h.epochs[1].reexecution_problems = {"fired timer 100/t (key 7), which its re-execution does not hold"};
  expect_failure(ReexecutionCheck().check(h), {"fired timer 100/t", "computation/Count/0"});
}

TEST(ReexecutedHistoryTest, StateFailsOnAnEpochStartingFromOtherStateOrOtherTablesAtTheEnd) {
  PipelineHistory h = reexecuted_history();
  h.epochs[1].expected_state[0] = {"Count/state", 7, true, "1"};
  expect_failure(StateCheck().check(h), {"computation Count", "version 2", "table Count/state key 7",
                                         "(absent)", "\"1\""});
  // Key 7 is the key of the message the epoch took: no word of another key's row.
  EXPECT_EQ(StateCheck().check(h).detail.find(kReadAnotherKeysRow), std::string::npos);
  // A row of a key none of its messages or timers had, but no other job of Count took one:
  // nothing to say of whose the row is.
  for (MessageRecord& m : h.epochs[1].consumed) m.key = 8;
  EXPECT_EQ(StateCheck().check(h).detail.find(kReadAnotherKeysRow), std::string::npos);
  // Another job of Count took key 7: the function read another job's key's row.
  h.epochs.push_back(epoch("computation/Count/1", "Count", false, 2, 8, 440, {message(0x61, 7, "in", 10, "z")}, {}, {},
                           "worker-2", {}));
  expect_failure(StateCheck().check(h), {"table Count/state key 7", "key 7 is the key of no message or timer this epoch took",
                                         "job computation/Count/1 took some", std::string(kReadAnotherKeysRow)});
  h = reexecuted_history();
  h.reexecuted_tables["Count/state"][std::string("\x07", 1)] = "3";
  expect_failure(StateCheck().check(h), {"table Count/state", "re-executed"});
  // The reference run no longer decides: a table it disagrees with passes.
  h = reexecuted_history();
  h.reference_tables["Count/state"][std::string("\x07", 1)] = "9";
  EXPECT_TRUE(StateCheck().check(h).passed);
}

TEST(ReexecutedHistoryTest, DeliveryFailsOnAMissingOutputNamingItsIdAndCount) {
  PipelineHistory h = reexecuted_history();
  h.deliveries.erase(h.deliveries.begin());  // counts_out's 0x21
  expect_failure(DeliveryCheck().check(h), {"sink counts_out", "lost-write: 1 of 1 messages missing",
                                            "0000000000000021", "\"7:2\"", "computation Count", "committed version 2"});
  // At most once: missing is fine when dropped or in doubt; a drop the target holds is not.
  h = reexecuted_history();
  h.counted_drops["alerts"].clear();
  expect_failure(DeliveryCheck().check(h), {"sink alerts", "0000000000000042", "not dropped, not in doubt"});
  h.in_doubt["alerts"] = {0x42};
  EXPECT_TRUE(DeliveryCheck().check(h).passed);
  h.counted_drops["alerts"] = {0x41};
  expect_failure(DeliveryCheck().check(h), {"0000000000000041 counted as dropped, but the target holds it"});
}

// An at-most-once sink downstream of an at_least_once_consistent computation may take one
// MessageId again (its stream repeats late): it sends at most once per take. Copies beyond
// its committed epochs' takes are duplicates, and a drop the target holds as often as it was
// taken is still a lie.
TEST(ReexecutedHistoryTest, DeliveryHoldsAnAtMostOnceSinkWhoseStreamRepeatsToItsTakes) {
  PipelineHistory h = reexecuted_history();
  h.sinks[1].repeats_late = true;
  const DeliveryRecord again{"alerts", "", 0, 520, message(0x41, 7, "alerts", 10, "x")};
  h.deliveries.push_back(again);
  expect_failure(DeliveryCheck().check(h), {"sink alerts (at-most-once per take)", "duplicate: message 0000000000000041",
                                            "made visible 2 times, taken by the sink's committed epochs 1 times"});
  // Without the repeats, the same copy is a duplicate of a sink that sends at most once.
  PipelineHistory once = h;
  once.sinks[1].repeats_late = false;
  expect_failure(DeliveryCheck().check(once), {"sink alerts (at-most-once)", "0000000000000041"});
  // A second committed take of 0x41 accounts for the second copy.
  h.epochs.push_back(epoch("sink/alerts/0", "alerts", false, 2, 8, 500, {message(0x41, 7, "alerts", 10, "x")}, {}, {},
                           "worker-2", {}));
  h.controller_commits[0].job_leases["sink/alerts/0"] = 2;
  const Verdict per_take = DeliveryCheck().check(h);
  EXPECT_TRUE(per_take.passed) << per_take.detail;
  EXPECT_NE(per_take.detail.find("alerts at-most-once per take"), std::string::npos) << per_take.detail;
  // A third copy is one too many.
  h.deliveries.push_back(again);
  expect_failure(DeliveryCheck().check(h), {"made visible 3 times, taken by the sink's committed epochs 2 times"});
  // One take dropped, the other delivered: fine; dropped while the target holds every take: not.
  h.deliveries.pop_back();
  h.deliveries.pop_back();
  h.counted_drops["alerts"].insert(0x41);
  const Verdict dropped_once = DeliveryCheck().check(h);
  EXPECT_TRUE(dropped_once.passed) << dropped_once.detail;
  h.deliveries.push_back(again);
  expect_failure(DeliveryCheck().check(h), {"0000000000000041 counted as dropped, but the target holds it as often as the "
                                            "sink's committed epochs took it (2)"});
}

// A run that never drained: what is still in the sink's stream, untaken by the sink, is late
// (liveness fails the run), as consumption says, and so is one the sink took that is still in
// its outbox; gone from the stream untaken, or from the outbox undelivered, it is lost as in
// any run.
TEST(ReexecutedHistoryTest, DeliveryLeavesWhatAStalledRunsSinkHadNotTakenYetToLiveness) {
  PipelineHistory h = reexecuted_history();
  h.deliveries.erase(h.deliveries.begin());  // counts_out's 0x21
  h.undrained = "stream counts still holds 1 message";
  h.in_streams_at_end = {0x21};
  // The sink took it and its outbox holds it no more: lost.
  expect_failure(DeliveryCheck().check(h), {"sink counts_out", "lost-write: 1 of 1 messages missing", "0000000000000021"});
  // Still in the outbox: its delivery is under way.
  PipelineHistory outbox = h;
  outbox.in_outboxes_at_end = {0x21};
  const Verdict pending = DeliveryCheck().check(outbox);
  EXPECT_TRUE(pending.passed) << pending.detail;
  EXPECT_NE(pending.detail.find("never drained: 1 messages not delivered yet (in a stream or an outbox), left to "
                                "liveness"),
            std::string::npos)
      << pending.detail;
  outbox.undrained.clear();  // a drained run: lost
  expect_failure(DeliveryCheck().check(outbox), {"sink counts_out", "lost-write: 1 of 1 messages missing"});
  for (EpochRecord& e : h.epochs) {
    if (e.job == "sink/counts_out/0") e.consumed.clear();  // the sink never took it
  }
  const Verdict late = DeliveryCheck().check(h);
  EXPECT_TRUE(late.passed) << late.detail;
  EXPECT_NE(late.detail.find("never drained: 1 messages not delivered yet (in a stream or an outbox), left to liveness"),
            std::string::npos)
      << late.detail;
  PipelineHistory gone = h;
  gone.in_streams_at_end.clear();
  expect_failure(DeliveryCheck().check(gone), {"sink counts_out", "lost-write: 1 of 1 messages missing"});
  // Behind a later message of its key that the sink took (a sink takes a key's messages in
  // alignment order): skipped, lost.
  h.produced_times_recorded = true;
  EXPECT_TRUE(DeliveryCheck().check(h).passed) << DeliveryCheck().check(h).detail;
  PipelineHistory skipped = h;
  const MessageRecord later = message(0x22, 7, "counts", 30, "7:3");
  for (EpochRecord& e : skipped.epochs) {
    if (e.job == "computation/Count/0") {
      e.produced.push_back(later);
      e.expected_produced.push_back(later);
    }
    if (e.job == "sink/counts_out/0") e.consumed = {later};
  }
  skipped.sinks[0].expected.push_back(later);
  skipped.deliveries.push_back({"counts_out", "sink/counts_out/0", 2, 455, later});
  expect_failure(DeliveryCheck().check(skipped), {"sink counts_out", "lost-write: 1 of 2 messages missing",
                                                  "0000000000000021"});
  PipelineHistory drained = h;
  drained.undrained.clear();
  expect_failure(DeliveryCheck().check(drained), {"sink counts_out", "lost-write: 1 of 1 messages missing"});
}

TEST(ReexecutedHistoryTest, DeliveryNamesADuplicateOnlyForOneIdVisibleTwice) {
  PipelineHistory h = reexecuted_history();
  h.deliveries.push_back({"counts_out", "sink/counts_out/0", 2, 455, h.sinks[0].expected[0]});
  expect_failure(DeliveryCheck().check(h), {"duplicate: message 0000000000000021", "2 times"});
  EXPECT_EQ(DeliveryCheck().check(h).detail.find("network"), std::string::npos);
  // A copy the transport made still breaks the promise at the target, and says whose it is.
  h.deliveries.back().network_copy = true;
  expect_failure(DeliveryCheck().check(h), {"duplicate: message 0000000000000021",
                                            "1 of the 2 copies came from the network duplicating the request"});
  // Two outputs with equal content and different ids are no duplicate: each is its own.
  h = reexecuted_history();
  MessageRecord same = h.sinks[0].expected[0];
  same.id = 0x23;
  h.sinks[0].expected.push_back(same);
  h.deliveries.push_back({"counts_out", "sink/counts_out/0", 2, 455, same});
  EXPECT_TRUE(DeliveryCheck().check(h).passed) << DeliveryCheck().check(h).detail;
}

// One MessageId, one message: a computation that takes each input once commits each output
// once. Two outputs under one id (the engine naming outputs of one input, or of two, alike)
// fail consumption, whatever delivery makes of them: a sink deduplicating by id keeps one, and
// the re-execution names outputs as the engine does.
TEST(ReexecutedHistoryTest, ConsumptionFailsOnOneIdCommittedTwiceByAComputationThatTakesEachInputOnce) {
  PipelineHistory h = reexecuted_history();
  ASSERT_TRUE(ConsumptionCheck().check(h).passed) << ConsumptionCheck().check(h).detail;
  MessageRecord other = h.epochs[1].produced[0];
  other.payload = "7:2";
  h.epochs[1].produced.push_back(other);  // the same epoch
  expect_failure(ConsumptionCheck().check(h), {"message 0000000000000021 committed twice", "computation Count"});
  h = reexecuted_history();
  EpochRecord later = h.epochs[1];
  later.version = 40;
  later.consumed = {};
  later.produced = {other};  // another epoch of the same computation
  h.epochs.push_back(later);
  expect_failure(ConsumptionCheck().check(h), {"message 0000000000000021 committed twice", "committed version 40"});
  // A computation that may take an input twice (Double, at least once) may give one id two
  // payloads, even in one epoch: a function with state answers the second take otherwise.
  h = reexecuted_history();
  MessageRecord again = h.epochs[2].produced.back();
  again.payload = "bbb";
  h.epochs[2].produced.push_back(again);
  const Verdict v = ConsumptionCheck().check(h);
  EXPECT_EQ(v.detail.find("committed twice"), std::string::npos) << v.detail;
}

// An output carries the event time of the input or timer it came from: one with another fails
// consumption (the re-execution derives outputs as the engine does, so it would agree).
TEST(ReexecutedHistoryTest, ConsumptionFailsOnAnOutputWhoseEventTimeNoInputOfItsEpochHas) {
  PipelineHistory h = reexecuted_history();
  h.epochs[1].produced[0].event_ts += 1;
  expect_failure(ConsumptionCheck().check(h), {"message 0000000000000021", "computation Count", "carries event time"});
  // A timer's output carries the timer's event time.
  h = reexecuted_history();
  h.epochs[1].consumed.clear();
  h.epochs[1].fired = {{"7/100/t", 1, 7, 100, h.epochs[1].produced[0].event_ts, "t", 0, 100}};
  const Verdict v = ConsumptionCheck().check(h);  // fails, as its input is now taken by no one
  EXPECT_EQ(v.detail.find("carries event time"), std::string::npos) << v.detail;
}

TEST(ReexecutedHistoryTest, DeliveryFailsOnAnOutputNoReexecutionProduced) {
  PipelineHistory h = reexecuted_history();
  h.deliveries.push_back({"counts_out", "sink/counts_out/0", 2, 455, message(0x77, 7, "counts", 20, "7:9")});
  expect_failure(DeliveryCheck().check(h), {"unexpected: message 0000000000000077", "job sink/counts_out/0",
                                            "nor did any committed epoch as recorded"});
  // A real run records outputs by digest only: the id is one the function gave when it ran, not re-executed.
  h.outputs_recorded = false;
  expect_failure(DeliveryCheck().check(h), {"unexpected: message 0000000000000077", "a real run records its epochs' outputs by digest only"});
  h = reexecuted_history();
  h.deliveries[0].message.payload = "7:5";  // the right id, other content
  expect_failure(DeliveryCheck().check(h), {"unexpected: message 0000000000000021 delivered as", "\"7:5\""});
  // At least once: copies of one id pass; a copy with other content does not.
  h = reexecuted_history();
  h.deliveries.back().message.payload = "b";
  expect_failure(DeliveryCheck().check(h), {"sink log", "0000000000000051"});
}

TEST(ReexecutedHistoryTest, TimersFailOnAFiringBeforeItsWatermark) {
  PipelineHistory h = reexecuted_history();
  h.epochs[1].fired = {{"100/t", 0x11, 7, 100, 0, "t", 2, 100}};
  EXPECT_TRUE(TimerCheck().check(h).passed);
  h.epochs[1].fired[0].watermark = 99;
  expect_failure(TimerCheck().check(h), {"timer 100/t", "watermark at 0.000099s, before its trigger 0.000100s"});
}

TEST(ReexecutedHistoryTest, AnEventTimeTimerFiresOnlyOnceItsJobTookAMessageAsNewAsItsTrigger) {
  // The engine's own word for its watermark is not taken: it once came from the system time.
  PipelineHistory h = reexecuted_history();
  h.event_time_timer_streams = {"Count/t"};
  int64_t newest = INT64_MIN;
  for (const MessageRecord& m : h.epochs[1].consumed) newest = std::max(newest, m.event_ts);
  h.epochs[1].fired = {{"100/t", 0x11, 7, newest, 0, "t", 2, newest + 50}};
  EXPECT_TRUE(TimerCheck().check(h).passed) << TimerCheck().check(h).detail;
  h.epochs[1].fired[0].trigger_ts = newest + 1;
  expect_failure(TimerCheck().check(h), {"event-time timer", "computation/Count/0", "before its trigger",
                                         "the job's event watermark (the newest event it took, or the trigger of a due "
                                         "timer a repartition moved to it) was " + format_time(newest)});
  // A timer of another stream (system time) is held to the watermark the engine gave only.
  h.event_time_timer_streams = {"Count/other"};
  EXPECT_TRUE(TimerCheck().check(h).passed);
}

TEST(ReexecutedHistoryTest, ADueEventTimeTimerStillStoredAtTheEndFails) {
  // A job whose watermark was lost (say, a new life starting from none) leaves due timers
  // unfired; the engine, judging by that watermark, calls the run drained.
  PipelineHistory h = reexecuted_history();
  h.event_time_timer_streams = {"Count/t"};
  int64_t newest = INT64_MIN;
  for (const MessageRecord& m : h.epochs[1].consumed) newest = std::max(newest, m.event_ts);
  const auto row = [](int64_t trigger) {
    return fmt::format("timers/Count/t:0000/{:016x}/{:016x}/t", static_cast<uint64_t>(trigger) ^ (uint64_t{1} << 63), 7);
  };
  h.epochs[1].timers_created.push_back(row(newest));
  h.pending_timers = {row(newest)};
  expect_failure(TimerCheck().check(h), {"event-time timer timers/Count/t:0000/(trigger " + format_time(newest),
                                         "of job computation/Count/0 never fired", "was " + format_time(newest)});
  // Not due yet, or in a run that ended stopped (no timer fires while draining): it may wait.
  PipelineHistory later = h;
  later.epochs[1].timers_created.back() = row(newest + 1);
  later.pending_timers = {row(newest + 1)};
  EXPECT_TRUE(TimerCheck().check(later).passed) << TimerCheck().check(later).detail;
  h.state_changes.push_back({"stopped", 99, 990, {}});
  EXPECT_TRUE(TimerCheck().check(h).passed) << TimerCheck().check(h).detail;
  // In a run that never drained (its job may have been stuck, say every epoch threw), it is
  // late: liveness fails the run.
  h.state_changes.clear();
  PipelineHistory stalled = h;
  stalled.undrained = "row timers/Count/t:0000/... is still there";
  const Verdict late = TimerCheck().check(stalled);
  EXPECT_TRUE(late.passed) << late.detail;
  EXPECT_NE(late.detail.find("never drained: 1 of them due, not fired yet, left to liveness"), std::string::npos)
      << late.detail;
  // Not when its job went on taking messages after the commit that made it due: it lost it.
  stalled.epochs.push_back(epoch("computation/Count/0", "Count", false, 1, 50, 950, {message(0x13, 7, "in", 5, "c")}, {},
                                 {}, "worker-1", {}));
  expect_failure(TimerCheck().check(stalled), {"of job computation/Count/0 never fired"});
  // A system-time timer is not held to event times.
  h.state_changes.clear();
  h.event_time_timer_streams = {"Count/other"};
  EXPECT_TRUE(TimerCheck().check(h).passed);
}

// No timer fires while a pipeline drains, so a repartition moves due timers too. One due where
// it was stays due where it goes (the engine gives the partition it goes to its trigger as a
// floor of the event watermark), whether or not that partition ever takes an event as new:
// left stored at the end it fails, fired there it passes. One not due where it was is not.
TEST(ReexecutedHistoryTest, AnEventTimeTimerDueWhereARepartitionMovedItFromStaysDue) {
  PipelineHistory h = reexecuted_history();
  h.event_time_timer_streams = {"Count/t"};
  int64_t newest = INT64_MIN;
  for (const MessageRecord& m : h.epochs[1].consumed) newest = std::max(newest, m.event_ts);
  const auto row = [](int partition, int64_t trigger) {
    return fmt::format("timers/Count/t:{:04x}/{:016x}/{:016x}/t", partition,
                       static_cast<uint64_t>(trigger) ^ (uint64_t{1} << 63), 7);
  };
  uint64_t last = 0;
  for (const EpochRecord& e : h.epochs) last = std::max(last, e.version);
  const auto moved = [&](int64_t trigger) {
    PipelineHistory out = h;
    out.epochs[1].timers_created.push_back(row(0, trigger));
    out.timer_moves.push_back({row(0, trigger), row(1, trigger), last + 1});
    return out;
  };
  // An epoch of the partition it went to, which took no event, fires it.
  const auto fired = [&](PipelineHistory out, int64_t trigger) {
    out.epochs.push_back(epoch("computation/Count/1", "Count", false, 2, last + 2, 990, {}, {}, {row(1, trigger)},
                               "worker-1", {}));
    out.epochs.back().fired = {{row(1, trigger), 0x11, 7, trigger, 0, "t", 0, trigger}};
    return out;
  };
  PipelineHistory stored = moved(newest);
  stored.pending_timers = {row(1, newest)};
  expect_failure(TimerCheck().check(stored), {"timers/Count/t:0001/(trigger " + format_time(newest),
                                              "of job computation/Count/1 never fired", "was " + format_time(newest)});
  const PipelineHistory fired_there = fired(moved(newest), newest);
  EXPECT_TRUE(TimerCheck().check(fired_there).passed) << TimerCheck().check(fired_there).detail;
  // Not due where it was: it waits for its new partition's events, and may not fire before.
  PipelineHistory waits = moved(newest + 1);
  waits.pending_timers = {row(1, newest + 1)};
  EXPECT_TRUE(TimerCheck().check(waits).passed) << TimerCheck().check(waits).detail;
  expect_failure(TimerCheck().check(fired(moved(newest + 1), newest + 1)),
                 {"event-time timer timers/Count/t:0001/", "of job computation/Count/1", "before its trigger"});
}

}  // namespace
}  // namespace onceflow::checkers
