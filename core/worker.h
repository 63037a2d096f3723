// Worker: runs the jobs the controller assigns to it.
//
// Every heartbeat_interval the worker tells the controller which jobs it runs (with their
// Leases) and gets back the jobs it should run. It starts what is missing, asks jobs that
// are no longer assigned (or hold another Lease) to stop, and drops jobs that ended. The
// worker never pings Leases: the controller does. A worker cut off from the controller goes
// on running its jobs; their commits fail once their Leases end.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/engine.h"
#include "core/job.h"

namespace onceflow {

class Worker {
 public:
  Worker(const EngineEnv& env, std::string name);
  ~Worker();

  static constexpr const char* kHeartbeatService = "heartbeat";

 private:
  void heartbeat_loop();
  void reconcile(const std::map<std::string, LeaseId>& assigned);
  void start_job(const JobId& id, LeaseId lease);

  const EngineEnv& env_;
  std::string name_;
  std::map<std::string, std::unique_ptr<Job>> jobs_;  // by JobId::str()
  std::vector<std::unique_ptr<Job>> retired_;         // ending; destroyed once idle
};

// Heartbeat messages between worker and controller.
std::string encode_job_leases(const std::string& worker, const std::map<std::string, LeaseId>& jobs);
Result<std::pair<std::string, std::map<std::string, LeaseId>>> decode_job_leases(std::string_view bytes);

}  // namespace onceflow
