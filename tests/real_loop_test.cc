// The real loop: fibers of several nodes on the wall clock, the in-process network, and
// stopping, which unwinds every fiber.
#include "real/loop.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace onceflow::real {
namespace {

TEST(RealLoopTest, FibersOfSeveralNodesSleepOnTheWallClock) {
  RealLoop loop;
  loop.add_node("a");
  loop.add_node("b");
  std::vector<std::string> order;
  Micros slept = 0;
  loop.runtime("a").spawn("sleeper", [&] {
    const Micros start = loop.clock().now();
    loop.runtime("a").sleep_for(20 * kMillis);
    slept = loop.clock().now() - start;
    order.push_back("a woke");
  });
  loop.runtime("b").spawn("quick", [&] {
    order.push_back("b ran");
    loop.runtime("b").yield();
    order.push_back("b yielded");
  });
  loop.run([&] { return order.size() == 3; });
  EXPECT_EQ(order, (std::vector<std::string>{"b ran", "b yielded", "a woke"}));
  EXPECT_GE(slept, 20 * kMillis);
  EXPECT_LT(slept, 2 * kSeconds);
}

TEST(RealLoopTest, CallsGetRepliesTimeoutsAndUnreachable) {
  RealLoop loop;
  loop.add_node("client");
  loop.add_node("server");
  loop.network("server").serve("echo", [](const std::string& from, std::string_view req) -> Result<std::string> {
    return from + ":" + std::string(req);
  });
  loop.network("server").serve("slow", [&](const std::string&, std::string_view) -> Result<std::string> {
    loop.runtime("server").sleep_for(200 * kMillis);
    return std::string("late");
  });
  loop.network("server").serve("fails", [](const std::string&, std::string_view) -> Result<std::string> {
    return Status::invalid_argument("no");
  });
  std::vector<std::string> results;
  bool finished = false;
  loop.runtime("client").spawn("caller", [&] {
    Network& net = loop.network("client");
    auto echo = net.call("server", "echo", "hi", kSeconds);
    results.push_back(echo ? *echo : echo.error().message());
    const Micros start = loop.clock().now();
    auto slow = net.call("server", "slow", "", 20 * kMillis);
    results.push_back(slow ? *slow : std::string(status_code_name(slow.error().code())));
    EXPECT_LT(loop.clock().now() - start, 150 * kMillis);  // the timeout, not the handler
    auto fails = net.call("server", "fails", "", kSeconds);
    results.push_back(fails ? *fails : std::string(status_code_name(fails.error().code())));
    auto nobody = net.call("nowhere", "echo", "", kSeconds);
    results.push_back(nobody ? *nobody : std::string(status_code_name(nobody.error().code())));
    auto no_service = net.call("server", "nothing", "", kSeconds);
    results.push_back(no_service ? *no_service : std::string(status_code_name(no_service.error().code())));
    finished = true;
  });
  loop.run([&] { return finished; });
  ASSERT_EQ(results.size(), 5u);
  EXPECT_EQ(results[0], "client:hi");
  EXPECT_EQ(results[1], "Timeout");
  EXPECT_EQ(results[2], "InvalidArgument");
  EXPECT_EQ(results[3], "Unreachable");
  EXPECT_EQ(results[4], "Unreachable");
}

// A fiber woken for no reason while it waits for a reply (a wake left over from an earlier
// wait of the same fiber) waits on for that reply. Before, it parked again under a new wait
// that the reply's wake did not match, and the call ended in a timeout though the answer came
// at once: an operator's request, applied by the controller, was not answered for 30 s.
TEST(RealLoopTest, ACallerWokenForNoReasonStillGetsItsReply) {
  RealLoop loop;
  loop.add_node("client");
  loop.add_node("server");
  fibers::Scheduler::WakeToken caller{};
  loop.network("server").serve("slow", [&](const std::string&, std::string_view) -> Result<std::string> {
    loop.scheduler().wake(caller);  // the stray wake, for the wait the caller is in
    loop.runtime("server").sleep_for(20 * kMillis);
    return std::string("answer");
  });
  Result<std::string> reply = Status::aborted("not called");
  Micros took = 0;
  bool finished = false;
  loop.runtime("client").spawn("caller", [&] {
    caller = loop.scheduler().wake_token();
    const Micros start = loop.clock().now();
    reply = loop.network("client").call("server", "slow", "", 2 * kSeconds);
    took = loop.clock().now() - start;
    finished = true;
  });
  loop.run([&] { return finished; });
  ASSERT_TRUE(reply.has_value()) << reply.error().message();
  EXPECT_EQ(*reply, "answer");
  EXPECT_LT(took, kSeconds);
}

// A blocking call that ends before its fiber waits leaves no wake behind: the fiber's next
// wait (here a sleep) is not cut short by it.
TEST(RealLoopTest, ABlockingCallLeavesNoWakeForTheFibersNextWait) {
  RealLoop loop;
  loop.add_node("a");
  int cut_short = 0;
  bool finished = false;
  loop.runtime("a").spawn("blocker", [&] {
    for (int i = 0; i < 300; ++i) {
      // The helper thread may well finish before this fiber looks: the call's fast path.
      loop.run_blocking([] {});
      if (loop.scheduler().park(loop.scheduler().now() + 200)) ++cut_short;
    }
    finished = true;
  });
  loop.run([&] { return finished; });
  EXPECT_EQ(cut_short, 0);
}

// A sleep lasts its time though the fiber is woken meanwhile (a wake meant for an earlier wait).
TEST(RealLoopTest, ASleepIsNotCutShortByAWake) {
  RealLoop loop;
  loop.add_node("a");
  loop.add_node("b");
  fibers::Scheduler::WakeToken sleeper{};
  Micros slept = 0;
  bool finished = false;
  loop.runtime("a").spawn("sleeper", [&] {
    sleeper = loop.scheduler().wake_token();
    const Micros start = loop.clock().now();
    loop.runtime("a").sleep_for(60 * kMillis);
    slept = loop.clock().now() - start;
    finished = true;
  });
  loop.runtime("b").spawn("waker", [&] {
    loop.runtime("b").sleep_for(5 * kMillis);
    loop.scheduler().wake(sleeper);
  });
  loop.run([&] { return finished; });
  EXPECT_GE(slept, 60 * kMillis);
}

TEST(RealLoopTest, StoppingFromAnotherThreadUnwindsEveryFiber) {
  RealLoop loop;
  loop.add_node("a");
  int unwound = 0;
  struct Guard {
    int* count;
    ~Guard() { ++*count; }
  };
  for (int i = 0; i < 3; ++i) {
    loop.runtime("a").spawn("forever", [&] {
      Guard guard{&unwound};
      for (;;) loop.runtime("a").sleep_for(5 * kMillis);
    });
  }
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    loop.request_stop();
  });
  loop.run();
  stopper.join();
  EXPECT_EQ(unwound, 3);
  EXPECT_EQ(loop.scheduler().live_fibers(), 0u);
}

}  // namespace
}  // namespace onceflow::real
