#include "core/workload.h"

#include <algorithm>
#include <iterator>

#include "core/env/random.h"

namespace onceflow {
namespace {
constexpr const char* kWords[] = {"Apple", "banana", "CHERRY", "date", "Elderberry", "fig",
                                  "Grape", "honeydew", "KIWI", "lemon", "Mango", "nectarine"};
}  // namespace

std::vector<SourceInput> make_workload(const PipelineSpec& spec, const PipelineWorkload& w, uint64_t seed) {
  WorkloadStream stream(spec, w, seed);
  std::vector<SourceInput> inputs;
  inputs.reserve(stream.size());
  for (uint64_t k = 0; k < stream.size(); ++k) inputs.push_back(stream.at(k));
  return inputs;
}

WorkloadStream::WorkloadStream(const PipelineSpec& spec, const PipelineWorkload& w, uint64_t seed,
                               const std::function<bool(const SourceSpec&)>& keep)
    : spec_(spec), w_(w), seed_(seed), rng_(0) {
  const uint64_t slots = spec.sources.size();
  for (uint64_t s = 0; s < slots; ++s) {
    if (!keep || keep(spec.sources[s])) kept_.push_back(s);
  }
  const auto messages = static_cast<uint64_t>(std::max(w.messages, 0));
  for (const uint64_t s : kept_) size_ += messages / slots + (s < messages % slots ? 1 : 0);
  restart();
}

void WorkloadStream::restart() {
  rng_ = Xoshiro256StarStar(seed_).fork("workload");
  next_ = 0;
}

void WorkloadStream::generate_next() {
  const SourceSpec& source = spec_.sources[next_ % spec_.sources.size()];
  current_.source = source.name;
  current_.partition = static_cast<int>(rng_.uniform(static_cast<uint64_t>(source.partitions)));
  current_.key = rng_.uniform(static_cast<uint64_t>(w_.keys));
  current_.payload = kWords[rng_.uniform(std::size(kWords))];
  current_.write_ts = static_cast<Micros>(next_ + 1) * w_.interval_us;
  current_.event_ts = current_.write_ts - rng_.uniform_range(0, w_.event_disorder_us);
  ++next_;
}

const SourceInput& WorkloadStream::at(uint64_t k) {
  // The k-th kept input is in round k / |kept|, at the slot kept_[k % |kept|].
  const uint64_t index = k / kept_.size() * spec_.sources.size() + kept_[k % kept_.size()];
  if (index + 1 < next_) restart();  // before the input current_ holds
  while (next_ <= index) generate_next();
  return current_;
}

}  // namespace onceflow
