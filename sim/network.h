// SimNetwork: the simulated network between the nodes of a World.
//
// A packet's fate is drawn from the network's own generator: dropped (with a separate
// probability for replies, which makes a request that ran look lost), duplicated, delayed by
// a latency drawn from [latency_us_min, ...) with mean latency_us_mean, and sometimes delayed
// further so that it overtakes or is overtaken (reordering). Partitions block directed links;
// heal() lifts them all. A request that reaches a down node is refused (kUnreachable); one
// that reaches a paused node waits for it. Per-link options override the defaults.
//
// Thread-safety: none.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "core/env/network.h"
#include "core/env/random.h"
#include "sim/scheduler.h"

namespace onceflow::sim {

class World;

struct LinkOptions {
  Micros latency_us_min = 50;
  Micros latency_us_mean = 300;
  double drop_probability = 0;
  double reply_drop_probability = 0;  // replies only: the request ran, its answer is lost
  double duplicate_probability = 0;
  double reorder_probability = 0;
  Micros reorder_delay_us_max = 5000;

  // REQUIRES-style check of the relations between the fields; returns a reason when broken.
  std::string invalid_reason() const;
};

struct NetworkOptions {
  LinkOptions link;
};

class SimNetwork {
 public:
  SimNetwork(World& world, NetworkOptions options, Xoshiro256StarStar rng);
  ~SimNetwork();

  // The endpoint of `node` (created on first use).
  Network& endpoint(NodeIndex node);
  // Registers a service whose handler never suspends (it must not call into the network or
  // sleep): a request runs it at once on arrival instead of on a fiber of its own. A paused
  // node still makes the request wait.
  void serve_inline(NodeIndex node, const std::string& service, RpcHandler handler);
  // Forgets the node's pending calls and services: called when it crashes.
  void reset_endpoint(NodeIndex node);

  // --- Faults ---
  // Cuts the directed link; `cause` names what cut it, for the stats of packets lost there.
  void block(NodeIndex from, NodeIndex to, const std::string& cause = "partition");
  void unblock(NodeIndex from, NodeIndex to);
  void partition(NodeIndex a, NodeIndex b, const std::string& cause = "partition") {
    block(a, b, cause), block(b, a, cause);
  }
  void isolate(NodeIndex node, const std::string& cause = "isolate");  // every link to and from the node
  void heal();                   // lifts every partition
  bool blocked(NodeIndex from, NodeIndex to) const;
  void set_default_link(const LinkOptions& options);
  void set_link(NodeIndex from, NodeIndex to, const LinkOptions& options);
  const LinkOptions& link(NodeIndex from, NodeIndex to) const;
  void clear_link_overrides() { links_.clear(); }

  struct Stats {
    uint64_t sent = 0, delivered = 0, dropped = 0, duplicated = 0, refused = 0;
    uint64_t dropped_at_random = 0;  // by a link's drop_probability
    uint64_t replies_lost = 0;       // by a link's reply_drop_probability
    uint64_t reordered = 0;          // held back so that others could overtake
    uint64_t delayed = 0;            // sent on a link slower than the default
    std::map<std::string, uint64_t> dropped_at_cut;  // by the cause that cut the link
  };
  const Stats& stats() const { return stats_; }
  // Whether the request whose handler runs now is the link's duplicate of one already sent
  // (a `duplicate` fault): read at the handler's start, before it suspends. A target that
  // records what it made visible keeps it, so a check can tell the transport's copies.
  bool delivering_network_copy() const { return delivering_copy_; }

 private:
  class Endpoint;
  struct Packet;
  friend class Endpoint;

  void send(std::shared_ptr<const Packet> packet);
  void deliver(const std::shared_ptr<const Packet>& packet);
  void deliver_request(const std::shared_ptr<const Packet>& packet);
  void deliver_reply(const Packet& packet);
  void reply(const Packet& request, Result<std::string> result);
  Endpoint& endpoint_impl(NodeIndex node);

  World& world_;
  NetworkOptions options_;
  Xoshiro256StarStar rng_;
  uint64_t next_call_id_ = 1;
  bool delivering_copy_ = false;
  std::map<NodeIndex, std::unique_ptr<Endpoint>> endpoints_;
  std::map<std::pair<NodeIndex, NodeIndex>, std::string> blocked_;  // cut links -> what cut them
  std::map<std::pair<NodeIndex, NodeIndex>, LinkOptions> links_;
  Stats stats_;
};

}  // namespace onceflow::sim
