// Helpers shared by the engine and pipeline tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/builtin.h"
#include "core/computation.h"
#include "core/spec.h"
#include "faults/fault.h"

namespace onceflow::testing {

// A registry with every built-in computation.
inline ComputationRegistry builtin_registry() {
  ComputationRegistry r;
  builtin::register_all(r);
  return r;
}

// scenarios/pipelines/<name>.yaml from the source tree.
inline PipelineSpec library_pipeline(const std::string& name) {
  auto spec = load_pipeline_spec(std::string(ONCEFLOW_SOURCE_DIR) + "/scenarios/pipelines/" + name + ".yaml");
  EXPECT_TRUE(spec.has_value()) << spec.error().message();
  return spec.has_value() ? *spec : PipelineSpec{};
}

// A fault of `kind` on `node` from `at` for `duration`, with probability `p`.
inline faults::Fault fault(faults::FaultKind kind, Micros at, Micros duration, std::string node = "", double p = 0) {
  faults::Fault f;
  f.kind = kind;
  f.at_us = at;
  f.duration_us = duration;
  f.node = std::move(node);
  f.intensity = p;
  return f;
}

}  // namespace onceflow::testing
