// A sink job's epoch: the targets written before the commit, the outbox after it.
#include "core/job_parts.h"

namespace onceflow {

void Job::step_sink(EpochTx& etx) {
  const SinkSpec& spec = *sink_;
  const bool amo = spec.at_most_once_strategy.enabled;
  // An at-least-once queue sink keeps no input dedup: a repeat is delivered again.
  const bool alo_queue = spec.type == SinkType::kAsyncQueue && spec.delivery_guarantee == SinkDelivery::kAtLeastOnce;
  const bool dedup = !amo && !alo_queue && !env_.bugs.no_input_dedup;
  const std::string& prefix = prefix_;
  // Outbox rows delivered since the last epoch are acknowledged now.
  const bool write_now = writes_before_commit(spec);
  std::vector<Message> written_now;
  if (spec.type != SinkType::kSyncQueue && !amo && !write_now) {
    const uint64_t acked =
        delivery_->acknowledge(etx.tx, etx.meta.acked_seqno, etx.meta.next_seqno - 1, &etx.confirmed, &etx.outbox);
    if (acked > etx.meta.acked_seqno) probe(env_, Probe::kOutboxAcknowledged);
    etx.meta.acked_seqno = acked;
  }
  const uint64_t first_seqno = etx.meta.next_seqno;
  delivery_->incarnation_starts_at(first_seqno);  // earlier seqNos are an earlier incarnation's
  OutboxRowWriter outbox;  // the epoch's outputs, one row (or one per message)
  const bool row_per_message = outbox_row_per_message(spec);
  const bool batched = batched_outbox(spec);
  uint64_t row_first = first_seqno;  // the first seqNo of the outbox row being filled
  const auto batch_block = static_cast<uint64_t>(std::max(1, spec.max_batch_messages));
  // Writes the row being filled (up to seqNo `last`) and starts the next one after it.
  const auto close_row = [&](uint64_t last) {
    Delivery::EpochOutbox::Written& row = etx.outbox.written.emplace_back();
    row.first = row_first;
    etx.tx.put(outbox_table_, prefix + tables::hex16(row_first), outbox.take(&row.messages));
    row_first = last + 1;
  };
  std::vector<Input> rows;
  Micros unseen_from = kNoWatermark;
  if (!read_inputs(etx, {spec.input_stream}, &rows, &unseen_from)) return;
  Micros take_below = INT64_MIN;
  (void)producers_watermark(etx, false, &take_below);
  const Micros takes_below = take_below;
  Micros left_from = std::min(unseen_from, take_below);  // what may be left untaken (Meta::taken_below)
  // Held back by its target (spec.max_in_flight, held_by_target): while the bound of what it
  // took waits for the target, the epoch takes no input, and its producers are held in turn.
  // Acknowledgements (above) and deliveries go on.
  const uint64_t unacknowledged = !held_by_target(spec) ? 0
                                  : amo                 ? delivery_->at_most_once_pending()
                                                        : etx.meta.next_seqno - 1 - etx.meta.acked_seqno;
  held_ = env_.spec.max_in_flight > 0 && unacknowledged >= static_cast<uint64_t>(env_.spec.max_in_flight);
  if (held_) {
    probe(env_, Probe::kSinkHeldBack);
    take_below = INT64_MIN;
  }
  if (dedup) prefetch_dedup(etx, rows, take_below);
  Micros backlog_from = unseen_from;  // the oldest input left for later
  DedupRows dedup_rows(etx, dedup_table_);
  DedupTable::Batch seen(dedup_, dedup_rows);
  for (auto& [read, m] : rows) {
    if (m.alignment_ts >= take_below) {
      backlog_from = std::min(backlog_from, m.system_ts);
      left_from = std::min(left_from, m.alignment_ts);
      if (held_) break;  // what it waits for is its target, not a watermark
      probe(env_, Probe::kAlignmentWait);
      etx.aligned = true;
      break;
    }
    etx.has_work = true;
    etx.inputs.take(read, m.id);
    if (dedup && !seen.record_if_new(m)) {
      probe(env_, Probe::kSinkDedupHit);
      if (env_.observer != nullptr) env_.observer->duplicate_dropped(id_, m);
      continue;
    }
    etx.record.consumed.push_back(m);
    if (amo) {
      etx.amo_outputs.push_back(std::move(m));
    } else if (spec.type == SinkType::kSyncQueue) {
      etx.tx.put(tables::sync_sink(spec.name), prefix + tables::hex16(etx.meta.sink_offset++), encode_message(m));
    } else if (write_now) {
      written_now.push_back(std::move(m));
    } else {
      outbox.add(std::move(m));
      const uint64_t seqno = etx.meta.next_seqno++;
      if (row_per_message) etx.tx.put(outbox_table_, prefix + tables::hex16(seqno), outbox.take());
      // A batching sink's batch is a row of its own, cut here at every max_batch_messages-th
      // seqNo (and at the epoch's end, below): once committed the cut never moves, whatever
      // limit a later incarnation runs with, so a batch sent again is the same batch, under
      // the same token.
      if (batched && seqno % batch_block == 0) close_row(seqno);
    }
  }
  if (outbox.messages() > 0) close_row(etx.meta.next_seqno - 1);
  publish_taken(etx, left_from, takes_below);
  dedup_recorded_ += dedup ? seen.flush(dedup_forget_below(etx, backlog_from)) : seen.flush();
  if (dedup) clean_dedup(etx, backlog_from);
  if (amo) {  // what a drain waits for: held in memory now, or queued once this epoch commits
    etx.meta.progress.amo_pending = delivery_->at_most_once_pending() + etx.amo_outputs.size();
  }
  if (!written_now.empty()) {
    // Acknowledged before the epoch commits; if the commit then fails, they go again.
    if (alo_queue && env_.bugs.alo_write_after_commit) {
      etx.written_late = std::move(written_now);  // the bug: written once the inputs are gone
      return;
    }
    ExternalSink* external = external_sink();
    const Status written = external != nullptr ? external->write_now(id_.str(), lease_, written_now)
                           : alo_queue         ? delivery_->write_now(written_now)
                                               : Status::invalid_argument("no connector for sink " + spec.name);
    if (!written.is_ok()) {
      probe(env_, Probe::kSyncWriteFailed);
      etx.failed = written;
      return;
    }
    fault_point(env_, "sink.after_external_write");
  }
}

}  // namespace onceflow
