#include "real/wall_clock.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace onceflow::real {
namespace {

TEST(WallClockTest, NeverGoesBackwardsAndAdvances) {
  WallClock clock;
  Micros last = clock.now();
  Micros first = last;
  for (int i = 0; i < 1'000'000 && last == first; ++i) {
    const Micros now = clock.now();
    ASSERT_GE(now, last);
    last = now;
  }
  EXPECT_GT(last, first);
}

// A real deployment's time is the calendar's, not the time since the machine booted: the
// processes of one pipeline on several machines (a PostgreSQL store) stamp messages and
// system-time timers on one scale, and so does a life after a reboot.
TEST(WallClockTest, TellsTheCalendarsTime) {
  const Micros calendar = calendar_now();
  const Micros now = WallClock().now();
  EXPECT_LT(std::abs(now - calendar), 1'000'000) << "the monotonic clock's count from boot?";
}

}  // namespace
}  // namespace onceflow::real
