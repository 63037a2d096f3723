// The simulator's side of core/user_code.h: counts the assertions of the user's code, answers
// its ONCEFLOW_BUGGIFY and ONCEFLOW_BUG calls from the run's seed and options, and notes its
// calls to the machine's clock and randomness (simulated/intercept.cc).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checkers/history.h"
#include "core/user_code.h"
#include "simulated/run_outcome.h"
#include "sim/world.h"

namespace onceflow::simulated {

struct SimUserCodeOptions {
  uint64_t seed = 1;
  // Buggify sites drawn from the seed (a quarter of them) when `random_buggify`; exactly
  // `buggify_sites` when given (a shrunk scenario's); none otherwise.
  bool random_buggify = false;
  std::optional<std::set<std::string>> buggify_sites;
  Micros heal_at_us = 0;  // no site fires in an epoch whose system time is past this
  std::set<std::string> bugs;  // the user's bug switches on
};

class SimUserCode final : public UserCodeHooks {
 public:
  explicit SimUserCode(SimUserCodeOptions options);
  // Where the run is, for naming the node and time of a failure.
  void watch(sim::World* world) { world_ = world; }

  void assertion(uint32_t site, bool condition, std::string_view details, const UserCall& call) override;
  bool buggify(uint32_t site, const UserCall& call) override;
  bool bug(uint32_t site) override;
  bool simulated() const override { return true; }
  void nondeterministic(std::string_view what, const UserCall& call) override;

  // What the history and the outcome carry of it.
  void fill(checkers::PipelineHistory& h) const;
  void fill(RunOutcome& out) const;

 private:
  struct Count {
    uint64_t evaluated = 0;
    uint64_t held = 0;
    std::string first_failure;
  };
  bool enabled(uint32_t site);

  SimUserCodeOptions options_;
  sim::World* world_ = nullptr;
  std::map<uint32_t, Count> counts_;
  std::map<uint32_t, bool> enabled_;              // buggify sites decided so far
  std::map<std::string, uint64_t> buggify_fired_;  // site -> firings
  std::set<std::string> nondeterministic_;
};

}  // namespace onceflow::simulated
