// The test workload: input messages for a pipeline's sources, drawn from a seed.
//
// Used by the simulator's producer (faults/pipeline_world.h) and by `onceflow real`'s
// producer alike, so that one seed means one workload in both worlds.
#pragma once

#include <cstdint>
#include <vector>

#include "core/env/clock.h"
#include "core/reference.h"
#include "core/spec.h"

namespace onceflow {

struct PipelineWorkload {
  int messages = 200;
  int keys = 16;
  Micros interval_us = 5 * kMillis;  // between two writes to the source queues
};

// The input messages of a workload, in write order: source round-robin, partition, key and
// word drawn from `seed`; write_ts every interval_us.
std::vector<SourceInput> make_workload(const PipelineSpec& spec, const PipelineWorkload& workload, uint64_t seed);

}  // namespace onceflow
