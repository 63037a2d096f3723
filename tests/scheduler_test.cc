#include "sim/scheduler.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/env/runtime.h"
#include "sim/world.h"

namespace onceflow::sim {
namespace {

TEST(SchedulerTest, VirtualTimeJumpsToTheNextEvent) {
  Scheduler sched;
  std::vector<Micros> woke;
  sched.spawn(0, "sleeper", [&] {
    sched.sleep_until(1'000'000);
    woke.push_back(sched.now());
    sched.sleep_until(5'000'000);
    woke.push_back(sched.now());
  });
  sched.run_until(kNever);
  EXPECT_EQ(woke, (std::vector<Micros>{1'000'000, 5'000'000}));
  EXPECT_EQ(sched.live_fibers(), 0u);
}

TEST(SchedulerTest, TiesRunInTheOrderScheduled) {
  Scheduler sched;
  std::string order;
  for (char c : std::string("abcde")) {
    sched.spawn(0, std::string(1, c), [&, c] {
      sched.sleep_until(10);
      order.push_back(c);
      sched.yield();
      order.push_back(static_cast<char>(c - 'a' + 'A'));
    });
  }
  sched.run_until(kNever);
  EXPECT_EQ(order, "abcdeABCDE");
}

TEST(SchedulerTest, WakeEndsAParkBeforeItsDeadline) {
  Scheduler sched;
  Scheduler::WakeToken token;
  bool woken = false;
  Micros at = 0;
  sched.spawn(0, "waiter", [&] {
    token = sched.wake_token();
    woken = sched.park(1'000);
    at = sched.now();
  });
  sched.at(300, kWorldNode, [&] { sched.wake(token); });
  sched.at(400, kWorldNode, [&] { sched.wake(token); });  // stale: that wait is over
  sched.run_until(kNever);
  EXPECT_TRUE(woken);
  EXPECT_EQ(at, 300);
}

TEST(SchedulerTest, ParkTimesOutWithoutAWake) {
  Scheduler sched;
  bool woken = true;
  sched.spawn(0, "waiter", [&] { woken = sched.park(700); });
  sched.run_until(kNever);
  EXPECT_FALSE(woken);
  EXPECT_EQ(sched.now(), 700);
}

// Counts destructor runs so a test can see the stack unwound.
struct Guard {
  int* destroyed;
  ~Guard() { ++*destroyed; }
};

TEST(SchedulerTest, KilledFibersUnwindAndNeverRunAgain) {
  Scheduler sched;
  int destroyed = 0;
  int steps_after_kill = 0;
  bool killed = false;
  for (int i = 0; i < 3; ++i) {
    sched.spawn(7, "victim", [&] {
      Guard outer{&destroyed};
      {
        Guard inner{&destroyed};
        while (true) {
          sched.sleep_until(sched.now() + 100);
          if (killed) ++steps_after_kill;
        }
      }
    });
  }
  int survivor_steps = 0;
  sched.spawn(8, "survivor", [&] {
    for (int i = 0; i < 50; ++i) {
      sched.sleep_until(sched.now() + 100);
      ++survivor_steps;
    }
  });
  sched.at(1'050, kWorldNode, [&] {
    sched.kill_node(7);
    killed = true;
  });
  sched.run_until(100'000);  // bounded: a victim that survived would loop forever
  EXPECT_EQ(destroyed, 6);  // two guards on each of three stacks
  EXPECT_EQ(steps_after_kill, 0);
  EXPECT_EQ(survivor_steps, 50);
  EXPECT_EQ(sched.live_fibers(), 0u);
}

TEST(SchedulerTest, AFiberNotYetStartedIsKilledWithoutRunning) {
  Scheduler sched;
  bool ran = false;
  sched.spawn(3, "never", [&] { ran = true; });
  sched.kill_node(3);
  sched.run_until(kNever);
  EXPECT_FALSE(ran);
}

TEST(SchedulerTest, PausedNodeResumesWithItsStackIntact) {
  Scheduler sched;
  std::vector<std::pair<int, Micros>> seen;
  sched.spawn(1, "counter", [&] {
    int local = 0;                  // lives on the fiber's stack across the pause
    std::string text = "intact";    // and so does a heap-owning object
    for (int i = 0; i < 5; ++i) {
      sched.sleep_until(sched.now() + 100);
      ++local;
      seen.push_back({local, sched.now()});
    }
    EXPECT_EQ(text, "intact");
  });
  sched.at(250, kWorldNode, [&] { sched.pause_node(1); });
  sched.at(10'000, kWorldNode, [&] { sched.resume_node(1); });
  sched.run_until(kNever);
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_EQ(seen[0], (std::pair<int, Micros>{1, 100}));
  EXPECT_EQ(seen[1], (std::pair<int, Micros>{2, 200}));
  // The wake due at 300 was held until the node resumed at 10'000.
  EXPECT_EQ(seen[2], (std::pair<int, Micros>{3, 10'000}));
  EXPECT_EQ(seen[4], (std::pair<int, Micros>{5, 10'200}));
}

TEST(WorldTest, CrashDestroysVolatileMemoryAndRestartBootsAfresh) {
  // Declared before the world, which destroys the last process when it goes.
  int boots = 0;
  int process_destroyed = 0;
  struct Process {
    explicit Process(int* d) : destroyed(d) {}
    int* destroyed;
    int counter = 0;
    ~Process() { ++*destroyed; }
  };
  std::vector<int> counters;
  World world(World::Options{});
  const NodeIndex n = world.add_node("n", [&](NodeContext& ctx) -> std::shared_ptr<void> {
    ++boots;
    auto p = std::make_shared<Process>(&process_destroyed);
    Runtime& rt = ctx.runtime;
    Process* raw = p.get();
    rt.spawn("tick", [&rt, raw, &counters] {
      while (true) {
        rt.sleep_for(100);
        counters.push_back(++raw->counter);
      }
    });
    return p;
  });
  world.start(n);
  world.run_until(350);
  world.crash(n);
  EXPECT_EQ(process_destroyed, 1);
  EXPECT_FALSE(world.is_up(n));
  world.run_until(1'000);  // nothing runs while it is down
  EXPECT_EQ(counters, (std::vector<int>{1, 2, 3}));
  world.start(n);
  world.run_until(1'250);
  EXPECT_EQ(boots, 2);
  EXPECT_EQ(world.incarnation(n), 2u);
  EXPECT_EQ(counters, (std::vector<int>{1, 2, 3, 1, 2}));  // counting from zero again
}

// A real process restarted with the same configuration seeds its generator as before; the
// simulated one must get nothing kinder. Fault draws of the simulator are another matter.
TEST(WorldTest, ARestartedNodeDrawsTheSameNumbersAsItsFirstLife) {
  World world(World::Options{});
  std::vector<uint64_t> draws, fault_draws;
  const NodeIndex n = world.add_node("n", [&](NodeContext& ctx) -> std::shared_ptr<void> {
    draws.push_back(ctx.random.next_u64());
    fault_draws.push_back(ctx.fault_random.next_u64());
    return nullptr;
  });
  world.start(n);
  world.restart(n);
  world.restart(n);
  ASSERT_EQ(draws.size(), 3u);
  EXPECT_EQ(draws[0], draws[1]);
  EXPECT_EQ(draws[1], draws[2]);
  EXPECT_NE(fault_draws[0], fault_draws[1]);
  // Another node, or another seed, draws otherwise.
  const NodeIndex m = world.add_node("m", [&](NodeContext& ctx) -> std::shared_ptr<void> {
    draws.push_back(ctx.random.next_u64());
    return nullptr;
  });
  world.start(m);
  EXPECT_NE(draws.back(), draws[0]);
}

TEST(WorldTest, NodeClockCarriesItsOffset) {
  World world(World::Options{});
  Micros woke_at_global = -1;
  const NodeIndex n = world.add_node("skewed", [&](NodeContext& ctx) -> std::shared_ptr<void> {
    Runtime& rt = ctx.runtime;
    rt.spawn("sleep", [&rt, &world, &woke_at_global] {
      rt.sleep_until(rt.clock().now() + 1'000);
      woke_at_global = world.now();
    });
    return nullptr;
  });
  world.set_clock_offset(n, 5'000);
  world.start(n);
  EXPECT_EQ(world.node_now(n), 5'000);
  world.run_until(kNever);
  EXPECT_EQ(woke_at_global, 1'000);
}

}  // namespace
}  // namespace onceflow::sim
