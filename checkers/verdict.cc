#include "checkers/verdict.h"

#include <fmt/format.h>

namespace onceflow::checkers {

Verdict DeterminismCheck::check(uint64_t seed, uint64_t first_hash, uint64_t second_hash,
                                const std::string& replay) const {
  if (first_hash == second_hash) {
    return Verdict::pass(kName, fmt::format("seed {} ran twice with trace_hash {:016x}", seed, first_hash));
  }
  return Verdict::fail(kName, fmt::format("seed {} ran twice with different trace hashes {:016x} and {:016x}: "
                                          "something reads the wall clock, OS randomness, an address or an "
                                          "unordered iteration{}",
                                          seed, first_hash, second_hash, replay.empty() ? "" : " — replay: " + replay));
}

}  // namespace onceflow::checkers
