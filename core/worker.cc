#include "core/worker.h"

#include <cassert>

#include "core/env/codec.h"

namespace onceflow {

std::string encode_job_leases(const std::string& worker, const std::map<std::string, LeaseId>& jobs) {
  Encoder out;
  out.bytes(worker).u64(jobs.size());
  for (const auto& [job, lease] : jobs) out.bytes(job).u64(lease);
  return out.take();
}

Result<std::pair<std::string, std::map<std::string, LeaseId>>> decode_job_leases(std::string_view bytes) {
  Decoder in(bytes);
  std::pair<std::string, std::map<std::string, LeaseId>> out;
  out.first = in.string();
  const uint64_t n = in.u64();
  for (uint64_t i = 0; in.ok() && i < n; ++i) {
    std::string job = in.string();
    out.second[job] = in.u64();
  }
  if (!in.done()) return Status::corruption("malformed heartbeat");
  return out;
}

Worker::Worker(const EngineEnv& env, std::string name) : env_(env), name_(std::move(name)) {
  env_.runtime.spawn("heartbeat", [this] { heartbeat_loop(); });
}

Worker::~Worker() = default;

void Worker::heartbeat_loop() {
  while (true) {
    std::map<std::string, LeaseId> running;
    for (const auto& [id, job] : jobs_) {
      if (!job->finished()) running[id] = job->lease();
    }
    auto reply = env_.network.call(env_.options.controller_node, kHeartbeatService,
                                   encode_job_leases(name_, running), env_.options.rpc_timeout_us);
    if (reply) {
      auto assigned = decode_job_leases(*reply);
      if (assigned) reconcile(assigned->second);
    }
    std::erase_if(retired_, [](const auto& job) { return !job->busy(); });
    env_.runtime.sleep_for(env_.options.heartbeat_interval_us);
  }
}

void Worker::reconcile(const std::map<std::string, LeaseId>& assigned) {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    auto want = assigned.find(it->first);
    const bool keep = want != assigned.end() && want->second == it->second->lease() && !it->second->finished();
    if (keep) {
      ++it;
      continue;
    }
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

void Worker::start_job(const JobId& id, LeaseId lease) {
  auto job = std::make_unique<Job>(env_, id, lease);
  Job* raw = job.get();
  jobs_[id.str()] = std::move(job);
  env_.runtime.spawn("job:" + id.str(), [raw] { raw->run(); });
}

}  // namespace onceflow
