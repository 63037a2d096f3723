// The controller's cycle (core/controller.h): what the pipeline's state asks of it, a drain and
// its cut, quiescing; its leadership, scheduling, layouts and requests are in
// controller_leadership.cc, controller_schedule.cc, controller_layout.cc and
// controller_requests.cc.
#include "core/controller_parts.h"

namespace onceflow {

Controller::Controller(const EngineEnv& env, std::string node) : env_(env), node_(std::move(node)), spec_(env.spec) {
  assert(!node_.empty());
  env_.network.serve(kSetStateService, [this](const std::string&, std::string_view req) { return on_set_state(req); });
  env_.network.serve(kRepartitionService, [this](const std::string&, std::string_view req) { return on_repartition(req); });
  env_.network.serve(kRespecService, [this](const std::string&, std::string_view req) { return on_respec(req); });
  env_.network.serve(kReconfigureService, [this](const std::string&, std::string_view req) { return on_reconfigure(req); });
  env_.runtime.spawn("scheduler", [this] { loop(); });
}

void Controller::loop() {
  while (true) {
    if (!busy_) {  // else a state request is being stored: this cycle is skipped
      busy_ = true;
      cycle();
      end_busy();
    }
    env_.runtime.sleep_for(env_.spec.scheduling_period_us);
  }
}

void Controller::cycle() {
  if (!lead()) return;
  if (!booted_ && !boot()) return;
  const bool unstored_left = !end_unstored_leases();
  // Keep the job Leases alive first, whatever else this cycle manages to do.
  const std::set<std::string> ended = ping_job_leases();
  // Right after the pings: a job of an older layout is never kept alive past this cycle.
  remove_stale_layout_jobs();
  if (quiescing_ || (state_ != PipelineState::kWorking && state_ != PipelineState::kDraining)) {
    std::vector<std::string> jobs;
    for (const auto& [job, a] : assignments_) jobs.push_back(job);
    for (const auto& job : jobs) (void)remove(job, "pipeline not working");
    if (state_dirty_ || !jobs.empty() || unstored_left) {
      if (persist(assignments_)) state_dirty_ = false;
    }
    if (quiescing_ && assignments_.empty() && unstored_.empty()) finish_quiescing();
    if (!quiescing_ && pending_ && state_ == PipelineState::kStopped && assignments_.empty() && unstored_.empty()) {
      apply_pending_layout();
    }
    return;
  }
  if (pending_ && state_ == PipelineState::kWorking) {  // a repartition waits for a drain
    state_ = PipelineState::kDraining;
    resume_after_layout_ = true;
    if (!persist_state()) {
      state_ = PipelineState::kWorking;
      return;
    }
  }
  if (state_ == PipelineState::kDraining && !drain_cut_ && !persist_state()) return;  // the cut first
  auto workers = read_workers();
  if (!workers) return;
  schedule(*workers, ended, env_.runtime.clock().now());
  if (lease_ == 0) return;  // it stepped down meanwhile
  // A target resharded: the sink's partitions are recreated after a drain, from the next cycle.
  if (state_ == PipelineState::kWorking && !pending_ && follow_resharded_targets()) return;
  if (state_ == PipelineState::kDraining) {
    if (sources_at_cut() && nothing_in_flight(false).value_or(false)) quiescing_ = PipelineState::kStopped;
  } else if (sources_finished() && nothing_in_flight(true).value_or(false)) {
    if (env_.bugs.completion_leaves_leases) {
      // The bug: completed at once, the job Leases left to run out.
      assignments_.clear();
      state_ = PipelineState::kCompleted;
      if (persist(assignments_)) probe(env_, Probe::kControllerCompleted);
      return;
    }
    quiescing_ = PipelineState::kCompleted;
  }
}

std::optional<bool> Controller::nothing_in_flight(bool with_timers) {
  auto tx = env_.store.begin();
  if (!tx) return std::nullopt;
  // Not a destructor's job: releasing may suspend, and a crash unwinds through suspensions.
  const auto answer = in_flight_answer(*tx, with_timers);
  env_.store.abort(*tx);
  return answer;
}

std::optional<bool> Controller::in_flight_answer(const Transaction& tx, bool with_timers) {
  const auto empty = [&](const std::string& table) -> std::optional<bool> {
    auto rows = env_.store.scan(tx, table, "", "", 1);
    if (!rows) return std::nullopt;
    return rows->empty();
  };
  std::vector<std::string> tables;
  for (const auto& c : spec_.computations) {
    for (const auto& in : c.input_streams) tables.push_back(tables::stream(in));
  }
  for (const auto& s : spec_.sinks) {
    tables.push_back(tables::stream(s.input_stream));
    tables.push_back(tables::outbox(s.name));
  }
  for (const std::string& table : tables) {
    const auto is_empty = empty(table);
    if (!is_empty || !*is_empty) return is_empty;
  }
  auto pending = at_most_once_pending(env_.store, tx, spec_);
  if (!pending) return std::nullopt;
  if (*pending != 0) return false;
  if (!with_timers) return true;
  // Completion waits for every timer that may still fire (core/job.h: timer_may_fire). An
  // event-time timer past its partition's event watermark waits for input that will not
  // come: the pipeline completes with it stored, as a drain ends with it.
  for (const auto& c : spec_.computations) {
    for (const std::string& table : tables::timers(c)) {
      bool failed = false;
      const auto first_from = [&](const std::string& key) -> std::optional<Row> {
        auto rows = env_.store.scan(tx, table, key, "", 1);
        failed = failed || !rows;
        return rows && !rows->empty() ? std::optional<Row>(std::move(rows->front())) : std::nullopt;
      };
      const auto meta = [&](const std::string& job) -> std::optional<std::string> {
        auto row = env_.store.get(tx, tables::kJobMeta, job);
        failed = failed || !row;
        return row ? *row : std::nullopt;
      };
      const bool may_fire = timers_may_fire(c, first_from, meta);
      if (failed) return std::nullopt;
      if (may_fire) return false;
    }
  }
  return true;
}

bool Controller::sources_finished() {
  std::vector<std::string> metas;
  for (const auto& s : env_.spec.sources) {
    if (!finite(s)) return false;
    for (int p = 0; p < s.partitions; ++p) metas.push_back(JobId{JobKind::kSource, s.name, p}.str());
  }
  if (metas.empty()) return false;
  auto tx = env_.store.begin();
  if (!tx) return false;
  auto rows = env_.store.get_many(*tx, tables::kJobMeta, metas);
  env_.store.abort(*tx);
  if (!rows) return false;
  for (const auto& meta : *rows) {
    if (!meta || !job_progress(*meta).finished) return false;
  }
  return true;
}

bool Controller::sources_at_cut() {
  auto tx = env_.store.begin();
  if (!tx) return false;
  auto rows = env_.store.get_many(*tx, tables::kJobMeta, source_metas());
  env_.store.abort(*tx);
  if (!rows) return false;
  for (const auto& meta : *rows) {
    if (!meta) return false;  // it never committed: it may have anything to emit
    const JobProgress p = job_progress(*meta);
    if (!p.finished && p.low_watermark < *drain_cut_) return false;
  }
  return true;
}

std::vector<std::string> Controller::source_metas() const {
  std::vector<std::string> out;
  for (const auto& s : env_.spec.sources) {
    for (int p = 0; p < s.partitions; ++p) out.push_back(JobId{JobKind::kSource, s.name, p}.str());
  }
  return out;
}

std::vector<std::string> Controller::drain_metas() const {
  std::vector<std::string> out = source_metas();
  for (const auto& c : spec_.computations) {
    if (c.type != ComputationType::kProcessFunction) continue;
    for (int p = 0; p < c.partitions; ++p) out.push_back(JobId{JobKind::kComputation, c.name, p}.str());
  }
  return out;
}

// The cut a drain starts with: past every row a source has emitted so far. It is written into
// the source meta rows (a missing one is erased), so a source epoch that read them before
// this commit cannot commit after it (it conflicts): every row emitted before the cut is
// stored is older than the cut, and every source epoch after it reads the cut. It goes into
// the meta rows of computations with timers too: they fire none while the pipeline drains,
// so that a drain ends (a timer that sets itself again would keep work in flight for ever).
bool Controller::put_drain_cut(Transaction& tx, bool now) {
  const std::vector<std::string> keys = drain_metas();
  const size_t sources = source_metas().size();
  auto rows = env_.store.get_many(tx, tables::kJobMeta, keys);
  if (!rows) return false;
  // At least the clock: every input written before the request is older than the cut. A stop
  // "now" cuts just past what the sources emitted instead: a queue's backlog, written but not
  // read yet, stays for the restart (a queue partition that lags the others still reads up to
  // the newest time any of them emitted); the clock only when no source has emitted anything.
  Micros cut = now ? INT64_MIN : env_.runtime.clock().now();
  for (size_t i = 0; i < sources; ++i) {
    if ((*rows)[i]) {
      const Micros newest = job_progress(*(*rows)[i]).last_output_ts;
      if (newest != INT64_MIN) cut = std::max(cut, newest + 1);
    }
  }
  if (cut == INT64_MIN) cut = env_.runtime.clock().now();
  // A job that has not committed yet gets a meta row too: else it would never learn the cut
  // (and read on past it); a first epoch in flight conflicts with this write.
  const std::string fresh = with_output_floor(std::nullopt, INT64_MIN);
  for (size_t i = 0; i < keys.size(); ++i) {
    tx.put(tables::kJobMeta, keys[i], with_drain_cut((*rows)[i] ? std::string_view(*(*rows)[i]) : fresh, cut));
  }
  cut_written_ = cut;
  Encoder out;
  out.i64(cut);
  tx.put(tables::kController, tables::kDrainCutKey, out.take());
  return true;
}

// The state, and the drain cut while draining (computed when the drain starts); the cut the
// transaction stores is `cut_written_`, which becomes `drain_cut_` once it committed.
bool Controller::put_state(Transaction& tx) {
  tx.put(tables::kController, kStateKey, std::string(pipeline_state_name(state_)));
  tx.put(tables::kController, kStateSeqKey, std::to_string(state_seq_));
  tx.put(tables::kController, kLayoutKey, encode_layout(layout_));
  if (pending_) {
    tx.put(tables::kController, kLayoutPendingKey, encode_pending_layout({*pending_, resume_after_layout_}));
  } else {
    tx.erase(tables::kController, kLayoutPendingKey);
  }
  cut_written_ = drain_cut_;
  if (state_ != PipelineState::kDraining) {
    cut_written_.reset();
    if (!drain_cut_) return true;
    // Leaving a drain: the sources read on past the cut, timers fire again.
    tx.erase(tables::kController, tables::kDrainCutKey);
    const std::vector<std::string> keys = drain_metas();
    auto rows = env_.store.get_many(tx, tables::kJobMeta, keys);
    if (!rows) return false;
    for (size_t i = 0; i < keys.size(); ++i) {
      if ((*rows)[i]) tx.put(tables::kJobMeta, keys[i], with_drain_cut(*(*rows)[i], std::nullopt));
    }
    return true;
  }
  if (!drain_cut_) return put_drain_cut(tx, stop_now_);
  Encoder out;
  out.i64(*drain_cut_);
  tx.put(tables::kController, tables::kDrainCutKey, out.take());
  return true;
}

// No job Lease is left, so nothing can write to the pipeline's tables any more: what the
// store holds now is final until the controller schedules again.
void Controller::finish_quiescing() {
  const PipelineState target = *quiescing_;
  const auto clean = nothing_in_flight(target == PipelineState::kCompleted);
  if (!clean) return;  // the store did not answer: look again next cycle
  quiescing_.reset();
  if (!*clean) return;  // a last epoch (a timer's) put something in flight: back to work
  const PipelineState before = state_;
  state_ = target;
  if (!persist(assignments_)) {
    state_ = before;
    quiescing_ = target;
    return;
  }
  probe(env_, target == PipelineState::kCompleted ? Probe::kControllerCompleted : Probe::kControllerDrained);
  if (pending_ && state_ == PipelineState::kStopped) apply_pending_layout();
}

bool Controller::persist_state() {
  assert(busy_);
  assert(lease_ != 0);
  // A drain's cut goes into every job's meta row, so that any epoch committed while it is
  // built conflicts with it: on a store busy with epochs it is tried again at once, a few
  // times, rather than a cycle (or an operator's retry) later, which lost to the epochs again
  // and again (a repartition under load took seconds to start).
  // Bounded in time too: the cycle that pings the Leases waits for this.
  constexpr int kConflictRetries = 3;
  const Micros started = env_.runtime.clock().now();
  for (int attempt = 0;; ++attempt) {
    auto tx = env_.store.begin();
    if (!tx) return false;
    if (!put_state(*tx)) return false;
    if (env_.observer != nullptr) env_.observer->controller_committing(node_, lease_, tx->id(), std::nullopt);
    bool conflicted = false;
    if (commit_as_leader(*tx, &conflicted)) break;
    if (!conflicted || attempt == kConflictRetries) return false;
    if (env_.runtime.clock().now() - started > env_.spec.lease_ttl_us / 4) return false;
  }
  drain_cut_ = cut_written_;
  return true;
}

Status Controller::take_turn() {
  // One thing at a time: a cycle in progress would interleave with this request's commit. A
  // request waits for it rather than being refused, so that a controller whose cycles take
  // most of the time (a loaded store) still takes requests.
  const Micros deadline =
      env_.runtime.clock().now() + env_.options.request_wait_us.value_or(env_.options.rpc_timeout_us / 2);
  while (busy_ && env_.runtime.clock().now() < deadline) {
    turn_waiters_.push_back(env_.runtime.waiter());
    (void)env_.runtime.sleep_until_woken(deadline);
  }
  // Until boot has read the persisted state, a change here would be overwritten by it; and
  // the lead may have been lost while waiting.
  if (lease_ == 0 || !booted_) return Status::unavailable("this controller does not lead");
  if (busy_) return Status::unavailable("the controller is busy; ask again");
  return Status::ok();
}

void Controller::end_busy() {
  busy_ = false;
  for (const Runtime::Waiter& waiter : std::exchange(turn_waiters_, {})) env_.runtime.wake(waiter);
}

}  // namespace onceflow
