// Clock: a node's own notion of time.
//
// Time is a signed count of microseconds (Micros). A simulated node's clock may be skewed or
// jump relative to other nodes; code that compares times taken on different nodes must not
// assume they agree. Thread-safety: implementations say their own; the simulated one is
// single-threaded.
#pragma once

#include <cstdint>

namespace onceflow {

using Micros = int64_t;

inline constexpr Micros kMillis = 1000;
inline constexpr Micros kSeconds = 1000 * kMillis;

class Clock {
 public:
  virtual ~Clock() = default;
  // The current time on this node's clock, in microseconds.
  virtual Micros now() const = 0;
};

}  // namespace onceflow
