#include "checkers/verdict.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace onceflow::checkers {

std::set<std::string> ids_named_by_failures(const std::vector<Verdict>& verdicts) {
  std::set<std::string> ids;
  const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  for (const auto& v : verdicts) {
    if (v.passed) continue;
    const std::string& d = v.detail;
    for (size_t i = 0; i < d.size();) {
      size_t j = i;
      while (j < d.size() && hex(d[j])) ++j;
      if (j - i == 16) ids.insert(d.substr(i, 16));
      i = j == i ? i + 1 : j;
    }
  }
  return ids;
}

std::set<uint64_t> keys_named_by_failures(const std::vector<Verdict>& verdicts) {
  std::set<uint64_t> keys;
  constexpr std::string_view kOpen = "(key ";
  for (const auto& v : verdicts) {
    if (v.passed) continue;
    const std::string& d = v.detail;
    for (size_t at = d.find(kOpen); at != std::string::npos; at = d.find(kOpen, at + 1)) {
      uint64_t key = 0;
      const char* begin = d.data() + at + kOpen.size();
      const auto [end, ec] = std::from_chars(begin, d.data() + d.size(), key);
      if (ec == std::errc() && end != begin && end < d.data() + d.size() && *end == ',') keys.insert(key);
    }
  }
  return keys;
}

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

Verdict DeterminismCheck::check(uint64_t seed, uint64_t first_hash, uint64_t second_hash, uint64_t first_content,
                                uint64_t second_content, const std::string& replay) const {
  if (first_hash != second_hash) return check(seed, first_hash, second_hash, replay);
  if (first_content == second_content) {
    return Verdict::pass(kName, fmt::format("seed {} ran twice with trace_hash {:016x} and the same payloads", seed,
                                            first_hash));
  }
  return Verdict::fail(kName, fmt::format("seed {} ran twice with one trace but other payloads (content hashes {:016x} "
                                          "and {:016x}): a computation reads the wall clock, OS randomness or an "
                                          "address into what it emits{}",
                                          seed, first_content, second_content,
                                          replay.empty() ? "" : " — replay: " + replay));
}

std::string following_reexecution(const std::vector<Verdict>& verdicts) {
  bool reexecution = false;
  std::string others;
  for (const auto& v : verdicts) {
    if (v.passed) continue;
    if (v.check == "re-execution") {
      reexecution = true;
    } else if (v.check == "delivery" || v.check == "state" || v.check == "timers" || v.check == "ordering") {
      others += fmt::format("{}{}", others.empty() ? "" : ", ", v.check);
    }
  }
  return reexecution ? others : "";
}

std::string following_another_keys_row(const std::vector<Verdict>& verdicts) {
  const std::string others = following_reexecution(verdicts);
  const bool another_key = std::any_of(verdicts.begin(), verdicts.end(), [](const Verdict& v) {
    return !v.passed && v.check == "state" && v.detail.find(kReadAnotherKeysRow) != std::string::npos;
  });
  if (others.empty() || !another_key) return "";
  std::string rest = "re-execution";
  for (const auto& v : verdicts) {
    if (!v.passed && v.check != "state" && v.check != "re-execution" && others.find(v.check) != std::string::npos) {
      rest += ", " + v.check;
    }
  }
  return rest;
}

std::string read_first(const std::vector<Verdict>& verdicts) {
  const std::string others = following_reexecution(verdicts);
  if (others.empty()) return "";
  if (const std::string rest = following_another_keys_row(verdicts); !rest.empty()) {
    return fmt::format("state: a computation's function read the row of a key none of its epoch's messages or timers "
                       "had, which another partition's job may write at the same time, so what it read is not what the "
                       "committed history gives; the {} failures may follow from it (docs/guarantees.md, \"The oracle\")",
                       rest);
  }
  return fmt::format(
      "re-execution: a committed epoch is not what its computation's function gives on what it took (a function that "
      "depends on more than its input, its state, its timers, current_timestamp() and random(), such as a member "
      "variable or another key's state; or an engine that named its outputs wrongly); the {} failures may follow from it "
      "(docs/guarantees.md, \"The oracle\")",
      others);
}

}  // namespace onceflow::checkers
