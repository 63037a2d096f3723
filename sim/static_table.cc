#include "sim/static_table.h"

#include <fmt/format.h>

#include "core/engine.h"
#include "core/env/codec.h"

namespace onceflow::sim {

BootFn static_table_master_boot(TargetLog& table, StaticTableProgress& progress, TargetFaults& faults) {
  return [&table, &progress, &faults](NodeContext& node) -> std::shared_ptr<void> {
    World& world = node.world;
    const NodeIndex self = node.index;
    Random& random = node.fault_random;
    node.network.serve(kStaticTableWriteService, [&, self](const std::string&, std::string_view request) -> Result<std::string> {
      Decoder in(request);
      const std::string job = in.string();
      const uint64_t lease = in.u64();
      const int partition = static_cast<int>(in.u64());
      const uint64_t count = in.u64();
      std::vector<std::pair<uint64_t, Message>> rows;
      for (uint64_t i = 0; i < count; ++i) {
        const uint64_t seqno = in.u64();
        auto m = decode_message(in.bytes());
        if (!m) return Status::invalid_argument("malformed row");
        rows.emplace_back(seqno, std::move(*m));
      }
      if (!in.done()) return Status::invalid_argument("malformed write");
      if (auto failure = faults.injected_failure(random)) return *failure;
      // One master transaction: the uncovered rows and the new frontier.
      uint64_t& frontier = progress.frontier[partition];
      for (const auto& [seqno, m] : rows) {
        if (seqno <= frontier) continue;
        if (seqno != frontier + 1) {
          return Status::invalid_argument(fmt::format("rows of partition {} skip from {} to {}", partition, frontier, seqno));
        }
        break;
      }
      size_t covered = 0;
      for (auto& [seqno, m] : rows) {
        if (seqno <= frontier) {
          ++covered;
          continue;
        }
        table.appended.push_back({std::move(m), job, lease, world.now()});
        frontier = seqno;
      }
      if (covered > 0) {
        progress.covered_rows += covered;
        if (covered < rows.size()) ++progress.partial_replays;
        world.detail(self, fmt::format("frontier of partition {} covers {} of {} rows; writes the tail", partition,
                                       covered, rows.size()));
      }
      Encoder out;
      out.u64(frontier);
      return out.take();
    });
    return nullptr;
  };
}

Result<uint64_t> SimStaticTableSink::deliver(const std::string& job, LeaseId lease, const std::vector<OutboxRow>& rows) {
  if (rows.empty()) return 0;
  auto id = JobId::parse(job);
  Encoder req;
  req.bytes(job).u64(lease).u64(static_cast<uint64_t>(id ? id->partition : 0)).u64(rows.size());
  for (const OutboxRow& row : rows) req.u64(row.seqno).bytes(row.message);
  auto reply = call(kStaticTableWriteService, req.take());
  if (!reply) return reply.error();
  Decoder in(*reply);
  return in.u64();
}

}  // namespace onceflow::sim
