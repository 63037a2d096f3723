#include "core/controller.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <charconv>

#include "core/env/codec.h"
#include "core/job.h"

namespace onceflow {

namespace {
constexpr std::string_view kStateNames[] = {"working", "paused", "draining", "stopped", "completed"};
constexpr const char* kStateKey = "state";
constexpr const char* kStateSeqKey = "state_seq";
const std::string kJobPrefix = kJobKeyPrefix;
constexpr size_t kMaxJobs = 1'000'000;

// A numbered request: "<number><separator><rest>" (a sequence number, a layout version), as
// (number, rest); `form` is the whole request's expected form, for the error.
Result<std::pair<uint64_t, std::string_view>> numbered_request(std::string_view request, char separator,
                                                                std::string_view form) {
  const auto at = request.find(separator);
  uint64_t version = 0;
  const std::string_view number = request.substr(0, at);
  const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), version);
  if (ec != std::errc() || ptr != number.data() + number.size() || at == std::string_view::npos) {
    return Status::invalid_argument(fmt::format("expected {}, got '{}'", form, request.substr(0, 64)));
  }
  return std::make_pair(version, request.substr(at + 1));
}
}  // namespace

std::string_view pipeline_state_name(PipelineState state) { return kStateNames[static_cast<int>(state)]; }

std::optional<PipelineState> parse_pipeline_state(std::string_view name) {
  for (size_t i = 0; i < std::size(kStateNames); ++i) {
    if (kStateNames[i] == name) return static_cast<PipelineState>(i);
  }
  if (name == "running") return PipelineState::kWorking;
  return std::nullopt;
}

// --- Shared rows ---------------------------------------------------------------------------

std::string encode_leader(const LeaderRow& row) {
  Encoder out;
  out.u64(row.lease).bytes(row.node);
  return out.take();
}

std::optional<LeaderRow> decode_leader(std::string_view bytes) {
  Decoder in(bytes);
  LeaderRow row;
  row.lease = in.u64();
  row.node = in.string();
  if (!in.done()) return std::nullopt;
  return row;
}

std::string encode_assignment(const AssignmentRow& row) {
  Encoder out;
  out.bytes(row.worker).u64(row.lease).i64(row.assigned_at).u64(row.layout_version);
  return out.take();
}

std::optional<AssignmentRow> decode_assignment(std::string_view bytes) {
  Decoder in(bytes);
  AssignmentRow row;
  row.worker = in.string();
  row.lease = in.u64();
  row.assigned_at = in.i64();
  if (!in.done()) row.layout_version = in.u64();  // rows written before layouts end here
  if (!in.done()) return std::nullopt;
  return row;
}

std::string encode_worker(const WorkerRow& row) {
  Encoder out;
  out.u64(row.lease).u64(row.running.size());
  for (const auto& [job, lease] : row.running) out.bytes(job).u64(lease);
  return out.take();
}

std::optional<WorkerRow> decode_worker(std::string_view bytes) {
  Decoder in(bytes);
  WorkerRow row;
  row.lease = in.u64();
  const uint64_t n = in.u64();
  for (uint64_t i = 0; in.ok() && i < n; ++i) {
    std::string job = in.string();
    row.running[std::move(job)] = in.u64();
  }
  if (!in.done()) return std::nullopt;
  return row;
}

// --- Controller ----------------------------------------------------------------------------

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
      busy_ = false;
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

void Controller::complete_layout() {
  const PipelineSpec in_force = with_layout(env_.spec, layout_);
  for (const auto& c : in_force.computations) layout_.partitions.try_emplace(c.name, c.partitions);
  for (const auto& s : in_force.sinks) {
    if (s.type == SinkType::kAsyncQueue || s.type == SinkType::kSyncQueue) layout_.partitions.try_emplace(s.name, s.partitions);
  }
  // Workers run their deployment's spec until an assignment names another layout version: a
  // version-0 layout with other counts is stored as version 1 by the boot's commit, before any
  // job is assigned. (A stored spec comes with a version above 0.)
  if (layout_.version != 0) return;
  const auto other = [&](const std::string& name, int partitions) {
    auto it = layout_.partitions.find(name);
    return it != layout_.partitions.end() && it->second != partitions;
  };
  bool differs = false;
  for (const auto& c : env_.spec.computations) differs = differs || other(c.name, c.partitions);
  for (const auto& s : env_.spec.sinks) differs = differs || other(s.name, s.partitions);
  if (differs) layout_.version = 1;
}

bool Controller::follow_resharded_targets() {
  std::vector<const SinkSpec*> sharded;
  for (const SinkSpec& s : spec_.sinks) {
    if (s.type == SinkType::kAsyncQueue && s.target_tablets > 0) sharded.push_back(&s);
  }
  if (env_.bugs.reshard_watches_widest && sharded.size() > 1) {  // the bug: the others go unwatched
    const auto widest = std::max_element(sharded.begin(), sharded.end(), [](const SinkSpec* a, const SinkSpec* b) {
      return a->partitions < b->partitions;
    });
    sharded = {*widest};
  }
  Layout next = layout_;
  bool resharded = false;
  for (const SinkSpec* sink : sharded) {
    auto reply = env_.network.call(sink_target_node(sink->name), kSinkDescribeService, "", env_.options.rpc_timeout_us);
    if (!reply) continue;  // asked again next cycle
    int tablets = 0;
    const auto [ptr, ec] = std::from_chars(reply->data(), reply->data() + reply->size(), tablets);
    if (ec != std::errc() || ptr != reply->data() + reply->size() || tablets < 1 || tablets > kMaxPartitions) continue;
    if (tablets == sink->target_tablets) continue;
    next.target_tablets[sink->name] = tablets;
    next.partitions[sink->name] = tablets;
    ++next.producer_generations[sink->name];
    resharded = true;
  }
  if (!resharded) return false;
  next.version = layout_.version + 1;
  if (!begin_layout_change(next)) return false;
  probe(env_, Probe::kControllerTargetResharded);
  return true;
}

void Controller::remove_stale_layout_jobs() {
  if (env_.bugs.reconfigure_keeps_jobs) return;  // the bug: they run on with the old settings
  std::vector<std::string> stale;
  for (const auto& [job, a] : assignments_) {
    if (!a.retiring && a.row.layout_version != layout_.version) stale.push_back(job);
  }
  for (const auto& job : stale) (void)remove(job, "layout changed");
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
    if (with_timers) tables.push_back(tables::timers(c.name));
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
  return *pending == 0;
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

void Controller::apply_pending_layout() {
  constexpr size_t kPage = 512;
  constexpr int kPagesPerCycle = 16;
  bool in_place = false;  // a page found nothing left to move
  for (int page = 0; page < kPagesPerCycle; ++page) {
    auto tx = env_.store.begin();
    if (!tx) return;
    size_t moved = 0;
    std::vector<std::pair<std::string, std::string>> timers;
    for (const auto& [owner, count] : pending_->partitions) {
      auto n = move_partition_rows(env_.store, *tx, spec_, owner, count, kPage - moved, &timers);
      if (!n) {
        env_.store.abort(*tx);
        return;
      }
      moved += *n;
      if (moved >= kPage) break;
    }
    if (moved == 0) {
      env_.store.abort(*tx);
      in_place = true;
      break;
    }
    if (env_.observer != nullptr) {
      for (const auto& [from, to] : timers) env_.observer->timer_moving(from, to, tx->id());
      env_.observer->controller_committing(node_, lease_, tx->id(), std::nullopt);
    }
    if (!commit_as_leader(*tx)) return;  // the next cycle goes on from what is stored
  }
  // This cycle's pages ran out before every row was in place: the next cycle goes on.
  if (!in_place || lease_ == 0) return;
  // Each new owner of a key stamps its outputs above every old owner's, in the commit that
  // stores the layout.
  auto tx = env_.store.begin();
  if (!tx) return;
  for (const auto& [owner, count] : pending_->partitions) {
    const ComputationSpec* c = spec_.computation(owner);
    if (c == nullptr) continue;
    std::vector<std::string> keys;
    for (int p = 0; p < std::max(count, c->partitions); ++p) keys.push_back(JobId{JobKind::kComputation, owner, p}.str());
    auto rows = env_.store.get_many(*tx, tables::kJobMeta, keys);
    if (!rows) {
      env_.store.abort(*tx);
      return;
    }
    Micros floor = INT64_MIN;
    for (const auto& row : *rows) {
      if (row) floor = std::max(floor, job_progress(*row).last_output_ts);
    }
    for (int p = 0; p < count; ++p) {
      const auto& row = (*rows)[static_cast<size_t>(p)];
      tx->put(tables::kJobMeta, keys[static_cast<size_t>(p)],
              with_output_floor(row ? std::optional<std::string_view>(*row) : std::nullopt, floor));
    }
  }
  // Sinks recreated for a resharded target: their partitions are new producers, numbering
  // from 1 (their outboxes are empty: the drain delivered everything).
  for (const auto& [sink, generation] : pending_->producer_generations) {
    const auto was = layout_.producer_generations.find(sink);
    if (was != layout_.producer_generations.end() && was->second == generation) continue;
    const std::string prefix = JobId{JobKind::kSink, sink, 0}.str();
    const std::string from = prefix.substr(0, prefix.size() - 1);  // "sink/<name>/"
    auto metas = env_.store.scan(*tx, tables::kJobMeta, from, from + "~", kMaxJobs);
    if (!metas) {
      env_.store.abort(*tx);
      return;
    }
    for (const Row& row : *metas) tx->put(tables::kJobMeta, row.key, with_new_producer(row.value));
  }
  const Layout before = layout_;
  const std::optional<Layout> pending = pending_;
  const PipelineState state_before = state_;
  layout_ = *pending_;
  pending_.reset();
  state_ = resume_after_layout_ ? PipelineState::kWorking : PipelineState::kStopped;
  bool stored = put_state(*tx);
  if (stored) {
    if (env_.observer != nullptr) env_.observer->controller_committing(node_, lease_, tx->id(), std::nullopt);
    stored = commit_as_leader(*tx);
    if (stored) drain_cut_ = cut_written_;
  } else {
    env_.store.abort(*tx);
  }
  if (!stored) {
    layout_ = before;
    pending_ = pending;
    state_ = state_before;
    return;
  }
  spec_ = with_layout(env_.spec, layout_);
  state_dirty_ = true;
  probe(env_, Probe::kControllerRepartitioned);
}

std::set<std::string> Controller::ping_job_leases() {
  std::set<std::string> ended;
  for (const auto& [job, a] : assignments_) {
    if (!a.retiring && env_.store.ping_lease(a.row.lease).is_prerequisite_failed()) {
      ended.insert(job);
      if (env_.observer != nullptr) env_.observer->job_lease_found_ended(job, a.row.lease);
    }
  }
  return ended;
}

bool Controller::lead() {
  if (lease_ == 0) return take_over();
  const Status pinged = env_.store.ping_lease(lease_);
  if (env_.bugs.controller_without_lease) return true;  // the bug: it never checks its Lease
  if (pinged.is_prerequisite_failed()) {
    step_down("its Lease ended");
    return false;
  }
  // A ping that got no answer proves nothing either way: go on, every commit names the Lease.
  return true;
}

// Takes the lead under a new Lease when the leader row names none that is still active.
bool Controller::take_over() {
  auto lease = env_.store.start_lease(env_.spec.lease_ttl_us);
  if (!lease) return false;
  auto tx = env_.store.begin();
  if (!tx) {
    (void)env_.store.abort_lease(*lease);
    return false;
  }
  auto leader_bytes = env_.store.get(*tx, tables::kController, kLeaderKey);
  bool free = leader_bytes.has_value();
  if (free && leader_bytes->has_value()) {
    const auto leader = decode_leader(**leader_bytes);
    assert(leader.has_value());
    const auto state = env_.store.lease_state(leader->lease);
    free = state.has_value() && *state != LeaseState::kActive;
  }
  if (!free) {  // another controller leads (or the store did not answer): stand by
    probe(env_, Probe::kControllerStandby);
    env_.store.abort(*tx);
    (void)env_.store.abort_lease(*lease);
    return false;
  }
  tx->put(tables::kController, kLeaderKey, encode_leader({*lease, node_}));
  lease_ = *lease;
  booted_ = false;
  if (!commit_as_leader(*tx)) {
    const LeaseId lost = lease_;
    lease_ = 0;
    (void)env_.store.abort_lease(lost);
    return false;
  }
  probe(env_, Probe::kControllerTakeOver);
  if (env_.observer != nullptr) env_.observer->controller_leads(node_, lease_);
  return true;
}

void Controller::step_down(const char* why) {
  probe(env_, Probe::kControllerStepDown);
  if (env_.observer != nullptr) env_.observer->controller_steps_down(node_, lease_, why);
  lease_ = 0;
  booted_ = false;
  quiescing_.reset();
  assignments_.clear();  // the next leader aborts their Leases when it takes over
}

bool Controller::boot() {
  auto tx = env_.store.begin();
  if (!tx) return false;
  auto state = env_.store.get(*tx, tables::kController, kStateKey);
  auto seq = env_.store.get(*tx, tables::kController, kStateSeqKey);
  auto cut = env_.store.get(*tx, tables::kController, tables::kDrainCutKey);
  auto layout = env_.store.get(*tx, tables::kController, kLayoutKey);
  auto pending = env_.store.get(*tx, tables::kController, kLayoutPendingKey);
  // The bug: one page of assignments, as if a boot never found more than 16 jobs.
  const size_t limit = env_.bugs.boot_scan_one_page ? 16 : kMaxJobs;
  auto rows = env_.store.scan(*tx, tables::kController, kJobPrefix, kJobPrefix + "~", limit);
  env_.store.abort(*tx);
  if (!state || !seq || !cut || !layout || !pending || !rows) return false;
  layout_ = layout->has_value() ? decode_layout(**layout).value() : Layout{};
  complete_layout();
  spec_ = with_layout(env_.spec, layout_);
  pending_.reset();
  if (pending->has_value()) {
    PendingLayout stored = decode_pending_layout(**pending).value();
    resume_after_layout_ = stored.resume;
    pending_ = std::move(stored.layout);
  }
  drain_cut_.reset();
  if (cut->has_value()) {
    Decoder in(**cut);
    drain_cut_ = in.i64();
  }
  if (state->has_value()) state_ = parse_pipeline_state(**state).value_or(PipelineState::kWorking);
  quiescing_.reset();
  if (seq->has_value()) state_seq_ = std::stoull(**seq);
  if (!rows->empty()) probe(env_, Probe::kControllerBootAborted);
  for (const Row& row : *rows) {
    const auto a = decode_assignment(row.value);
    assert(a.has_value());
    const Status aborted = env_.store.abort_lease(a->lease);
    if (!aborted.is_ok() && !aborted.is_prerequisite_failed()) return false;
    if (env_.observer != nullptr) env_.observer->job_lease_aborted(row.key.substr(kJobPrefix.size()), a->lease, "aborted by a controller taking over");
  }
  assignments_.clear();
  if (!persist(assignments_)) return false;
  booted_ = true;
  return true;
}

// The workers whose Leases are active, and what each reports running.
std::optional<Controller::Workers> Controller::read_workers() {
  auto tx = env_.store.begin();
  if (!tx) return std::nullopt;
  auto rows = env_.store.scan(*tx, tables::kWorkers, "", "", kMaxJobs);
  env_.store.abort(*tx);
  if (!rows) return std::nullopt;
  Workers out;
  for (const Row& row : *rows) {
    const auto w = decode_worker(row.value);
    assert(w.has_value());
    const auto state = env_.store.lease_state(w->lease);
    // A worker whose Lease state did not come back counts as it did the last time.
    const bool live = state ? *state == LeaseState::kActive : live_workers_.count(row.key) != 0;
    if (!live) continue;
    out.live.push_back(row.key);
    out.running[row.key] = w->running;
  }
  live_workers_ = std::set<std::string>(out.live.begin(), out.live.end());
  return out;
}

bool Controller::remove(const std::string& job, const char* why) {
  auto it = assignments_.find(job);
  assert(it != assignments_.end());
  const bool skip_abort = env_.bugs.no_abort_on_rebalance && std::string_view(why) == "rebalance";
  if (!skip_abort) {
    const Status aborted = env_.store.abort_lease(it->second.row.lease);
    const bool ended = aborted.is_ok() || aborted.is_prerequisite_failed();
    if (ended && env_.observer != nullptr) env_.observer->job_lease_aborted(job, it->second.row.lease, fmt::format("aborted: {}", why));
    if (!ended && !env_.bugs.lease_abort_not_retried) {  // the bug: whatever the abort answered
      probe(env_, Probe::kControllerRetiring);
      it->second.retiring = true;  // try again next cycle; the Lease may still be live
      return false;
    }
  }
  assignments_.erase(it);
  return true;
}

const char* Controller::removal_reason(const std::string& id, const Assignment& a, const std::string* target,
                                       const Workers& workers, bool lease_ended, Micros now) {
  if (lease_ended) {
    probe(env_, Probe::kControllerLeaseEnded);
    return "lease ended";
  }
  const auto& live = workers.live;
  if (std::find(live.begin(), live.end(), a.row.worker) == live.end()) {
    probe(env_, Probe::kControllerWorkerLost);
    return "worker lost";
  }
  if (target != nullptr && *target != a.row.worker) {
    probe(env_, Probe::kControllerRebalance);
    return "rebalance";
  }
  const auto running = workers.running.find(a.row.worker);
  bool is_running = false;
  if (running != workers.running.end()) {
    const auto reported = running->second.find(id);
    is_running = reported != running->second.end() && reported->second == a.row.lease;
  }
  if (now - a.row.assigned_at > env_.options.start_grace_us && !is_running) {
    probe(env_, Probe::kControllerNotRunning);
    return "not running";
  }
  return nullptr;
}

bool Controller::end_unstored_leases() {
  for (auto it = unstored_.begin(); it != unstored_.end();) {
    const Status aborted = env_.store.abort_lease(it->second);
    if (aborted.is_ok() || aborted.is_prerequisite_failed()) {
      if (env_.observer != nullptr) env_.observer->job_lease_aborted(it->first, it->second, "aborted: its assignment was never stored");
      it = unstored_.erase(it);
    } else {
      ++it;
    }
  }
  return unstored_.empty();
}

void Controller::schedule(const Workers& workers, const std::set<std::string>& ended, Micros now) {
  const std::vector<JobId> jobs = all_jobs(spec_);
  const auto& live = workers.live;
  bool changed = state_dirty_;
  std::map<std::string, Assignment> added;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string id = jobs[i].str();
    const std::string* target = live.empty() ? nullptr : &live[i % live.size()];
    if (auto it = assignments_.find(id); it != assignments_.end()) {
      const char* why =
          it->second.retiring ? "retiring" : removal_reason(id, it->second, target, workers, ended.count(id) != 0, now);
      if (why == nullptr) continue;
      changed = true;
      const std::string failed_on = it->second.row.worker;
      if (!remove(id, why)) continue;  // retiring: no replacement until its Lease has ended
      const std::string_view reason = why;
      if (env_.bugs.replace_on_another_worker && (reason == "lease ended" || reason == "not running" || reason == "worker lost")) {
        avoided_[id] = failed_on;
      }
    }
    if (auto avoid = avoided_.find(id); avoid != avoided_.end() && target != nullptr && *target == avoid->second) {
      // The bug: never again on the worker it failed on, even when that is the only one.
      target = nullptr;
      for (const std::string& w : live) {
        if (w != avoid->second) target = &w;
      }
    }
    // An earlier Lease of this job that was never stored must end before a new one starts.
    if (target == nullptr || (unstored_.count(id) != 0 && !env_.bugs.lease_abort_not_retried)) continue;
    auto lease = env_.store.start_lease(env_.spec.lease_ttl_us);
    if (!lease) continue;
    if (env_.observer != nullptr) env_.observer->job_lease_started(id, *lease, *target);
    added[id] = Assignment{AssignmentRow{*target, *lease, now, layout_.version}, false};
  }
  if (added.empty() && !changed) return;
  if (env_.bugs.assign_before_persist) push_unstored(added);
  std::map<std::string, Assignment> next = assignments_;
  next.insert(added.begin(), added.end());
  if (persist(next)) {
    assignments_ = std::move(next);
    state_dirty_ = false;
    tell_assigned(added);
    return;
  }
  // Not stored, so no worker learned of them: their Leases must end before their jobs are
  // assigned again.
  probe(env_, Probe::kControllerUnstored);
  for (const auto& [id, a] : added) {
    if (env_.bugs.lease_abort_not_retried) {
      (void)env_.store.abort_lease(a.row.lease);  // the bug: once, and whatever it answers
      continue;
    }
    unstored_[id] = a.row.lease;
  }
  (void)end_unstored_leases();
}

bool Controller::persist(const std::map<std::string, Assignment>& assignments) {
  assert(busy_);
  assert(lease_ != 0);
  auto tx = env_.store.begin();
  if (!tx) return false;
  auto rows = env_.store.scan(*tx, tables::kController, kJobPrefix, kJobPrefix + "~", kMaxJobs);
  if (!rows) return false;
  for (const Row& row : *rows) {
    if (assignments.count(row.key.substr(kJobPrefix.size())) == 0) tx->erase(tables::kController, row.key);
  }
  std::map<std::string, LeaseId> job_leases;
  for (const auto& [job, a] : assignments) {
    tx->put(tables::kController, kJobPrefix + job, encode_assignment(a.row));
    job_leases[job] = a.row.lease;
  }
  if (!put_state(*tx)) return false;
  if (env_.observer != nullptr) env_.observer->controller_committing(node_, lease_, tx->id(), job_leases);
  if (!commit_as_leader(*tx)) return false;
  drain_cut_ = cut_written_;
  return true;
}

bool Controller::persist_state() {
  assert(busy_);
  assert(lease_ != 0);
  auto tx = env_.store.begin();
  if (!tx) return false;
  if (!put_state(*tx)) return false;
  if (env_.observer != nullptr) env_.observer->controller_committing(node_, lease_, tx->id(), std::nullopt);
  if (!commit_as_leader(*tx)) return false;
  drain_cut_ = cut_written_;
  return true;
}

// Commits `tx` with this controller's Lease as prerequisite; steps down when it has ended.
bool Controller::commit_as_leader(const Transaction& tx) {
  std::vector<LeaseId> prerequisites;
  if (!env_.bugs.controller_without_lease) prerequisites.push_back(lease_);
  auto result = env_.store.commit(tx, prerequisites);
  if (result) return true;
  if (result.error().is_prerequisite_failed()) {
    step_down("its Lease ended");
    return false;
  }
  if (!result.error().is_ambiguous()) return false;
  probe(env_, Probe::kControllerCommitAmbiguous);
  // Ask until the store answers; resolve() also fences the transaction if it did not apply.
  while (true) {
    auto outcome = env_.store.resolve(tx.id());
    if (outcome) return *outcome == TxOutcome::kCommitted;
    env_.runtime.sleep_for(env_.spec.scheduling_period_us);
  }
}

// Each worker of `added` (stored now) reads its assignments at once rather than at its next
// heartbeat. On fibers of their own: a worker that does not answer holds up no cycle.
void Controller::tell_assigned(const std::map<std::string, Assignment>& added) {
  std::set<std::string> workers;
  for (const auto& [job, a] : added) workers.insert(a.row.worker);
  for (const std::string& worker : workers) {
    env_.runtime.spawn("tell-assigned", [this, worker] {
      (void)env_.network.call(worker, kAssignedService, "", env_.options.rpc_timeout_us);
    });
  }
}

// The assign-before-persist bug: workers hear of new assignments before they are stored.
void Controller::push_unstored(const std::map<std::string, Assignment>& added) {
  std::map<std::string, std::map<std::string, LeaseId>> by_worker;
  for (const auto& [job, a] : added) by_worker[a.row.worker][job] = a.row.lease;
  for (const auto& [worker, jobs] : by_worker) {
    WorkerRow pushed;
    pushed.running = jobs;
    (void)env_.network.call(worker, kPushService, encode_worker(pushed), env_.options.rpc_timeout_us);
  }
}

Status Controller::serving() const {
  // Until boot has read the persisted state, a change here would be overwritten by it.
  if (lease_ == 0 || !booted_) return Status::unavailable("this controller does not lead");
  // One thing at a time: a cycle in progress would interleave with this request's commit.
  if (busy_) return Status::unavailable("the controller is busy; ask again");
  return Status::ok();
}

bool Controller::store_layout(const Layout& next) {
  const Layout before = layout_;
  layout_ = next;
  if (!persist_state()) {
    layout_ = before;
    return false;
  }
  spec_ = with_layout(env_.spec, layout_);
  return true;
}

struct Controller::Busy {
  bool& busy;
  explicit Busy(bool& b) : busy(b) { busy = true; }
  ~Busy() { busy = false; }
};

// Request: "<layout version> NAME=COUNT ...".
Result<std::string> Controller::on_repartition(std::string_view request) {
  auto parts = numbered_request(request, ' ', "'<layout version> NAME=COUNT ...'");
  if (!parts) return parts.error();
  const uint64_t expected = parts->first;
  auto changes = parse_repartition(spec_, parts->second);
  if (!changes) return changes.error();
  if (Status refused = serving(); !refused.is_ok()) return refused;
  Busy busy(busy_);
  if (state_ == PipelineState::kCompleted) return Status::invalid_argument("the pipeline has completed");
  if (state_ == PipelineState::kPaused) {
    return Status::invalid_argument("the pipeline is paused with work in flight: start or stop it first");
  }
  const uint64_t current = pending_ ? pending_->version : layout_.version;
  if (expected != current) {
    return Status::invalid_argument(fmt::format("the layout is at version {}, not {}", current, expected));
  }
  Layout next = pending_ ? *pending_ : layout_;
  next.version = current + 1;
  for (const auto& [name, count] : *changes) next.partitions[name] = count;
  if (env_.bugs.repartition_without_drain) {
    // The bug: the new layout at once, rows moved while the old partitions still run.
    for (const auto& [owner, count] : next.partitions) {
      auto tx = env_.store.begin();
      if (!tx) return Status::unavailable("the store did not answer");
      std::vector<std::pair<std::string, std::string>> timers;
      if (!move_partition_rows(env_.store, *tx, spec_, owner, count, 1'000'000, &timers)) continue;
      if (env_.observer != nullptr) {
        for (const auto& [from, to] : timers) env_.observer->timer_moving(from, to, tx->id());
      }
      if (!commit_as_leader(*tx)) {
        return Status::unavailable("the rows could not be moved");
      }
    }
    if (!store_layout(next)) return Status::unavailable("the layout could not be stored");
    return std::to_string(layout_.version);
  }
  if (!begin_layout_change(next)) return Status::unavailable("the change could not be stored");
  return std::to_string(next.version);
}

bool Controller::begin_layout_change(const Layout& next) {
  const std::optional<Layout> before = pending_;
  const bool resume_before = resume_after_layout_;
  const PipelineState state_before = state_;
  pending_ = next;
  if (state_ == PipelineState::kWorking) {
    state_ = PipelineState::kDraining;
    resume_after_layout_ = true;
  } else if (state_ == PipelineState::kStopped) {
    resume_after_layout_ = false;
  }
  if (!persist_state()) {
    pending_ = before;
    resume_after_layout_ = resume_before;
    state_ = state_before;
    return false;
  }
  if (state_ != state_before) quiescing_.reset();
  probe(env_, Probe::kControllerStateChanged);
  return true;
}

// Request: "<layout version> SETTING=VALUE ...".
Result<std::string> Controller::on_reconfigure(std::string_view request) {
  auto parts = numbered_request(request, ' ', "'<layout version> SETTING=VALUE ...'");
  if (!parts) return parts.error();
  const uint64_t expected = parts->first;
  auto next = reconfigured_layout(layout_, parts->second);
  if (!next) return next.error();
  if (Status refused = serving(); !refused.is_ok()) return refused;
  Busy busy(busy_);
  if (state_ == PipelineState::kCompleted) return Status::invalid_argument("the pipeline has completed");
  if (pending_) return Status::unavailable("a repartition is being made; ask again");
  if (expected != layout_.version) {
    return Status::invalid_argument(fmt::format("the layout is at version {}, not {}", layout_.version, expected));
  }
  if (!store_layout(*next)) return Status::unavailable("the settings could not be stored");
  probe(env_, Probe::kControllerReconfigured);
  return std::to_string(layout_.version);
}

// Request: "<layout version>\n<spec YAML>".
Result<std::string> Controller::on_respec(std::string_view request) {
  auto parts = numbered_request(request, '\n', "'<layout version>' and a pipeline spec on the lines after it");
  if (!parts) return parts.error();
  const uint64_t expected = parts->first;
  if (Status refused = serving(); !refused.is_ok()) return refused;
  Busy busy(busy_);
  if (state_ != PipelineState::kStopped || quiescing_) {
    return Status::invalid_argument(fmt::format("the pipeline is {}: its spec changes only while it is stopped",
                                                   pipeline_state_name(state_)));
  }
  if (pending_) return Status::unavailable("a repartition is being made; ask again");
  if (expected != layout_.version) {
    return Status::invalid_argument(fmt::format("the layout is at version {}, not {}", layout_.version, expected));
  }
  auto next = respecified_layout(spec_, layout_, std::string(parts->second));
  if (!next) return next.error();
  const PipelineSpec next_spec = with_layout(env_.spec, *next);
  auto tx = env_.store.begin();
  if (!tx) return Status::unavailable("the store did not answer");
  if (!env_.bugs.source_swap_keeps_offsets && !forget_swapped_inputs(*tx, next_spec)) {
    env_.store.abort(*tx);
    return Status::unavailable("the store did not answer");
  }
  const Layout before = layout_;
  layout_ = *next;
  if (!put_state(*tx)) {
    layout_ = before;
    env_.store.abort(*tx);
    return Status::unavailable("the store did not answer");
  }
  if (env_.observer != nullptr) env_.observer->controller_committing(node_, lease_, tx->id(), std::nullopt);
  if (!commit_as_leader(*tx)) {
    layout_ = before;
    return Status::unavailable("the spec could not be stored");
  }
  spec_ = next_spec;
  probe(env_, Probe::kControllerRespecified);
  return std::to_string(layout_.version);
}

bool Controller::forget_swapped_inputs(Transaction& tx, const PipelineSpec& next) {
  for (const SourceSpec& source : spec_.sources) {
    const SourceSpec* kept = next.source(source.name);
    if (kept != nullptr && kept->generation == source.generation) continue;
    const std::string prefix = source_origin(source) + "/";
    auto offsets = env_.store.scan(tx, tables::kSourceOffsets, prefix, prefix + "~", kMaxJobs);
    if (!offsets) return false;
    for (const Row& row : *offsets) tx.erase(tables::kSourceOffsets, row.key);
    std::vector<std::string> metas;
    for (int p = 0; p < source.partitions; ++p) metas.push_back(JobId{JobKind::kSource, source.name, p}.str());
    auto rows = env_.store.get_many(tx, tables::kJobMeta, metas);
    if (!rows) return false;
    Micros newest = INT64_MIN;
    for (const auto& row : *rows) {
      if (row) newest = std::max(newest, job_progress(*row).last_output_ts);
    }
    for (size_t i = 0; i < metas.size(); ++i) {
      if ((*rows)[i]) {
        tx.put(tables::kJobMeta, metas[i], with_input_swapped(*(*rows)[i], newest));
      } else if (newest != INT64_MIN) {
        tx.put(tables::kJobMeta, metas[i], with_output_floor(std::nullopt, newest));  // never ran: a floor too
      }
    }
  }
  return true;
}

// Request: "<sequence number> <state>". Requests can be delayed and reordered on the way,
// so one older than the last applied is ignored.
Result<std::string> Controller::on_set_state(std::string_view request) {
  auto parts = numbered_request(request, ' ', "'<sequence> <state>'");
  std::string_view state_word = parts ? parts->second : std::string_view();
  constexpr std::string_view kNow = " now";
  const bool now = state_word.ends_with(kNow);
  if (now) state_word.remove_suffix(kNow.size());
  const auto parsed = parts ? parse_pipeline_state(state_word) : std::nullopt;
  if (!parsed || (now && *parsed != PipelineState::kStopped && *parsed != PipelineState::kDraining)) {
    return Status::invalid_argument(
        fmt::format("expected '<sequence> <state>' or '<sequence> stopped now', got '{}'", request.substr(0, 64)));
  }
  const uint64_t seq = parts->first;
  const PipelineState requested = *parsed;
  if (Status refused = serving(); !refused.is_ok()) return refused;
  Busy busy(busy_);
  if (state_ == PipelineState::kCompleted) return Status::invalid_argument("the pipeline has completed");
  if (requested == PipelineState::kCompleted) {
    return Status::invalid_argument("a pipeline completes by itself, when its finite sources are read");
  }
  if (seq < state_seq_) return std::string(pipeline_state_name(state_));
  // A stop drains first (the bug: it stops at once, as a pause does); stopping a stopped
  // pipeline changes nothing.
  PipelineState next = requested;
  if (next == PipelineState::kDraining) next = PipelineState::kStopped;
  if (next == PipelineState::kStopped && state_ != PipelineState::kStopped && !env_.bugs.stop_without_drain) {
    next = PipelineState::kDraining;
  }
  // Acknowledge only what is durable: a restarted controller must not go back to the old state.
  const PipelineState before = state_;
  const uint64_t seq_before = state_seq_;
  state_seq_ = seq;
  state_ = next;
  const bool resume_before = resume_after_layout_;
  if (pending_) resume_after_layout_ = next == PipelineState::kWorking;  // a stop keeps it stopped after
  if (state_ != before) quiescing_.reset();
  const bool stop_now_before = stop_now_;
  stop_now_ = now;  // the cut of a drain this request begins
  if (!persist_state()) {
    stop_now_ = stop_now_before;
    resume_after_layout_ = resume_before;
    state_ = before;
    state_seq_ = seq_before;
    return Status::unavailable("the state could not be stored");
  }
  state_dirty_ = true;
  probe(env_, Probe::kControllerStateChanged);
  // What a pause or a stop did, where it landed (the simulator's fault effects count these).
  if (state_ != before && state_ == PipelineState::kPaused) probe(env_, Probe::kControllerPaused);
  if (state_ != before && (state_ == PipelineState::kDraining || state_ == PipelineState::kStopped)) {
    probe(env_, Probe::kControllerStopping);
  }
  return std::string(pipeline_state_name(state_));
}

}  // namespace onceflow
