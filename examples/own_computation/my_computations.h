// Your computations, shared by your command line (main.cc) and your tests (pipeline_test.cc).
#pragma once

#include "core/computation.h"

namespace my {

// Registers this project's computations by the names its pipeline specs use:
//   LongestWord  keeps, per key, the longest word seen so far and emits it whenever it changes.
void register_my_computations(onceflow::ComputationRegistry& registry);

}  // namespace my
