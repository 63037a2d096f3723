// The master of a static output table, as an arrival-order table sink sees it: rows appended
// in arrival order, and the sink's progress, a per-partition frontier (the last seqNo each
// sink partition wrote). One request is one master transaction that appends the rows above
// the writer's frontier and moves the frontier, both or neither; so a replay that the
// frontier partly covers writes only its uncovered tail, and the job goes on.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/connectors.h"
#include "core/spec.h"
#include "sim/queue_target.h"
#include "sim/world.h"

namespace onceflow::sim {

struct StaticTableProgress {
  std::map<int, uint64_t> frontier;  // sink partition -> last seqNo written
  uint64_t partial_replays = 0;      // requests the frontier covered in part
  uint64_t covered_rows = 0;         // rows skipped as already written
};

inline constexpr const char* kStaticTableWriteService = "static_table.write";
BootFn static_table_master_boot(TargetLog& table, StaticTableProgress& progress, TargetFaults& faults);

// The engine side: hands committed outbox rows to the master in one transaction.
class SimStaticTableSink final : public SimTargetSink {
 public:
  using SimTargetSink::SimTargetSink;
  Result<uint64_t> deliver(const std::string& job, LeaseId lease, const std::vector<OutboxRow>& rows) override;
};

}  // namespace onceflow::sim
