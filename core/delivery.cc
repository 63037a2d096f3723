#include "core/delivery.h"

#include <algorithm>
#include <utility>

#include "core/env/codec.h"

namespace onceflow {

bool batched_outbox(const SinkSpec& sink) {
  return sink.type == SinkType::kClickHouse && sink.delivery_guarantee == SinkDelivery::kExactlyOnce;
}

bool outbox_row_per_message(const SinkSpec& sink) {
  return sink.type == SinkType::kClickHouse && sink.delivery_guarantee == SinkDelivery::kAtMostOnce;
}

bool held_by_target(const SinkSpec& sink) {
  return sink.at_most_once_strategy.enabled || (sink.type != SinkType::kSyncQueue && !writes_before_commit(sink));
}

bool resolve_until_answered(const EngineEnv& env, TxId tx, Version* version) {
  while (true) {
    auto outcome = env.store.resolve(tx, version);
    if (outcome) return *outcome == TxOutcome::kCommitted;
    env.runtime.sleep_for(env.spec.epoch_period_us);
  }
}

Delivery::Delivery(const EngineEnv& env, const JobId& job, LeaseId lease, const SinkSpec& sink,
                           std::function<void()> fail_job)
    : env_(env),
      job_(job),
      lease_(lease),
      sink_(sink),
      fail_job_(std::move(fail_job)),
      prefix_(tables::partition_prefix(job.partition)),
      outbox_table_(tables::outbox(sink.name)),
      sender_(OutboxSender::Bugs{env.bugs.new_seqno_on_resend, env.bugs.batch_ack_whole}) {
  // A Kafka transaction or a ClickHouse batch may hold more than 256 rows. A queue target
  // takes batches of the sink's size, and a round looks at twice what one epoch may add, so
  // that delivery keeps up with the epochs and a backlog shrinks.
  const size_t messages =
      sink_.type == SinkType::kKafka ? std::max<size_t>(256, static_cast<size_t>(sink_.transaction_messages))
      : batched_outbox(sink_)        ? std::max<size_t>(256, static_cast<size_t>(sink_.max_batch_messages))
                                     : std::max<size_t>(static_cast<size_t>(sink_.delivery_batch_messages),
                                                        2 * static_cast<size_t>(env_.spec.epoch_batch_limit));
  // An epoch's row holds at most epoch_batch_limit messages (a sink reads one stream); a
  // batching sink's epoch writes a row per batch: up to epoch_batch_limit / max_batch_messages
  // of them, and one more for the epoch's end.
  const auto epoch_limit = std::max<size_t>(1, static_cast<size_t>(env_.spec.epoch_batch_limit));
  const auto block = std::max<size_t>(1, static_cast<size_t>(sink_.max_batch_messages));
  const size_t rows_per_epoch = batched_outbox(sink_) ? (epoch_limit + block - 1) / block + 1 : 1;
  round_rows_ = outbox_row_per_message(sink_)
                    ? messages
                    : rows_per_epoch * std::max<size_t>(2, (messages + epoch_limit - 1) / epoch_limit);
}

ExternalSink* Delivery::external_sink() const {
  if (env_.connectors == nullptr) return nullptr;
  auto it = env_.connectors->sinks.find(sink_.name);
  return it == env_.connectors->sinks.end() ? nullptr : it->second;
}

uint64_t Delivery::acknowledge(Transaction& tx, uint64_t acked, uint64_t last_written, std::vector<MessageId>* confirmed,
                              EpochOutbox* changes) const {
  // The target may hold more than this incarnation has read (an earlier one read further, as
  // after epoch_batch_limit was lowered): the rest is acknowledged once read, so that no row
  // is passed over unerased.
  if (outbox_row_per_message(sink_)) {
    // Each row was erased, in seqNo order, just before its send (acknowledge_before_send):
    // what this epoch's snapshot no longer holds is acknowledged, whichever incarnation sent
    // it and whatever the last round read; nothing is left to erase.
    auto first = env_.store.scan(tx, outbox_table_, prefix_, prefix_ + "~", 1);
    if (!first) return acked;  // known next epoch
    if (first->empty()) return std::max(acked, last_written);
    const uint64_t oldest = tables::parse_hex16(std::string_view(first->front().key).substr(prefix_.size()));
    if (oldest == 0) return acked;  // not this engine's row: delivery stops at it too
    return std::max(acked, std::min(oldest - 1, last_written));
  }
  const uint64_t last_read = read_rows_.empty() ? 0 : read_rows_.back().last;
  const uint64_t now_acked = std::max(acked, std::min({sender_.delivered(), last_written, last_read}));
  if (now_acked == acked) return acked;
  for (const ReadRow& row : read_rows_) {
    // The bug: a row the target holds the first part of goes, and the rest is never sent.
    const bool held = env_.bugs.outbox_erase_held_in_part ? row.first <= now_acked : row.last <= now_acked;
    if (row.last > acked && held) {
      tx.erase(outbox_table_, row.key);
      changes->erased.push_back(row.key);
    }
  }
  for (auto it = delivered_ids_.upper_bound(acked); it != delivered_ids_.end() && it->first <= now_acked; ++it) {
    confirmed->push_back(it->second);
  }
  return now_acked;
}

void Delivery::confirmed_up_to(uint64_t seqno) {
  for (auto it = delivered_ids_.begin(); it != delivered_ids_.end() && it->first <= seqno;) it = delivered_ids_.erase(it);
}

void Delivery::queue_at_most_once(std::vector<Message> messages) {
  for (Message& m : messages) {
    const uint64_t bytes = m.payload.size() + 64;
    if (amo_queue_bytes_ + bytes > sink_.at_most_once_strategy.total_queue_bytes_limit) {
      probe(env_, Probe::kAmoQueueFull);
      if (env_.observer != nullptr) env_.observer->amo_dropped(sink_.name, m, "queue full");
      continue;
    }
    if (env_.observer != nullptr) env_.observer->amo_queued(sink_.name, m);
    amo_queue_bytes_ += bytes;
    amo_queue_.push_back(std::move(m));
  }
  if (!amo_queue_.empty() && !amo_sender_running_) {
    amo_sender_running_ = true;
    env_.runtime.spawn("amo-sender:" + job_.str(), [this] { send_at_most_once(); });
  }
}

void Delivery::committed(EpochOutbox changes) {
  if (!known_) return;
  for (const std::string& key : changes.erased) {
    const auto row = std::find_if(known_rows_.begin(), known_rows_.end(), [&](const ReadRow& r) { return r.key == key; });
    if (row == known_rows_.end()) continue;
    std::erase_if(known_messages_, [&](const OutboxRow& m) { return m.seqno >= row->first && m.seqno <= row->last; });
    known_rows_.erase(row);
  }
  for (const EpochOutbox::Written& row : changes.written) {
    if (row.messages.empty()) continue;
    append_outbox_rows(row.first, row.messages, batched_outbox(sink_), &known_messages_);
    known_rows_.push_back({prefix_ + tables::hex16(row.first), row.first, known_messages_.back().seqno});
  }
  if (known_rows_.size() > round_rows_) {  // too far behind to keep in memory
    probe(env_, Probe::kOutboxBehindTarget);
    known_ = false;
    known_rows_.clear();
    known_messages_.clear();
  }
}

bool Delivery::read_outbox(std::vector<OutboxRow>* out) {
  auto tx = env_.store.begin();
  if (!tx) return false;
  auto rows = env_.store.scan(*tx, outbox_table_, prefix_, prefix_ + "~", round_rows_);
  env_.store.abort(*tx);
  if (!rows) return false;
  read_rows_.clear();
  for (Row& row : *rows) {
    const uint64_t first = tables::parse_hex16(std::string_view(row.key).substr(prefix_.size()));
    if (!decode_outbox_row(first, row.value, batched_outbox(sink_), out)) {
      // Not this engine's row: delivering past it would lose its messages, so nothing goes.
      probe(env_, Probe::kOutboxDeliveryFailed);
      read_rows_.clear();
      return false;
    }
    read_rows_.push_back({std::move(row.key), first, out->back().seqno});
  }
  // Rows acknowledged one by one, each in a transaction of its own, are never kept in memory.
  if (rows->size() < round_rows_ && !outbox_row_per_message(sink_)) {
    known_ = true;
    known_rows_ = read_rows_;
    known_messages_ = std::move(*out);  // deliver_outbox() reads them from here now
  }
  return true;
}

// Sends the outbox in seqNo order, each message under its stable (producer_id, seqNo), until
// one fails; the rest wait for the next round. The target drops seqNos it has seen.
bool Delivery::deliver_outbox() {
  // From memory when it holds the outbox (never more than a round's rows), else from the store.
  std::vector<OutboxRow> read;
  if (known_) {
    read_rows_ = known_rows_;
  } else if (!read_outbox(&read)) {
    return false;
  }
  if (read_rows_.empty()) return true;
  const std::vector<OutboxRow>& outbox = known_ ? known_messages_ : read;
  const std::string producer = producer_id(job_, sink_, env_.bugs);
  // Rows an earlier incarnation committed (and may have delivered) go again.
  if (!resend_probed_ && own_from_seqno_ != 0 && outbox.front().seqno < own_from_seqno_) {
    resend_probed_ = true;
    probe(env_, Probe::kOutboxResend);
  }
  ExternalSink* external = external_sink();
  if (external != nullptr && sink_.type == SinkType::kClickHouse && sink_.delivery_guarantee == SinkDelivery::kAtMostOnce) {
    deliver_at_most_once(*external, outbox);
    return false;
  }
  const uint64_t delivered_before = sender_.delivered();
  const Status sent =
      external != nullptr
          ? sender_.deliver_all(outbox,
                                [&](const std::vector<OutboxRow>& pending) {
                                  return external->deliver(producer, lease_, pending);
                                })
          : sender_.deliver(outbox, batch_limits(), [&](const std::vector<AppendRequest::Entry>& batch) -> Result<uint64_t> {
              auto reply = append(producer, batch);
              if (!reply) return reply.error();
              if (reply->duplicates > 0) probe(env_, Probe::kOutboxTargetDuplicate);
              fault_point(env_, "sink.after_delivery");
              return reply->held;
            });
  if (env_.observer != nullptr && sender_.delivered() > delivered_before) {
    // For the delivery callback, which fires once an epoch acknowledged them.
    std::vector<MessageId> now_held;
    for (const OutboxRow& row : outbox) {
      if (row.seqno <= delivered_before || row.seqno > sender_.delivered()) continue;
      delivered_ids_[row.seqno] = row.id;
      now_held.push_back(row.id);
    }
    // The bug: the callback fires as soon as the target answered, before any commit.
    if (env_.bugs.callback_before_commit) env_.observer->delivery_confirmed(job_, now_held, 0);
  }
  // A permanent error must not be skipped (that would lose the message), nor may a sink go on
  // that cannot do so safely: the job fails, and its replacement delivers from the same outbox.
  if (sent.is_invalid_argument()) {
    probe(env_, Probe::kOutboxPermanentError);
    fail_job_();
  } else if (!sent.is_ok()) {
    probe(env_, Probe::kOutboxDeliveryFailed);
  }
  return false;  // rows were there: the next epoch acknowledges or resends them
}

// At-most-once with the outbox (ClickHouse's default strategy): messages go one INSERT each,
// in order. A row is acknowledged (erased, under the Lease) just before its INSERT starts:
// a failure before that is retried later, one after it leaves the message in doubt, and a
// crash in between loses the message rather than repeat it.
void Delivery::deliver_at_most_once(ExternalSink& external, const std::vector<OutboxRow>& outbox) {
  for (const OutboxRow& row : outbox) {
    if (row.seqno <= sender_.delivered()) continue;
    auto m = decode_message(row.message);
    if (!m) return;
    const auto outcome =
        external.send_once(job_.str(), lease_, *m, [&] { return acknowledge_before_send(row.seqno, *m); });
    if (outcome == ExternalSink::Once::kRefused) {
      fail_job_();  // the target refuses for good: the job fails, as other sinks do
      return;
    }
    if (outcome == ExternalSink::Once::kNotStarted) return;  // retried next round
    sender_.skip_to(row.seqno);
    if (env_.observer == nullptr) continue;
    if (outcome == ExternalSink::Once::kSent) {
      env_.observer->amo_sent(sink_.name, m->id);
    } else {
      probe(env_, Probe::kAmoInDoubt);
      env_.observer->amo_in_doubt(sink_.name, *m, "the INSERT failed after it started");
    }
  }
}

// Acknowledges (erases) the outbox row of message `seqno` under the Lease just before `m`'s one send; true
// once that is known to have applied (an ambiguous commit is resolved first).
bool Delivery::acknowledge_before_send(uint64_t seqno, const Message& m) {
  auto tx = env_.store.begin();
  if (!tx) return false;
  tx->erase(outbox_table_, prefix_ + tables::hex16(seqno));
  if (env_.observer != nullptr) env_.observer->amo_acknowledging(job_, lease_, m.id, tx->id());
  auto committed = env_.store.commit(*tx, {lease_});
  if (!committed && committed.error().is_prerequisite_failed()) fail_job_();  // a zombie
  bool applied = committed.has_value();
  if (!committed && committed.error().is_ambiguous()) {
    probe(env_, Probe::kAmoAckAmbiguous);
    applied = resolve_until_answered(env_, tx->id());
  }
  if (applied && env_.observer != nullptr) {
    // From here on the message is in this process only: a crash before the send loses it.
    env_.observer->amo_queued(sink_.name, m);
    env_.observer->amo_sending(sink_.name, m.id);
  }
  return applied;
}

// The deliver-before-commit bug: an epoch's outbox rows go out before the epoch commits.
void Delivery::deliver_uncommitted(const std::vector<std::pair<std::string, std::string>>& outbox_rows) {
  std::vector<OutboxRow> rows;
  for (const auto& [key, value] : outbox_rows) {
    (void)decode_outbox_row(tables::parse_hex16(std::string_view(key).substr(prefix_.size())), value, batched_outbox(sink_), &rows);
  }
  if (rows.empty()) return;
  if (ExternalSink* external = external_sink()) {
    (void)external->deliver(job_.str(), lease_, rows);
    return;
  }
  std::vector<AppendRequest::Entry> batch;
  for (const OutboxRow& row : rows) batch.push_back({row.seqno, row.message});
  (void)append(producer_id(job_, sink_, env_.bugs), std::move(batch));
}

Status Delivery::write_now(const std::vector<Message>& messages) {
  std::vector<std::string> encoded;
  encoded.reserve(messages.size());
  for (const Message& m : messages) encoded.push_back(encode_message(m));
  const BatchLimits limits = batch_limits();
  for (size_t at = 0; at < encoded.size();) {
    std::vector<AppendRequest::Entry> batch;
    size_t bytes = 0;
    while (at < encoded.size() && batch.size() < limits.messages &&
           (batch.empty() || bytes + encoded[at].size() <= limits.bytes)) {
      bytes += encoded[at].size();
      batch.push_back({0, encoded[at++]});
    }
    // A target may take the first part of a batch only: the rest goes again.
    while (!batch.empty()) {
      auto reply = append("", batch);
      if (!reply) return reply.error();
      if (reply->appended == 0) return Status::unavailable("the target took none of a batch");
      batch.erase(batch.begin(), batch.begin() + static_cast<ptrdiff_t>(std::min<uint64_t>(reply->appended, batch.size())));
    }
  }
  return Status::ok();
}

// At-most-once: each queued message is sent once, without a producer id; a failed send is
// a counted drop, never a retry, and a send that got no answer is in doubt.
void Delivery::send_at_most_once() {
  const auto& strategy = sink_.at_most_once_strategy;
  Micros give_up_at = INT64_MAX;
  bool discard_next = false;  // the amo-silent-loss bug
  while (!amo_queue_.empty()) {
    if (job_ended_ && give_up_at == INT64_MAX) {
      give_up_at = env_.runtime.clock().now() + strategy.suspend_destruction_duration_us;
    }
    Message m = std::move(amo_queue_.front());
    amo_queue_.pop_front();
    amo_queue_bytes_ -= m.payload.size() + 64;
    if (std::exchange(discard_next, false)) continue;  // the bug: gone without a word
    if (env_.runtime.clock().now() > give_up_at) {
      probe(env_, Probe::kAmoSinkDestroyed);
      if (env_.observer != nullptr) env_.observer->amo_dropped(sink_.name, m, "sink destroyed");
      continue;
    }
    amo_sending_ = true;
    SendOutcome outcome = send_once(m);
    if (env_.bugs.amo_retry_in_doubt && outcome == SendOutcome::kInDoubt) outcome = send_once(m);  // the bug
    amo_sending_ = false;
    if (outcome != SendOutcome::kSent) probe(env_, outcome == SendOutcome::kInDoubt ? Probe::kAmoInDoubt : Probe::kAmoNotSent);
    discard_next = env_.bugs.amo_silent_loss && outcome == SendOutcome::kInDoubt;
    if (env_.observer == nullptr || env_.bugs.uncounted_send_failure) {  // the bug: failures go uncounted
      if (env_.observer != nullptr && outcome == SendOutcome::kSent) env_.observer->amo_sent(sink_.name, m.id);
      continue;
    }
    switch (outcome) {
      case SendOutcome::kSent: env_.observer->amo_sent(sink_.name, m.id); break;
      case SendOutcome::kNotSent: env_.observer->amo_dropped(sink_.name, m, "send failed"); break;
      case SendOutcome::kInDoubt: env_.observer->amo_in_doubt(sink_.name, m, "no answer to the send"); break;
    }
  }
  amo_sender_running_ = false;
}

// One at-most-once send of `m`, through the sink's connector or to its queue target.
Delivery::SendOutcome Delivery::send_once(const Message& m) {
  if (env_.observer != nullptr) env_.observer->amo_sending(sink_.name, m.id);
  if (ExternalSink* external = external_sink()) {
    // A failure before the request starts may be retried; after, its outcome is unknown.
    auto outcome = ExternalSink::Once::kNotStarted;
    for (int attempt = 0; attempt < 3 && outcome == ExternalSink::Once::kNotStarted; ++attempt) {
      outcome = external->send_once(job_.str(), lease_, m, [] { return true; });
    }
    if (outcome == ExternalSink::Once::kSent) return SendOutcome::kSent;
    return outcome == ExternalSink::Once::kFailedAfterStart ? SendOutcome::kInDoubt : SendOutcome::kNotSent;
  }
  const std::string encoded = encode_message(m);
  auto reply = append("", {{0, encoded}});
  if (reply) return SendOutcome::kSent;
  // A request that timed out may have arrived; one that could not leave did not.
  return reply.error().is_timeout() ? SendOutcome::kInDoubt : SendOutcome::kNotSent;
}

Result<AppendReply> Delivery::append(const std::string& producer, std::vector<AppendRequest::Entry> batch) {
  AppendRequest req;
  req.producer = producer;
  req.lease = lease_;
  req.tablet = static_cast<uint64_t>(job_.partition);
  req.entries = std::move(batch);
  auto reply = env_.network.call(sink_target_node(sink_.name), kSinkAppendService, encode_append(req),
                                 env_.options.rpc_timeout_us);
  if (!reply) return reply.error();
  auto decoded = decode_append_reply(*reply);
  if (!decoded) return Status::corruption("the target's answer to an append does not decode");
  return *decoded;
}

BatchLimits Delivery::batch_limits() const {
  return {static_cast<size_t>(sink_.delivery_batch_messages), static_cast<size_t>(sink_.delivery_batch_bytes)};
}

}  // namespace onceflow
