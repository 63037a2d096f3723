// The assertions of the user's code in a real run (core/user_code.h): counted, the first
// failure of each told on stderr, never stopping the process. ONCEFLOW_BUGGIFY is never true
// here; ONCEFLOW_BUG(name) only for the switch the run names (`onceflow real --bug name`).
#pragma once

#include <atomic>
#include <nlohmann/json.hpp>
#include <vector>

#include "checkers/history.h"
#include "core/user_code.h"

namespace onceflow::real {

class UserCodeCounts final : public UserCodeHooks {
 public:
  // `bug`: the program's own bug switch on for the run (empty: none). `reexecution`: the counts
  // of `--verify`'s re-execution of the committed history, for its `assertions` verdict (kept
  // quiet, replays counted); else the run's own, each site's first failure said on stderr.
  explicit UserCodeCounts(std::string bug = {}, bool reexecution = false);
  void assertion(uint32_t site, bool condition, std::string_view details, const UserCall& call) override;
  bool buggify(uint32_t, const UserCall&) override { return false; }
  bool bug(uint32_t site) override;
  bool simulated() const override { return false; }
  void nondeterministic(std::string_view, const UserCall&) override {}
  bool counts_replays() const override { return reexecution_; }

  // Each assertion site: name, kind, evaluated, held, failed (--stats).
  nlohmann::json counts() const;
  // The always and unreachable sites, as the assertions check reads them.
  void fill(checkers::PipelineHistory& h) const;

 private:
  struct Count {
    std::atomic<uint64_t> evaluated{0};
    std::atomic<uint64_t> held{0};
    std::atomic<bool> told{false};
    std::string first_failure;  // written once, with `told`, on the loop thread
  };
  std::string bug_;
  bool reexecution_ = false;
  std::vector<UserSite> sites_;
  std::vector<Count> counts_;
};

}  // namespace onceflow::real
