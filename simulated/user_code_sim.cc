#include "simulated/user_code_sim.h"

#include <fmt/format.h>

#include "core/env/random.h"
#include "core/spec.h"

namespace onceflow::simulated {

SimUserCode::SimUserCode(SimUserCodeOptions options) : options_(std::move(options)) {}

void SimUserCode::assertion(uint32_t site, bool condition, std::string_view details, const UserCall& call) {
  Count& c = counts_[site];
  ++c.evaluated;
  const UserSiteKind kind = user_code::site(site).kind;
  const bool failed = assertion_failed(kind, condition);
  if (assertion_held(kind, condition)) ++c.held;
  if (!failed || !c.first_failure.empty()) return;
  const std::string where =
      world_ == nullptr ? std::string() : fmt::format(" on {} at {}", world_->name(world_->scheduler().current_node()),
                                                      format_time(world_->now()));
  c.first_failure = fmt::format("{}{}{}", user_code::describe_call(call), where,
                                details.empty() ? std::string() : ": " + std::string(details.substr(0, 300)));
}

bool SimUserCode::enabled(uint32_t site) {
  const auto it = enabled_.find(site);
  if (it != enabled_.end()) return it->second;
  const std::string& name = user_code::site(site).name;
  bool on = false;
  if (options_.buggify_sites) {
    on = options_.buggify_sites->count(name) != 0;
  } else if (options_.random_buggify) {
    on = (mix64(options_.seed ^ mix64(hash_bytes(name) ^ 0x6275676769667921ULL)) >> 62) == 0;  // a quarter
  }
  enabled_.emplace(site, on);
  return on;
}

bool SimUserCode::buggify(uint32_t site, const UserCall& call) {
  if (!enabled(site) || call.now >= options_.heal_at_us) return false;
  if (!user_code::buggify_fires(site, call)) return false;
  if (!call.replay) ++buggify_fired_[user_code::site(site).name];
  return true;
}

bool SimUserCode::bug(uint32_t site) { return !options_.bugs.empty() && options_.bugs.count(user_code::site(site).name) != 0; }

void SimUserCode::nondeterministic(std::string_view what, const UserCall& call) {
  if (nondeterministic_.size() >= 16) return;
  nondeterministic_.insert(fmt::format("{} from computation {} (job {})", what, call.computation, call.job));
}

void SimUserCode::fill(checkers::PipelineHistory& h) const {
  for (uint32_t id = 0; const UserSite& site : user_code::sites()) {
    const uint32_t this_id = id++;
    if (site.kind != UserSiteKind::kAlways && site.kind != UserSiteKind::kUnreachable) continue;
    checkers::UserAssertionRecord r;
    r.name = site.name;
    r.kind = user_site_kind_name(site.kind);
    if (const auto it = counts_.find(this_id); it != counts_.end()) {
      r.evaluated = it->second.evaluated;
      r.failed = assertion_failures(site.kind, it->second.evaluated, it->second.held);
      r.first_failure = it->second.first_failure;
    }
    h.user_assertions.push_back(std::move(r));
  }
  h.nondeterministic_calls.assign(nondeterministic_.begin(), nondeterministic_.end());
}

void SimUserCode::fill(RunOutcome& out) const {
  for (uint32_t id = 0; const UserSite& site : user_code::sites()) {
    const uint32_t this_id = id++;
    if (site.kind == UserSiteKind::kBuggify || site.kind == UserSiteKind::kBug) continue;
    UserSiteCount c{site.name, std::string(user_site_kind_name(site.kind)), 0, 0};
    if (const auto it = counts_.find(this_id); it != counts_.end()) {
      c.evaluated = it->second.evaluated;
      c.held = it->second.held;
    }
    out.user_sites.push_back(std::move(c));
  }
  bool any_enabled = false;
  for (const auto& [site, on] : enabled_) any_enabled |= on;
  if (!any_enabled) return;
  uint64_t fired = 0;
  faults::FaultEffect e{"user fault points fired (ONCEFLOW_BUGGIFY)", 0, {}};
  for (const auto& [site, n] : buggify_fired_) {
    fired += n;
    e.details.emplace_back(site, n);
    out.buggify_fired.push_back(site);
  }
  e.count = fired;
  out.effects["buggify"] = std::move(e);
}

}  // namespace onceflow::simulated
