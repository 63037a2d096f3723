// The example's own computation, shared by its command line (main.cc) and its property test.
#pragma once

#include "core/computation.h"

namespace example {

// Keeps, per key, the longest word seen so far, and emits it whenever it changes.
// Registered as "LongestWord".
void register_longest_word(onceflow::ComputationRegistry& registry);

}  // namespace example
