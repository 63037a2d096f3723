// RealLoop: the nodes of a single-process deployment, on the shared fiber scheduler
// (fibers/scheduler.h) driven by the wall clock.
//
// Every node gets a Runtime (its fibers; its clock is the process's WallClock) and a
// Network endpoint. The network is in-process: a call runs the handler on a fresh fiber of
// the called node and wakes the caller with the reply, or with kTimeout when the deadline
// passes first, or kUnreachable when no such node or service exists. The loop runs what is
// due, then sleeps until the next event (at most 2 ms) or until a helper thread of
// run_blocking() hands its fiber back, calling the idle hook, if one is set, each turn.
//
// Thread-safety: one thread runs the loop; request_stop() may be called from a signal
// handler or another thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/env/network.h"
#include "core/env/runtime.h"
#include "fibers/scheduler.h"
#include "real/wall_clock.h"

namespace onceflow::real {

class RealLoop {
 public:
  RealLoop();
  ~RealLoop();
  RealLoop(const RealLoop&) = delete;
  RealLoop& operator=(const RealLoop&) = delete;

  // Adds a node. REQUIRES: the name is new.
  void add_node(const std::string& name);
  Runtime& runtime(const std::string& node);
  Network& network(const std::string& node);
  const Clock& clock() const { return clock_; }

  // Called once per turn of the loop with the longest it may block.
  void set_idle_hook(std::function<void(Micros max_wait_us)> hook) { idle_hook_ = std::move(hook); }

  // Runs until request_stop() or until `done()` (checked every turn) returns true. Then
  // unwinds every fiber of every node.
  void run(const std::function<bool()>& done = {});
  void request_stop() { stop_requested_.store(true); }
  bool stop_requested() const { return stop_requested_.load(); }

  // From a fiber: runs `fn` on a thread of its own (a blocking library call, such as
  // committing a Kafka transaction) while the loop goes on; the fiber resumes when fn
  // returns. If the loop stops meanwhile, the fiber is unwound once fn has returned.
  void run_blocking(const std::function<void()>& fn);
  // From a fiber of the loop: parks it for `us`, the loop going on meanwhile.
  void pause_fiber(Micros us);

  fibers::Scheduler& scheduler() { return scheduler_; }

 private:
  class NodeRuntime;
  class NodeNetwork;
  struct Node;
  Node& node(const std::string& name);
  void shutdown();

  // Helper threads of run_blocking() hand their fibers back through here; the loop's idle
  // wait ends early when one does.
  void wake_from_thread(fibers::Scheduler::WakeToken token);
  void idle(Micros wait_us);
  // From a fiber: parks it until `t` (scheduler time), whatever wakes it before.
  void sleep_through(Micros t);

  WallClock clock_;
  fibers::Scheduler scheduler_;
  std::mutex wake_mutex_;
  std::condition_variable wake_cv_;
  std::vector<fibers::Scheduler::WakeToken> woken_;  // guarded by wake_mutex_

  // The helper threads of run_blocking(): started when none is idle, kept for the next call.
  struct Helpers;
  std::unique_ptr<Helpers> helpers_;
  std::map<std::string, std::unique_ptr<Node>> nodes_;
  std::function<void(Micros)> idle_hook_;
  std::atomic<bool> stop_requested_{false};
  bool shut_down_ = false;
  static constexpr Micros kMaxSleepUs = 2 * kMillis;
};

}  // namespace onceflow::real
