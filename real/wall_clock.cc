#include "real/wall_clock.h"

#include <chrono>

namespace onceflow::real {

namespace {
Micros steady_now() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

Micros WallClock::now() const {
  // The calendar time when the process first read this clock, moved on by the monotonic clock
  // since. The monotonic clock alone counts from the machine's boot: two machines sharing a
  // PostgreSQL store, or one machine after a reboot, would stamp messages, watermarks and
  // system-time timers on scales days apart.
  static const Micros calendar_minus_steady = calendar_now() - steady_now();
  return calendar_minus_steady + steady_now();
}

Micros calendar_now() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace onceflow::real
