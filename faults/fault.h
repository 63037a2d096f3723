// Faults and fault plans.
//
// A Fault is one timed disturbance of the simulated world: it starts at `at_us` (virtual
// time), lasts `duration_us`, and is then lifted (a crashed node restarts, a paused one
// resumes, a partition heals, a link gets its options back). A FaultPlan is a list of faults
// plus the time of its heal phase, after which no fault is active, so liveness can be
// checked. Plans are written in scenarios or generated from a seed (see swarm.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/env/clock.h"

namespace onceflow::faults {

enum class FaultKind {
  kCrash,             // node crashes; restarts when the fault ends
  kPause,             // node freezes (a zombie); resumes when the fault ends
  kPartition,         // node <-> peer cut both ways
  kOneWayPartition,   // node -> peer cut
  kIsolate,           // every link of node cut
  kDrop,              // packets from node dropped with probability `intensity`
  kDuplicate,         // packets from node duplicated with probability `intensity`
  kDelay,             // packets from node take `amount_us` more on average
  kReorder,           // packets from node delayed at random by up to `amount_us`
  kLostReplies,       // replies from node lost with probability `intensity` (ambiguous commits)
  kStoreUnavailable,  // the store answers every request with kUnavailable
  kClockSkew,         // node's clock is offset by `amount_us` for the duration
  kClockJump,         // node's clock jumps by `amount_us` and stays there
  // Engine-level kinds (pipelines only):
  kLeasePingLoss,     // the store ignores Lease pings: Leases run out unless the fault ends first
  kLeaseExpiry,       // at `at_us` the store expires every active Lease (instant)
  kSinkErrors,        // the sink target `node` fails requests with probability `intensity`
  kDedupEviction,     // the sink target `node` forgets its (producer_id, seqNo) state (instant)
  kPipelinePause,     // the pipeline is paused, then started again when the fault ends
  kPipelineStop,      // the pipeline is stopped, then started again when the fault ends
  kSinkRejects,       // the sink target `node` rejects requests as permanent errors (p = `intensity`)
  kRebalance,         // spare worker `node` joins the cluster, and leaves when the fault ends
  // Scripted only: `node` crashes the first time it reaches the named fault point `point`
  // (faults/points.h) at or after `at_us`, and restarts `duration_us` later (as a swarm run's
  // fault point crash, written down by onceflow shrink).
  kPointCrash,
};

inline constexpr FaultKind kAllKernelFaultKinds[] = {
    FaultKind::kCrash,           FaultKind::kPause,      FaultKind::kPartition,
    FaultKind::kOneWayPartition, FaultKind::kIsolate,    FaultKind::kDrop,
    FaultKind::kDuplicate,       FaultKind::kDelay,      FaultKind::kReorder,
    FaultKind::kLostReplies,     FaultKind::kStoreUnavailable, FaultKind::kClockSkew,
    FaultKind::kClockJump,
};

// The kinds swarm mode draws from for pipelines by default: the kernel kinds and the
// engine-level ones, except dedup-window eviction, which breaks exactly-once by design and
// belongs in scenarios that show that (scripted).
inline constexpr FaultKind kAllPipelineSwarmKinds[] = {
    FaultKind::kCrash,           FaultKind::kPause,         FaultKind::kPartition,
    FaultKind::kOneWayPartition, FaultKind::kIsolate,       FaultKind::kDrop,
    FaultKind::kDuplicate,       FaultKind::kDelay,         FaultKind::kReorder,
    FaultKind::kLostReplies,     FaultKind::kStoreUnavailable, FaultKind::kClockSkew,
    FaultKind::kClockJump,       FaultKind::kLeasePingLoss, FaultKind::kLeaseExpiry,
    FaultKind::kSinkErrors,      FaultKind::kPipelinePause, FaultKind::kPipelineStop,
    FaultKind::kSinkRejects,     FaultKind::kRebalance,
};

// Whether the kind acts on no node (store-wide or pipeline-wide).
bool fault_is_global(FaultKind kind);

std::string_view fault_kind_name(FaultKind kind);
std::optional<FaultKind> parse_fault_kind(std::string_view name);
// Whether the kind needs a peer node.
bool fault_needs_peer(FaultKind kind);

struct Fault {
  FaultKind kind = FaultKind::kCrash;
  Micros at_us = 0;
  Micros duration_us = 0;
  std::string node;       // the node it acts on (empty for kStoreUnavailable)
  std::string peer;       // partitions only
  double intensity = 0;   // probabilities
  Micros amount_us = 0;   // delays, skews, jumps
  std::string point;      // kPointCrash: the fault point

  // "crash client-2 at 1.200s for 0.300s" style.
  std::string describe() const;
};

// A node crashed at a fault point (faults/points.h), as a run saw it.
struct PointHit {
  std::string node;
  std::string point;
  Micros at_us = 0;
};

// What one fault kind did in a run, measured where it landed: a count of `measure` and, for
// some kinds, engine paths it led to.
struct FaultEffect {
  using Details = std::vector<std::pair<std::string, uint64_t>>;
  FaultEffect() = default;
  FaultEffect(std::string m, uint64_t c, Details d = {}) : measure(std::move(m)), count(c), details(std::move(d)) {}
  std::string measure;
  uint64_t count = 0;
  Details details;
};

struct FaultPlan {
  std::vector<Fault> faults;
  Micros heal_at_us = 0;  // every fault is lifted by then

  std::string describe() const;
};

}  // namespace onceflow::faults
