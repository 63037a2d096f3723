// A sink partition's delivery, outside its epochs: what the sink's Job hands to the target
// once an epoch committed it.
//
// - Exactly once (async queue, Kafka, ClickHouse): the committed outbox goes to the target in
//   seqNo order under the stable (producer_id, seqNo); queue targets take batches within
//   delivery_batch_messages/bytes and answer the highest seqNo they hold (acknowledgements
//   cover ranges). What the target holds is acknowledged (its outbox rows erased) by the
//   job's next epoch, and the delivery callback fires with that commit.
// - At most once through the outbox (ClickHouse's default strategy): each row is erased under
//   the Lease just before its one INSERT.
// - At most once in memory (at_most_once_strategy): the committed epoch's messages wait in a
//   bounded queue, and a sender fiber sends each once, without a producer id.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/connectors.h"
#include "core/engine.h"
#include "core/outbox.h"

namespace onceflow {

// Whether `sink` cuts its outbox into batches at epoch boundaries (an exactly-once ClickHouse
// sink: a batch keeps its rows and its dedup token when it is sent again).
bool batched_outbox(const SinkSpec& sink);

// Whether `sink` writes one outbox row per message, each acknowledged alone just before its
// send (at most once through the outbox, ClickHouse's default), rather than one per epoch.
bool outbox_row_per_message(const SinkSpec& sink);

// Whether backpressure (spec.max_in_flight) holds `sink` by what its target has not taken yet
// (Job::step_sink): its at-most-once queue, or its outbox (not yet acknowledged). Not a sink
// that writes before its commits.
bool held_by_target(const SinkSpec& sink);

// Whether transaction `tx`, whose commit was ambiguous, applied; asks until the store answers
// (resolve() also fences it when it did not), one epoch period apart.
bool resolve_until_answered(const EngineEnv& env, TxId tx, Version* version = nullptr);

class Delivery {
 public:
  // `fail_job` ends the job (a permanent refusal, or a zombie): its replacement delivers
  // from the same outbox.
  Delivery(const EngineEnv& env, const JobId& job, LeaseId lease, const SinkSpec& sink, std::function<void()> fail_job);

  // Hands the committed outbox over; true when it was empty.
  bool deliver_outbox();

  // What an epoch does to the outbox (filled by the epoch, see acknowledge()).
  struct EpochOutbox {
    std::vector<std::string> erased;  // keys of the rows it erases
    struct Written {
      uint64_t first = 0;             // the seqNo of the row's first message
      std::vector<Message> messages;  // the row's messages
    };
    std::vector<Written> written;     // the rows it writes, in seqNo order
  };
  // The epoch that did `changes` committed: the outbox this incarnation keeps in memory
  // follows.
  void committed(EpochOutbox changes);
  // The deliver-before-commit bug: an epoch's outbox rows go out before it commits.
  // `outbox_rows`: the epoch's outbox writes, key and value.
  void deliver_uncommitted(const std::vector<std::pair<std::string, std::string>>& outbox_rows);
  // An at-least-once queue sink: appends `messages` to the target in batches, without a
  // producer id (never deduplicated), before the epoch commits; OK once all are appended.
  Status write_now(const std::vector<Message>& messages);

  // The highest seqNo the target is known to hold (this incarnation's knowledge).
  uint64_t delivered() const { return sender_.delivered(); }
  // An epoch acknowledges what the target holds, from `acked` (the job's acknowledged seqNo)
  // up to at most `last_written`: erases in `tx` each outbox row read whose last message the
  // target now holds (and names it in `changes`), adds the ids whose confirmations are due
  // to `confirmed`, and returns the new acknowledged seqNo. Rows are erased whole; a row held
  // in part stays, and a resend of it is dropped by the target's (producer_id, seqNo) dedup.
  // A sink whose rows were erased one by one before their sends (outbox_row_per_message)
  // acknowledges what `tx`'s snapshot no longer holds, and erases nothing.
  uint64_t acknowledge(Transaction& tx, uint64_t acked, uint64_t last_written, std::vector<MessageId>* confirmed,
                       EpochOutbox* changes) const;
  // An epoch acknowledged every seqNo up to `seqno`: their confirmations went out.
  void confirmed_up_to(uint64_t seqno);
  // The first seqNo this incarnation numbered: rows below it are an earlier one's, resent.
  void incarnation_starts_at(uint64_t seqno) {
    if (own_from_seqno_ == 0) own_from_seqno_ = seqno;
  }

  // At most once in memory: a committed epoch's messages join the queue (dropped, and said
  // so, past total_queue_bytes_limit), and the sender starts if it is not running.
  void queue_at_most_once(std::vector<Message> messages);
  // Messages held in memory: queued, or being sent.
  size_t at_most_once_pending() const { return amo_queue_.size() + (amo_sending_ ? 1 : 0); }
  // The job ended: the sender gives up what it cannot send within suspend_destruction_duration.
  void job_ended() { job_ended_ = true; }
  bool sender_running() const { return amo_sender_running_; }

 private:
  enum class SendOutcome : uint8_t { kSent, kNotSent, kInDoubt };
  ExternalSink* external_sink() const;
  // Reads the partition's first round_rows_ outbox rows from the store into read_rows_ and
  // `out`; false when the store or a row that does not decode stops it. A read that found
  // every row starts the in-memory outbox, moving `out` there.
  bool read_outbox(std::vector<OutboxRow>* out);
  void deliver_at_most_once(ExternalSink& external, const std::vector<OutboxRow>& outbox);
  bool acknowledge_before_send(uint64_t seqno, const Message& m);
  void send_at_most_once();
  SendOutcome send_once(const Message& m);
  // One request of kSinkAppendService (core/engine.h) from this sink partition: `batch` under
  // `producer` ("": an at-most-once send), and the target's answer.
  Result<AppendReply> append(const std::string& producer, std::vector<AppendRequest::Entry> batch);
  BatchLimits batch_limits() const;

  const EngineEnv& env_;
  const JobId job_;
  LeaseId lease_;
  const SinkSpec& sink_;
  std::function<void()> fail_job_;
  std::string prefix_;        // the partition's key prefix
  std::string outbox_table_;
  OutboxSender sender_;       // the outbox as delivered so far (volatile; resends start from the store)
  std::map<uint64_t, MessageId> delivered_ids_;  // seqNo -> id, delivered and not yet confirmed
  // The outbox rows the last round read: key and last seqNo. Every row whose last seqNo lies
  // between the acknowledged one and the last read is among them (rows are read from the
  // partition's first), so an acknowledgement within them erases each row it covers.
  struct ReadRow {
    std::string key;
    uint64_t first = 0;
    uint64_t last = 0;
  };
  std::vector<ReadRow> read_rows_;
  size_t round_rows_ = 0;  // how many rows a round looks at
  // The outbox in memory, once a read from the store found all of it (known_): the epochs of
  // this incarnation, the only writer of the partition's outbox, then add and erase rows here
  // as they commit them, and rounds deliver from here instead of reading the store. Dropped
  // (and the store read again) when it grows past a round's rows, as behind a target that
  // does not answer. A new incarnation, as after a restart, reads the store.
  bool known_ = false;
  std::vector<ReadRow> known_rows_;
  std::vector<OutboxRow> known_messages_;  // the rows' messages, in seqNo order
  uint64_t own_from_seqno_ = 0;
  bool resend_probed_ = false;
  std::deque<Message> amo_queue_;
  uint64_t amo_queue_bytes_ = 0;
  bool amo_sender_running_ = false;
  bool amo_sending_ = false;  // a message taken from the queue is being sent
  bool job_ended_ = false;
};

}  // namespace onceflow
