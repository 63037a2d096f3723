// A computation job's epoch: the function over its inputs, state and timers.
#include "core/job_parts.h"

#include <algorithm>

namespace onceflow {

void Job::step_computation(EpochTx& etx) {
  const ComputationSpec& spec = *computation_;
  if (!init_threw_.empty()) return gave_up_for_throw(etx, init_threw_);  // no epoch of it can run
  const bool swift = spec.type == ComputationType::kSwiftMap;
  const bool dedup = spec.processing_mode == ProcessingMode::kExactlyOnce && !swift && !env_.bugs.no_input_dedup;
  std::vector<Input> rows;
  Micros unseen_from = kNoWatermark;
  if (!read_inputs(etx, spec.input_streams, &rows, &unseen_from)) return;

  // Swift: acknowledge what the previous committed epoch processed.
  if (!pending_ack_.empty()) probe(env_, Probe::kSwiftAcknowledge);
  for (const InputRef& ref : pending_ack_) etx.inputs.take(ref);
  Context context(etx.now, function_random());
  // Alignment: only messages older than every producer's watermark are taken, so a message
  // that arrives late can never be older than one already processed.
  Micros take_below = INT64_MIN;  // the alignment bound: messages older than it are taken
  const Micros input_watermark = producers_watermark(etx, false, &take_below);
  // Held back by a consumer (spec.max_in_flight), the epoch takes no input: every input waits
  // as if for a watermark. Timers still fire.
  const Micros takes_below = take_below;
  Micros left_from = std::min(unseen_from, take_below);  // what may be left untaken (Meta::taken_below)
  held_ = holds_back(etx);
  if (held_) take_below = INT64_MIN;
  if (dedup) prefetch_dedup(etx, rows, take_below);
  if (!spec.timer_streams.empty()) {
    // All of the partition's timers, usually: then adding and firing them needs no reads.
    const std::string& prefix = prefix_;
    for (const auto& [stream, table] : timers_tables_) {
      if (!etx.prefetch_range(table, prefix, prefix + "~", env_.options.timer_rows_known)) probe(env_, Probe::kTimerReadAheadFull);
    }
  }
  prefetch_state(etx, rows, take_below);
  Micros first_unacked = unseen_from;      // oldest input that may still be recomputed
  Micros first_unprocessed = unseen_from;  // oldest input not yet processed
  OutputBatches batches;  // swift batching with relaxed guarantees
  DedupRows dedup_rows(etx, dedup_table_);
  DedupTable::Batch seen(dedup_, dedup_rows);

  for (Input& in : rows) {
    Message& m = in.m;
    if (processed(etx, in)) continue;
    first_unacked = std::min(first_unacked, m.system_ts);
    if (held_) {
      first_unprocessed = std::min(first_unprocessed, m.system_ts);
      left_from = std::min(left_from, m.alignment_ts);
      break;
    }
    if (m.alignment_ts >= take_below) {
      first_unprocessed = std::min(first_unprocessed, m.system_ts);
      left_from = std::min(left_from, m.alignment_ts);
      probe(env_, Probe::kAlignmentWait);
      etx.aligned = true;
      break;
    }
    etx.has_work = true;
    if (dedup && !seen.record_if_new(m)) {
      etx.inputs.take(in.read, m.id);
      probe(env_, Probe::kInputDedupHit);
      if (env_.observer != nullptr) env_.observer->duplicate_dropped(id_, m);
      continue;
    }
    // A restored swift job takes inputs its predecessor may have processed: they were not
    // acknowledged.
    if (swift && committed_epochs_ == 0 && etx.meta.epoch > 1) probe(env_, Probe::kSwiftRecompute);
    CollectingOutput out(spec, m.key, m.event_ts);
    call_function(etx, user_call(etx, m.id, m.key, false), [&] { function_->process_message(m, out, context); });
    if (!etx.failed.is_ok() || misused(etx, out)) return;
    etx.meta.event_watermark =
        std::max(etx.meta.event_watermark, env_.bugs.event_watermark_from_system_time ? m.system_ts : m.event_ts);
    if (swift) {
      etx.consumed_rows.push_back({etx.inputs.row(in.read), m.id});
    } else {
      etx.inputs.take(in.read, m.id);
    }
    for (uint32_t i = 0; i < out.messages.size(); ++i) {
      if (swift && spec.allow_batching_with_relaxed_guarantees) {
        batches.add(m, std::move(out.messages[i]));
        continue;
      }
      Message child = message_output(m, std::move(out.messages[i]), i);
      child.system_ts = child.alignment_ts = swift ? m.system_ts : next_output_ts(etx);
      emit(etx, std::move(child));
    }
    for (uint32_t i = 0; i < out.timers.size(); ++i) add_timer(etx, out.timers[i], message_timer_unique(m, i));
    etx.record.consumed.push_back(std::move(m));
  }
  publish_taken(etx, left_from, takes_below);
  // Rows the epoch rewrites anyway forget what a cleanup now would.
  dedup_recorded_ += dedup ? seen.flush(dedup_forget_below(etx, first_unprocessed)) : seen.flush();
  // Batching: one message per (stream, key) group of up to batch_size inputs.
  if (swift && spec.allow_batching_with_relaxed_guarantees) {
    for (Message& batch : batches.take(spec.batch_size)) emit(etx, std::move(batch));
  }
  // No timer fires while the pipeline drains (core/controller.h): a drain must end.
  if (etx.meta.drain_cut == INT64_MIN) fire_timers(etx);
  if (dedup) clean_dedup(etx, first_unprocessed);
  // The low watermark of what this job may still emit. A swift job re-emits what it has not
  // acknowledged, with its inputs' timestamps; a regular job never re-emits, and stamps
  // whatever it emits next above its last output.
  if (swift) {
    // New outputs inherit their inputs' times; re-emissions after a restart are repeats of
    // what was emitted already, which consumers drop by MessageId.
    // A stage above may replay too (a swift producer re-emits what it has not acknowledged),
    // and this one then re-emits what it derives from the repeats.
    const Micros upstream_replay = env_.bugs.swift_replay_own_watermark ? kNoWatermark : producers_watermark(etx, true);
    etx.meta.low_watermark = std::max(etx.meta.low_watermark, std::min(first_unprocessed, input_watermark));
    etx.meta.replay_watermark =
        std::max(etx.meta.replay_watermark, std::min({first_unacked, input_watermark, upstream_replay}));
  } else {
    etx.meta.last_output_ts = std::max(etx.meta.last_output_ts, etx.now);
    etx.meta.low_watermark = etx.meta.replay_watermark = etx.meta.last_output_ts + 1;
  }
}

// A call of the function its spec does not allow fails the epoch, and is reported.
bool Job::misused(EpochTx& etx, const CollectingOutput& out) {
  if (out.misuse.empty()) return false;
  etx.failed = Status::invalid_argument(fmt::format("computation {}: {}", computation_->name, out.misuse));
  if (env_.observer != nullptr) env_.observer->computation_misuse(computation_->name, out.misuse);
  return true;
}

template <typename Call>
void Job::call_function(EpochTx& etx, const UserCall& call, Call&& run) {
  const user_code::CallScope scope(call);
  // The function caught the node's crash (a `catch (...)` around a state read) and went on,
  // returning or throwing its own: said (a run lists a warning once), and the unwinding goes on.
  const auto swallowed_crash = [&](std::string_view how) {
    if (env_.observer == nullptr) return;
    env_.observer->warning("UserCodeSwallowedCrash",
                           {{"Computation", computation_->name}, {"Job", std::string(call.job)},
                            {"Detail", fmt::format("the function caught the exception that unwinds a crashed node's "
                                                   "calls (a catch (...) around a state read or a timer call) and {}: "
                                                   "catch your own exception types and rethrow the rest", how)}});
  };
  try {
    run();
    if (env_.runtime.unwinding()) {
      swallowed_crash("returned");
      throw FiberKilled{};
    }
  } catch (const FiberKilled&) {
    throw;  // the node went down under the call: not the function's doing
  } catch (...) {
    if (env_.runtime.unwinding()) {
      swallowed_crash("threw another");
      throw FiberKilled{};
    }
    if (!etx.failed.is_ok()) return;  // told "no such row" by a failed read: that is the cause
    const std::string where = call.timer ? fmt::format("firing a timer of key {}", call.key)
                                         : fmt::format("taking message {} (key {})", format_id(call.message), call.key);
    gave_up_for_throw(etx, fmt::format("computation {} threw {} {} in epoch {} of job {}", computation_->name,
                                       user_code::describe_current_exception(), where, call.epoch, call.job));
  }
}

void Job::gave_up_for_throw(EpochTx& etx, const std::string& what) {
  etx.failed = Status::aborted(what);
  etx.threw = true;
  if (env_.observer != nullptr) env_.observer->computation_threw(computation_->name, what);
}

// How far the timers of `timer_stream` are due: its watermark, the event time seen so far or
// the system time.
Micros Job::timer_watermark(const std::string& timer_stream, Micros event_watermark, Micros now) const {
  if (const TimerStreamSpec* s = computation_->timer_stream(timer_stream)) {
    return s->watermark == Watermark::kEventTime ? event_watermark : now;
  }
  assert(false && "a timer of an undeclared timer stream");
  return now;
}

// A timer is due once its stream's watermark has reached its trigger.
bool Job::due(const Timer& t, Micros event_watermark, Micros now) const {
  const Micros watermark = timer_watermark(t.timer_stream, event_watermark, now);
  if (env_.bugs.timer_fires_after_watermark) return t.trigger_ts < watermark;  // the bug: one past it
  return t.trigger_ts <= watermark;
}

// The state rows of the keys the epoch will process (its inputs' and its due timers'), one
// read per state table.
void Job::prefetch_state(EpochTx& etx, const std::vector<Input>& rows, Micros watermark) {
  if (state_tables_.empty()) return;
  std::vector<uint64_t> keys;
  Micros event_watermark = etx.meta.event_watermark;
  for (const Input& in : rows) {
    const Message& m = in.m;
    if (m.alignment_ts >= watermark) break;
    if (processed(etx, in)) continue;
    keys.push_back(m.key);
    event_watermark = std::max(event_watermark, m.event_ts);
  }
  for (const DueTimer& timer : due_timers(etx, event_watermark)) keys.push_back(timer.timer.key);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::vector<std::string> hex;
  hex.reserve(keys.size());
  for (uint64_t key : keys) hex.push_back(tables::hex16(key));
  for (const std::string& table : state_tables_) etx.prefetch(table, hex);
}

// Stores a timer: rows are keyed by (trigger, key, stream), so with
// deduplicate_equal_timestamps (the default) equal triggers of one key merge into one row
// keeping the smallest event time; without it each timer gets a row of its own.
void Job::add_timer(EpochTx& etx, const Timer& t, uint64_t unique) {
  const ComputationSpec& spec = *computation_;
  const TimerStreamSpec* stream = nullptr;
  for (const auto& s : spec.timer_streams) {
    if (s.name == t.timer_stream) stream = &s;
  }
  assert(stream != nullptr);
  const std::string& table = timers_tables_.at(t.timer_stream);
  const std::string key = prefix_ + timer_row(t, stream->deduplicate_equal_timestamps, unique);
  std::optional<TimerValue> existing;
  if (const auto row = etx.read(table, key)) {
    probe(env_, Probe::kTimerMerged);
    existing = decode_timer_value(*row);
  } else {
    etx.record.timer_rows_created.push_back(table + ":" + key);
  }
  const std::optional<TimerValue> value = timer_after_add(existing, t.event_ts, unique);
  if (value) etx.tx.put(table, key, encode_timer_value(*value));
}

// Each timer stream's table holds its timers in trigger order, so its due ones come first:
// up to timers_per_epoch rows are read from each, and the due ones of all of them are taken
// in trigger order (then key and stream), up to timers_per_epoch in all. A stream whose
// watermark lags (an event-time one after a repartition, or the other clock's) holds none of
// the others' due timers back.
std::vector<Job::DueTimer> Job::due_timers(EpochTx& etx, Micros event_watermark) {
  std::vector<DueTimer> out;
  const std::string& prefix = prefix_;
  const auto limit = static_cast<size_t>(env_.options.timers_per_epoch);
  for (const auto& [stream, table] : timers_tables_) {
    for (Row& row : etx.scan(table, prefix, prefix + "~", limit)) {
      const TimerValue value = decode_timer_value(row.value);
      Timer t = decode_timer(std::string_view(row.key).substr(prefix.size()), value);
      if (!due(t, event_watermark, etx.now)) break;  // nor is any later row of the stream
      out.push_back(DueTimer{&table, std::move(row.key), value, std::move(t)});
    }
  }
  std::sort(out.begin(), out.end(), [](const DueTimer& a, const DueTimer& b) { return a.key < b.key; });
  if (out.size() > limit) out.resize(limit);
  return out;
}

void Job::fire_timers(EpochTx& etx) {
  const ComputationSpec& spec = *computation_;
  if (spec.timer_streams.empty()) return;
  const std::string& prefix = prefix_;
  Context context(etx.now, function_random());
  for (const DueTimer& due_timer : due_timers(etx, etx.meta.event_watermark)) {
    const std::string& table = *due_timer.table;
    const std::string& key = due_timer.key;
    const std::string rest = key.substr(prefix.size());
    const TimerValue& value = due_timer.value;
    const Timer& t = due_timer.timer;
    const std::string firing = timer_firing(rest, value.creation);  // this timer, this creation
    etx.has_work = true;
    if (env_.bugs.timer_dropped_with_message &&
        std::any_of(etx.record.consumed.begin(), etx.record.consumed.end(), [&](const Message& m) { return m.key == t.key; })) {
      etx.record.timer_rows_fired.push_back(table + ":" + key);
      etx.tx.erase(table, key);
      continue;
    }
    CollectingOutput out(spec, t.key, t.event_ts);
    call_function(etx, user_call(etx, 0, t.key, true), [&] { function_->process_timer(t, out, context); });
    if (!etx.failed.is_ok() || misused(etx, out)) return;
    probe(env_, committed_epochs_ == 0 && etx.meta.epoch > 1 ? Probe::kTimerFiredAfterRestart : Probe::kTimerFired);
    etx.record.timers_fired.push_back({rest, value.creation, t, etx.record.consumed.size(),
                                       timer_watermark(t.timer_stream, etx.meta.event_watermark, etx.now)});
    etx.record.timer_rows_fired.push_back(table + ":" + key);
    if (env_.bugs.timer_delete_apart) {
      etx.timer_deletes_apart.emplace_back(table, key);
    } else {
      etx.tx.erase(table, key);
    }
    // The bug: outputs named by the key, stream and event time, which a repeating timer's
    // firings share.
    const std::string named = env_.bugs.timer_output_id_by_event_time
                                  ? fmt::format("{:016x}/{}/{}", t.key, t.timer_stream, t.event_ts)
                                  : firing;
    for (uint32_t i = 0; i < out.messages.size(); ++i) {
      Message child = timer_output(spec.name, named, t, std::move(out.messages[i]), i);
      child.system_ts = child.alignment_ts = next_output_ts(etx);
      emit(etx, std::move(child));
    }
    for (uint32_t i = 0; i < out.timers.size(); ++i) add_timer(etx, out.timers[i], timer_timer_unique(spec.name, firing, i));
  }
}

}  // namespace onceflow
