// Helpers for tests that run library scenarios over many seeds and tally how they failed.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "cli/scenario.h"
#include "simulated/pipeline_run.h"
#include "tests/test_support.h"

namespace onceflow::testing {

inline const ComputationRegistry& shared_registry() {
  static const ComputationRegistry r = builtin_registry();
  return r;
}

// The pipeline run options of scenarios/<file>.
inline simulated::PipelineRunOptions options_of(const std::string& file) {
  auto s = cli::load_scenario(std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/" + file);
  EXPECT_TRUE(s.has_value()) << s.error().message();
  return s.has_value() ? s->pipeline : simulated::PipelineRunOptions{};
}

struct Tally {
  int runs = 0, passed = 0, duplicated = 0, lost = 0;
  std::vector<std::string> warnings;  // of the first run that gave any
  std::vector<std::string> failures;  // "seed N: check: detail"
};

// Seeds 1..seeds; a failing delivery verdict counts as duplicated (one MessageId visible
// twice: "duplicate") and/or lost ("missing").
inline Tally run_seeds(simulated::PipelineRunOptions o, int seeds) {
  Tally t;
  for (int seed = 1; seed <= seeds; ++seed) {
    o.seed = static_cast<uint64_t>(seed);
    const auto run = simulated::run_pipeline(o, shared_registry()).outcome;
    ++t.runs;
    t.passed += run.passed ? 1 : 0;
    if (t.warnings.empty()) t.warnings = run.warnings;
    for (const auto& v : run.verdicts) {
      if (v.passed) continue;
      t.failures.push_back(fmt::format("seed {}: {}: {}", seed, v.check, v.detail));
      if (v.detail.find("duplicate:") != std::string::npos) ++t.duplicated;
      if (v.detail.find("missing") != std::string::npos) ++t.lost;
    }
  }
  return t;
}

inline std::string first_failure(const Tally& t) { return t.failures.empty() ? "" : t.failures.front(); }

}  // namespace onceflow::testing
