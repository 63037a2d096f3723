#include "faults/fault.h"
#include "core/env/clock.h"

#include <fmt/format.h>

namespace onceflow::faults {

namespace {
struct KindName {
  FaultKind kind;
  std::string_view name;
};
constexpr KindName kKindNames[] = {
    {FaultKind::kCrash, "crash"},
    {FaultKind::kPause, "pause"},
    {FaultKind::kPartition, "partition"},
    {FaultKind::kOneWayPartition, "one_way_partition"},
    {FaultKind::kIsolate, "isolate"},
    {FaultKind::kDrop, "drop"},
    {FaultKind::kDuplicate, "duplicate"},
    {FaultKind::kDelay, "delay"},
    {FaultKind::kReorder, "reorder"},
    {FaultKind::kLostReplies, "lost_replies"},
    {FaultKind::kStoreUnavailable, "store_unavailable"},
    {FaultKind::kClockSkew, "clock_skew"},
    {FaultKind::kClockJump, "clock_jump"},
    {FaultKind::kLeasePingLoss, "lease_ping_loss"},
    {FaultKind::kLeaseExpiry, "lease_expiry"},
    {FaultKind::kSinkErrors, "sink_errors"},
    {FaultKind::kDedupEviction, "dedup_eviction"},
    {FaultKind::kPipelinePause, "pipeline_pause"},
    {FaultKind::kPipelineStop, "pipeline_stop"},
    {FaultKind::kSinkRejects, "sink_rejects"},
    {FaultKind::kRebalance, "rebalance"},
    {FaultKind::kPointCrash, "point_crash"},
};


}  // namespace

std::string_view fault_kind_name(FaultKind kind) {
  for (const auto& entry : kKindNames) {
    if (entry.kind == kind) return entry.name;
  }
  return "unknown";
}

std::optional<FaultKind> parse_fault_kind(std::string_view name) {
  for (const auto& entry : kKindNames) {
    if (entry.name == name) return entry.kind;
  }
  return std::nullopt;
}

bool fault_is_global(FaultKind kind) {
  return kind == FaultKind::kStoreUnavailable || kind == FaultKind::kLeasePingLoss ||
         kind == FaultKind::kLeaseExpiry || kind == FaultKind::kPipelinePause || kind == FaultKind::kPipelineStop;
}

bool fault_needs_peer(FaultKind kind) {
  return kind == FaultKind::kPartition || kind == FaultKind::kOneWayPartition;
}

std::string Fault::describe() const {
  std::string out(fault_kind_name(kind));
  if (!node.empty()) out += " " + node;
  if (!peer.empty()) out += (kind == FaultKind::kOneWayPartition ? " -> " : " <-> ") + peer;
  if (!point.empty()) out += " at point " + point;
  if (intensity > 0) out += fmt::format(" p={:.2f}", intensity);
  if (amount_us != 0) out += fmt::format(" by {}", format_time(amount_us));
  out += (kind == FaultKind::kPointCrash ? " from " : " at ") + format_time(at_us) + " for " + format_time(duration_us);
  return out;
}

std::string FaultPlan::describe() const {
  std::string out;
  for (const Fault& f : faults) out += "  " + f.describe() + "\n";
  out += "  heal at " + format_time(heal_at_us) + "\n";
  return out;
}

}  // namespace onceflow::faults
