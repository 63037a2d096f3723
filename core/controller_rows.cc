// The controller's shared rows (the leader, assignments, workers) and the pipeline states'
// names, as every process reads and writes them (core/controller.h).
#include "core/controller_parts.h"

namespace onceflow {

namespace {
constexpr std::string_view kStateNames[] = {"working", "paused", "draining", "stopped", "completed"};
}  // namespace

std::string_view pipeline_state_name(PipelineState state) { return kStateNames[static_cast<int>(state)]; }

std::optional<PipelineState> parse_pipeline_state(std::string_view name) {
  for (size_t i = 0; i < std::size(kStateNames); ++i) {
    if (kStateNames[i] == name) return static_cast<PipelineState>(i);
  }
  if (name == "running") return PipelineState::kWorking;
  return std::nullopt;
}

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

}  // namespace onceflow
