// The test workload: input messages for a pipeline's sources, drawn from a seed.
//
// Used by the simulator's producer (simulated/pipeline_world.h) and by `onceflow real`'s
// producer alike, so that one seed means one workload in both worlds.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/env/clock.h"
#include "core/env/random.h"
#include "core/reference.h"
#include "core/spec.h"

namespace onceflow {

struct PipelineWorkload {
  int messages = 200;
  int keys = 16;
  Micros interval_us = 5 * kMillis;  // between two writes to the source queues
  // An input's event time is up to this much before its write: the disorder of event times
  // (late data, across sources and partitions) that event-time watermarks and timers meet.
  Micros event_disorder_us = kMillis;
};

// The input messages of a workload, in write order: source round-robin, partition, key and
// word drawn from `seed`; write_ts every interval_us.
std::vector<SourceInput> make_workload(const PipelineSpec& spec, const PipelineWorkload& workload, uint64_t seed);

// The same inputs one at a time, without holding them all (a million-message real run reads
// from this), optionally only those of the sources `keep` accepts. at(k) is the k-th kept
// input, equal to the k-th kept element of make_workload; going forward is cheap, going
// back starts over from the seed.
class WorkloadStream {
 public:
  WorkloadStream(const PipelineSpec& spec, const PipelineWorkload& workload, uint64_t seed,
                 const std::function<bool(const SourceSpec&)>& keep = {});

  uint64_t size() const { return size_; }
  const SourceInput& at(uint64_t k);

 private:
  void restart();
  void generate_next();  // current_ becomes input number next_, next_ advances

  const PipelineSpec& spec_;
  PipelineWorkload w_;
  uint64_t seed_;
  std::vector<uint64_t> kept_;  // the round-robin slots of the kept sources
  uint64_t size_ = 0;
  Xoshiro256StarStar rng_;
  uint64_t next_ = 0;  // the workload index generate_next() produces
  SourceInput current_;
};

}  // namespace onceflow
