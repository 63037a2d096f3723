// End-to-end latency of `onceflow real`: from an input's time to its output being visible at
// the sink (committed by the target's transaction, or by the Kafka transaction that carries
// it). An output carries its input's event time; the real producer stamps an input with its
// write time (less the workload's configured lateness, none in bench/pipelines), and a Kafka
// record's timestamp is its producer's write time.
//
// A log-bucketed histogram: exact below 64 µs, then 32 buckets per power of two (quantiles
// within about 3%), in constant memory however long the run.
#pragma once

#include <array>
#include <cstdint>

#include "core/env/clock.h"

namespace onceflow::real {

class LatencyHistogram {
 public:
  void add(Micros latency);
  uint64_t count() const { return count_; }
  // The smallest latency with at least `q` (0..1) of the samples at or below it (the upper end
  // of its bucket); 0 without samples.
  Micros quantile(double q) const;

 private:
  static constexpr int kExact = 64;
  static constexpr int kSubBits = 5;
  static constexpr int kBuckets = kExact + (64 - 6) * (1 << kSubBits);
  static int bucket_of(uint64_t v);
  static uint64_t upper_of(int bucket);
  std::array<uint64_t, kBuckets> buckets_{};
  uint64_t count_ = 0;
};

}  // namespace onceflow::real
