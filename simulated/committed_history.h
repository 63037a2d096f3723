// The committed history as the oracle: re-executes a recorded history's committed computation
// epochs (core/reexecute.h) and fills in what the checkers hold the run to.
//
// Shared by the simulator (simulated/pipeline_run.cc) and by whatever else records a history, so
// that every verdict on a run comes from the same oracle.
#pragma once

#include "checkers/history.h"
#include "checkers/records.h"
#include "core/computation.h"
#include "core/message.h"
#include "core/spec.h"

namespace onceflow::simulated {

using checkers::record_of;  // checkers/records.h

// Fills `h` from its committed epochs (h.epochs, in commit order) and `source_messages` (every
// input the sources hold): each computation epoch's expected_* fields and the re-execution's
// tables, h.source_inputs, h.stream_consumers, and each sink expectation's `expected` (h.sinks
// must name every sink of `spec`). Sets h.reexecuted.
// REQUIRES: every computation's function of `spec` is registered in `registry`.
void reexecute_history(const PipelineSpec& spec, const ComputationRegistry& registry,
                       std::vector<Message> source_messages, checkers::PipelineHistory& h);

}  // namespace onceflow::simulated
