#include "sim/network.h"

#include <fmt/format.h>

#include <cassert>
#include <optional>

#include "sim/world.h"
#include "core/env/clock.h"

namespace onceflow::sim {

std::string LinkOptions::invalid_reason() const {
  const auto probability_ok = [](double p) { return p >= 0 && p <= 1; };
  if (latency_us_min < 0) return "latency_us_min must not be negative";
  if (latency_us_mean < latency_us_min) return "latency_us_mean must be >= latency_us_min";
  if (!probability_ok(drop_probability)) return "drop_probability must be in [0, 1]";
  if (!probability_ok(reply_drop_probability)) return "reply_drop_probability must be in [0, 1]";
  if (!probability_ok(duplicate_probability)) return "duplicate_probability must be in [0, 1]";
  if (!probability_ok(reorder_probability)) return "reorder_probability must be in [0, 1]";
  if (reorder_delay_us_max < 0) return "reorder_delay_us_max must not be negative";
  return "";
}

struct SimNetwork::Packet {
  bool is_reply = false;
  NodeIndex from = 0;
  NodeIndex to = 0;
  uint64_t call_id = 0;
  uint64_t caller_incarnation = 0;  // the incarnation of the calling node
  std::string service;
  std::string payload;
  Status status;  // replies only
  bool network_copy = false;  // the second copy of a packet the link duplicated
};

class SimNetwork::Endpoint final : public Network {
 public:
  Endpoint(SimNetwork& net, NodeIndex node) : net_(net), node_(node) {}

  const std::string& self() const override { return net_.world_.name(node_); }

  void serve(const std::string& service, RpcHandler handler) override {
    services_[service] = std::move(handler);
    inline_.erase(service);
  }
  void serve_inline(const std::string& service, RpcHandler handler) {
    services_[service] = std::move(handler);
    inline_.insert(service);
  }
  bool is_inline(const std::string& service) const { return inline_.count(service) > 0; }

  Result<std::string> call(const std::string& to, const std::string& service, std::string request,
                           Micros timeout_us) override {
    Scheduler& sched = net_.world_.scheduler();
    assert(sched.in_fiber() && sched.current_node() == node_);
    assert(timeout_us > 0);
    // A fiber of a crashed node that swallowed FiberKilled sends nothing: the crash stands.
    if (sched.current_killed()) throw FiberKilled{};
    // No such host: the connection is refused, as DNS would refuse it.
    if (!net_.world_.has_node(to)) return Status::unreachable("no node named " + to);
    const uint64_t call_id = net_.next_call_id_++;
    Pending& pending = pending_[call_id];
    pending.token = sched.wake_token();
    // Erases the entry however the wait ends, including FiberKilled.
    struct Erase {
      std::map<uint64_t, Pending>& map;
      uint64_t id;
      ~Erase() { map.erase(id); }
    } erase{pending_, call_id};

    auto packet = std::make_shared<Packet>();
    packet->from = node_;
    packet->to = net_.world_.find(to);
    packet->call_id = call_id;
    packet->caller_incarnation = net_.world_.incarnation(node_);
    packet->service = service;
    packet->payload = std::move(request);
    net_.send(std::move(packet));

    const Micros deadline = sched.now() + timeout_us;
    while (true) {
      const bool woken = sched.park(deadline);
      auto it = pending_.find(call_id);
      if (it->second.result.has_value()) return std::move(*it->second.result);
      if (!woken) return Status::timeout(fmt::format("{} on {} after {}", service, to, format_time(timeout_us)));
      it->second.token = sched.wake_token();
    }
  }

  // Hands a reply to the waiting caller; duplicates and late replies are ignored.
  void complete(uint64_t call_id, Result<std::string> result) {
    auto it = pending_.find(call_id);
    if (it == pending_.end() || it->second.result.has_value()) return;
    it->second.result = std::move(result);
    net_.world_.scheduler().wake(it->second.token);
  }

  const RpcHandler* handler(const std::string& service) const {
    auto it = services_.find(service);
    return it == services_.end() ? nullptr : &it->second;
  }

  void reset() {
    pending_.clear();
    services_.clear();
    inline_.clear();
  }

 private:
  struct Pending {
    Scheduler::WakeToken token;
    std::optional<Result<std::string>> result;
  };

  SimNetwork& net_;
  NodeIndex node_;
  std::map<std::string, RpcHandler> services_;
  std::set<std::string> inline_;  // services whose handlers never suspend
  std::map<uint64_t, Pending> pending_;
};

SimNetwork::SimNetwork(World& world, NetworkOptions options, Xoshiro256StarStar rng)
    : world_(world), options_(std::move(options)), rng_(rng) {
  const std::string reason = options_.link.invalid_reason();
  assert(reason.empty());
  (void)reason;
}

SimNetwork::~SimNetwork() = default;

SimNetwork::Endpoint& SimNetwork::endpoint_impl(NodeIndex node) {
  auto& slot = endpoints_[node];
  if (!slot) slot = std::make_unique<Endpoint>(*this, node);
  return *slot;
}

Network& SimNetwork::endpoint(NodeIndex node) { return endpoint_impl(node); }

void SimNetwork::serve_inline(NodeIndex node, const std::string& service, RpcHandler handler) {
  endpoint_impl(node).serve_inline(service, std::move(handler));
}

void SimNetwork::reset_endpoint(NodeIndex node) { endpoint_impl(node).reset(); }

void SimNetwork::block(NodeIndex from, NodeIndex to, const std::string& cause) { blocked_[{from, to}] = cause; }
void SimNetwork::unblock(NodeIndex from, NodeIndex to) { blocked_.erase({from, to}); }

void SimNetwork::isolate(NodeIndex node, const std::string& cause) {
  for (NodeIndex other = 0; other < world_.node_count(); ++other) {
    if (other != node) partition(node, other, cause);
  }
}

void SimNetwork::heal() { blocked_.clear(); }

bool SimNetwork::blocked(NodeIndex from, NodeIndex to) const {
  return blocked_.count({from, to}) != 0;
}

void SimNetwork::set_default_link(const LinkOptions& options) {
  assert(options.invalid_reason().empty());
  options_.link = options;
}

void SimNetwork::set_link(NodeIndex from, NodeIndex to, const LinkOptions& options) {
  assert(options.invalid_reason().empty());
  links_[{from, to}] = options;
}

const LinkOptions& SimNetwork::link(NodeIndex from, NodeIndex to) const {
  auto it = links_.find({from, to});
  return it == links_.end() ? options_.link : it->second;
}

void SimNetwork::send(std::shared_ptr<const Packet> packet) {
  ++stats_.sent;
  const LinkOptions& link_options = link(packet->from, packet->to);
  Scheduler& sched = world_.scheduler();
  sched.mix_hash(packet->call_id * 2 + (packet->is_reply ? 1 : 0));
  const auto note = [&](std::string_view what) {
    if (!world_.trace().keeping()) return;
    world_.detail(packet->from,
                  fmt::format("{} {} #{} of the {} service to {}", what, packet->is_reply ? "reply" : "request",
                              packet->call_id, packet->service, world_.name(packet->to)));
  };
  // Draw every number whatever the outcome, so one fault does not shift the others' draws.
  const bool drop = rng_.bernoulli(link_options.drop_probability);
  const bool drop_reply = rng_.bernoulli(link_options.reply_drop_probability);
  const bool duplicate = rng_.bernoulli(link_options.duplicate_probability);
  const auto cut = blocked_.find({packet->from, packet->to});
  if (cut != blocked_.end() || drop || (packet->is_reply && drop_reply)) {
    ++stats_.dropped;
    if (cut != blocked_.end()) {
      ++stats_.dropped_at_cut[cut->second];
    } else if (drop) {
      ++stats_.dropped_at_random;
    } else {
      ++stats_.replies_lost;
    }
    note(cut != blocked_.end() ? "link cut: loses" : drop ? "network drops" : "network loses");
    return;
  }
  const int copies = duplicate ? 2 : 1;
  stats_.duplicated += copies - 1;
  if (link_options.latency_us_mean > options_.link.latency_us_mean) ++stats_.delayed;
  for (int copy = 0; copy < copies; ++copy) {
    const double extra = rng_.exponential(
        static_cast<double>(link_options.latency_us_mean - link_options.latency_us_min));
    Micros latency = link_options.latency_us_min + static_cast<Micros>(extra);
    if (rng_.bernoulli(link_options.reorder_probability)) {
      latency += rng_.uniform_range(0, link_options.reorder_delay_us_max);
      ++stats_.reordered;
    }
    note(copy == 0 ? "sends" : "network duplicates");
    std::shared_ptr<const Packet> sent = packet;
    if (copy > 0) {
      auto twin = std::make_shared<Packet>(*packet);
      twin->network_copy = true;
      sent = std::move(twin);
    }
    sched.at(sched.now() + latency, packet->to, [this, sent] { deliver(sent); });
  }
}

void SimNetwork::deliver(const std::shared_ptr<const Packet>& packet) {
  if (packet->is_reply) {
    deliver_reply(*packet);
  } else {
    deliver_request(packet);
  }
}

void SimNetwork::deliver_request(const std::shared_ptr<const Packet>& packet) {
  if (!world_.is_up(packet->to)) {
    ++stats_.refused;
    reply(*packet, Status::unreachable(world_.name(packet->to) + " is down"));
    return;
  }
  const RpcHandler* handler = endpoint_impl(packet->to).handler(packet->service);
  if (handler == nullptr) {
    reply(*packet, Status::unreachable("no service " + packet->service + " on " +
                                       world_.name(packet->to)));
    return;
  }
  ++stats_.delivered;
  if (endpoint_impl(packet->to).is_inline(packet->service) && !world_.is_paused(packet->to)) {
    // A handler that never suspends runs at once, as one step of the node: no fiber needed.
    delivering_copy_ = packet->network_copy;
    Result<std::string> result = (*handler)(world_.name(packet->from), packet->payload);
    delivering_copy_ = false;
    reply(*packet, std::move(result));
    return;
  }
  // Copy the handler: the service may be replaced while this request runs.
  world_.scheduler().spawn(packet->to, packet->service,
                           [this, packet, run = *handler]() {
                             delivering_copy_ = packet->network_copy;
                             Result<std::string> result =
                                 run(world_.name(packet->from), packet->payload);
                             delivering_copy_ = false;
                             reply(*packet, std::move(result));
                           });
}

void SimNetwork::reply(const Packet& request, Result<std::string> result) {
  auto packet = std::make_shared<Packet>();
  packet->is_reply = true;
  packet->from = request.to;
  packet->to = request.from;
  packet->call_id = request.call_id;
  packet->caller_incarnation = request.caller_incarnation;
  packet->service = request.service;
  if (result.has_value()) {
    packet->payload = std::move(result).value();
  } else {
    packet->status = result.error();
  }
  send(std::move(packet));
}

void SimNetwork::deliver_reply(const Packet& packet) {
  if (!world_.is_up(packet.to) || world_.incarnation(packet.to) != packet.caller_incarnation) {
    return;  // the caller crashed meanwhile: nobody waits for this
  }
  ++stats_.delivered;
  Result<std::string> result = packet.status.is_ok() ? Result<std::string>(packet.payload)
                                                     : Result<std::string>(packet.status);
  endpoint_impl(packet.to).complete(packet.call_id, std::move(result));
}

}  // namespace onceflow::sim
