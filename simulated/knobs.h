// Knobs: the engine's timing and size parameters, drawn per seed from documented ranges around
// a scenario's values (FoundationDB's buggified knobs), so that an exploration reaches the
// paths that only odd timings and tiny or huge batches reach; or set to explicit values.
//
// A knob's value is an integer (microseconds for durations). Drawn knobs come from the seed
// alone (a generator forked for them), so a replay of the seed gets them back; a run reports
// the values it used.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/engine.h"
#include "core/env/status.h"
#include "core/spec.h"

namespace onceflow::simulated {

using KnobValues = std::map<std::string, int64_t>;

struct KnobInfo {
  std::string_view name;
  std::string_view drawn;  // how a random value is drawn
  bool duration = false;   // in microseconds; written "250ms" in a scenario
};
// Every knob, in the order they are drawn.
extern const std::vector<KnobInfo> kKnobs;

// Draws every knob from `seed` around the values `spec` and `engine` have.
KnobValues draw_knobs(uint64_t seed, const PipelineSpec& spec, const EngineOptions& engine);
// Raises the knobs that must outlast others to their floors: a Lease outlives 8 scheduling
// periods and 10 epoch periods, a worker's timeout 4 heartbeats, the start grace 2. Drawn
// knobs keep them; a knob changed on its own (explore --guided) is made to.
void keep_knob_rules(KnobValues& values);
// Sets the knobs `values` names in `spec` and `engine`. kInvalidArgument for an unknown name or
// a value out of its range (named, with the range).
Status apply_knobs(const KnobValues& values, PipelineSpec& spec, EngineOptions& engine);

}  // namespace onceflow::simulated
