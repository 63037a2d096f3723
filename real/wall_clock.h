// WallClock: the Clock of a real deployment, read from the OS's monotonic clock.
//
// Never used inside a simulation (the simulated world has its own clocks); the command line
// uses it to time runs. Thread-safety: safe from any thread.
#pragma once

#include "core/env/clock.h"

namespace onceflow::real {

class WallClock final : public Clock {
 public:
  // Microseconds since an arbitrary fixed point; never goes backwards.
  Micros now() const override;
};

}  // namespace onceflow::real
