// Controller: owns the pipeline's state, its jobs and one Lease per job.
//
// Each scheduling cycle it pings every job's Lease; removes the job whose Lease ended,
// whose worker was lost, whose worker no longer reports it running, or that a rebalance
// moves (aborting the Lease of each job it removes); and schedules a replacement under a
// new Lease, but only once the old Lease is known to have ended (aborted, or found ended).
// Assignments are persisted before workers learn of them. When the pipeline is
// paused, stopped or completed it aborts every Lease and schedules nothing. After a restart
// it reads its persisted assignments and aborts every Lease of its previous life before
// scheduling anew.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/engine.h"

namespace onceflow {

enum class PipelineState : uint8_t { kRunning, kPaused, kStopped, kCompleted };
std::string_view pipeline_state_name(PipelineState state);
std::optional<PipelineState> parse_pipeline_state(std::string_view name);

class Controller {
 public:
  explicit Controller(const EngineEnv& env);

  // Request "<sequence number> <state>"; a request older than the last applied is ignored.
  static constexpr const char* kSetStateService = "set_state";

 private:
  struct Assignment {
    std::string worker;
    LeaseId lease = 0;
    Micros assigned_at = 0;
    // Removed, but its Lease is not yet known to have ended: no replacement until it has, or
    // the old job and its replacement could both commit.
    bool retiring = false;
  };
  struct WorkerInfo {
    Micros heard_at = 0;
    std::map<std::string, LeaseId> running;
  };

  void loop();
  bool boot();
  void cycle();
  // Aborts the job's Lease and forgets the job; when the abort cannot be confirmed, the job
  // stays as retiring. Returns true when the job is gone.
  bool remove(const std::string& job, const char* why);
  // Why an assigned job must go (its Lease ended, its worker was lost, a rebalance moves it,
  // or its worker does not run it), or nullptr when it stays. Pings the job's Lease.
  const char* removal_reason(const std::string& id, const Assignment& a, const std::string* target,
                             const std::vector<std::string>& live, Micros now);
  bool persist();
  Result<std::string> on_heartbeat(std::string_view request);
  Result<std::string> on_set_state(std::string_view request);

  const EngineEnv& env_;
  bool booted_ = false;
  PipelineState state_ = PipelineState::kRunning;
  uint64_t state_seq_ = 0;  // the sequence number of the last state request applied
  bool state_dirty_ = false;
  std::map<std::string, Assignment> assignments_;  // by JobId::str(), only persisted ones
  std::map<std::string, WorkerInfo> workers_;
};

}  // namespace onceflow
