// The assertions of the user's code in a real run (core/user_code.h): counted, the first
// failure of each told on stderr, never stopping the process. ONCEFLOW_BUGGIFY and
// ONCEFLOW_BUG are never true here.
#pragma once

#include <atomic>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/user_code.h"

namespace onceflow::real {

class UserCodeCounts final : public UserCodeHooks {
 public:
  UserCodeCounts();
  void assertion(uint32_t site, bool condition, std::string_view details, const UserCall& call) override;
  bool buggify(uint32_t, const UserCall&) override { return false; }
  bool bug(uint32_t) override { return false; }
  bool simulated() const override { return false; }
  void nondeterministic(std::string_view, const UserCall&) override {}

  // Each assertion site: name, kind, evaluated, held, failed (--stats).
  nlohmann::json counts() const;

 private:
  struct Count {
    std::atomic<uint64_t> evaluated{0};
    std::atomic<uint64_t> held{0};
    std::atomic<bool> told{false};
  };
  std::vector<UserSite> sites_;
  std::vector<Count> counts_;
};

}  // namespace onceflow::real
