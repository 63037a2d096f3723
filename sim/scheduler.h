// The simulator runs its nodes on the shared fiber scheduler (fibers/scheduler.h), in
// virtual time.
#pragma once

#include "fibers/scheduler.h"

namespace onceflow::sim {

using fibers::FiberId;
using fibers::kNever;
using fibers::kWorldNode;
using fibers::NodeIndex;
using fibers::Scheduler;

}  // namespace onceflow::sim
