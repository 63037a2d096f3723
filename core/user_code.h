// What your computations can say to the simulator: assertions, fault points and bug switches
// of your own, placed anywhere in the code your process functions run.
//
//   ONCEFLOW_ALWAYS(total >= 0, "total never negative", fmt::format("total {}", total));
//   ONCEFLOW_SOMETIMES(retries > 0, "a lookup was retried");
//   ONCEFLOW_REACHABLE("cache evicted a key");
//   ONCEFLOW_UNREACHABLE("a message older than the watermark", details);
//   if (ONCEFLOW_BUGGIFY("lookup fails")) return retry_later();    // FoundationDB's BUGGIFY
//   if (ONCEFLOW_BUG("count-twice")) count += 1;                    // a switch for `mutants`
//
// The names are string literals; each (name, kind) is one site, catalogued when the program
// loads, so a site never reached is still known. The assertions follow Antithesis's:
//   always       must hold every time it is evaluated; false once fails the run
//   sometimes    must hold at least once over an exploration ("never true" is a coverage gap)
//   reachable    must be reached at least once over an exploration
//   unreachable  must never be reached; reached once fails the run
// In a simulated run (run, explore, the testing helpers), a failed `always` or a reached
// `unreachable` fails the run's `assertions` check, which names the assertion, the
// computation, the job, the epoch and the message or timer; every site's evaluations and
// true counts are in the run's JSON, and explore adds them up and lists the `sometimes` never
// true and the `reachable` never reached (--require-sometimes makes that exit 1). In
// `onceflow real` they are counted, shown by --stats, and never stop the process.
//
// ONCEFLOW_BUGGIFY(name) is true on some seeds at some calls, in simulation only, before the
// faults heal: a quarter of the sites are enabled per seed (drawn from the seed and the name),
// and an enabled site fires at a quarter of its calls (drawn from the epoch's seed and the
// call's place among the site's calls in the epoch, so re-executing the epoch gives the same
// answers). Never true in
// `onceflow real`. Its firings are reported as the effects of the `buggify` fault kind.
//
// ONCEFLOW_BUG(name) is true while a run has the bug switch `name` on (`--bug name`,
// `mutants`): register each with ComputationRegistry::add_bug so that `list --bugs` and
// `mutants` know it. In `onceflow real`, only for the switch `--bug name` names (to see
// `--verify` catch it).
//
// These act inside process_message and process_timer (and for bug switches, wherever the run
// calls your function; not in init()). Elsewhere they count nothing and return false. In a simulated run,
// your code's calls to the machine's clock or randomness (clock_gettime, gettimeofday, time,
// std::chrono's clocks, rand, random, getrandom, getentropy, arc4random, std::random_device) are answered
// from the simulation and fail the run's `determinism` check naming the call and the
// computation (docs/testing.md).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace onceflow {

class Status;

enum class UserSiteKind : uint8_t { kAlways, kSometimes, kReachable, kUnreachable, kBuggify, kBug };
std::string_view user_site_kind_name(UserSiteKind kind);
// What one evaluation of an assertion of `kind` says: it held (always: true; sometimes: true;
// reachable: reached; unreachable: never), or it failed (a false always, a reached
// unreachable). The simulator and a real run's counters both count by these.
inline bool assertion_held(UserSiteKind kind, bool condition) { return condition && kind != UserSiteKind::kUnreachable; }
inline bool assertion_failed(UserSiteKind kind, bool condition) {
  return kind == UserSiteKind::kUnreachable || (kind == UserSiteKind::kAlways && !condition);
}
// How many of `evaluated` evaluations of which `held` held failed.
inline uint64_t assertion_failures(UserSiteKind kind, uint64_t evaluated, uint64_t held) {
  return kind == UserSiteKind::kUnreachable ? evaluated : kind == UserSiteKind::kAlways ? evaluated - held : 0;
}

struct UserSite {
  std::string name;
  UserSiteKind kind = UserSiteKind::kAlways;
  std::string file;
  int line = 0;
};

// The user-code call running now on this thread: which computation, job and epoch, and what
// it processes.
struct UserCall {
  std::string_view computation;
  std::string_view job;  // "computation/Name/3"
  uint64_t epoch = 0;
  uint64_t message = 0;  // the message's id (0 for a timer)
  uint64_t key = 0;      // the message's or timer's key
  bool timer = false;
  int64_t now = 0;           // the epoch's system time
  uint64_t random_seed = 0;  // the epoch's seed
  // This epoch's ONCEFLOW_BUGGIFY calls so far, per site: a site's answers depend on its own
  // calls only, not on which other sites are enabled.
  std::map<uint32_t, uint32_t>* buggify_calls = nullptr;
  bool replay = false;  // re-executing a committed epoch: assertions are not counted again
  mutable uint32_t intercepted = 0;  // calls to the machine's clock or randomness answered so far
  // The epoch's reads of the store (null: none to fail). Once one failed, every later read
  // answers "no such row" and the epoch is given up, so what the function asserts after
  // that is not counted: it may hold for the store and fail only for what it was told.
  const Status* reads = nullptr;
};

// Who listens: the simulator, or a real run's counters. One per run, set for its duration.
class UserCodeHooks {
 public:
  virtual ~UserCodeHooks() = default;
  virtual void assertion(uint32_t site, bool condition, std::string_view details, const UserCall& call) = 0;
  virtual bool buggify(uint32_t site, const UserCall& call) = 0;
  virtual bool bug(uint32_t site) = 0;
  // True in a simulation: calls to the clock and OS randomness from user code are intercepted.
  virtual bool simulated() const = 0;
  // User code called `what` (e.g. "clock_gettime") of the machine during `call`.
  virtual void nondeterministic(std::string_view what, const UserCall& call) = 0;
  // Whether assertions evaluated by a re-execution (UserCall::replay) count: not where the run
  // counts its own calls (a re-execution would count them twice), but where the re-execution
  // is what is judged (`onceflow real --verify`).
  virtual bool counts_replays() const { return false; }
};

namespace user_code {

// The catalog: every site of this program, registered when it loads. The index is the id.
uint32_t register_site(const char* name, UserSiteKind kind, const char* file, int line);
std::vector<UserSite> sites();
const UserSite& site(uint32_t id);

void assertion(uint32_t site, bool condition, std::string details);
bool buggify(uint32_t site);
bool bug(uint32_t site);

// Where a call of the user's code was, for an assertion's first failure: "computation C, job J,
// epoch E, message M (key K)" (or "a timer" for the message).
std::string describe_call(const UserCall& call);

// What the exception being handled is, for a message: "std::runtime_error \"what\"" (its
// dynamic type, demangled), or "an exception of type T" when it is no std::exception.
// REQUIRES: called from a catch block.
std::string describe_current_exception();

// The hooks of the run on this thread, and the call running now (null: none).
UserCodeHooks* hooks();
const UserCall* call();

// Sets the run's hooks for this thread for its lifetime.
class HooksScope {
 public:
  explicit HooksScope(UserCodeHooks* hooks);
  ~HooksScope();
  HooksScope(const HooksScope&) = delete;
  HooksScope& operator=(const HooksScope&) = delete;

 private:
  UserCodeHooks* previous_;
};
// Marks the user-code call running for its lifetime.
class CallScope {
 public:
  explicit CallScope(const UserCall& call);
  ~CallScope();
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  const UserCall* previous_;
};
// No user-code call while it lives: around a wait (a store read inside a state client) in
// which other fibers run on this thread.
class CallPause {
 public:
  CallPause();
  ~CallPause();
  CallPause(const CallPause&) = delete;
  CallPause& operator=(const CallPause&) = delete;

 private:
  const UserCall* previous_;
};

// Whether the buggify site `site`, enabled on this run, fires at the call: a quarter of the
// calls, drawn from the epoch's seed, the site and the call's place in the epoch.
bool buggify_fires(uint32_t site, const UserCall& call);

// A site's name as a template argument (C++20), so that each site registers itself once.
template <size_t N>
struct SiteLiteral {
  constexpr SiteLiteral(const char (&text)[N]) { std::copy_n(text, N, chars); }  // NOLINT: implicit by design
  char chars[N];
};
template <SiteLiteral Name, UserSiteKind Kind, SiteLiteral File, int Line>
struct Site {
  static inline const uint32_t id = register_site(Name.chars, Kind, File.chars, Line);
};

}  // namespace user_code
}  // namespace onceflow

#define ONCEFLOW_SITE_ID_(name, kind) \
  (::onceflow::user_code::Site<name, ::onceflow::UserSiteKind::kind, __FILE__, __LINE__>::id)

#define ONCEFLOW_ALWAYS(cond, name, ...)                                                      \
  do {                                                                                        \
    const bool onceflow_holds_ = static_cast<bool>(cond);                                     \
    ::onceflow::user_code::assertion(ONCEFLOW_SITE_ID_(name, kAlways), onceflow_holds_,       \
                                     onceflow_holds_ ? std::string() : std::string(__VA_ARGS__)); \
  } while (false)
#define ONCEFLOW_SOMETIMES(cond, name) \
  ::onceflow::user_code::assertion(ONCEFLOW_SITE_ID_(name, kSometimes), static_cast<bool>(cond), std::string())
#define ONCEFLOW_REACHABLE(name) \
  ::onceflow::user_code::assertion(ONCEFLOW_SITE_ID_(name, kReachable), true, std::string())
#define ONCEFLOW_UNREACHABLE(name, ...) \
  ::onceflow::user_code::assertion(ONCEFLOW_SITE_ID_(name, kUnreachable), false, std::string(__VA_ARGS__))
#define ONCEFLOW_BUGGIFY(name) ::onceflow::user_code::buggify(ONCEFLOW_SITE_ID_(name, kBuggify))
#define ONCEFLOW_BUG(name) ::onceflow::user_code::bug(ONCEFLOW_SITE_ID_(name, kBug))
