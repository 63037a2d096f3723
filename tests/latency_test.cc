// The latency histogram of `onceflow real`: quantiles within its bucket precision.
#include "real/latency.h"

#include <gtest/gtest.h>

namespace onceflow::real {
namespace {

TEST(LatencyHistogramTest, QuantilesAreWithinThreePercent) {
  LatencyHistogram h;
  EXPECT_EQ(h.quantile(0.5), 0);
  for (Micros v = 1; v <= 100'000; ++v) h.add(v);
  EXPECT_EQ(h.count(), 100'000u);
  const auto near = [](Micros got, Micros want) { return got >= want && got <= want + want * 3 / 100; };
  EXPECT_TRUE(near(h.quantile(0.5), 50'000)) << h.quantile(0.5);
  EXPECT_TRUE(near(h.quantile(0.99), 99'000)) << h.quantile(0.99);
  EXPECT_TRUE(near(h.quantile(1.0), 100'000)) << h.quantile(1.0);
  EXPECT_EQ(h.quantile(0.0), 1);
}

TEST(LatencyHistogramTest, SmallValuesAreExactAndNegativeOnesCountAsZero) {
  LatencyHistogram h;
  h.add(-5);
  h.add(3);
  h.add(63);
  EXPECT_EQ(h.quantile(0.3), 0);
  EXPECT_EQ(h.quantile(0.6), 3);
  EXPECT_EQ(h.quantile(1.0), 63);
  h.add(int64_t{1} << 40);  // a day and more
  EXPECT_GE(h.quantile(1.0), int64_t{1} << 40);
}

}  // namespace
}  // namespace onceflow::real
