// World: the simulated cluster in one process.
//
// A world owns the scheduler, the trace, the simulated network and the nodes. A node is a
// name plus a boot function: start() calls it to create the node's process (its volatile
// memory) and fibers; crash() unwinds every fiber of the node and destroys that process;
// restart() boots it again with a new incarnation, which gets back exactly what a real
// restarted process would: its name and its seeded generator, starting over. pause() freezes a node (a zombie to be)
// without telling anyone; resume() lets it go on as if nothing happened. Each node reads
// its own clock: virtual time plus a per-node offset (skew), which jumps can change.
//
// Every random choice comes from generators forked off the one seed, so a world is replayed
// from its seed alone. Thread-safety: none.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/env/network.h"
#include "core/env/random.h"
#include "core/env/runtime.h"
#include "sim/network.h"
#include "sim/scheduler.h"
#include "sim/trace.h"

namespace onceflow::sim {

class World;

// What a booting node gets: its runtime, clock, network endpoint and random generators.
// The struct lives only during the boot call; the objects it refers to live as long as the
// world, so keep references to them, not to the struct.
struct NodeContext {
  World& world;
  NodeIndex index;
  const std::string& name;
  uint64_t incarnation;
  Runtime& runtime;
  Network& network;
  // The process's own generator: seeded from the world's seed and the node's name, so every
  // life starts it over with the same numbers, as a real process restarted with the same
  // configuration would.
  Random& random;
  // The simulator's draws for faults this node injects (a target's refusals): a fresh
  // sequence per life. Never for anything a real process would do.
  Random& fault_random;
};

// Creates a node's process; the returned object lives until the node crashes.
using BootFn = std::function<std::shared_ptr<void>(NodeContext&)>;

class World {
 public:
  struct Options {
    uint64_t seed = 1;
    NetworkOptions network;
    size_t trace_keep_lines = 0;
    size_t fiber_stack_bytes = 256 * 1024;
  };

  explicit World(Options options);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  // Adds a node that is down until start(). REQUIRES: the name is new.
  NodeIndex add_node(std::string name, BootFn boot);
  NodeIndex find(std::string_view name) const;  // REQUIRES: the node exists
  bool has_node(std::string_view name) const;
  const std::string& name(NodeIndex node) const;
  size_t node_count() const { return nodes_.size(); }

  // Node lifecycle. These run outside fibers (from the test driver or a scheduled callback);
  // a fiber that wants one schedules it with scheduler().at().
  void start(NodeIndex node);
  void crash(NodeIndex node);
  void restart(NodeIndex node);
  void pause(NodeIndex node);
  void resume(NodeIndex node);
  bool is_up(NodeIndex node) const;
  // Every crash so far: (node, virtual time).
  const std::vector<std::pair<NodeIndex, Micros>>& crashes() const { return crashes_; }
  bool is_paused(NodeIndex node) const;
  uint64_t incarnation(NodeIndex node) const;

  // The node's clock reads virtual time + offset. `cause` names what set it (counted).
  void set_clock_offset(NodeIndex node, Micros offset_us, const std::string& cause = "");
  // How often each cause changed a node's clock offset.
  const std::map<std::string, uint64_t>& clock_changes() const { return clock_changes_; }
  // Every pause of a running node so far: (node, virtual time).
  const std::vector<std::pair<NodeIndex, Micros>>& pauses() const { return pauses_; }
  Micros clock_offset(NodeIndex node) const;
  Micros node_now(NodeIndex node) const;
  // The furthest the node's clock could have read so far, read or not (after a jump back,
  // more than it reads now): no reading of it so far is later.
  Micros node_clock_furthest(NodeIndex node) const;

  Runtime& runtime(NodeIndex node);
  Network& network_endpoint(NodeIndex node);

  Scheduler& scheduler() { return scheduler_; }
  SimNetwork& network() { return *network_; }
  Trace& trace() { return trace_; }
  Xoshiro256StarStar& rng() { return rng_; }
  uint64_t seed() const { return options_.seed; }
  Micros now() const { return scheduler_.now(); }

  // Records a trace line (hashed) for `node`.
  void record(NodeIndex node, std::string_view text);
  // Keeps a line for readers of the trace without hashing it (only when lines are kept).
  void detail(NodeIndex node, std::string_view text);
  // Same seed and build: same hash.
  uint64_t trace_hash() const;

  void run_until(Micros t) { scheduler_.run_until(t); }

 private:
  class NodeRuntime;
  struct Node;

  Node& node(NodeIndex index);
  const Node& node(NodeIndex index) const;

  Options options_;
  Scheduler scheduler_;
  Trace trace_;
  Xoshiro256StarStar rng_;
  std::unique_ptr<SimNetwork> network_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::map<std::string, NodeIndex, std::less<>> by_name_;
  std::vector<std::pair<NodeIndex, Micros>> crashes_;
  std::vector<std::pair<NodeIndex, Micros>> pauses_;
  std::map<std::string, uint64_t> clock_changes_;
};

}  // namespace onceflow::sim
