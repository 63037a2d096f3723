// Scheduling: the workers alive, which jobs run where, assignments stored and told, the job
// Leases kept.
#include "core/controller_parts.h"

namespace onceflow {

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

}  // namespace onceflow
