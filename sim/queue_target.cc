#include "sim/queue_target.h"

#include "core/engine.h"
#include "core/env/codec.h"

#include <fmt/format.h>

namespace onceflow::sim {

bool TargetLog::append(const std::string& producer, uint64_t seqno, uint64_t lease, Message message, Micros now) {
  if (!producer.empty()) {
    uint64_t& last = last_seqno[producer];
    if (seqno <= last) {
      ++deduplicated;
      return false;
    }
    last = seqno;
  }
  appended.push_back({std::move(message), producer, lease, now});
  return true;
}

BootFn queue_target_boot(TargetLog& log) {
  return [&log](NodeContext& node) -> std::shared_ptr<void> {
    World& world = node.world;
    const NodeIndex self = node.index;
    Random& random = node.random;
    node.network.serve(kSinkAppendService, [&log, &world, self, &random](const std::string&, std::string_view request) -> Result<std::string> {
      Decoder in(request);
      const std::string producer = in.string();
      const uint64_t seqno = in.u64();
      const uint64_t lease = in.u64();
      auto message = decode_message(in.bytes());
      if (!in.done() || !message) return Status::invalid_argument("malformed append");
      const bool fail = random.bernoulli(log.error_probability);
      const bool reject = random.bernoulli(log.reject_probability);
      if (reject) {
        ++log.rejections;
        return Status::invalid_argument("the target rejects the request (permanent)");
      }
      if (fail) {
        ++log.errors;
        return Status::unavailable("the target failed the request");
      }
      const MessageId id = message->id;
      if (!log.append(producer, seqno, lease, std::move(*message), world.now())) {
        world.detail(self, fmt::format("drops repeat {} from {} seqNo {}", format_id(id), producer, seqno));
        return std::string("duplicate");
      }
      world.detail(self, fmt::format("appends {} from {} seqNo {} lease {:x}", format_id(id),
                                     producer.empty() ? "(at-most-once)" : producer, seqno, lease));
      return std::string("appended");
    });
    return nullptr;
  };
}

}  // namespace onceflow::sim
