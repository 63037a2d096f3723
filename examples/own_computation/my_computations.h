// Your computations, shared by your command line (main.cc) and your tests (pipeline_test.cc).
#pragma once

#include "core/computation.h"

namespace my {

// Registers this project's computations by the names its pipeline specs use, and what the
// simulator should know of them:
//   LongestWord            keeps, per key, the longest word seen so far and emits it whenever it
//                          changes; its assertions (ONCEFLOW_ALWAYS, _SOMETIMES, _REACHABLE,
//                          _UNREACHABLE) and a fault point of its own (ONCEFLOW_BUGGIFY) are in
//                          my_computations.cc
//   check "each key keeps its longest word"   an invariant over the run's history
//   bug switch "shorter-wins"                 a deliberate mistake that check must catch
//   bug switch "cache-outlives-epoch"         a member-variable cache the re-execution catches
void register_my_computations(onceflow::ComputationRegistry& registry);

}  // namespace my
