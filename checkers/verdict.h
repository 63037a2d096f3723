// Verdict: what one checker concluded about one run.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace onceflow::checkers {

struct Verdict {
  std::string check;   // the invariant's name, e.g. "lease-fencing"
  bool passed = true;
  std::string detail;  // on failure: what broke, naming the ids involved
  // False when the run gave the check nothing to check (reported "n/a", never "pass"); such
  // a verdict does not fail the run.
  bool applicable = true;

  static Verdict pass(std::string check, std::string detail = "") {
    return Verdict{std::move(check), true, std::move(detail), true};
  }
  static Verdict fail(std::string check, std::string detail) {
    return Verdict{std::move(check), false, std::move(detail), true};
  }
  static Verdict not_applicable(std::string check, std::string why) {
    return Verdict{std::move(check), true, std::move(why), false};
  }
  std::string_view verdict_name() const { return !applicable ? "n/a" : passed ? "pass" : "fail"; }
};

// The MessageIds (runs of exactly 16 lowercase hex digits) that failing verdicts name in their
// details: what a report of the run should point at.
std::set<std::string> ids_named_by_failures(const std::vector<Verdict>& verdicts);
// What `state` says when an epoch started from another value of a row whose key none of its
// messages or timers had: the function read another key's row.
// The verdict a simulated run adds, first, when a call of a computation's function threw.
inline constexpr const char* kExceptionsCheck = "exceptions";
inline constexpr std::string_view kReadAnotherKeysRow = "its function read another key's row";
// When a computation's committed epochs are not what its own function gives (`re-execution`)
// and delivery, state, timers or ordering fail too, those failures may follow from the
// function: the line that says to read re-execution first (or `state`, when it says the
// function read another key's row), naming them; else "".
std::string read_first(const std::vector<Verdict>& verdicts);
// What read_first names: the failed checks that may follow from a failed re-execution,
// "delivery, state"; "" when re-execution held or none of them failed.
std::string following_reexecution(const std::vector<Verdict>& verdicts);
// When `state` says the function read another key's row and re-execution failed: the failed
// checks that may follow from that read, "re-execution, delivery"; else "".
std::string following_another_keys_row(const std::vector<Verdict>& verdicts);
// The keys failing verdicts name, as they write them: "(key 13, ...".
std::set<uint64_t> keys_named_by_failures(const std::vector<Verdict>& verdicts);

inline bool all_passed(const std::vector<Verdict>& verdicts) {
  for (const Verdict& v : verdicts) {
    if (!v.passed) return false;
  }
  return true;
}

}  // namespace onceflow::checkers

namespace onceflow::checkers {

// Same seed, same build: same run. Compares the trace hashes of two runs of one seed.
class DeterminismCheck {
 public:
  static constexpr const char* kName = "determinism";
  Verdict check(uint64_t seed, uint64_t first_hash, uint64_t second_hash, const std::string& replay) const;
  // The same, and the hashes of what the two runs committed and delivered (payloads included).
  Verdict check(uint64_t seed, uint64_t first_hash, uint64_t second_hash, uint64_t first_content,
                uint64_t second_content, const std::string& replay) const;
};

}  // namespace onceflow::checkers
