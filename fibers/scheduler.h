// Scheduler: the fibers of many nodes on one thread, run from one queue of events.
//
// It runs every node's fibers (Boost.Context) and plain callbacks from one queue of events
// ordered by (time, sequence number). The simulator (sim/) drives it in virtual time, which
// jumps to the next event; the real deployment (real/loop.h) drives it with the wall clock,
// running what is due and sleeping until the next event. Ties run in the order they were
// scheduled, so a simulated run depends only on what was scheduled, never on addresses,
// threads or the wall clock.
//
// Fibers belong to a node. A paused node's events are held back and run, in order, when it
// resumes; a killed node's fibers are unwound (FiberKilled is thrown from the point where
// each is suspended) and never run again.
//
// Thread-safety: none. One scheduler, one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/env/clock.h"

namespace onceflow::fibers {

using FiberId = uint64_t;
using NodeIndex = uint32_t;

inline constexpr Micros kNever = std::numeric_limits<Micros>::max();
// Events not bound to any node (fault actions, world callbacks) use this node index.
inline constexpr NodeIndex kWorldNode = std::numeric_limits<NodeIndex>::max();

class StackPool;

class Scheduler {
 public:
  struct Options {
    size_t fiber_stack_bytes = 256 * 1024;
  };

  // Identifies one wait of one fiber; a wake for an older wait is ignored.
  struct WakeToken {
    FiberId fiber = 0;
    uint64_t generation = 0;
  };

  explicit Scheduler(Options options);
  Scheduler() : Scheduler(Options{}) {}
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  Micros now() const { return now_; }
  uint64_t events_run() const { return events_run_; }
  // A rolling hash of every event run so far: (time, kind, fiber, node).
  uint64_t event_hash() const { return event_hash_; }
  // Mixes an application-level fact into event_hash (e.g. a network packet's identity).
  void mix_hash(uint64_t value);

  // --- Fibers ---
  // Creates a fiber on `node`; it first runs as an event at the current time.
  FiberId spawn(NodeIndex node, std::string name, std::function<void()> fn);
  bool in_fiber() const { return current_ != nullptr; }
  FiberId current_fiber() const;
  NodeIndex current_node() const;
  const std::string& current_fiber_name() const;
  size_t live_fibers() const { return fibers_.size(); }

  // From inside a fiber: suspends until `deadline` (global virtual time) or until woken
  // through the token returned by wake_token(). Returns true when woken, false at deadline.
  // Throws FiberKilled when the fiber's node is killed meanwhile.
  WakeToken wake_token() const;
  bool park(Micros deadline);
  // Whether the running fiber's node was killed: it is being unwound, and a fiber that caught
  // FiberKilled (a user's `catch (...)`) and went on must not act for the dead node.
  bool current_killed() const;
  void sleep_until(Micros t) { (void)park(t); }
  void yield();
  // Makes the fiber waiting under `token` resume at the current time. A no-op when that wait
  // already ended or the fiber is gone.
  void wake(WakeToken token);

  // --- Plain callbacks ---
  // Runs `fn` at time `t` (no earlier than now) outside any fiber. A callback bound to a node
  // is held while that node is paused.
  void at(Micros t, NodeIndex node, std::function<void()> fn);

  // --- Nodes ---
  void pause_node(NodeIndex node);
  // Releases the node's held events at the current time, in their original order.
  void resume_node(NodeIndex node);
  bool node_paused(NodeIndex node) const;
  // Unwinds every fiber of `node` and drops its held events. REQUIRES: not called from a
  // fiber (a fiber schedules it with at()).
  void kill_node(NodeIndex node);

  // --- Running ---
  // An exception that escapes a fiber's function ends that fiber and is rethrown from the
  // step() (or run_until()) that was running it.
  // Runs the next event. Returns false when there is none.
  bool step();
  // Runs every event with time <= t, then advances the clock to t.
  void run_until(Micros t);
  // Time of the next queued event, kNever when there is none.
  Micros next_event_time() const;

 private:
  struct Fiber;
  struct Event {
    Micros time;
    uint64_t seq;
    NodeIndex node;
    FiberId fiber;  // 0 for a callback
    uint64_t generation;
    bool woken;
    std::function<void()> fn;
  };
  // The queue orders small entries; each names the slot its event waits in, so that the
  // heap's sifts move 24 bytes instead of an event with its std::function.
  struct Queued {
    Micros time;
    uint64_t seq;
    size_t slot;
  };
  struct Later {
    bool operator()(const Queued& a, const Queued& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  struct NodeSlot {
    bool paused = false;
    std::vector<Event> held;
    std::map<FiberId, Fiber*> fibers;  // ordered: deterministic kill order
  };

  void push(Event event);
  void run_event(Event& event);
  void resume(Fiber* fiber);
  void suspend();
  void finish(Fiber* fiber);
  NodeSlot& slot(NodeIndex node);

  Options options_;
  std::unique_ptr<StackPool> stacks_;
  Micros now_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t next_fiber_id_ = 1;
  uint64_t events_run_ = 0;
  uint64_t event_hash_ = 0;
  std::priority_queue<Queued, std::vector<Queued>, Later> queue_;
  std::vector<Event> slots_;        // the queued events, by Queued::slot
  std::vector<size_t> free_slots_;  // slots free for reuse
  std::unordered_map<FiberId, std::unique_ptr<Fiber>> fibers_;  // lookup only, never iterated
  std::vector<NodeSlot> nodes_;
  Fiber* current_ = nullptr;
  // AddressSanitizer bookkeeping for switching stacks; unused otherwise.
  void* scheduler_fake_stack_ = nullptr;
  const void* scheduler_stack_bottom_ = nullptr;
  size_t scheduler_stack_size_ = 0;
};

}  // namespace onceflow::fibers
