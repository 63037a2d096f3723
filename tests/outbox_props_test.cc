// Outbox + receiver as a property: the engine's outbox sender (core/outbox.h) against the
// simulated target's (producer_id, seqNo) dedup (sim/queue_target.h), under any sequence of
// epoch commits, sends whose request or reply is lost, target errors and sender restarts.
// Once the outbox drains, the target holds every committed message exactly once, in order.
// With the new-seqno-on-resend bug switch the same property must fail.
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

enum class Fate { kAcked, kRequestLost, kReplyLost, kTargetError };

struct Step {
  enum Kind { kCommit, kDeliver, kRestartSender } kind = kCommit;
  int messages = 1;          // kCommit: rows the epoch adds
  std::vector<Fate> fates;   // kDeliver: what happens to each send, in turn (then: acked)
};

void showValue(const Step& s, std::ostream& os) {
  static const char* const kFates[] = {"acked", "request-lost", "reply-lost", "target-error"};
  switch (s.kind) {
    case Step::kCommit: os << "commit " << s.messages; break;
    case Step::kRestartSender: os << "restart sender"; break;
    case Step::kDeliver:
      os << "deliver [";
      for (const Fate f : s.fates) os << kFates[static_cast<int>(f)] << " ";
      os << "]";
      break;
  }
}

rc::Gen<Step> step() {
  const auto fate = rc::gen::weightedElement<Fate>(
      {{4, Fate::kAcked}, {1, Fate::kRequestLost}, {1, Fate::kReplyLost}, {1, Fate::kTargetError}});
  return rc::gen::oneOf(
      rc::gen::map(rc::gen::inRange(1, 4), [](int n) { return Step{Step::kCommit, n, {}}; }),
      rc::gen::map(rc::gen::container<std::vector<Fate>>(fate), [](std::vector<Fate> f) { return Step{Step::kDeliver, 0, std::move(f)}; }),
      rc::gen::just(Step{Step::kRestartSender, 0, {}}));
}

// The sink's side as the engine keeps it: outbox rows in the store, the acknowledged seqNo in
// the job's meta row, the sender in memory.
struct Sink {
  explicit Sink(bool bug) : bug(bug), sender(bug) {}
  bool bug;
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

void deliver(Sink& sink, sim::TargetLog& target, const std::vector<Fate>& fates) {
  size_t turn = 0;
  (void)sink.sender.deliver(sink.rows(), [&](uint64_t seqno, const std::string& id) -> Status {
    const Fate fate = turn < fates.size() ? fates[turn] : Fate::kAcked;
    ++turn;
    if (fate == Fate::kRequestLost) return Status::unavailable("request lost");
    if (fate == Fate::kTargetError) return Status::unavailable("target error");
    Message m;
    m.id = std::stoull(id);
    target.append("sink/out/0", seqno, 1, m, 0);
    if (fate == Fate::kReplyLost) return Status::unavailable("reply lost");
    return Status::ok();
  });
}

void outbox_property(bool bug) {
  const auto steps = *rc::gen::container<std::vector<Step>>(step()).as("steps");
  Sink sink(bug);
  sim::TargetLog target;
  uint64_t next_message = 0;
  for (const Step& s : steps) {
    switch (s.kind) {
      case Step::kCommit: sink.commit(s.messages, &next_message); break;
      case Step::kDeliver: deliver(sink, target, s.fates); break;
      case Step::kRestartSender: sink.sender = OutboxSender(bug); break;
    }
  }
  deliver(sink, target, {});  // faults over: the outbox drains
  RC_ASSERT(target.appended.size() == static_cast<size_t>(next_message));
  for (size_t i = 0; i < target.appended.size(); ++i) RC_ASSERT(target.appended[i].message.id == i);
}

RC_GTEST_PROP(OutboxProps, AnyResendSequenceDeliversEachMessageOnceInOrder, ()) { outbox_property(false); }

TEST(OutboxProps, TheSamePropertyFailsWhenResendsGetNewSeqNos) {
  rc::detail::TestParams params;
  params.seed = 1;
  params.maxSuccess = 500;
  const auto result = testing::check_quietly([] { outbox_property(true); }, {"OutboxProps/WithBug", "with bug"}, params);
  EXPECT_TRUE(result.is<rc::detail::FailureResult>()) << "no counterexample with new-seqno-on-resend";
}

}  // namespace
}  // namespace onceflow
