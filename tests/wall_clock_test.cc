#include "real/wall_clock.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace onceflow::real
