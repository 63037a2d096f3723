#include "real/latency.h"

#include <bit>
#include <cmath>

namespace onceflow::real {

int LatencyHistogram::bucket_of(uint64_t v) {
  if (v < kExact) return static_cast<int>(v);
  const int e = 63 - std::countl_zero(v);  // 6 and up
  const auto sub = static_cast<int>((v >> (e - kSubBits)) & ((1 << kSubBits) - 1));
  return kExact + (e - 6) * (1 << kSubBits) + sub;
}

uint64_t LatencyHistogram::upper_of(int bucket) {
  if (bucket < kExact) return static_cast<uint64_t>(bucket);
  const int e = 6 + (bucket - kExact) / (1 << kSubBits);
  const uint64_t sub = static_cast<uint64_t>((bucket - kExact) % (1 << kSubBits));
  return (((uint64_t{1} << kSubBits) + sub + 1) << (e - kSubBits)) - 1;
}

void LatencyHistogram::add(Micros latency) {
  ++buckets_[static_cast<size_t>(bucket_of(latency < 0 ? 0 : static_cast<uint64_t>(latency)))];
  ++count_;
}

Micros LatencyHistogram::quantile(double q) const {
  if (count_ == 0) return 0;
  const auto rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_)));
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += buckets_[static_cast<size_t>(b)];
    if (seen >= std::max<uint64_t>(rank, 1)) return static_cast<Micros>(upper_of(b));
  }
  return static_cast<Micros>(upper_of(kBuckets - 1));
}

}  // namespace onceflow::real
