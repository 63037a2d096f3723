// A job: its Lease, its epochs and how each one commits (core/job.h); its sources, inputs,
// computations and sinks are in job_sources.cc, job_inputs.cc, job_computation.cc, job_sink.cc.
#include "core/job_parts.h"

namespace onceflow {

Job::Job(const EngineEnv& env, JobId id, LeaseId lease)
    : env_(env),
      id_(std::move(id)),
      lease_(lease),
      sink_(id_.kind == JobKind::kSink ? env_.spec.sink(id_.name) : nullptr),
      job_name_(id_.str()) {
  switch (id_.kind) {
    case JobKind::kSource:
      source_ = env_.spec.source(id_.name);
      if (source_ != nullptr) origin_ = source_origin(*source_);
      break;
    case JobKind::kComputation: computation_ = env_.spec.computation(id_.name); break;
    case JobKind::kSink:
      if (sink_ != nullptr) delivery_ = std::make_unique<Delivery>(env_, id_, lease_, *sink_, [this] { request_stop(); });
      break;
  }
  assert(source_ != nullptr || computation_ != nullptr || sink_ != nullptr);
  // Where this job's input dedup lives, worked out once rather than per message.
  if (source_ == nullptr) {
    const std::string owner = computation_ != nullptr ? computation_->name : "sink:" + sink_->name;
    // A sink's input keys are the uint64 hashes of the stream, so it always takes the
    // compact layout (one row per key rather than a row put and erased per message).
    const bool compact = computation_ == nullptr || computation_->compact_input_messages();
    dedup_table_ = compact ? tables::compact_input_messages(owner) : tables::input_messages(owner);
    dedup_ = DedupTable(compact ? DedupLayout::kCompact : DedupLayout::kFull, id_.partition);
  }
  const auto outputs = computation_ != nullptr ? computation_->output_streams
                       : source_ != nullptr    ? std::vector<std::string>{source_->output_stream}
                                               : std::vector<std::string>{};
  for (const auto& stream : outputs) {
    std::optional<StreamConsumer> consumer = consumer_of(env_.spec, stream);
    // Every source may be held (a queue's, a Kafka topic's or a service log's rows wait where
    // they are), and every computation but on a stream that feeds back into itself.
    const int partitions = consumer ? consumer->partitions : 0;
    const bool held = env_.spec.max_in_flight > 0 &&
                      (source_ != nullptr || (computation_ != nullptr && !feeds_back(env_.spec, stream, *computation_)));
    if (!held) consumer.reset();
    consumers_[stream] = Consumer{partitions, tables::stream(stream), std::move(consumer)};
    watermark_outputs_.push_back(InputWakeups::watermark(tables::stream(stream)));
  }
  prefix_ = tables::partition_prefix(id_.partition);
  if (computation_ != nullptr) {
    for (const TimerStreamSpec& s : computation_->timer_streams) timers_tables_[s.name] = tables::timers(computation_->name, s.name);
  }
  if (sink_ != nullptr) outbox_table_ = tables::outbox(sink_->name);
  if (computation_ != nullptr) {
    state_backend_ = std::make_unique<StateForward>(*this);
    function_ = env_.registry.create(computation_->processing_function);
    const InitContext init(*state_backend_, computation_->name);
    try {
      function_->init(init);
    } catch (const FiberKilled&) {
      throw;
    } catch (...) {
      init_threw_ = fmt::format("computation {} threw {} in init() on job {}", computation_->name,
                                user_code::describe_current_exception(), job_name_);
    }
    state_tables_ = init.tables();
    std::sort(state_tables_.begin(), state_tables_.end());
    state_tables_.erase(std::unique(state_tables_.begin(), state_tables_.end()), state_tables_.end());
  }
  // The meta rows an epoch reads: its own, and those of its inputs' producers (watermarks).
  const auto inputs = computation_ != nullptr ? computation_->input_streams
                      : sink_ != nullptr      ? std::vector<std::string>{sink_->input_stream}
                                              : std::vector<std::string>{};
  // A queue source is woken by rows appended in its process (`onceflow real`'s producer).
  if (source_ != nullptr && source_->type == "queue") wake_inputs_.emplace_back(tables::queue(table_of(*source_)), id_.partition);
  for (const auto& stream : inputs) {
    wake_inputs_.emplace_back(tables::stream(stream), id_.partition);
    watermark_inputs_.push_back(InputWakeups::watermark(tables::stream(stream)));
    for (const JobId& producer : producers(env_.spec, stream)) {
      producer_metas_.push_back(producer.str());
      source_producers_.push_back(producer.kind == JobKind::kSource);
    }
  }
  watermark_inputs_.insert(watermark_inputs_.begin(), wake_inputs_.begin(), wake_inputs_.end());
  meta_key_ = id_.str();
  epoch_metas_ = producer_metas_;
  epoch_metas_.push_back(meta_key_);
}

Job::~Job() = default;

UserCall Job::user_call(EpochTx& etx, uint64_t message, uint64_t key, bool timer) {
  UserCall call{computation_->name, job_name_, etx.meta.epoch, message, key, timer, etx.now, function_random_.seed(),
                &etx.buggify_calls, false};
  call.reads = &etx.failed;
  return call;
}

Random& Job::function_random() { return env_.bugs.random_per_process ? env_.random : function_random_; }

void Job::run() {
  const Micros period = env_.spec.epoch_period_us;
  while (!stop_requested_) {
    const Micros started = env_.runtime.clock().now();
    const bool wakes = env_.wakeups != nullptr && !wake_inputs_.empty();
    const uint64_t seen = wakes ? env_.wakeups->commits(wake_inputs_) : 0;  // before the epoch's snapshot
    const uint64_t seen_watermarks = wakes ? env_.wakeups->commits(watermark_inputs_) : 0;
    epoch_by_watermark_ = std::exchange(next_by_watermark_, false);
    const Outcome outcome = run_epoch();
    if (outcome == Outcome::kFenced) {
      fenced_ = true;
      if (env_.observer != nullptr) env_.observer->job_fenced(id_, lease_);
      break;
    }
    bool outbox_empty = true;
    if (sink_ != nullptr && !sink_->at_most_once_strategy.enabled && !writes_before_commit(*sink_)) {
      outbox_empty = delivery_->deliver_outbox();
    }
    // Idle means no work and nothing waiting to be delivered; an idle job slows down step by
    // step (1, 2, 4... periods, up to idle_epoch_periods), and any work brings it back.
    // A job held back by its consumers (held_) is not idle: it reads on once they catch up.
    idle_epochs_ = idle_ && outbox_empty && !held_ ? idle_epochs_ + 1 : 0;
    const int64_t periods =
        idle_epochs_ == 0 ? 1 : std::min<int64_t>(int64_t{1} << std::min(idle_epochs_ - 1, 20), env_.options.idle_epoch_periods);
    if (periods > 1) probe(env_, Probe::kIdleSlowdown);
    if (behind_) {
      // Behind its input: the next epoch at once (other fibers run first), not a period on.
      probe(env_, Probe::kEpochCatchUp);
      env_.runtime.sleep_for(0);
      continue;
    }
    // Epochs start a period apart (the epoch's own time counted in), so a busy job keeps its
    // cadence; bounded, so that a clock that jumps neither stalls nor races the job.
    // Rows committed into the job's inputs by a job of this process start the next epoch at
    // once (core/input_wakeups.h).
    const Micros wait = periods * period;
    const Micros now = env_.runtime.clock().now();
    const Micros until = std::clamp<Micros>(started + wait, now, now + wait);
    // An epoch that left inputs for a producer's watermark also starts when a producer of
    // this process commits an epoch that moves its watermark on, rows or not (see
    // after_commit for which do).
    if (held_) {
      // Held back: its input is not what it waits for; its consumer is, in another job.
      env_.runtime.sleep_until(until);
    } else if (wakes && aligned_) {
      if (env_.wakeups->wait(env_.runtime, watermark_inputs_, until, seen_watermarks)) {
        next_by_watermark_ = env_.wakeups->commits(wake_inputs_) == seen;
        probe(env_, next_by_watermark_ ? Probe::kEpochWokenByWatermark : Probe::kEpochWokenByInput);
      }
    } else if (wakes) {
      if (env_.wakeups->wait(env_.runtime, wake_inputs_, until, seen)) probe(env_, Probe::kEpochWokenByInput);
    } else {
      env_.runtime.sleep_until(until);
    }
  }
  finished_ = true;
  if (delivery_ != nullptr) delivery_->job_ended();
}

Job::Outcome Job::run_epoch() {
  auto began = env_.store.begin();
  if (!began) return Outcome::kRetry;
  EpochTx etx(env_.store, std::move(*began),
              env_.runtime.clock().now() + (env_.bugs.epoch_time_ahead ? env_.spec.epoch_period_us : 0));
  current_ = &etx;
  struct Reset {
    EpochTx** slot;
    ~Reset() { *slot = nullptr; }
  } reset{&current_};

  etx.prefetch(tables::kJobMeta, epoch_metas_);
  if (auto meta = etx.read(tables::kJobMeta, meta_key_)) etx.meta = Meta::decode(*meta);
  if (!etx.failed.is_ok()) return Outcome::kRetry;
  if (env_.bugs.event_watermark_not_kept && committed_epochs_ == 0) etx.meta.event_watermark = INT64_MIN;
  ++etx.meta.epoch;
  etx.watermark_before = etx.meta.low_watermark;
  if (computation_ != nullptr) function_random_ = Xoshiro256StarStar(env_.seed).fork(meta_key_ + "#" + std::to_string(etx.meta.epoch));
  etx.observed = env_.observer != nullptr && env_.observer->wants_state_reads();
  etx.record.now = etx.now;
  etx.record.random_seed = function_random_.seed();
  idle_ = false;
  held_ = false;
  switch (id_.kind) {
    case JobKind::kSource: step_source(etx); break;
    case JobKind::kComputation: step_computation(etx); break;
    case JobKind::kSink: step_sink(etx); break;
  }
  if (etx.failed.is_ok()) {
    etx.streams_written = etx.stream_out.write(etx.tx, meta_key_, etx.meta.epoch);
    (void)etx.inputs.settle(
        etx.tx, [&etx](const std::string& table, const std::string& key) { return etx.read(table, key); }, &etx.failed);
  }
  if (!etx.failed.is_ok()) {
    if (!etx.threw) probe(env_, Probe::kEpochReadFailed);
    if (env_.observer != nullptr) {
      env_.observer->epoch_abandoned(id_, lease_, etx.meta.epoch,
                                     etx.threw ? etx.failed.message() : "its reads failed (" + etx.failed.message() + ")");
    }
    env_.store.abort(etx.tx);
    return Outcome::kRetry;
  }
  if (!etx.has_work && env_.bugs.no_idle_heartbeat) {
    env_.store.abort(etx.tx);
    return Outcome::kRetry;
  }
  idle_ = !etx.has_work;
  etx.tx.put(tables::kJobMeta, meta_key_, etx.meta.encode());
  const Outcome outcome = commit(etx);
  if (outcome == Outcome::kCommitted) after_commit(etx);
  behind_ = outcome == Outcome::kCommitted && etx.has_work && etx.page_full;
  aligned_ = outcome == Outcome::kCommitted && etx.aligned;
  return outcome;
}

Job::Outcome Job::commit(EpochTx& etx) {
  std::vector<LeaseId> prerequisites;
  if (!env_.bugs.no_lease_prerequisite) prerequisites.push_back(lease_);
  if (env_.bugs.deliver_before_commit && sink_ != nullptr) {
    std::vector<std::pair<std::string, std::string>> rows;
    for (const auto& [where, value] : etx.tx.writes()) {
      if (where.first == outbox_table_ && value) rows.emplace_back(where.second, *value);
    }
    delivery_->deliver_uncommitted(rows);
  }
  etx.record.job = id_;
  etx.record.node = env_.network.self();
  etx.record.lease = lease_;
  etx.record.layout_version = env_.spec.layout_version;
  etx.record.tx = etx.tx.id();
  etx.record.epoch = etx.meta.epoch;
  if (env_.options.record_history && computation_ != nullptr &&
      (!etx.record.consumed.empty() || !etx.record.timers_fired.empty())) {
    etx.record.clock_at_commit = env_.runtime.clock().now();
    etx.tx.put(tables::history(computation_->name), prefix_ + tables::hex16(etx.meta.epoch), encode_history_row(etx.record));
  }
  if (env_.observer != nullptr) env_.observer->epoch_committing(etx.record);
  if (etx.has_work) fault_point(env_, "epoch.before_commit");
  auto result = env_.store.commit(etx.tx, prerequisites);
  Outcome outcome = Outcome::kRetry;
  if (result) {
    etx.record.version = *result;
    outcome = Outcome::kCommitted;
  } else if (result.error().is_prerequisite_failed()) {
    probe(env_, Probe::kEpochFenced);
    outcome = Outcome::kFenced;
  } else if (result.error().is_ambiguous()) {
    outcome = resolve_ambiguous(etx);
    probe(env_, outcome == Outcome::kCommitted ? Probe::kEpochAmbiguousCommitted : Probe::kEpochAmbiguousNotCommitted);
  } else {
    probe(env_, result.error().is_conflict() ? Probe::kEpochConflict : Probe::kEpochUnavailable);
    if (env_.observer != nullptr) {
      env_.observer->epoch_abandoned(id_, lease_, etx.meta.epoch,
                                     (result.error().is_conflict() ? "its commit conflicted (" : "the store was unavailable (") +
                                         result.error().message() + ")");
    }
  }
  if (outcome == Outcome::kCommitted && committed_epochs_++ == 0 && etx.meta.epoch > 1) {
    probe(env_, Probe::kEpochFirstOfIncarnation);
  }
  if (outcome == Outcome::kCommitted && env_.observer != nullptr) env_.observer->epoch_committed(etx.record);
  if (etx.has_work) fault_point(env_, "epoch.after_commit");
  return outcome;
}

Job::Outcome Job::resolve_ambiguous(EpochTx& etx) {
  if (env_.bugs.ambiguous_as_success) return Outcome::kCommitted;
  if (env_.bugs.ambiguous_as_failure) return Outcome::kRetry;
  return resolve_until_answered(env_, etx.tx.id(), &etx.record.version) ? Outcome::kCommitted : Outcome::kRetry;
}

void Job::after_commit(EpochTx& etx) {
  if (env_.wakeups != nullptr && !etx.streams_written.empty()) {
    std::vector<InputWakeups::Input> written;
    written.reserve(etx.streams_written.size());
    for (const StreamWrites::Written& row : etx.streams_written) written.push_back(row.where);
    env_.wakeups->committed(env_.runtime, written);
  }
  // Backpressure's ledger (untaken_): rows for consumers that press (none without a bound).
  for (const StreamWrites::Written& row : etx.streams_written) {
    const auto consumer = std::find_if(consumers_.begin(), consumers_.end(), [&](const auto& c) {
      return c.second.presses && c.second.table == row.where.first;
    });
    if (consumer == consumers_.end()) continue;
    Untaken& untaken = untaken_[row.where];
    if (untaken.consumer_meta.empty()) {
      const StreamConsumer& by = *consumer->second.presses;
      untaken.consumer_meta = JobId{by.kind, by.name, row.where.second}.str();
    }
    untaken.rows.put(row);
  }
  // Only a watermark that moved, and not by an idle epoch that a watermark began: two jobs of
  // a cycle (or the partitions of a job reading its own outputs), each waiting for a slow
  // third producer, would otherwise wake each other without end (a computation's watermark
  // follows its clock, so it moves on every epoch). A consumer waiting behind such an epoch
  // waits for the producer's next one, as without watermark wake-ups.
  if (env_.wakeups != nullptr && !watermark_outputs_.empty() && etx.meta.low_watermark != etx.watermark_before &&
      (etx.has_work || !epoch_by_watermark_)) {
    env_.wakeups->committed(env_.runtime, watermark_outputs_);
  }
  if (computation_ != nullptr && computation_->type == ComputationType::kSwiftMap) {
    pending_ack_.clear();
    pending_ack_.insert(etx.consumed_rows.begin(), etx.consumed_rows.end());
  }
  for (const auto& [table, key] : etx.timer_deletes_apart) {
    // The bug: the fired timer is deleted in a transaction of its own, after its result.
    auto tx = env_.store.begin();
    if (!tx) continue;
    tx->erase(table, key);
    (void)env_.store.commit(*tx, {lease_});
  }
  if (delivery_ == nullptr) return;
  delivery_->committed(std::move(etx.outbox));
  if (!etx.confirmed.empty()) {
    // The delivery callback: the target holds them, and this commit acknowledged them.
    if (env_.observer != nullptr) env_.observer->delivery_confirmed(id_, etx.confirmed, etx.record.version);
    delivery_->confirmed_up_to(etx.meta.acked_seqno);
  }
  if (!etx.amo_outputs.empty()) delivery_->queue_at_most_once(std::move(etx.amo_outputs));
  if (!etx.written_late.empty()) (void)delivery_->write_now(etx.written_late);
}

}  // namespace onceflow
