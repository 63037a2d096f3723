#include "core/user_code.h"

#include <cxxabi.h>
#include <fmt/format.h>

#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <typeinfo>

#include "core/env/random.h"
#include "core/env/status.h"

namespace onceflow {

std::string_view user_site_kind_name(UserSiteKind kind) {
  switch (kind) {
    case UserSiteKind::kAlways: return "always";
    case UserSiteKind::kSometimes: return "sometimes";
    case UserSiteKind::kReachable: return "reachable";
    case UserSiteKind::kUnreachable: return "unreachable";
    case UserSiteKind::kBuggify: return "buggify";
    case UserSiteKind::kBug: return "bug";
  }
  return "?";
}

namespace user_code {
namespace {

// Sites register from static initializers, in any order, before main() (and from shared
// libraries loaded later): a function-local catalog, guarded. A deque keeps references stable.
struct Catalog {
  std::mutex mutex;
  std::deque<UserSite> sites;
};
Catalog& catalog() {
  static Catalog c;
  return c;
}

thread_local UserCodeHooks* t_hooks = nullptr;
thread_local const UserCall* t_call = nullptr;

}  // namespace

uint32_t register_site(const char* name, UserSiteKind kind, const char* file, int line) {
  Catalog& c = catalog();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (size_t i = 0; i < c.sites.size(); ++i) {
    if (c.sites[i].kind == kind && c.sites[i].name == name) return static_cast<uint32_t>(i);
  }
  c.sites.push_back({name, kind, file, line});
  return static_cast<uint32_t>(c.sites.size() - 1);
}

std::vector<UserSite> sites() {
  Catalog& c = catalog();
  std::lock_guard<std::mutex> lock(c.mutex);
  return {c.sites.begin(), c.sites.end()};
}

const UserSite& site(uint32_t id) {
  Catalog& c = catalog();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.sites.at(id);
}

void assertion(uint32_t site, bool condition, std::string details) {
  if (t_hooks == nullptr || t_call == nullptr || (t_call->replay && !t_hooks->counts_replays())) return;
  if (t_call->reads != nullptr && !t_call->reads->is_ok()) return;  // told "no such row" by a failed read
  t_hooks->assertion(site, condition, details, *t_call);
}

bool buggify(uint32_t site) {
  if (t_hooks == nullptr || t_call == nullptr) return false;
  return t_hooks->buggify(site, *t_call);
}

bool bug(uint32_t site) { return t_hooks != nullptr && t_hooks->bug(site); }

UserCodeHooks* hooks() { return t_hooks; }
const UserCall* call() { return t_call; }

HooksScope::HooksScope(UserCodeHooks* hooks) : previous_(t_hooks) { t_hooks = hooks; }
HooksScope::~HooksScope() { t_hooks = previous_; }
CallScope::CallScope(const UserCall& call) : previous_(t_call) { t_call = &call; }
CallScope::~CallScope() { t_call = previous_; }
CallPause::CallPause() : previous_(t_call) { t_call = nullptr; }
CallPause::~CallPause() { t_call = previous_; }

bool buggify_fires(uint32_t site, const UserCall& call) {
  const uint32_t ordinal = call.buggify_calls != nullptr ? (*call.buggify_calls)[site]++ : 0;
  const uint64_t draw = mix64(call.random_seed ^ mix64(hash_bytes(user_code::site(site).name) + ordinal));
  return (draw >> 62) == 0;  // one call in four
}

std::string describe_call(const UserCall& call) {
  return fmt::format("computation {}, job {}, epoch {}, {} (key {})", call.computation, call.job, call.epoch,
                     call.timer ? "a timer" : fmt::format("message {:016x}", call.message), call.key);
}

std::string describe_current_exception() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  std::string name = type == nullptr ? "unknown" : type->name();
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  if (status == 0 && demangled != nullptr) name = demangled.get();
  try {
    throw;
  } catch (const std::exception& e) {
    return fmt::format("{} \"{}\"", name, e.what());
  } catch (...) {
    return "an exception of type " + name;
  }
}

}  // namespace user_code
}  // namespace onceflow
