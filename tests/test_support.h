// Helpers shared by the engine and pipeline tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>

#include "core/builtin.h"
#include "core/computation.h"
#include "core/message.h"
#include "core/outbox.h"
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

// Outbox rows with seqNos from..to, as a sink job would hand them over: message s has id
// id_base + s, key s and payload "m<s>"; row `batch_end` closes a batch (0: none does).
inline std::vector<OutboxRow> outbox_rows(uint64_t from, uint64_t to, uint64_t id_base = 0, uint64_t batch_end = 0) {
  std::vector<OutboxRow> out;
  for (uint64_t s = from; s <= to; ++s) {
    Message m;
    m.id = id_base + s;
    m.key = s;
    m.payload = fmt::format("m{}", s);
    out.push_back({s, encode_message(m), s == batch_end});
  }
  return out;
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
