#include "core/workload.h"

#include <iterator>

#include "core/env/random.h"

namespace onceflow {
namespace {
constexpr const char* kWords[] = {"Apple", "banana", "CHERRY", "date", "Elderberry", "fig",
                                  "Grape", "honeydew", "KIWI", "lemon", "Mango", "nectarine"};
}  // namespace

std::vector<SourceInput> make_workload(const PipelineSpec& spec, const PipelineWorkload& w, uint64_t seed) {
  std::vector<SourceInput> inputs;
  Xoshiro256StarStar rng = Xoshiro256StarStar(seed).fork("workload");
  for (int i = 0; i < w.messages; ++i) {
    const SourceSpec& source = spec.sources[static_cast<size_t>(i) % spec.sources.size()];
    SourceInput in;
    in.source = source.name;
    in.partition = static_cast<int>(rng.uniform(static_cast<uint64_t>(source.partitions)));
    in.key = rng.uniform(static_cast<uint64_t>(w.keys));
    in.payload = kWords[rng.uniform(std::size(kWords))];
    in.write_ts = (i + 1) * w.interval_us;
    in.event_ts = in.write_ts - rng.uniform_range(0, kMillis);
    inputs.push_back(std::move(in));
  }
  return inputs;
}

}  // namespace onceflow
