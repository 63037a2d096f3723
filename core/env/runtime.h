// Runtime: fibers for one node.
//
// Engine code is straight-line code on fibers: a call that would block (a sleep, a network
// request, a store commit) suspends the calling fiber, and others run meanwhile. Fibers of
// one node never run in parallel, so node-local data needs no locks; it must not be assumed
// unchanged across a suspension point, though.
//
// When a node crashes, each of its fibers is unwound from the point where it is suspended:
// the suspending call throws FiberKilled, destructors run, and the fiber never resumes.
// Code must let FiberKilled propagate (no `catch (...)` that swallows it) and must not
// suspend inside a destructor.
#pragma once

#include <functional>
#include <string>

#include "core/env/clock.h"

namespace onceflow {

// Thrown from a suspension point of a fiber whose node crashed. Not a std::exception, so
// `catch (const std::exception&)` does not catch it.
struct FiberKilled {};

class Runtime {
 public:
  virtual ~Runtime() = default;

  // This node's clock.
  virtual const Clock& clock() const = 0;

  // Starts `fn` on a new fiber of this node. It first runs after the caller suspends (or, when
  // called from outside any fiber, when the runtime next schedules). `name` appears in traces.
  virtual void spawn(std::string name, std::function<void()> fn) = 0;

  // Suspends the calling fiber until this node's clock reads at least `t`. Only sleep_until_woken
  // is ended by a wake: code must not count on a wake to end this one (a real run's does not
  // end before `t`).
  // REQUIRES: called on a fiber of this runtime.
  virtual void sleep_until(Micros t) = 0;

  // Lets every other runnable fiber run once before the caller continues.
  virtual void yield() = 0;

  // One wait of one fiber, for wake(); a wake for a wait that already ended is ignored.
  struct Waiter {
    uint64_t fiber = 0;
    uint64_t generation = 0;
  };
  // The calling fiber's next wait. REQUIRES: called on a fiber of this runtime.
  virtual Waiter waiter() const = 0;
  // As sleep_until, but wake(waiter()) from another fiber of this node ends the wait at once;
  // true when it was woken.
  virtual bool sleep_until_woken(Micros t) = 0;
  virtual void wake(Waiter waiter) = 0;

  void sleep_for(Micros duration) { sleep_until(clock().now() + duration); }

  // Whether the calling fiber's node went down and the fiber is being unwound: true after a
  // FiberKilled was thrown in it, also to code that caught it and went on. A real process has
  // no such unwinding.
  virtual bool unwinding() const { return false; }
};

}  // namespace onceflow
