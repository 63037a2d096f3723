// A clock that moves only when a test says so, for stores timed by a Clock.
#pragma once

#include "core/env/clock.h"

namespace onceflow::testing {

class ManualClock final : public Clock {
 public:
  Micros now() const override { return now_; }
  void advance(Micros by) { now_ += by; }

 private:
  Micros now_ = 1'000'000;
};

}  // namespace onceflow::testing
