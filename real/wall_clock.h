// WallClock: the Clock of a real deployment: the OS's calendar time when the process first
// read it, moved on by the monotonic clock, so that it never goes back within a process and
// processes on different machines (to their calendar clocks' agreement) and lives before and
// after a reboot tell comparable times.
//
// Never used inside a simulation (the simulated world has its own clocks); the command line
// uses it to time runs. Thread-safety: safe from any thread.
#pragma once

#include "core/env/clock.h"

namespace onceflow::real {

class WallClock final : public Clock {
 public:
  // Microseconds since the Unix epoch, as the calendar read at the process's first call, then
  // by the monotonic clock; never goes backwards.
  Micros now() const override;
};

// Microseconds since the Unix epoch, by the OS's calendar clock: the time base of event times
// (a Kafka record's timestamp, and the producer's inputs), against which the end-to-end
// latency is measured. Not monotonic; not for the engine's timing.
Micros calendar_now();

}  // namespace onceflow::real
