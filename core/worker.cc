#include "core/worker.h"

#include <cassert>

#include "core/env/codec.h"

namespace onceflow {

namespace {
constexpr size_t kMaxJobs = 1'000'000;
}  // namespace

Worker::Generation::Generation(const EngineEnv& base, PipelineSpec s)
    : spec(std::move(s)),
      env{base.runtime, base.network, base.store,  base.random,        spec,           base.registry,   base.options,
          base.bugs,    base.observer, base.fault_points, base.connectors, base.seed, base.wakeups} {}

Worker::Worker(const EngineEnv& env, std::string name) : env_(env), name_(std::move(name)) {
  assert(!name_.empty());
  generations_.push_back(std::make_unique<Generation>(env_, env_.spec));
  current_ = generations_.back().get();
  if (env_.bugs.assign_before_persist) {
    env_.network.serve(Controller::kPushService, [this](const std::string&, std::string_view req) { return on_push(req); });
  }
  env_.network.serve(Controller::kAssignedService, [this](const std::string&, std::string_view) { return on_assigned(); });
  env_.runtime.spawn("heartbeat", [this] { loop(); });
}

Worker::~Worker() = default;

void Worker::loop() {
  while (true) {
    told_ = false;
    if (keep_lease()) {
      if (auto assigned = read_assignments()) reconcile(*assigned);
      report();
    }
    std::erase_if(retired_, [](const auto& job) { return !job->busy(); });
    if (told_) continue;  // its read may have begun before they were stored
    sleeping_ = env_.runtime.waiter();
    (void)env_.runtime.sleep_until_woken(env_.runtime.clock().now() + env_.options.heartbeat_interval_us);
    sleeping_.reset();
  }
}

Result<std::string> Worker::on_assigned() {
  told_ = true;
  if (sleeping_) env_.runtime.wake(*sleeping_);
  return std::string();
}

bool Worker::keep_lease() {
  if (lease_ != 0 && env_.store.ping_lease(lease_).is_prerequisite_failed()) {
    probe(env_, Probe::kWorkerLeaseLost);
    lease_ = 0;  // it ended (this worker was cut off or paused): the controller moved its jobs
  }
  if (lease_ == 0) {
    auto lease = env_.store.start_lease(env_.options.worker_timeout_us);
    if (!lease) return false;
    lease_ = *lease;
    reported_.reset();
  }
  return true;
}

std::optional<std::map<std::string, LeaseId>> Worker::read_assignments() {
  auto tx = env_.store.begin();
  if (!tx) return std::nullopt;
  // The assignments and the layout row in one scan: "job/..." sorts just below "layout",
  // and no other row of the controller's sorts between them.
  const std::string prefix = kJobKeyPrefix;
  const std::string layout_key = kLayoutKey;
  static_assert(std::string_view(kJobKeyPrefix) < std::string_view(kLayoutKey));
  auto rows = env_.store.scan(*tx, tables::kController, prefix, layout_key + '\0', kMaxJobs + 1);
  env_.store.abort(*tx);
  if (!rows) return std::nullopt;
  // An assignment names the layout its job runs with, stored before any assignment names it.
  std::map<std::string, LeaseId> mine;
  uint64_t named = current_->spec.layout_version;
  std::optional<Layout> layout;
  LeaseId row_before = 0;  // for the bug switch below
  for (const Row& row : *rows) {
    if (row.key == layout_key) {
      layout = decode_layout(row.value).value();
      continue;
    }
    if (!row.key.starts_with(prefix)) continue;
    const auto a = decode_assignment(row.value);
    assert(a.has_value());
    // The bug: the Lease of the row read before this one (any worker's), off by one.
    const LeaseId lease = env_.bugs.worker_takes_row_before_lease && row_before != 0 ? row_before : a->lease;
    row_before = a->lease;
    if (a->worker != name_) continue;
    mine[row.key.substr(prefix.size())] = lease;
    named = std::max(named, a->layout_version);
  }
  // Jobs route by the layout in force, read on the first look and whenever a new version is
  // named: this process's spec may have other partition counts (a rerun with a changed
  // spec, before its repartition is applied). With none stored, the spec is the layout.
  const bool new_layout = !layout_read_ || named != current_->spec.layout_version;
  layout_read_ = true;
  if (new_layout && (layout || named != current_->spec.layout_version)) {
    generations_.push_back(std::make_unique<Generation>(env_, with_layout(env_.spec, layout.value_or(Layout{}))));
    current_ = generations_.back().get();
  }
  return mine;
}

void Worker::reconcile(const std::map<std::string, LeaseId>& assigned) {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    auto want = assigned.find(it->first);
    const bool keep = want != assigned.end() && want->second == it->second->lease() && !it->second->finished();
    if (keep) {
      ++it;
      continue;
    }
    probe(env_, want != assigned.end() && want->second != it->second->lease() ? Probe::kWorkerJobReplaced
                                                                              : Probe::kJobStopped);
    it->second->request_stop();
    retired_.push_back(std::move(it->second));
    it = jobs_.erase(it);
  }
  for (const auto& [id, lease] : assigned) {
    if (jobs_.count(id) != 0) continue;
    auto job_id = JobId::parse(id);
    assert(job_id.has_value());
    start_job(*job_id, lease);
  }
}

void Worker::report() {
  WorkerRow row;
  row.lease = lease_;
  for (const auto& [id, job] : jobs_) {
    if (!job->finished()) row.running[id] = job->lease();
  }
  if (reported_ && reported_->lease == row.lease && reported_->running == row.running) return;
  auto tx = env_.store.begin();
  if (!tx) return;
  tx->put(tables::kWorkers, name_, encode_worker(row));
  auto committed = env_.store.commit(*tx, {lease_});
  if (committed) {
    reported_ = std::move(row);
  } else if (committed.error().is_prerequisite_failed()) {
    lease_ = 0;
  }
}

void Worker::start_job(const JobId& id, LeaseId lease) {
  auto job = std::make_unique<Job>(current_->env, id, lease);
  Job* raw = job.get();
  jobs_[id.str()] = std::move(job);
  env_.runtime.spawn("job:" + id.str(), [raw] { raw->run(); });
}

// The assign-before-persist bug: jobs the controller has not stored yet are started.
Result<std::string> Worker::on_push(std::string_view request) {
  auto pushed = decode_worker(request);
  if (!pushed) return Status::invalid_argument("malformed push");
  for (const auto& [id, lease] : pushed->running) {
    if (jobs_.count(id) != 0) continue;
    auto job_id = JobId::parse(id);
    if (job_id) start_job(*job_id, lease);
  }
  return std::string("started");
}

}  // namespace onceflow
