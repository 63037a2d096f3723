#include "real/user_code_counts.h"

#include <fmt/format.h>

namespace onceflow::real {

using json = nlohmann::json;

UserCodeCounts::UserCodeCounts(std::string bug, bool reexecution)
    : bug_(std::move(bug)), reexecution_(reexecution), sites_(user_code::sites()), counts_(sites_.size()) {}

bool UserCodeCounts::bug(uint32_t site) { return !bug_.empty() && user_code::site(site).name == bug_; }

void UserCodeCounts::assertion(uint32_t site, bool condition, std::string_view details, const UserCall& call) {
  if (site >= counts_.size()) return;  // registered after the run began (a library loaded late)
  // One writer: user code runs on the deployment's loop thread (real/loop.h), so a count is a
  // load and a store, not a locked add; --stats reads them after the run.
  Count& c = counts_[site];
  c.evaluated.store(c.evaluated.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  const UserSiteKind kind = sites_[site].kind;
  if (assertion_held(kind, condition)) c.held.store(c.held.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  const bool failed = assertion_failed(kind, condition);
  if (failed && !c.told.exchange(true)) {
    c.first_failure = fmt::format("{}{}{}", user_code::describe_call(call), details.empty() ? "" : ": ", details.substr(0, 300));
    if (!reexecution_) {
      fmt::print(stderr, "onceflow real: {} \"{}\" {} in computation {} (job {}, epoch {}, key {}){}{}\n",
                 user_site_kind_name(kind), sites_[site].name, kind == UserSiteKind::kUnreachable ? "reached" : "failed",
                 call.computation, call.job, call.epoch, call.key, details.empty() ? "" : ": ", details.substr(0, 300));
    }
  }
}

void UserCodeCounts::fill(checkers::PipelineHistory& h) const {
  for (size_t i = 0; i < sites_.size(); ++i) {
    const UserSiteKind kind = sites_[i].kind;
    if (kind != UserSiteKind::kAlways && kind != UserSiteKind::kUnreachable) continue;
    const uint64_t evaluated = counts_[i].evaluated.load(), held = counts_[i].held.load();
    h.user_assertions.push_back({sites_[i].name, std::string(user_site_kind_name(kind)), evaluated,
                                 assertion_failures(kind, evaluated, held), counts_[i].first_failure});
  }
}

json UserCodeCounts::counts() const {
  json out = json::array();
  for (size_t i = 0; i < sites_.size(); ++i) {
    const UserSiteKind kind = sites_[i].kind;
    if (kind == UserSiteKind::kBuggify || kind == UserSiteKind::kBug) continue;
    const uint64_t evaluated = counts_[i].evaluated.load(), held = counts_[i].held.load();
    const uint64_t failed = assertion_failures(kind, evaluated, held);
    out.push_back({{"name", sites_[i].name}, {"kind", user_site_kind_name(kind)}, {"evaluated", evaluated},
                   {"held", held}, {"failed", failed}});
  }
  return out;
}

}  // namespace onceflow::real
