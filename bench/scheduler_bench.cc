// Scheduler micro-benchmarks: events per second on a ping-pong workload, the cost of one
// fiber switch, and a raw Boost.Context switch for comparison.
#include <benchmark/benchmark.h>

#include <boost/context/fiber.hpp>

#include "sim/scheduler.h"

namespace onceflow::sim {
namespace {

// Two fibers hand a ball back and forth through park/wake: each hand-off is one event.
void BM_PingPongEvents(benchmark::State& state) {
  const int64_t rounds = state.range(0);
  uint64_t events = 0;
  for (auto _ : state) {
    Scheduler sched;
    Scheduler::WakeToken ping_token, pong_token;
    bool ping_ready = false, pong_ready = false;
    sched.spawn(0, "ping", [&] {
      for (int64_t i = 0; i < rounds; ++i) {
        ping_token = sched.wake_token();
        ping_ready = true;
        if (pong_ready) sched.wake(pong_token);
        (void)sched.park(kNever);
      }
      pong_ready = false;
      sched.wake(pong_token);
    });
    sched.spawn(1, "pong", [&] {
      while (true) {
        pong_token = sched.wake_token();
        pong_ready = true;
        if (ping_ready) {
          ping_ready = false;
          sched.wake(ping_token);
        }
        (void)sched.park(kNever);
        if (!pong_ready && !ping_ready) break;
      }
    });
    while (sched.step()) {
    }
    events += sched.events_run();
  }
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PingPongEvents)->Arg(100'000)->Unit(benchmark::kMillisecond);

// Timer events: many fibers sleeping for random-ish durations (a heap of pending events).
void BM_SleepEvents(benchmark::State& state) {
  const int fibers = static_cast<int>(state.range(0));
  uint64_t events = 0;
  for (auto _ : state) {
    Scheduler sched;
    for (int f = 0; f < fibers; ++f) {
      sched.spawn(static_cast<NodeIndex>(f % 8), "sleeper", [&sched, f] {
        for (int i = 0; i < 1'000; ++i) sched.sleep_until(sched.now() + 1 + (i * 7919 + f * 104729) % 1000);
      });
    }
    while (sched.step()) {
    }
    events += sched.events_run();
  }
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SleepEvents)->Arg(100)->Unit(benchmark::kMillisecond);

// One yield = fiber -> scheduler -> fiber: two switches and one event.
void BM_FiberSwitch(benchmark::State& state) {
  Scheduler sched;
  bool stop = false;
  sched.spawn(0, "yielder", [&] {
    while (!stop) sched.yield();
  });
  uint64_t switches = 0;
  for (auto _ : state) {
    sched.step();
    switches += 2;
  }
  stop = true;
  while (sched.step()) {
  }
  // Seconds per switch (printed with an SI prefix: "38n" is 38 ns), scheduler work included.
  state.counters["s_per_switch"] = benchmark::Counter(
      static_cast<double>(switches), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_FiberSwitch);

// The floor: a bare Boost.Context fiber switch, no scheduler.
void BM_RawBoostContextSwitch(benchmark::State& state) {
  namespace ctx = boost::context;
  bool stop = false;
  ctx::fiber f([&stop](ctx::fiber&& sink) {
    while (!stop) sink = std::move(sink).resume();
    return std::move(sink);
  });
  for (auto _ : state) f = std::move(f).resume();  // two switches
  state.counters["s_per_switch"] = benchmark::Counter(
      static_cast<double>(state.iterations() * 2), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  stop = true;
  f = std::move(f).resume();
}
BENCHMARK(BM_RawBoostContextSwitch);

}  // namespace
}  // namespace onceflow::sim

BENCHMARK_MAIN();
