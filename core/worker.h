// Worker: runs the jobs the controller assigns to it.
//
// A worker meets the controller only in the store (core/controller.h). It holds a Lease of
// its own, pinged every heartbeat_interval, which tells the controller it is alive; every
// heartbeat_interval, and at once when the controller says it stored new ones, it reads its
// assignments from the job rows (so it never learns one that is not stored), starts what is
// missing, asks jobs that are no longer assigned to it (or hold
// another Lease) to stop, drops jobs that ended, and writes its worker row (its Lease and the
// jobs it runs) when that changed. The worker never pings job Leases: the controller does. A
// worker cut off from the store goes on running its jobs; their commits fail once their
// Leases end, and the controller moves them once the worker's own Lease has ended.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/controller.h"
#include "core/engine.h"
#include "core/job.h"
#include "core/layout.h"

namespace onceflow {

class Worker {
 public:
  Worker(const EngineEnv& env, std::string name);
  ~Worker();

 private:
  void loop();
  // Starts the worker's Lease when it has none, pings it otherwise; false when it has none.
  bool keep_lease();
  // This worker's assignments as stored: job -> Lease; nullopt when the store did not answer.
  // Reads the partition layout in the same snapshot (current_).
  std::optional<std::map<std::string, LeaseId>> read_assignments();
  void reconcile(const std::map<std::string, LeaseId>& assigned);
  // Writes the worker row when what it would say changed.
  void report();
  void start_job(const JobId& id, LeaseId lease);
  Result<std::string> on_push(std::string_view request);  // the assign-before-persist bug
  Result<std::string> on_assigned();  // Controller::kAssignedService

  // The spec under one layout (its version is spec.layout_version), and the environment jobs
  // started under it run in. Kept for the worker's life: a job refers to its own until it is
  // destroyed.
  struct Generation {
    Generation(const EngineEnv& base, PipelineSpec s);
    PipelineSpec spec;
    EngineEnv env;
  };

  const EngineEnv& env_;
  std::string name_;
  std::vector<std::unique_ptr<Generation>> generations_;
  Generation* current_ = nullptr;
  bool layout_read_ = false;  // whether current_ was built from the stored layout yet
  LeaseId lease_ = 0;                  // the worker's own Lease; 0 while it has none
  // Told of stored assignments since the heartbeat began reading them: it goes round again.
  bool told_ = false;
  std::optional<Runtime::Waiter> sleeping_;  // the heartbeat's wait, while it waits
  std::optional<WorkerRow> reported_;  // the row as last stored
  std::map<std::string, std::unique_ptr<Job>> jobs_;  // by JobId::str()
  std::vector<std::unique_ptr<Job>> retired_;         // ending; destroyed once idle
};

}  // namespace onceflow
