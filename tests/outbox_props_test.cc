// Outbox + receiver as a property: the engine's outbox sender (core/outbox.h) against the
// simulated target's (producer_id, seqNo) dedup (sim/queue_target.h), under any sequence of
// epoch commits, batches of any size whose request or reply is lost, target errors, batches
// the target takes only in part, and sender restarts. Once the outbox drains, the target
// holds every committed message exactly once, in order. With the new-seqno-on-resend or the
// batch-ack-whole bug switch the same property must fail.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/outbox.h"
#include "sim/queue_target.h"
#include "testing/testing.h"

namespace onceflow {
namespace {

enum class Fate { kAcked, kRequestLost, kReplyLost, kTargetError, kTakenInPart };

struct Step {
  enum Kind { kCommit, kDeliver, kRestartSender } kind = kCommit;
  int messages = 1;          // kCommit: rows the epoch adds; kDeliver: rows per batch at most
  std::vector<Fate> fates;   // kDeliver: what happens to each batch, in turn (then: acked)
};

void showValue(const Step& s, std::ostream& os) {
  static const char* const kFates[] = {"acked", "request-lost", "reply-lost", "target-error", "taken-in-part"};
  switch (s.kind) {
    case Step::kCommit: os << "commit " << s.messages; break;
    case Step::kRestartSender: os << "restart sender"; break;
    case Step::kDeliver:
      os << "deliver in batches of " << s.messages << " [";
      for (const Fate f : s.fates) os << kFates[static_cast<int>(f)] << " ";
      os << "]";
      break;
  }
}

rc::Gen<Step> step() {
  const auto fate = rc::gen::weightedElement<Fate>(
      {{4, Fate::kAcked}, {1, Fate::kRequestLost}, {1, Fate::kReplyLost}, {1, Fate::kTargetError}, {2, Fate::kTakenInPart}});
  return rc::gen::oneOf(
      rc::gen::map(rc::gen::inRange(1, 4), [](int n) { return Step{Step::kCommit, n, {}}; }),
      rc::gen::apply([](int batch, std::vector<Fate> f) { return Step{Step::kDeliver, batch, std::move(f)}; },
                     rc::gen::inRange(1, 5), rc::gen::container<std::vector<Fate>>(fate)),
      rc::gen::just(Step{Step::kRestartSender, 0, {}}));
}

// The sink's side as the engine keeps it: outbox rows in the store, the acknowledged seqNo in
// the job's meta row, the sender in memory.
struct Sink {
  explicit Sink(OutboxSender::Bugs bugs) : bugs(bugs), sender(bugs) {}
  OutboxSender::Bugs bugs;
  OutboxSender sender;
  std::map<uint64_t, std::string> outbox;  // seqno -> message id (as the row's payload)
  uint64_t next_seqno = 1;
  uint64_t acked_seqno = 0;

  // An epoch commit: rows the sender has had acknowledged are erased, new rows are added.
  void commit(int messages, uint64_t* next_message) {
    for (uint64_t s = acked_seqno + 1; s <= sender.delivered() && s < next_seqno; ++s) outbox.erase(s);
    acked_seqno = std::max(acked_seqno, std::min(sender.delivered(), next_seqno - 1));
    for (int i = 0; i < messages; ++i) outbox[next_seqno++] = std::to_string((*next_message)++);
  }
  std::vector<OutboxRow> rows() const {
    std::vector<OutboxRow> out;
    for (const auto& [seqno, message] : outbox) out.push_back({seqno, message});
    return out;
  }
};

void deliver(Sink& sink, sim::TargetLog& target, const std::vector<Fate>& fates, int batch_messages) {
  size_t turn = 0;
  const BatchLimits limits{static_cast<size_t>(batch_messages), 1 << 20};
  (void)sink.sender.deliver(sink.rows(), limits, [&](const std::vector<AppendRequest::Entry>& batch) -> Result<uint64_t> {
    const Fate fate = turn < fates.size() ? fates[turn] : Fate::kAcked;
    ++turn;
    if (fate == Fate::kRequestLost) return Status::unavailable("request lost");
    if (fate == Fate::kTargetError) return Status::unavailable("target error");
    // A batch taken in part: the target holds its first half and answers so.
    const size_t take = fate == Fate::kTakenInPart ? std::max<size_t>(1, batch.size() / 2) : batch.size();
    for (size_t i = 0; i < take; ++i) {
      Message m;
      m.id = std::stoull(std::string(batch[i].message));
      target.append("sink/out/0", batch[i].seqno, 1, m, 0);
    }
    if (fate == Fate::kReplyLost) return Status::unavailable("reply lost");
    return target.last_seqno["sink/out/0"];
  });
}

void outbox_property(OutboxSender::Bugs bugs) {
  const auto steps = *rc::gen::container<std::vector<Step>>(step()).as("steps");
  Sink sink(bugs);
  sim::TargetLog target;
  uint64_t next_message = 0;
  for (const Step& s : steps) {
    switch (s.kind) {
      case Step::kCommit: sink.commit(s.messages, &next_message); break;
      case Step::kDeliver: deliver(sink, target, s.fates, s.messages); break;
      case Step::kRestartSender: sink.sender = OutboxSender(bugs); break;
    }
  }
  deliver(sink, target, {}, 3);  // faults over: the outbox drains
  RC_ASSERT(target.appended.size() == static_cast<size_t>(next_message));
  for (size_t i = 0; i < target.appended.size(); ++i) RC_ASSERT(target.appended[i].message.id == i);
}

RC_GTEST_PROP(OutboxProps, AnyResendSequenceDeliversEachMessageOnceInOrder, ()) { outbox_property({}); }

// With a bug switch on, RapidCheck must find a counterexample.
bool fails_with(OutboxSender::Bugs bugs) {
  rc::detail::TestParams params;
  params.seed = 1;
  params.maxSuccess = 500;
  const auto result = testing::check_quietly([bugs] { outbox_property(bugs); }, {"OutboxProps/WithBug", "with bug"}, params);
  return result.is<rc::detail::FailureResult>();
}

TEST(OutboxProps, TheSamePropertyFailsWhenResendsGetNewSeqNos) {
  EXPECT_TRUE(fails_with({.new_seqno_on_resend = true})) << "no counterexample with new-seqno-on-resend";
}

TEST(OutboxProps, TheSamePropertyFailsWhenABatchTakenInPartCountsAsWhole) {
  EXPECT_TRUE(fails_with({.batch_ack_whole = true})) << "no counterexample with batch-ack-whole";
}

Message outbox_message(uint64_t id, std::string payload) {
  Message m;
  m.id = id;
  m.key = id * 3;
  m.stream = "counts";
  m.system_ts = m.alignment_ts = 1'700'000'000'000'000 + static_cast<Micros>(id);
  m.event_ts = m.system_ts - 5;
  m.payload = std::move(payload);
  return m;
}

TEST(OutboxRows, AnEpochsRowHoldsItsMessagesUnderConsecutiveSeqNos) {
  OutboxRowWriter writer;
  const std::vector<Message> messages = {outbox_message(1, "a"), outbox_message(2, ""), outbox_message(3, "ccc")};
  for (const Message& m : messages) writer.add(m);
  EXPECT_EQ(writer.messages(), 3u);
  const std::string row = writer.take();
  EXPECT_EQ(writer.messages(), 0u);
  std::vector<OutboxRow> out{{6, "earlier", false}};
  ASSERT_TRUE(decode_outbox_row(7, row, true, &out));
  ASSERT_EQ(out.size(), 4u);
  for (size_t i = 0; i < messages.size(); ++i) {
    EXPECT_EQ(out[i + 1].seqno, 7 + i);
    EXPECT_EQ(out[i + 1].message, encode_message(messages[i])) << "as the target takes it";
    EXPECT_EQ(out[i + 1].id, messages[i].id);
  }
  EXPECT_FALSE(out[2].batch_end);
  EXPECT_TRUE(out[3].batch_end);  // a batching sink's batch ends with the epoch's row
}

TEST(OutboxRows, ARowThatDoesNotDecodeAddsNothing) {
  OutboxRowWriter writer;
  writer.add(outbox_message(1, "abcdef"));
  const std::string row = writer.take();
  std::vector<OutboxRow> out;
  EXPECT_FALSE(decode_outbox_row(1, row.substr(0, row.size() - 1), false, &out));  // cut short
  EXPECT_FALSE(decode_outbox_row(1, "", false, &out));                              // no message
  EXPECT_FALSE(decode_outbox_row(1, row + "\x05", false, &out));                   // a torn tail
  EXPECT_FALSE(decode_outbox_row(1, OutboxRowWriter().take(), false, &out));        // an empty row
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace onceflow
