#include "sim/queue_target.h"

#include "core/engine.h"
#include "core/env/codec.h"
#include "core/outbox.h"

#include <fmt/format.h>

namespace onceflow::sim {

std::optional<Status> TargetFaults::injected_failure(Random& random) {
  // Both draws happen on every request, so one switch does not shift the other's draws.
  const bool fail = random.bernoulli(error_probability);
  const bool reject = random.bernoulli(reject_probability);
  if (reject) {
    ++rejections;
    return Status::invalid_argument("the target rejects the request (permanent)");
  }
  if (fail) {
    ++errors;
    return Status::unavailable("the target failed the request");
  }
  return std::nullopt;
}

size_t TargetFaults::accepted_prefix(Random& random, size_t batch) {
  // Drawn on every request, so the draws of the other switches do not shift with batch sizes.
  const bool cut = random.bernoulli(error_probability);
  if (!cut || batch < 2) return batch;
  ++partial;
  return 1 + random.uniform(batch - 1);
}

bool TargetLog::append(const std::string& producer, uint64_t seqno, uint64_t lease, Message message, Micros now, int tablet) {
  if (!producer.empty()) {
    uint64_t& last = last_seqno[producer];
    if (seqno <= last) {
      ++deduplicated;
      return false;
    }
    last = seqno;
  }
  appended.push_back({std::move(message), producer, lease, now});
  appended.back().tablet = tablet;
  return true;
}

BootFn queue_target_boot(TargetLog& log, TargetFaults& faults) {
  return [&log, &faults](NodeContext& node) -> std::shared_ptr<void> {
    World& world = node.world;
    const NodeIndex self = node.index;
    Random& random = node.fault_random;
    node.network.serve(kSinkAppendService, [&log, &faults, &world, self, &random](const std::string&, std::string_view request) -> Result<std::string> {
      const bool network_copy = world.network().delivering_network_copy();
      auto req = decode_append(request);
      if (!req) return Status::invalid_argument("malformed append");
      // The whole request is checked before any of it is applied.
      std::vector<Message> messages;
      for (const auto& e : req->entries) {
        auto m = decode_message(e.message);
        if (!m) return Status::invalid_argument("malformed message in an append");
        messages.push_back(std::move(*m));
      }
      if (auto failure = faults.injected_failure(random)) {
        // Every message of the request is named: a loss is followed through each refused send.
        for (size_t i = 0; i < messages.size(); ++i) {
          world.detail(self, fmt::format("refuses {} from {} seqNo {}: {}", message_label(messages[i]),
                                         req->producer.empty() ? "a sender without producer id" : req->producer,
                                         req->entries[i].seqno, failure->message()));
        }
        return *failure;
      }
      const size_t take = faults.accepted_prefix(random, req->entries.size());
      const int tablet = log.tablets > 0 ? static_cast<int>(req->tablet % static_cast<uint64_t>(log.tablets)) : -1;
      const std::string from = req->producer.empty() ? "a sender without producer id" : req->producer;
      AppendReply reply;
      for (size_t i = 0; i < take; ++i) {
        const auto& e = req->entries[i];
        const std::string label = message_label(messages[i]);
        if (!log.append(req->producer, e.seqno, req->lease, std::move(messages[i]), world.now(), tablet)) {
          ++reply.duplicates;
          world.detail(self, fmt::format("drops repeat {} from {} seqNo {}", label, from, e.seqno));
          continue;
        }
        ++reply.appended;
        log.appended.back().network_copy = network_copy;
        world.detail(self, fmt::format("appends {} from {} seqNo {} lease {}{}{}", label, from, e.seqno, req->lease,
                                       tablet >= 0 ? fmt::format(" to tablet {}", tablet) : "",
                                       network_copy ? " (a copy the network made of the request)" : ""));
      }
      if (take < req->entries.size()) {
        world.detail(self, fmt::format("takes {} of a batch of {} from {}", take, req->entries.size(), from));
      }
      if (!req->producer.empty()) {
        auto it = log.last_seqno.find(req->producer);
        reply.held = it == log.last_seqno.end() ? 0 : it->second;
      }
      return encode_append_reply(reply);
    });
    node.network.serve(kSinkDescribeService, [&log](const std::string&, std::string_view) -> Result<std::string> {
      return std::to_string(log.tablets);
    });
    return nullptr;
  };
}

BootFn http_receiver_boot(TargetLog& log, TargetFaults& faults, bool honour_idempotency_key) {
  return [&log, &faults, honour_idempotency_key](NodeContext& node) -> std::shared_ptr<void> {
    World& world = node.world;
    const NodeIndex self = node.index;
    Random& random = node.fault_random;
    node.network.serve(kHttpPostService, [&log, &faults, &world, self, &random, honour_idempotency_key](
                                              const std::string&, std::string_view request) -> Result<std::string> {
      Decoder in(request);
      const bool network_copy = world.network().delivering_network_copy();
      const std::string key = in.string();
      const std::string producer = in.string();
      const uint64_t lease = in.u64();
      auto message = decode_message(in.bytes());
      if (!in.done() || !message) return Status::invalid_argument("400 malformed request");
      if (auto failure = faults.injected_failure(random)) {
        world.detail(self, fmt::format("refuses {} POSTed by {}: {}", message_label(*message), producer, failure->message()));
        return *failure;
      }
      if (honour_idempotency_key && !key.empty() && !log.idempotency_keys.insert(key).second) {
        ++log.deduplicated;
        world.detail(self, fmt::format("replays the answer to Idempotency-Key {}", key));
        return std::string("200 (replayed)");
      }
      world.detail(self, fmt::format("appends {} POSTed by {} lease {}", message_label(*message), producer, lease));
      log.appended.push_back({std::move(*message), producer, lease, world.now()});
      log.appended.back().network_copy = network_copy;
      return std::string("200");
    });
    return nullptr;
  };
}

// Sends the rows in order, each once per call; stops at the first failure. A timeout may
// hide a POST the receiver applied: the row goes again later (at least once), and only an
// Idempotency-Key the receiver honours makes that harmless.
Result<uint64_t> SimHttpSink::deliver(const std::string& job, LeaseId lease, const std::vector<OutboxRow>& rows) {
  uint64_t delivered = 0;
  for (const OutboxRow& row : rows) {
    auto m = decode_message(row.message);
    if (!m) return Status::corruption("an outbox row does not decode");
    Encoder req;
    req.bytes(spec_.idempotency_key ? format_id(m->id) : "").bytes(job).u64(lease).bytes(row.message);
    auto reply = call(kHttpPostService, req.take());
    if (!reply) {
      if (delivered > 0) return delivered;  // what went through is acknowledged; the rest waits
      return reply.error();
    }
    delivered = row.seqno;
  }
  return delivered;
}

}  // namespace onceflow::sim
