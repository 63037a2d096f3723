#include "real/loop.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <deque>
#include <thread>

namespace onceflow::real {

class RealLoop::NodeRuntime final : public Runtime {
 public:
  NodeRuntime(RealLoop& loop, fibers::NodeIndex index) : loop_(loop), index_(index) {}
  const Clock& clock() const override { return loop_.clock_; }
  void spawn(std::string name, std::function<void()> fn) override {
    loop_.scheduler_.spawn(index_, std::move(name), std::move(fn));
  }
  // Until `t` whatever wakes the fiber meanwhile: a sleep is woken by nobody (a wake meant for
  // an earlier wait of the fiber must not cut it short).
  void sleep_until(Micros t) override { loop_.sleep_through(t); }
  void yield() override { loop_.scheduler_.yield(); }
  Waiter waiter() const override {
    const auto token = loop_.scheduler_.wake_token();
    return {token.fiber, token.generation};
  }
  bool sleep_until_woken(Micros t) override { return loop_.scheduler_.park(std::max(t, loop_.scheduler_.now())); }
  void wake(Waiter waiter) override { loop_.scheduler_.wake({waiter.fiber, waiter.generation}); }

 private:
  RealLoop& loop_;
  fibers::NodeIndex index_;
};

class RealLoop::NodeNetwork final : public Network {
 public:
  NodeNetwork(RealLoop& loop, std::string self) : loop_(loop), self_(std::move(self)) {}
  const std::string& self() const override { return self_; }
  void serve(const std::string& service, RpcHandler handler) override;
  Result<std::string> call(const std::string& to, const std::string& service, std::string request,
                           Micros timeout_us) override;

 private:
  RealLoop& loop_;
  std::string self_;
};

struct RealLoop::Node {
  Node(RealLoop& loop, const std::string& name, fibers::NodeIndex index)
      : index(index), runtime(loop, index), network(loop, name) {}
  fibers::NodeIndex index;
  NodeRuntime runtime;
  NodeNetwork network;
  std::map<std::string, RpcHandler> services;
};

void RealLoop::NodeNetwork::serve(const std::string& service, RpcHandler handler) {
  loop_.node(self_).services[service] = std::move(handler);
}

Result<std::string> RealLoop::NodeNetwork::call(const std::string& to, const std::string& service,
                                                std::string request, Micros timeout_us) {
  assert(timeout_us > 0);
  auto target = loop_.nodes_.find(to);
  if (target == loop_.nodes_.end()) return Status::unreachable("no node " + to);
  auto handler = target->second->services.find(service);
  if (handler == target->second->services.end()) return Status::unreachable(to + " serves no " + service);
  struct Call {
    bool done = false;
    Result<std::string> reply = Status::timeout("no reply");
    fibers::Scheduler::WakeToken caller{};  // the caller's current wait
  };
  fibers::Scheduler& scheduler = loop_.scheduler_;
  auto call = std::make_shared<Call>();
  scheduler.spawn(target->second->index, "rpc " + service,
                  [call, fn = handler->second, from = self_, request = std::move(request), &scheduler] {
                    call->reply = fn(from, request);
                    call->done = true;
                    scheduler.wake(call->caller);
                  });
  // Each wait has its own token: a caller woken for another reason waits again under a new
  // one, which the reply's wake must name (the first one's wake would be ignored, and the
  // call would end in a timeout with its answer there).
  const Micros deadline = std::max(loop_.clock_.now(), scheduler.now()) + timeout_us;
  bool woken = true;
  while (!call->done && woken) {
    call->caller = scheduler.wake_token();
    woken = scheduler.park(deadline);
  }
  if (!call->done) return Status::timeout(to + " did not answer " + service + " in time");
  return std::move(call->reply);
}

void RealLoop::pause_fiber(Micros us) { sleep_through(std::max(clock_.now(), scheduler_.now()) + us); }

void RealLoop::sleep_through(Micros t) {
  // At least one turn (a sleep whose time has come still lets the others run first).
  do {
    (void)scheduler_.park(std::max(t, scheduler_.now()));
  } while (scheduler_.now() < t);
}

RealLoop::RealLoop() : helpers_(std::make_unique<Helpers>()) { scheduler_.run_until(clock_.now()); }

RealLoop::~RealLoop() {
  shutdown();
  helpers_.reset();  // joins the helper threads
}

void RealLoop::add_node(const std::string& name) {
  assert(nodes_.count(name) == 0);
  const auto index = static_cast<fibers::NodeIndex>(nodes_.size());
  nodes_.emplace(name, std::make_unique<Node>(*this, name, index));
}

RealLoop::Node& RealLoop::node(const std::string& name) {
  auto it = nodes_.find(name);
  assert(it != nodes_.end());
  return *it->second;
}

Runtime& RealLoop::runtime(const std::string& name) { return node(name).runtime; }
Network& RealLoop::network(const std::string& name) { return node(name).network; }

void RealLoop::run(const std::function<bool()>& done) {
  while (!stop_requested() && !(done && done())) {
    scheduler_.run_until(clock_.now());
    const Micros next = scheduler_.next_event_time();
    const Micros wait = next == fibers::kNever ? kMaxSleepUs : std::clamp<Micros>(next - clock_.now(), 0, kMaxSleepUs);
    if (idle_hook_) {
      idle_hook_(wait);
      idle(0);
    } else {
      idle(wait);
    }
  }
  shutdown();
}

struct RealLoop::Helpers {
  std::mutex mutex;
  std::condition_variable work;
  std::deque<std::function<void()>> queue;
  size_t idle = 0;
  bool stop = false;
  std::vector<std::thread> threads;

  void post(std::function<void()> job) {
    std::unique_lock<std::mutex> lock(mutex);
    queue.push_back(std::move(job));
    // Every queued job gets a thread of its own: a blocking call never waits behind another.
    if (queue.size() > idle) threads.emplace_back([this] { serve(); });
    work.notify_one();
  }
  void serve() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      ++idle;
      work.wait(lock, [this] { return stop || !queue.empty(); });
      --idle;
      if (queue.empty()) return;  // stopping
      auto job = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }
  ~Helpers() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    work.notify_all();
    for (auto& t : threads) t.join();
  }
};

void RealLoop::run_blocking(const std::function<void()>& fn) {
  struct Call {
    std::mutex mutex;
    std::condition_variable finished;
    bool done = false;
    fibers::Scheduler::WakeToken waiting{};  // the fiber's current wait
  };
  // No wait yet: a helper that ends before the fiber waits wakes nobody. (The token of the
  // fiber's current turn would be woken later, cutting short whatever it waits for next.)
  auto call = std::make_shared<Call>();
  helpers_->post([this, &fn, call] {
    fn();
    fibers::Scheduler::WakeToken token;
    {
      std::lock_guard<std::mutex> lock(call->mutex);
      call->done = true;
      token = call->waiting;
    }
    call->finished.notify_all();
    if (token.fiber != 0) wake_from_thread(token);
  });
  // If the fiber is unwound meanwhile, fn (and what it refers to on this fiber's stack) must
  // outlive the call: wait for it before the stack goes.
  struct Wait {
    Call& call;
    ~Wait() {
      std::unique_lock<std::mutex> lock(call.mutex);
      call.finished.wait(lock, [this] { return call.done; });
    }
  } wait{*call};
  for (;;) {
    {
      // Each wait has its own token: a wake for an earlier one would be ignored.
      std::lock_guard<std::mutex> lock(call->mutex);
      if (call->done) return;
      call->waiting = scheduler_.wake_token();
    }
    scheduler_.park(fibers::kNever);
  }
}

void RealLoop::wake_from_thread(fibers::Scheduler::WakeToken token) {
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    woken_.push_back(token);
  }
  wake_cv_.notify_one();
}

// Waits up to `wait_us` for the next event, or less when a helper thread hands a fiber back.
void RealLoop::idle(Micros wait_us) {
  std::vector<fibers::Scheduler::WakeToken> woken;
  {
    std::unique_lock<std::mutex> lock(wake_mutex_);
    if (woken_.empty() && wait_us > 0) {
      wake_cv_.wait_for(lock, std::chrono::microseconds(wait_us), [this] { return !woken_.empty(); });
    }
    woken.swap(woken_);
  }
  for (const auto& token : woken) scheduler_.wake(token);
}

void RealLoop::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  for (const auto& [name, n] : nodes_) scheduler_.kill_node(n->index);
}

}  // namespace onceflow::real
