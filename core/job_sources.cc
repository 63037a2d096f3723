// A source job's epoch: queues, static tables, service logs and external sources.
#include "core/job_parts.h"

namespace onceflow {

void Job::step_source(EpochTx& etx) {
  // The bug: a swapped input is read from the offsets its predecessor left under the name.
  const std::string offset_key =
      fmt::format("{}/{}", env_.bugs.source_swap_keeps_offsets ? source_->name : origin_, id_.partition);
  uint64_t offset = 0;
  if (auto stored = etx.read(tables::kSourceOffsets, offset_key)) {
    Decoder in(*stored);
    offset = in.u64();
  }
  std::optional<Micros> cut;
  if (etx.meta.drain_cut != INT64_MIN) cut = etx.meta.drain_cut;
  if (cut && stamps_on_read(*source_)) {
    // Draining: a source that stamps what it reads with the time of reading reads nothing
    // more; what it emits later is stamped no earlier than its watermark, so the cut and the
    // clock are watermarks as good.
    etx.meta.low_watermark = etx.meta.replay_watermark = std::max({etx.meta.low_watermark, *cut, etx.now});
    return;
  }
  if (stamps_on_read(*source_)) {
    // Held back by a consumer, a source that stamps what it reads with its own clock (Kafka
    // and other external sources, service logs) reads nothing. Its watermark moves on all
    // the same, past what it emitted: what it reads later is stamped no earlier than that, and
    // consumers may take everything it emitted.
    held_ = holds_back(etx);
    if (held_) {
      etx.meta.low_watermark = etx.meta.replay_watermark =
          std::max({etx.meta.low_watermark, etx.now, etx.meta.last_output_ts + 1});
      return;
    }
  }
  if (ExternalSource* external = external_source()) {
    step_external_source(etx, *external, offset_key, offset);
    return;
  }
  if (source_->type == "service_log") {
    step_service_log(etx, offset_key);
    return;
  }
  // A queue, or a static table read by row ranges: the committed range end is the offset,
  // so a replayed epoch reads the same range again and a committed one never.
  const std::string table =
      source_->type == "static_table" ? tables::static_table(table_of(*source_)) : tables::queue(table_of(*source_));
  // Held back by a consumer (never while draining: the drain takes what is in flight), the
  // source takes nothing. Draining or held, one row more is looked at (not taken): the first
  // row not taken gives the watermark, so that it reaches the cut once every older row is
  // taken, and consumers waiting for it to take older inputs go on.
  const auto limit = static_cast<size_t>(env_.spec.epoch_batch_limit);
  held_ = !cut && holds_back(etx);
  const size_t may_take = held_ ? 0 : limit;
  const auto rows = etx.scan(table, prefix_ + tables::hex16(offset), prefix_ + "~", may_take + (cut || held_ ? 1 : 0));
  std::vector<Message> messages;
  messages.reserve(rows.size());
  for (const Row& row : rows) messages.push_back(decode_source_row(row.value));
  size_t take = std::min(rows.size(), may_take);
  etx.page_full = !held_ && rows.size() >= limit;
  while (cut && take > 0 && messages[take - 1].system_ts >= *cut) --take;  // the rows come in time order
  // A row's time (system and alignment) is its write time, but never below the watermark
  // already published, nor as old as the row before: rows read after a drain (which raised the
  // watermark, below) keep their order, and so do rows written at one time.
  Micros last_write = etx.meta.low_watermark;
  for (size_t i = 0; i < take; ++i) {
    Message& m = messages[i];
    m.id = source_message_id(origin_, id_.partition, offset);
    m.stream = source_->output_stream;
    m.system_ts = m.alignment_ts = std::max({m.alignment_ts, etx.meta.low_watermark, etx.meta.last_output_ts + 1});
    last_write = std::max(last_write, m.alignment_ts);
    emit(etx, std::move(m));
    ++offset;
    etx.has_work = true;
  }
  // Appends to a partition come in time order, so nothing older than the last row read, nor
  // than the first row not taken, can follow; once caught up, the queue's head time (nothing
  // older will be written) holds too.
  if (take < messages.size()) {
    last_write = std::max(last_write, messages[take].system_ts);
    // Held, the next row is stamped after everything emitted: consumers may take all of it.
    if (held_) last_write = std::max(last_write, etx.meta.last_output_ts + 1);
  } else if (rows.size() < limit) {
    probe(env_, Probe::kSourceCaughtUp);
    // A static table is written before the pipeline reads it: caught up is the end.
    if (source_->type == "static_table") etx.meta.progress.finished = true;
    if (auto head = etx.read(tables::kQueueHeads, fmt::format("{}/{}", table_of(*source_), id_.partition))) {
      Decoder in(*head);
      last_write = std::max(last_write, in.i64());
    }
  }
  etx.meta.low_watermark = etx.meta.replay_watermark = last_write;
  Encoder out;
  out.u64(offset);
  if (env_.bugs.offsets_before_commit && etx.has_work) {
    // The bug: the offset moves in its own transaction before the epoch's rows commit.
    auto tx = env_.store.begin();
    if (tx) {
      tx->put(tables::kSourceOffsets, offset_key, out.buffer());
      (void)env_.store.commit(*tx, {lease_});
    }
    return;
  }
  etx.tx.put(tables::kSourceOffsets, offset_key, out.take());
}

ExternalSource* Job::external_source() const {
  if (env_.connectors == nullptr || source_ == nullptr) return nullptr;
  auto it = env_.connectors->sources.find(source_->name);
  return it == env_.connectors->sources.end() ? nullptr : it->second;
}

ExternalSink* Job::external_sink() const {
  if (env_.connectors == nullptr || sink_ == nullptr) return nullptr;
  auto it = env_.connectors->sinks.find(sink_->name);
  return it == env_.connectors->sinks.end() ? nullptr : it->second;
}

// A source outside the store: its records' offsets are the ids' origin and the next offset
// is kept in the pipeline state, committed with the epoch. A record's own timestamp is its
// event time (another clock, perhaps another machine's); its alignment time is when this
// job read it, which never goes back, so once the source is caught up, "now" is a valid low
// watermark.
void Job::step_external_source(EpochTx& etx, ExternalSource& external, const std::string& offset_key,
                               uint64_t offset) {
  bool caught_up = false;
  auto records = external.read(id_.partition, offset, static_cast<size_t>(env_.spec.epoch_batch_limit), &caught_up);
  if (!records) {
    probe(env_, Probe::kSourceReadFailed);
    etx.failed = records.error();
    return;
  }
  Micros last = etx.meta.low_watermark;
  for (auto& record : *records) {
    Message m;
    m.key = record.key;
    m.payload = std::move(record.payload);
    m.event_ts = record.timestamp;
    m.system_ts = m.alignment_ts = std::max(etx.now, last);
    m.id = source_message_id(origin_, id_.partition, record.offset);
    m.stream = source_->output_stream;
    last = m.alignment_ts;
    emit(etx, std::move(m));
    offset = record.offset + 1;
    etx.has_work = true;
  }
  if (caught_up) {
    probe(env_, Probe::kSourceCaughtUp);
    last = std::max(last, etx.now);
  }
  etx.meta.low_watermark = etx.meta.replay_watermark = last;
  Encoder out;
  out.u64(offset);
  etx.tx.put(tables::kSourceOffsets, offset_key, out.take());
}

// A service log: this partition's rows of a sorted table, read in key order over and over;
// one pass is a cycle. The cursor (row, cycle) is in the pipeline state and moves with the
// epoch, so within a cycle each row is read exactly once; a row's MessageId names its cycle.
// A row's alignment time is when it was read (the table is re-read, so its write times
// would go back).
void Job::step_service_log(EpochTx& etx, const std::string& cursor_key) {
  uint64_t offset = 0;
  uint64_t cycle = 0;
  if (auto stored = etx.read(tables::kSourceOffsets, cursor_key)) {
    Decoder in(*stored);
    offset = in.u64();
    cycle = in.u64();
  }
  const auto max_cycles = static_cast<uint64_t>(source_->max_cycles);
  Micros last = etx.meta.low_watermark;
  const bool finished = max_cycles != 0 && cycle >= max_cycles;
  if (!finished) {
    const std::string& prefix = prefix_;
    const auto limit = static_cast<size_t>(env_.spec.epoch_batch_limit);
    const auto rows = etx.scan(tables::static_table(table_of(*source_)), prefix + tables::hex16(offset), prefix + "~", limit);
    for (const Row& row : rows) {
      Message m = decode_source_row(row.value);
      m.system_ts = m.alignment_ts = std::max(etx.now, last);
      m.id = source_message_id(origin_, id_.partition, service_log_offset(cycle, offset));
      m.stream = source_->output_stream;
      last = m.alignment_ts;
      emit(etx, std::move(m));
      ++offset;
      etx.has_work = true;
    }
    if (rows.size() < limit) {  // the end of the table: the next epoch starts the next cycle
      offset = 0;
      ++cycle;
      etx.has_work = true;
      last = std::max(last, etx.now);  // later rows are read later: nothing older will come
    }
  }
  if (max_cycles != 0 && cycle >= max_cycles) {
    last = std::max(last, etx.now);
    etx.meta.progress.finished = true;
  }
  etx.meta.low_watermark = etx.meta.replay_watermark = last;
  Encoder out;
  out.u64(offset).u64(cycle);
  etx.tx.put(tables::kSourceOffsets, cursor_key, out.take());
}

}  // namespace onceflow
