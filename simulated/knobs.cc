#include "simulated/knobs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

#include "core/env/random.h"

namespace onceflow::simulated {

const std::vector<KnobInfo> kKnobs = {
    {"epoch_period", "the scenario's x 0.25..2, at least 5ms", true},
    {"lease_ttl", "the scenario's x 0.5..2, at least 8 scheduling periods and 10 epoch periods", true},
    {"scheduling_period", "the scenario's x 0.5..2", true},
    {"epoch_batch_limit", "one of 4, 16, 64, 256"},
    {"heartbeat_interval", "100ms x 0.5..2 (a worker's Lease ping and its read of its assignments)", true},
    {"worker_timeout", "1s x 0.5..2, at least 4 heartbeat intervals (a worker's own Lease)", true},
    {"start_grace", "600ms x 0.5..2, at least 2 heartbeat intervals", true},
    {"rpc_timeout", "100ms x 0.5..3", true},
    {"dedup_cleanup_every_epochs", "one of 1, 2, 8, 32"},
    {"dedup_cleanup_rows", "one of 1, 16, 256, 4096"},
    {"timers_per_epoch", "one of 16, 64, 256"},
    {"timer_rows_known", "one of 1, 16, 1024 (the timer read-ahead)"},
    {"idle_epoch_periods", "one of 1, 4, 16"},
};

namespace {

struct Range {
  int64_t min;
  int64_t max;
};

// The range an applied value must be in.
Range range_of(std::string_view knob) {
  if (knob == "epoch_batch_limit") return {1, 100'000};
  if (knob == "dedup_cleanup_every_epochs" || knob == "idle_epoch_periods") return {1, 1'000};
  if (knob == "dedup_cleanup_rows" || knob == "timers_per_epoch" || knob == "timer_rows_known") return {1, 1'000'000};
  return {1'000, 3'600 * kSeconds};  // durations: 1ms to an hour
}

int64_t scaled(Random& rng, int64_t base, double lo, double hi) {
  const double factor = lo + (hi - lo) * rng.unit();
  return static_cast<int64_t>(static_cast<double>(base) * factor);
}

template <typename T, size_t N>
T one_of(Random& rng, const T (&choices)[N]) {
  return choices[rng.uniform(N)];
}

}  // namespace

KnobValues draw_knobs(uint64_t seed, const PipelineSpec& spec, const EngineOptions& engine) {
  Xoshiro256StarStar rng = Xoshiro256StarStar(seed).fork("knobs");
  KnobValues k;
  k["epoch_period"] = std::max<int64_t>(5 * kMillis, scaled(rng, spec.epoch_period_us, 0.25, 2));
  k["scheduling_period"] = scaled(rng, spec.scheduling_period_us, 0.5, 2);
  k["lease_ttl"] = scaled(rng, spec.lease_ttl_us, 0.5, 2);
  k["epoch_batch_limit"] = one_of(rng, {4, 16, 64, 256});
  k["heartbeat_interval"] = scaled(rng, engine.heartbeat_interval_us, 0.5, 2);
  k["worker_timeout"] = scaled(rng, engine.worker_timeout_us, 0.5, 2);
  k["start_grace"] = scaled(rng, engine.start_grace_us, 0.5, 2);
  k["rpc_timeout"] = scaled(rng, engine.rpc_timeout_us, 0.5, 3);
  k["dedup_cleanup_every_epochs"] = one_of(rng, {1, 2, 8, 32});
  k["dedup_cleanup_rows"] = one_of(rng, {1, 16, 256, 4096});
  k["timers_per_epoch"] = one_of(rng, {16, 64, 256});
  k["timer_rows_known"] = one_of(rng, {1, 16, 1024});
  k["idle_epoch_periods"] = one_of(rng, {1, 4, 16});
  assert(k.size() == kKnobs.size());
  keep_knob_rules(k);
  return k;
}

void keep_knob_rules(KnobValues& k) {
  const auto raise = [&k](const char* knob, int64_t floor) {
    const auto it = k.find(knob);
    if (it != k.end()) it->second = std::max(it->second, floor);
  };
  const auto value = [&k](const char* knob) { return k.count(knob) != 0 ? k.at(knob) : 0; };
  raise("lease_ttl", std::max(8 * value("scheduling_period"), 10 * value("epoch_period")));
  raise("worker_timeout", 4 * value("heartbeat_interval"));
  raise("start_grace", 2 * value("heartbeat_interval"));
}

Status apply_knobs(const KnobValues& values, PipelineSpec& spec, EngineOptions& engine) {
  for (const auto& [name, value] : values) {
    const std::string& knob = name;  // clang 14 cannot capture a structured binding
    const bool known = std::any_of(kKnobs.begin(), kKnobs.end(), [&](const KnobInfo& k) { return k.name == knob; });
    if (!known) return Status::invalid_argument(fmt::format("unknown knob '{}'", name.substr(0, 40)));
    const Range r = range_of(name);
    if (value < r.min || value > r.max) {
      return Status::invalid_argument(fmt::format("knob {}: {} is out of range [{}, {}]", name, value, r.min, r.max));
    }
    if (name == "epoch_period") spec.epoch_period_us = value;
    if (name == "lease_ttl") spec.lease_ttl_us = value;
    if (name == "scheduling_period") spec.scheduling_period_us = value;
    if (name == "epoch_batch_limit") spec.epoch_batch_limit = static_cast<int>(value);
    if (name == "heartbeat_interval") engine.heartbeat_interval_us = value;
    if (name == "worker_timeout") engine.worker_timeout_us = value;
    if (name == "start_grace") engine.start_grace_us = value;
    if (name == "rpc_timeout") engine.rpc_timeout_us = value;
    if (name == "dedup_cleanup_every_epochs") engine.dedup_cleanup_every_epochs = value;
    if (name == "dedup_cleanup_rows") engine.dedup_cleanup_rows = static_cast<size_t>(value);
    if (name == "timers_per_epoch") engine.timers_per_epoch = static_cast<size_t>(value);
    if (name == "timer_rows_known") engine.timer_rows_known = static_cast<size_t>(value);
    if (name == "idle_epoch_periods") engine.idle_epoch_periods = static_cast<int>(value);
  }
  return Status::ok();
}

}  // namespace onceflow::simulated
