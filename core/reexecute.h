// Reexecution: the committed history of a pipeline's computations, run again.
//
// Flow promises that exactly one attempt of each epoch is applied, and that state, internal
// streams and outputs are those of the applied attempts. So the oracle for a run is its own
// committed history: every committed epoch of every computation, in commit order, handed to
// the computation's own function again (a fresh instance per job, from empty state, with the
// epoch's messages in the order it took them, the timers it fired where it fired them, its
// system time and its random seed, and no faults). What the function gives there is what
// the engine must have committed: the same outputs (named as core/emitted.h names them), the
// same timers, and state that the next epoch starts from. Whatever order the engine chose
// for messages from different partitions, or when it chose to fire a timer, the re-execution
// follows it; it only holds the engine to what it applied.
//
// Epochs are given one at a time, in the store's commit order across the whole pipeline (an
// external table may be shared by several computations), so a caller need not keep the whole
// history. Single-threaded; no I/O.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/computation.h"
#include "core/engine.h"
#include "core/spec.h"

namespace onceflow {

// One committed epoch of a computation partition, as recorded.
struct CommittedEpoch {
  std::string job;          // "computation/Name/3"
  std::string computation;  // Name
  Micros now = 0;
  uint64_t random_seed = 0;
  std::vector<Message> consumed;  // in the order processed
  std::vector<EngineObserver::Epoch::FiredTimer> timers_fired;
  std::vector<EngineObserver::Epoch::StateRead> state_reads;
};

// What the function gives for it.
struct ReexecutedEpoch {
  // Messages emitted: id, key, stream, event time and payload (times a job stamps are not
  // the function's, and stay 0; a swift batch's are its first parent's).
  std::vector<Message> produced;
  std::vector<std::string> timer_rows_created;  // timer rows within the partition
  // The re-execution's value of each of the epoch's state reads before it ran.
  std::vector<std::optional<std::string>> state_before;
  // What the recorded epoch did that its re-execution cannot: fire a timer it does not hold.
  std::vector<std::string> problems;
};

// What a real run records of a committed computation epoch (tables::history, one row per
// epoch that took a message or fired a timer): its layout, system time and seed, the messages it took
// by id with their system times, the timers it fired, and a reading of its node's clock as it
// committed (rows written before that reading was kept have none). The messages themselves are found
// again by re-executing what produced them.
struct EpochHistoryRow {
  // The layout the job ran with: a key moves to another partition only with a new layout,
  // after the old one drained, so (layout, partition, epoch) orders one key's epochs.
  uint64_t layout_version = 0;
  Micros now = 0;
  uint64_t random_seed = 0;
  std::vector<std::pair<MessageId, Micros>> consumed;  // (id, system time), in order
  std::vector<EngineObserver::Epoch::FiredTimer> timers_fired;  // watermark not kept (0)
  Micros clock_at_commit = EngineObserver::Epoch::kNoClockReading;  // not past `now` if not kept
  // outputs_digest of what the epoch produced (rows written before it was kept have none).
  std::optional<uint64_t> outputs_digest;
  // version_tag of each message taken, beside `consumed` (empty in rows written before they
  // were kept): an at-least-once stage may commit one id in several versions, and these tell
  // which one the epoch took.
  std::vector<uint16_t> version_tags;
};
std::string encode_history_row(const EngineObserver::Epoch& e);
std::optional<EpochHistoryRow> decode_history_row(std::string_view bytes);
// A digest of an epoch's outputs as the re-execution check compares them: each MessageId's
// first message (key, stream, event time, payload), in any order.
uint64_t outputs_digest(const std::vector<Message>& produced);
// A short hash of a message's key, stream, event time and payload, telling apart the versions
// of one MessageId.
uint16_t version_tag(const Message& m);

class Reexecution {
 public:
  // REQUIRES: every computation's function of `spec` is registered in `registry`.
  Reexecution(const PipelineSpec& spec, const ComputationRegistry& registry);
  ~Reexecution();

  // Re-executes the next committed epoch. REQUIRES: e.computation is a computation of the spec.
  ReexecutedEpoch next(const CommittedEpoch& e);

  // The state and external tables now: table -> key (16 hex digits) -> value; no empty table.
  std::map<std::string, std::map<std::string, std::string>> tables() const;
  // The timers held now, set and not yet fired: computation -> timer row (within a partition,
  // as timer_row gives it) -> its value (describe_timer_value), for every computation of the
  // spec with timer streams.
  std::map<std::string, std::map<std::string, std::string>> timers() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace onceflow
