#include "sim/world.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

#include "core/env/clock.h"

namespace onceflow::sim {

class World::NodeRuntime final : public Runtime, public Clock {
 public:
  NodeRuntime(World& world, NodeIndex index) : world_(world), index_(index) {}

  Micros now() const override { return world_.node_now(index_); }
  const Clock& clock() const override { return *this; }

  void spawn(std::string name, std::function<void()> fn) override {
    assert(world_.is_up(index_));
    world_.scheduler_.spawn(index_, std::move(name), std::move(fn));
  }

  void sleep_until(Micros t) override { (void)sleep_until_woken(t); }

  void yield() override { world_.scheduler_.yield(); }

  Waiter waiter() const override {
    const auto token = world_.scheduler_.wake_token();
    return {token.fiber, token.generation};
  }
  bool sleep_until_woken(Micros t) override {
    Scheduler& sched = world_.scheduler_;
    assert(sched.in_fiber() && sched.current_node() == index_);
    // Convert from this node's clock to virtual time with the offset in force now.
    const Micros global = t - world_.clock_offset(index_);
    return sched.park(global > sched.now() ? global : sched.now());
  }
  void wake(Waiter waiter) override { world_.scheduler_.wake({waiter.fiber, waiter.generation}); }
  bool unwinding() const override { return world_.scheduler_.current_killed(); }

 private:
  World& world_;
  NodeIndex index_;
};

struct World::Node {
  std::string name;
  BootFn boot;
  bool up = false;
  uint64_t incarnation = 0;
  Micros clock_offset_us = 0;
  Micros clock_read_before = INT64_MIN;  // the furthest the clock read under earlier offsets
  std::shared_ptr<void> process;
  std::unique_ptr<NodeRuntime> runtime;
  std::unique_ptr<Xoshiro256StarStar> random;
  std::unique_ptr<Xoshiro256StarStar> fault_random;
};

World::World(Options options)
    : options_(std::move(options)),
      scheduler_(Scheduler::Options{options_.fiber_stack_bytes}),
      trace_(options_.trace_keep_lines),
      rng_(Xoshiro256StarStar(options_.seed).fork("world")) {
  network_ = std::make_unique<SimNetwork>(*this, options_.network,
                                          Xoshiro256StarStar(options_.seed).fork("network"));
}

World::~World() {
  // Unwind every fiber while the processes they use still exist.
  for (NodeIndex i = 0; i < nodes_.size(); ++i) scheduler_.kill_node(i);
  for (auto& n : nodes_) n->process.reset();
}

NodeIndex World::add_node(std::string name, BootFn boot) {
  assert(!has_node(name));
  const auto index = static_cast<NodeIndex>(nodes_.size());
  auto n = std::make_unique<Node>();
  n->name = name;
  n->boot = std::move(boot);
  n->runtime = std::make_unique<NodeRuntime>(*this, index);
  nodes_.push_back(std::move(n));
  by_name_.emplace(std::move(name), index);
  return index;
}

NodeIndex World::find(std::string_view name) const {
  auto it = by_name_.find(name);
  assert(it != by_name_.end());
  return it->second;
}

bool World::has_node(std::string_view name) const { return by_name_.count(name) != 0; }

const std::string& World::name(NodeIndex index) const { return node(index).name; }

World::Node& World::node(NodeIndex index) {
  assert(index < nodes_.size());
  return *nodes_[index];
}

const World::Node& World::node(NodeIndex index) const {
  assert(index < nodes_.size());
  return *nodes_[index];
}

void World::start(NodeIndex index) {
  assert(!scheduler_.in_fiber());
  Node& n = node(index);
  assert(!n.up);
  n.up = true;
  ++n.incarnation;
  n.random = std::make_unique<Xoshiro256StarStar>(Xoshiro256StarStar(options_.seed).fork("node:" + n.name));
  n.fault_random = std::make_unique<Xoshiro256StarStar>(
      Xoshiro256StarStar(options_.seed).fork(fmt::format("node-faults:{}:{}", n.name, n.incarnation)));
  record(index, fmt::format("start incarnation {}", n.incarnation));
  NodeContext context{*this, index, n.name, n.incarnation, *n.runtime, network_->endpoint(index), *n.random,
                      *n.fault_random};
  n.process = n.boot(context);
}

void World::crash(NodeIndex index) {
  assert(!scheduler_.in_fiber());
  Node& n = node(index);
  if (!n.up) return;
  record(index, "crash");
  crashes_.emplace_back(index, now());
  n.up = false;
  scheduler_.resume_node(index);  // a paused node that crashes is no longer paused
  scheduler_.kill_node(index);
  network_->reset_endpoint(index);
  n.process.reset();
}

void World::restart(NodeIndex index) {
  crash(index);
  start(index);
}

void World::pause(NodeIndex index) {
  if (!is_up(index) || is_paused(index)) return;
  record(index, "pause");
  pauses_.emplace_back(index, now());
  scheduler_.pause_node(index);
}

void World::resume(NodeIndex index) {
  if (!is_paused(index)) return;
  record(index, "resume");
  scheduler_.resume_node(index);
}

bool World::is_up(NodeIndex index) const { return node(index).up; }
bool World::is_paused(NodeIndex index) const { return scheduler_.node_paused(index); }
uint64_t World::incarnation(NodeIndex index) const { return node(index).incarnation; }

void World::set_clock_offset(NodeIndex index, Micros offset_us, const std::string& cause) {
  record(index, fmt::format("clock offset {}", format_time(offset_us)));
  Node& n = node(index);
  if (n.clock_offset_us != offset_us) ++clock_changes_[cause];
  n.clock_read_before = std::max(n.clock_read_before, now() + n.clock_offset_us);
  n.clock_offset_us = offset_us;
}

Micros World::node_clock_furthest(NodeIndex index) const {
  const Node& n = node(index);
  return std::max(n.clock_read_before, now() + n.clock_offset_us);
}

Micros World::clock_offset(NodeIndex index) const { return node(index).clock_offset_us; }
Micros World::node_now(NodeIndex index) const { return now() + node(index).clock_offset_us; }

Runtime& World::runtime(NodeIndex index) { return *node(index).runtime; }
Network& World::network_endpoint(NodeIndex index) { return network_->endpoint(index); }

void World::record(NodeIndex index, std::string_view text) {
  trace_.record(now(), index == kWorldNode ? std::string_view("world") : name(index), text);
}

void World::detail(NodeIndex index, std::string_view text) {
  if (!trace_.keeping()) return;
  trace_.keep_only(now(), index == kWorldNode ? std::string_view("world") : name(index), text);
}

uint64_t World::trace_hash() const { return mix64(scheduler_.event_hash() ^ trace_.hash()); }

}  // namespace onceflow::sim
