// Clock: a node's own notion of time.
//
// Time is a signed count of microseconds (Micros). A simulated node's clock may be skewed or
// jump relative to other nodes; code that compares times taken on different nodes must not
// assume they agree. Thread-safety: implementations say their own; the simulated one is
// single-threaded.
#pragma once

#include <cstdint>
#include <string>

namespace onceflow {

using Micros = int64_t;

inline constexpr Micros kMillis = 1000;
inline constexpr Micros kSeconds = 1000 * kMillis;

// The one way every report writes an instant or a duration: seconds with six decimals, exact
// to the microsecond ("3.788572s", "0.036672s", "-0.250000s"); --from/--to and scenario files
// read it back as written (docs/cli.md, "How values are written").
inline std::string format_time(Micros us) {
  const uint64_t magnitude = us < 0 ? 0 - static_cast<uint64_t>(us) : static_cast<uint64_t>(us);
  std::string out = us < 0 ? "-" : "";
  out += std::to_string(magnitude / 1000000);
  const std::string fraction = std::to_string(magnitude % 1000000);
  out += '.';
  out.append(6 - fraction.size(), '0');
  out += fraction;
  out += 's';
  return out;
}

class Clock {
 public:
  virtual ~Clock() = default;
  // The current time on this node's clock, in microseconds.
  virtual Micros now() const = 0;
};

}  // namespace onceflow
