// What other parts of the engine read and change in a job's own row (core/job.h).
#include "core/job_parts.h"

namespace onceflow {

JobProgress job_progress(std::string_view meta_row) {
  const Job::Meta meta = Job::Meta::decode(meta_row);
  JobProgress out = meta.progress;
  out.epoch = meta.epoch;
  out.low_watermark = meta.low_watermark;
  out.last_output_ts = meta.last_output_ts;
  out.event_watermark = meta.event_watermark;
  out.sink_rows = meta.sink_offset;
  return out;
}

bool timer_may_fire(const ComputationSpec& c, const Timer& t, Micros partition_event_watermark) {
  const auto stream = std::find_if(c.timer_streams.begin(), c.timer_streams.end(),
                                   [&](const TimerStreamSpec& s) { return s.name == t.timer_stream; });
  if (stream == c.timer_streams.end() || stream->watermark != Watermark::kEventTime) return true;
  return t.trigger_ts <= partition_event_watermark;
}

std::optional<std::pair<int, Timer>> stored_timer(std::string_view key, const TimerValue& value) {
  const size_t slash = key.find('/');
  const std::string_view rest = slash == std::string_view::npos ? std::string_view() : key.substr(slash + 1);
  if (slash == 0 || slash > 16 || rest.size() <= 34 || rest[16] != '/' || rest[33] != '/') return std::nullopt;
  const auto partition = tables::parse_hex16(std::string(16 - slash, '0') + std::string(key.substr(0, slash)));
  // Past every partition this code names, or a prefix it did not write.
  if (partition >= 0xffff || key.substr(0, slash + 1) != tables::partition_prefix(static_cast<int>(partition))) {
    return std::nullopt;
  }
  return std::pair{static_cast<int>(partition), decode_timer(rest, value)};
}

bool timers_may_fire(const ComputationSpec& c, const std::function<std::optional<Row>(const std::string& key)>& first_from,
                     const std::function<std::optional<std::string>(const std::string& job)>& meta) {
  std::string from;
  while (const std::optional<Row> row = first_from(from)) {
    // A row this code did not write may fire (and would not move the reading on).
    const auto stored = stored_timer(row->key, decode_timer_value(row->value));
    if (!stored) return true;
    const auto& [partition, t] = *stored;
    const auto row_of_job = meta(JobId{JobKind::kComputation, c.name, partition}.str());
    if (timer_may_fire(c, t, row_of_job ? job_progress(*row_of_job).event_watermark : INT64_MIN)) return true;
    from = tables::partition_prefix(partition + 1);  // the partition's later rows are later still
  }
  return false;
}

Result<uint64_t> at_most_once_pending(Store& store, const Transaction& tx, const PipelineSpec& spec) {
  std::vector<std::string> metas;
  for (const auto& s : spec.sinks) {
    if (!s.at_most_once_strategy.enabled) continue;
    for (int p = 0; p < s.partitions; ++p) metas.push_back(JobId{JobKind::kSink, s.name, p}.str());
  }
  if (metas.empty()) return uint64_t{0};
  auto rows = store.get_many(tx, tables::kJobMeta, metas);
  if (!rows) return rows.error();
  uint64_t pending = 0;
  for (const auto& meta : *rows) {
    if (meta) pending += job_progress(*meta).amo_pending;
  }
  return pending;
}

std::string with_output_floor(std::optional<std::string_view> meta_row, Micros floor) {
  Job::Meta meta = meta_row ? Job::Meta::decode(*meta_row) : Job::Meta{};
  meta.last_output_ts = std::max(meta.last_output_ts, floor);
  return meta.encode();
}

std::string with_event_watermark_floor(std::optional<std::string_view> meta_row, Micros floor) {
  Job::Meta meta = meta_row ? Job::Meta::decode(*meta_row) : Job::Meta{};
  meta.event_watermark = std::max(meta.event_watermark, floor);
  return meta.encode();
}

std::string with_input_swapped(std::string_view meta_row, Micros newest) {
  Job::Meta meta = Job::Meta::decode(meta_row);
  meta.progress.finished = false;
  meta.low_watermark = meta.replay_watermark = meta.last_output_ts = newest;
  return meta.encode();
}

std::string with_new_producer(std::string_view meta_row) {
  Job::Meta meta = Job::Meta::decode(meta_row);
  meta.next_seqno = 1;
  meta.acked_seqno = 0;
  return meta.encode();
}

std::string with_drain_cut(std::string_view meta_row, std::optional<Micros> cut) {
  Job::Meta meta = Job::Meta::decode(meta_row);
  meta.drain_cut = cut.value_or(INT64_MIN);
  return meta.encode();
}

std::optional<SinkProgress> sink_progress(std::string_view meta_row) {
  Decoder in(meta_row);
  for (int skip = 0; skip < 4; ++skip) (void)in.u64();  // epoch and three timestamps
  SinkProgress p;
  p.next_seqno = in.u64();
  p.acked_seqno = in.u64();
  if (!in.ok()) return std::nullopt;
  return p;
}

}  // namespace onceflow
