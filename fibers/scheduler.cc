#include "fibers/scheduler.h"

#include <algorithm>
#include <boost/context/fiber.hpp>
#include <boost/context/stack_context.hpp>
#include <cassert>
#include <cstdlib>
#include <exception>
#include <new>

#include "core/env/random.h"
#include "core/env/runtime.h"

#if defined(__SANITIZE_ADDRESS__)
#define ONCEFLOW_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ONCEFLOW_ASAN 1
#endif
#endif

#ifdef ONCEFLOW_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace ctx = boost::context;

namespace onceflow::fibers {

namespace {

// Tells AddressSanitizer that the stack is about to change (no-ops without it).
void start_switch(void** fake_stack_save, const void* bottom, size_t size) {
#ifdef ONCEFLOW_ASAN
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
#else
  (void)fake_stack_save, (void)bottom, (void)size;
#endif
}

void finish_switch(void* fake_stack_save, const void** bottom_old, size_t* size_old) {
#ifdef ONCEFLOW_ASAN
  __sanitizer_finish_switch_fiber(fake_stack_save, bottom_old, size_old);
#else
  (void)fake_stack_save, (void)bottom_old, (void)size_old;
#endif
}

}  // namespace

// Reuses fiber stacks: a run creates a fiber per request, and malloc'ing a fresh stack each
// time would dominate the cost of short fibers. Bounded by the peak number of live fibers.
class StackPool {
 public:
  explicit StackPool(size_t stack_bytes) : stack_bytes_(stack_bytes) {}
  ~StackPool() {
    for (void* block : free_) std::free(block);
  }

  ctx::stack_context allocate() {
    void* block = nullptr;
    if (!free_.empty()) {
      block = free_.back();
      free_.pop_back();
    } else {
      block = std::malloc(stack_bytes_);
      if (block == nullptr) throw std::bad_alloc();
    }
    ctx::stack_context sc;
    sc.size = stack_bytes_;
    sc.sp = static_cast<char*>(block) + stack_bytes_;
    return sc;
  }

  void deallocate(ctx::stack_context& sc) {
    free_.push_back(static_cast<char*>(sc.sp) - sc.size);
  }

 private:
  size_t stack_bytes_;
  std::vector<void*> free_;
};

namespace {
// The StackAllocator concept Boost.Context expects, forwarding to the pool.
struct PoolAllocator {
  StackPool* pool;
  ctx::stack_context allocate() { return pool->allocate(); }
  void deallocate(ctx::stack_context& sc) { pool->deallocate(sc); }
};
}  // namespace

struct Scheduler::Fiber {
  FiberId id = 0;
  NodeIndex node = 0;
  std::string name;
  std::function<void()> fn;
  ctx::fiber self;  // the fiber's continuation while it is suspended
  ctx::fiber sink;  // the scheduler's continuation while the fiber runs
  uint64_t generation = 0;
  bool woken = false;
  bool killed = false;
  bool done = false;
  std::exception_ptr failure;  // an exception that escaped the fiber's function
  const void* stack_bottom = nullptr;
  size_t stack_size = 0;
  void* fake_stack = nullptr;
};

Scheduler::Scheduler(Options options)
    : options_(options), stacks_(std::make_unique<StackPool>(options.fiber_stack_bytes)) {
  assert(options_.fiber_stack_bytes >= 16 * 1024);
}

Scheduler::~Scheduler() {
  assert(current_ == nullptr);
  for (NodeIndex n = 0; n < nodes_.size(); ++n) kill_node(n);
  assert(fibers_.empty());
}

void Scheduler::mix_hash(uint64_t value) { event_hash_ = mix64(event_hash_ ^ value); }

FiberId Scheduler::current_fiber() const {
  assert(current_ != nullptr);
  return current_->id;
}

NodeIndex Scheduler::current_node() const {
  assert(current_ != nullptr);
  return current_->node;
}

const std::string& Scheduler::current_fiber_name() const {
  assert(current_ != nullptr);
  return current_->name;
}

Scheduler::NodeSlot& Scheduler::slot(NodeIndex node) {
  assert(node != kWorldNode);
  if (node >= nodes_.size()) nodes_.resize(node + 1);
  return nodes_[node];
}

FiberId Scheduler::spawn(NodeIndex node, std::string name, std::function<void()> fn) {
  auto owned = std::make_unique<Fiber>();
  Fiber* f = owned.get();
  f->id = next_fiber_id_++;
  f->node = node;
  f->name = std::move(name);
  f->fn = std::move(fn);
  ctx::stack_context sc = stacks_->allocate();
  f->stack_bottom = static_cast<char*>(sc.sp) - sc.size;
  f->stack_size = sc.size;
  // Boost.Context places its control block at the top of the stack and hands the stack back
  // to the pool when the fiber ends.
  f->self = ctx::fiber(std::allocator_arg, ctx::preallocated(sc.sp, sc.size, sc),
                       PoolAllocator{stacks_.get()},
                       [this, f](ctx::fiber&& sink) {
                         finish_switch(nullptr, &scheduler_stack_bottom_, &scheduler_stack_size_);
                         f->sink = std::move(sink);
                         if (!f->killed) {
                           try {
                             f->fn();
                           } catch (const FiberKilled&) {
                           } catch (...) {
                             f->failure = std::current_exception();
                           }
                         }
                         f->done = true;
                         start_switch(nullptr, scheduler_stack_bottom_, scheduler_stack_size_);
                         return std::move(f->sink);
                       });
  slot(node).fibers.emplace(f->id, f);
  fibers_.emplace(f->id, std::move(owned));
  push(Event{now_, 0, node, f->id, f->generation, true, nullptr});
  return f->id;
}

void Scheduler::push(Event event) {
  event.seq = next_seq_++;
  size_t slot = slots_.size();
  if (free_slots_.empty()) {
    slots_.push_back(std::move(event));
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
    slots_[slot] = std::move(event);
  }
  queue_.push(Queued{slots_[slot].time, slots_[slot].seq, slot});
}

Scheduler::WakeToken Scheduler::wake_token() const {
  assert(current_ != nullptr);
  return WakeToken{current_->id, current_->generation};
}

bool Scheduler::current_killed() const { return current_ != nullptr && current_->killed; }

bool Scheduler::park(Micros deadline) {
  Fiber* f = current_;
  assert(f != nullptr);
  assert(deadline >= now_);
  if (deadline != kNever) push(Event{deadline, 0, f->node, f->id, f->generation, false, nullptr});
  suspend();
  return f->woken;
}

void Scheduler::yield() {
  Fiber* f = current_;
  assert(f != nullptr);
  push(Event{now_, 0, f->node, f->id, f->generation, true, nullptr});
  suspend();
}

void Scheduler::wake(WakeToken token) {
  auto it = fibers_.find(token.fiber);
  if (it == fibers_.end() || it->second->generation != token.generation) return;
  push(Event{now_, 0, it->second->node, token.fiber, token.generation, true, nullptr});
}

void Scheduler::at(Micros t, NodeIndex node, std::function<void()> fn) {
  assert(fn);
  push(Event{std::max(t, now_), 0, node, 0, 0, false, std::move(fn)});
}

void Scheduler::suspend() {
  Fiber* f = current_;
  start_switch(&f->fake_stack, scheduler_stack_bottom_, scheduler_stack_size_);
  f->sink = std::move(f->sink).resume();
  finish_switch(f->fake_stack, &scheduler_stack_bottom_, &scheduler_stack_size_);
  // Back on this fiber: the scheduler resumed it, so current_ == f again.
  if (f->killed) throw FiberKilled{};
}

void Scheduler::resume(Fiber* f) {
  assert(current_ == nullptr);
  ++f->generation;  // every wait of the fiber so far is over
  current_ = f;
  start_switch(&scheduler_fake_stack_, f->stack_bottom, f->stack_size);
  f->self = std::move(f->self).resume();
  finish_switch(scheduler_fake_stack_, nullptr, nullptr);
  current_ = nullptr;
  if (!f->done) return;
  std::exception_ptr failure = std::move(f->failure);
  finish(f);
  // An exception that escaped a fiber surfaces in whoever drives the scheduler.
  if (failure) std::rethrow_exception(failure);
}

void Scheduler::finish(Fiber* f) {
  assert(f->done);
  slot(f->node).fibers.erase(f->id);
  fibers_.erase(f->id);  // destroys f; its stack went back to the pool when it returned
}

void Scheduler::pause_node(NodeIndex node) { slot(node).paused = true; }

void Scheduler::resume_node(NodeIndex node) {
  NodeSlot& s = slot(node);
  s.paused = false;
  std::vector<Event> held = std::move(s.held);
  s.held.clear();
  for (Event& e : held) {
    e.time = now_;
    push(std::move(e));
  }
}

bool Scheduler::node_paused(NodeIndex node) const {
  return node < nodes_.size() && nodes_[node].paused;
}

void Scheduler::kill_node(NodeIndex node) {
  assert(current_ == nullptr);  // from a fiber, schedule the kill with at()
  if (node >= nodes_.size()) return;
  nodes_[node].held.clear();
  // A killed fiber's destructors may spawn or wake others on this node; loop until none.
  while (!nodes_[node].fibers.empty()) {
    Fiber* f = nodes_[node].fibers.begin()->second;
    f->killed = true;
    resume(f);  // throws FiberKilled at its suspension point; the fiber ends
  }
  nodes_[node].held.clear();
}

void Scheduler::run_event(Event& e) {
  ++events_run_;
  event_hash_ = mix64(event_hash_ ^ static_cast<uint64_t>(e.time)) ^ (e.fiber * 0x9e3779b97f4a7c15ULL) ^
                e.node;
  if (e.fiber == 0) {
    e.fn();
    return;
  }
  auto it = fibers_.find(e.fiber);
  if (it == fibers_.end()) return;
  Fiber* f = it->second.get();
  if (f->generation != e.generation) return;  // that wait already ended
  f->woken = e.woken;
  resume(f);
}

bool Scheduler::step() {
  while (!queue_.empty()) {
    const size_t slot = queue_.top().slot;
    queue_.pop();
    Event e = std::move(slots_[slot]);
    slots_[slot].fn = nullptr;
    free_slots_.push_back(slot);
    assert(e.time >= now_);
    now_ = e.time;
    if (e.node != kWorldNode && node_paused(e.node)) {
      nodes_[e.node].held.push_back(std::move(e));
      continue;
    }
    run_event(e);
    return true;
  }
  return false;
}

void Scheduler::run_until(Micros t) {
  while (!queue_.empty() && queue_.top().time <= t) step();
  if (t > now_ && t != kNever) now_ = t;
}

Micros Scheduler::next_event_time() const { return queue_.empty() ? kNever : queue_.top().time; }

}  // namespace onceflow::fibers
