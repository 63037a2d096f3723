// The reference result: the pipeline's functions run once, in order, with no faults.
//
// Source messages are taken in write order; each message is handed to its stream's consumer
// and what it emits joins the back of one queue; when the queue is empty the earliest timer
// fires (time jumps to its trigger). What the sinks received and what the state and external
// tables hold at the end is what a faultless exactly-once run must produce too (as a
// multiset: no global order is promised).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/computation.h"
#include "core/spec.h"

namespace onceflow {

struct SourceInput {
  std::string source;
  int partition = 0;
  uint64_t key = 0;
  std::string payload;
  Micros event_ts = 0;
  Micros write_ts = 0;
  std::string table;  // a queue source's table when not the source's own (an input swapped in)
  std::string origin;  // then the origin its ids are named under (source_origin of the new spec)
};

struct PipelineResult {
  // sink -> the (key, payload) of every message it delivered, sorted.
  std::map<std::string, std::vector<std::pair<uint64_t, std::string>>> sinks;
  // state or external table -> key (16 hex digits) -> value.
  std::map<std::string, std::map<std::string, std::string>> tables;
};

PipelineResult run_reference(const PipelineSpec& spec, const ComputationRegistry& registry,
                             const std::vector<SourceInput>& inputs);

}  // namespace onceflow
