#include "core/controller.h"

#include <cassert>
#include <charconv>

#include "core/env/codec.h"
#include "core/worker.h"

namespace onceflow {

namespace {
constexpr std::string_view kStateNames[] = {"running", "paused", "stopped", "completed"};
constexpr const char* kStateKey = "state";
constexpr const char* kStateSeqKey = "state_seq";
const std::string kJobPrefix = "job/";
}  // namespace

std::string_view pipeline_state_name(PipelineState state) { return kStateNames[static_cast<int>(state)]; }

std::optional<PipelineState> parse_pipeline_state(std::string_view name) {
  for (int i = 0; i < 4; ++i) {
    if (kStateNames[i] == name) return static_cast<PipelineState>(i);
  }
  return std::nullopt;
}

Controller::Controller(const EngineEnv& env) : env_(env) {
  env_.network.serve(Worker::kHeartbeatService, [this](const std::string&, std::string_view req) {
    return on_heartbeat(req);
  });
  env_.network.serve(kSetStateService, [this](const std::string&, std::string_view req) {
    return on_set_state(req);
  });
  env_.runtime.spawn("scheduler", [this] { loop(); });
}

void Controller::loop() {
  while (true) {
    cycle();
    env_.runtime.sleep_for(env_.spec.scheduling_period_us);
  }
}

// Reads the previous life's assignments and aborts their Leases: whatever ran under them is
// fenced before anything new is scheduled.
bool Controller::boot() {
  auto tx = env_.store.begin();
  if (!tx) return false;
  auto state = env_.store.get(*tx, tables::kController, kStateKey);
  auto seq = env_.store.get(*tx, tables::kController, kStateSeqKey);
  auto rows = env_.store.scan(*tx, tables::kController, kJobPrefix, kJobPrefix + "~", 1'000'000);
  env_.store.abort(*tx);
  if (!state || !seq || !rows) return false;
  if (state->has_value()) state_ = parse_pipeline_state(**state).value_or(PipelineState::kRunning);
  if (seq->has_value()) state_seq_ = std::stoull(**seq);
  for (const Row& row : *rows) {
    Decoder in(row.value);
    (void)in.string();
    const LeaseId lease = in.u64();
    const Status aborted = env_.store.abort_lease(lease);
    if (!aborted.is_ok() && !aborted.is_prerequisite_failed()) return false;
  }
  assignments_.clear();
  if (!persist()) return false;
  booted_ = true;
  return true;
}

bool Controller::remove(const std::string& job, const char* why) {
  auto it = assignments_.find(job);
  assert(it != assignments_.end());
  const bool skip_abort = env_.bugs.no_abort_on_rebalance && std::string_view(why) == "rebalance";
  if (!skip_abort) {
    const Status aborted = env_.store.abort_lease(it->second.lease);
    if (!aborted.is_ok() && !aborted.is_prerequisite_failed()) {
      it->second.retiring = true;  // try again next cycle; the Lease may still be live
      return false;
    }
  }
  assignments_.erase(it);
  return true;
}

bool Controller::persist() {
  auto tx = env_.store.begin();
  if (!tx) return false;
  auto rows = env_.store.scan(*tx, tables::kController, kJobPrefix, kJobPrefix + "~", 1'000'000);
  if (!rows) return false;
  for (const Row& row : *rows) {
    if (assignments_.count(row.key.substr(kJobPrefix.size())) == 0) tx->erase(tables::kController, row.key);
  }
  for (const auto& [job, a] : assignments_) {
    Encoder out;
    out.bytes(a.worker).u64(a.lease).i64(a.assigned_at);
    tx->put(tables::kController, kJobPrefix + job, out.take());
  }
  tx->put(tables::kController, kStateKey, std::string(pipeline_state_name(state_)));
  tx->put(tables::kController, kStateSeqKey, std::to_string(state_seq_));
  auto result = env_.store.commit(*tx, {});
  if (result) return true;
  if (!result.error().is_ambiguous()) return false;
  while (true) {
    auto outcome = env_.store.resolve(tx->id());
    if (outcome) return *outcome == TxOutcome::kCommitted;
    env_.runtime.sleep_for(env_.spec.scheduling_period_us);
  }
}

const char* Controller::removal_reason(const std::string& id, const Assignment& a, const std::string* target,
                                       const std::vector<std::string>& live, Micros now) {
  if (env_.store.ping_lease(a.lease).is_prerequisite_failed()) return "lease ended";
  if (std::find(live.begin(), live.end(), a.worker) == live.end()) return "worker lost";
  if (target != nullptr && *target != a.worker) return "rebalance";
  const auto& running = workers_[a.worker].running;
  const auto reported = running.find(id);
  const bool is_running = reported != running.end() && reported->second == a.lease;
  if (now - a.assigned_at > env_.options.start_grace_us && !is_running) return "not running";
  return nullptr;
}

void Controller::cycle() {
  if (!booted_ && !boot()) return;
  const Micros now = env_.runtime.clock().now();
  std::vector<std::string> live;
  for (const auto& [name, info] : workers_) {
    if (now - info.heard_at <= env_.options.worker_timeout_us) live.push_back(name);
  }
  bool changed = state_dirty_;
  state_dirty_ = false;
  if (state_ != PipelineState::kRunning) {
    changed |= !assignments_.empty();
    std::vector<std::string> jobs;
    for (const auto& [job, a] : assignments_) jobs.push_back(job);
    for (const auto& job : jobs) (void)remove(job, "pipeline not running");
    if (changed) (void)persist();
    return;
  }
  const std::vector<JobId> jobs = all_jobs(env_.spec);
  std::map<std::string, Assignment> added;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string id = jobs[i].str();
    const std::string* target = live.empty() ? nullptr : &live[i % live.size()];
    if (auto it = assignments_.find(id); it != assignments_.end()) {
      const char* why = it->second.retiring ? "retiring" : removal_reason(id, it->second, target, live, now);
      if (why == nullptr) continue;
      changed = true;
      if (!remove(id, why)) continue;  // retiring: no replacement until its Lease has ended
    }
    if (target == nullptr) continue;
    auto lease = env_.store.start_lease(env_.spec.lease_ttl_us);
    if (!lease) continue;
    added[id] = Assignment{*target, *lease, now};
  }
  if (added.empty() && !changed) return;
  auto before = assignments_;
  assignments_.insert(added.begin(), added.end());
  if (persist()) return;
  // Not persisted: forget the new assignments (nobody learned of them) and end their Leases.
  for (const auto& [id, a] : added) (void)env_.store.abort_lease(a.lease);
  assignments_ = std::move(before);
}

Result<std::string> Controller::on_heartbeat(std::string_view request) {
  auto report = decode_job_leases(request);
  if (!report) return report.error();
  WorkerInfo& info = workers_[report->first];
  info.heard_at = env_.runtime.clock().now();
  info.running = std::move(report->second);
  std::map<std::string, LeaseId> assigned;
  for (const auto& [job, a] : assignments_) {
    if (a.worker == report->first && !a.retiring) assigned[job] = a.lease;
  }
  return encode_job_leases(report->first, assigned);
}

// Request: "<sequence number> <state>". Requests can be delayed and reordered on the way,
// so one older than the last applied is ignored.
Result<std::string> Controller::on_set_state(std::string_view request) {
  const auto space = request.find(' ');
  uint64_t seq = 0;
  const std::string_view number = request.substr(0, space);
  const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), seq);
  const auto state = space == std::string_view::npos ? std::nullopt : parse_pipeline_state(request.substr(space + 1));
  if (ec != std::errc() || ptr != number.data() + number.size() || !state) {
    return Status::invalid_argument("expected '<sequence> <state>', got '" + std::string(request) + "'");
  }
  // Until boot has read the persisted state, a change here would be overwritten by it.
  if (!booted_) return Status::unavailable("the controller is starting");
  if (state_ == PipelineState::kCompleted) return Status::invalid_argument("the pipeline has completed");
  if (seq < state_seq_) return std::string(pipeline_state_name(state_));
  state_seq_ = seq;
  state_ = *state;
  state_dirty_ = true;
  // Acknowledge only what is durable: a restarted controller must not go back to the old state.
  auto tx = env_.store.begin();
  if (!tx) return tx.error();
  tx->put(tables::kController, kStateKey, std::string(pipeline_state_name(state_)));
  tx->put(tables::kController, kStateSeqKey, std::to_string(state_seq_));
  auto committed = env_.store.commit(*tx, {});
  if (!committed) return Status::unavailable("state not persisted: " + committed.error().to_string());
  return std::string(pipeline_state_name(state_));
}

}  // namespace onceflow
