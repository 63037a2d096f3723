// The checks a program registers for its own computations (ComputationRegistry::add_check),
// run on a history as the built-in checkers are: by the simulator and by `real --verify`.
#pragma once

#include <fmt/format.h>

#include <string>
#include <vector>

#include "checkers/history.h"
#include "checkers/verdict.h"
#include "core/computation.h"
#include "core/user_code.h"

namespace onceflow::checkers {

// Each check of `registry` on `h`: named as registered, a failure's detail ending with the
// history's replay command, a throw a failure naming what was thrown.
inline std::vector<Verdict> run_user_checks(const ComputationRegistry& registry, const PipelineHistory& h) {
  std::vector<Verdict> out;
  for (const auto& [name, check] : registry.checks()) {
    Verdict v;
    try {
      v = check(h);
    } catch (...) {
      // Named as a computation's throw is: `std::invalid_argument "stoll"`.
      v = Verdict::fail(name, "the check threw " + user_code::describe_current_exception());
    }
    v.check = name;
    if (!v.passed && !h.replay_command.empty() && v.detail.find(" — replay: ") == std::string::npos) {
      v.detail += " — replay: " + h.replay_command;
    }
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace onceflow::checkers
