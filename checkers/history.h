// The history of one simulated pipeline run, as plain data, for the checkers.
//
// Recorded by the simulator (simulated/pipeline_run.cc) from the engine's observer, the store's
// commit log and Lease records, and the sink targets' logs; the checkers read only this.
// Times are virtual microseconds; store times are on the store's clock (never skewed).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace onceflow {
enum class SinkDelivery : uint8_t;  // core/spec.h
}

namespace onceflow::checkers {

enum class Guarantee { kExactlyOnce, kAtLeastOnce, kAtMostOnce };
// The guarantee a sink is held to for what it promises (core/spec.h: promised_delivery).
Guarantee guarantee_of(SinkDelivery promised);

struct MessageRecord {
  uint64_t id = 0;
  uint64_t key = 0;
  std::string stream;
  int64_t alignment_ts = 0;
  std::string payload;
  int64_t event_ts = 0;
  int64_t system_ts = 0;
};

// A timer an epoch fired: its row within the partition ("<trigger>/<key>/<stream>[/<unique>]"),
// the creation that set it, the timer, how many of the epoch's consumed messages were
// processed before it, and the watermark of its timer stream it was due by.
struct FiredTimerRecord {
  std::string row;
  uint64_t creation = 0;
  uint64_t key = 0;
  int64_t trigger_ts = 0;
  int64_t event_ts = 0;
  std::string stream;
  size_t after_consumed = 0;
  int64_t watermark = 0;
};

// A state row as an epoch read it before writing it (the state it started from), or as the
// re-execution holds it then.
struct StateReadRecord {
  std::string table;
  uint64_t key = 0;
  bool present = false;
  std::string value;
  friend bool operator==(const StateReadRecord&, const StateReadRecord&) = default;
};

struct EpochRecord {
  std::string job;          // "computation/Name/3"
  std::string computation;  // the job's computation, source or sink name
  bool swift = false;
  uint64_t lease = 0;
  uint64_t version = 0;     // the store's commit version
  int64_t commit_time = -1; // store time of the commit (-1: unknown)
  std::vector<MessageRecord> consumed;  // in processing order
  std::vector<MessageRecord> produced;
  std::vector<std::string> timers_fired;    // "<timers table>:<row key>", fired and deleted
  std::string node;                         // the worker that ran it
  std::vector<std::string> timers_created;  // as timers_fired: rows created (merges create none)
  uint64_t layout_version = 0;  // the layout (core/layout.h) the job ran with
  // What else its function read: the epoch's number, system time and random seed; the timers
  // it fired, where; the state it read.
  uint64_t epoch = 0;
  int64_t now = 0;
  // The furthest its node's clock had read when it committed (INT64_MAX: unknown): `now`, a
  // reading of that clock, cannot be past it.
  int64_t clock_bound = INT64_MAX;
  uint64_t random_seed = 0;
  std::vector<FiredTimerRecord> fired;
  std::vector<StateReadRecord> state_reads;
  // The re-execution of this epoch from the committed history (core/reexecute.h), for
  // computation epochs of a history that was re-executed: what the function gives, the state
  // it finds for each of state_reads, and what the recorded epoch did that it cannot redo.
  bool reexecuted = false;
  std::vector<MessageRecord> expected_produced;
  std::vector<std::string> expected_timers_created;  // rows within the partition
  std::vector<StateReadRecord> expected_state;
  std::vector<std::string> reexecution_problems;
  // A real run's epoch whose outputs were compared with its re-execution's by their digest.
  bool outputs_compared = false;
};

struct DeliveryRecord {  // a message the target made visible
  std::string sink;
  std::string producer_job;  // empty for at-most-once sends
  uint64_t lease = 0;        // the delivering job's Lease (0: unknown)
  int64_t time = 0;
  MessageRecord message;
  // Kafka transactions: the producer epoch that wrote it and the one whose commit made it
  // visible (-1: not transactional).
  int64_t written_epoch = -1;
  int64_t committed_epoch = -1;
  // The writer's transaction the record was meant for and the one whose EndTxn committed it
  // (-1: not transactional), and whether the writer aborted the former.
  int64_t txn = -1;
  int64_t committed_txn = -1;
  bool txn_aborted_by_writer = false;
  // Made visible by the network's duplicate of the request that carried it (a `duplicate`
  // fault), not by a send of the engine's.
  bool network_copy = false;
};

// An async sink's delivery callback: the sink said the target holds message `id`, after
// epoch `version` of `job` (0: none) acknowledged it.
struct ConfirmationRecord {
  std::string sink;
  std::string job;
  uint64_t id = 0;
  uint64_t version = 0;
  int64_t time = 0;
};

// A controller's commit of its state, applied by the store.
struct ControllerCommit {
  std::string node;
  uint64_t lease = 0;        // the controller's own Lease
  uint64_t version = 0;
  int64_t commit_time = -1;  // store time
  bool stores_assignments = false;
  std::map<std::string, uint64_t> job_leases;  // job -> Lease, as the commit stored them
};

// A change of the pipeline's state as a controller stored it, with the rows the store still
// held in flight right after that commit (looked at only for "stopped" and "completed").
struct StateChangeRecord {
  std::string state;  // "working", "paused", "draining", "stopped", "completed"
  uint64_t version = 0;
  int64_t commit_time = 0;             // store time
  std::vector<std::string> in_flight;  // "<table>:<key>", at most 8
};
// A new layout (partition counts, spec or settings) as a controller stored it.
struct LayoutChangeRecord {
  uint64_t layout_version = 0;
  uint64_t version = 0;     // the store's commit version
  int64_t commit_time = 0;  // store time
};
// A timer row a controller moved to another partition (a repartition), applied at `version`:
// the row `from` ends without firing and `to` holds the same timer from then on.
struct TimerMoveRecord {
  std::string from;  // "<timers table>:<row key>"
  std::string to;
  uint64_t version = 0;
};
struct LeaseSpan {
  int64_t started_at = 0;
  int64_t ended_at = -1;  // -1: still active at the end of the run
};

struct SinkExpectation {
  std::string sink;
  Guarantee guarantee = Guarantee::kExactlyOnce;
  // What the reference run delivered: (key, payload), sorted. Used only by a history that was
  // not re-executed (PipelineHistory::reexecuted); else `expected` decides.
  std::vector<std::pair<uint64_t, std::string>> reference;
  // Every message the re-executed history puts on the sink's stream, by MessageId (an
  // at-least-once-consistent producer may give one id several payloads: each is listed).
  std::vector<MessageRecord> expected;
  // The sink writes each epoch's messages before the epoch commits (a synchronous sink): its
  // outputs are visible before their commit by design, and repeated after a failed one.
  bool writes_before_commit = false;
  // The sink's stream may carry one MessageId again in a later take (core/spec.h:
  // repeats_late, downstream of an at_least_once_consistent computation). An at-most-once sink
  // then sends a message at most once per take: as often as its committed epochs took it.
  bool repeats_late = false;
};

// A consumer of a stream: a computation or sink by name, and whether it takes each message
// in exactly one committed epoch (exactly-once computations, deduplicating sinks) or in at
// least one (swift maps, at-least-once-consistent computations, sinks that do not deduplicate).
struct StreamConsumer {
  std::string job_prefix;  // "computation/Name/" or "sink/Name/"
  bool exactly_once = true;
};

// An `always` or `unreachable` assertion of the user's code (core/user_code.h): every such site
// of the program, with how often the run evaluated (reached) it and how often it failed, and
// where it failed first.
struct UserAssertionRecord {
  std::string name;
  std::string kind;  // "always" or "unreachable"
  uint64_t evaluated = 0;
  uint64_t failed = 0;
  std::string first_failure;  // "computation C, job J, epoch E, message M on N at T: details"
};

struct PipelineHistory {
  uint64_t seed = 0;
  std::string replay_command;
  // The history was re-executed (core/reexecute.h): the oracle is the committed history, and
  // the fields below are filled; else the delivery and state checks fall back to the
  // reference run.
  bool reexecuted = false;
  // The epochs' produced messages carry the alignment timestamps the engine gave them (the
  // simulator's history; a real one's are re-executed, and the function gives no times).
  bool produced_times_recorded = false;
  // The epochs' produced messages and created timers are what the run committed (the
  // simulator's history). A real run records neither: its epochs' outputs are what their
  // re-execution gives, so of an epoch only the time it was told and what its re-execution
  // cannot redo are checked.
  bool outputs_recorded = true;
  std::vector<MessageRecord> source_inputs;  // every message the sources hold, by MessageId
  // Simulated runs: beside each source input, the queue or topic partition it is in (from 1),
  // whose inputs its source reads in the order source_inputs lists them; 0 where not so read.
  std::vector<uint32_t> source_input_lanes;
  // Simulated runs that never drained: the ids of the messages still in a stream at the end,
  // sorted (what a consumer may still take).
  std::vector<uint64_t> in_streams_at_end;
  // And the ids in the sinks' outboxes (committed by the sink, not acknowledged by its target)
  // or in an at-most-once sink's queue in memory (taken, not sent yet).
  std::vector<uint64_t> in_outboxes_at_end;
  std::map<std::string, std::vector<StreamConsumer>> stream_consumers;  // stream -> consumers
  std::map<std::string, std::map<std::string, std::string>> reexecuted_tables;  // as `tables`
  // computation -> the timer rows its re-execution holds at the end (set, not fired), without
  // their partition, each with its value described (event time, creation); every computation
  // with timer streams is named
  std::map<std::string, std::map<std::string, std::string>> reexecuted_timers;
  std::vector<EpochRecord> epochs;  // in commit-version order
  std::vector<DeliveryRecord> deliveries;
  std::vector<ConfirmationRecord> confirmations;
  std::map<std::string, std::vector<std::pair<uint64_t, std::string>>> sink_outputs;  // sorted
  std::vector<SinkExpectation> sinks;
  std::map<std::string, std::set<uint64_t>> counted_drops;  // at-most-once: sink -> dropped ids
  // At-most-once: sink -> ids whose one send started and got no answer (the target may hold
  // them or not).
  std::map<std::string, std::set<uint64_t>> in_doubt;
  // State and external tables: table -> key -> value, at the end and in the reference.
  std::map<std::string, std::map<std::string, std::string>> tables;
  std::map<std::string, std::map<std::string, std::string>> reference_tables;
  // Tables of at-least-once-consistent computations, not compared with the reference.
  std::set<std::string> uncompared_tables;
  std::map<uint64_t, LeaseSpan> leases;
  std::vector<ControllerCommit> controller_commits;  // in version order
  std::vector<StateChangeRecord> state_changes;      // in version order
  std::vector<TimerMoveRecord> timer_moves;           // in version order
  std::vector<LayoutChangeRecord> layout_changes;     // in version order
  // How long after a new layout is stored jobs of an older one may still commit: the controller
  // ends their Leases right after it pinged them in its next cycle, so at worst they run out
  // a Lease TTL after a last ping (one Lease TTL and 4 scheduling periods).
  int64_t layout_grace = 0;
  // Reshards of sharded sink targets, in time order, and the partitions each such sink had
  // in the layout in force at the end.
  struct TargetReshard {
    std::string sink;
    int tablets = 0;
    int64_t time = 0;
  };
  std::vector<TargetReshard> target_reshards;
  std::map<std::string, int> sink_partitions_at_end;
  std::vector<std::string> pending_timers;  // "<timers table>:<row key>" still stored at the end
  std::map<std::string, std::string> pending_timer_values;  // as pending_timers -> its value described
  // The timer streams whose watermark is the event time, "<computation>/<timer stream>": such
  // a timer may fire only once its job has taken a message at least as new as its trigger.
  std::set<std::string> event_time_timer_streams;
  // The calm: faults lifted, every input written and the operator's last state request made
  // (the latest of them); and when the faults alone were lifted.
  int64_t heal_at = 0;
  int64_t faults_lifted_at = 0;
  int64_t liveness_bound = 0;
  // The latest trigger of the system-time timers the function had set beyond the bound, which
  // the run waited for (-1: none): the bound runs from it too.
  int64_t timers_due_at = -1;
  int64_t drained_at = -1;  // -1: never drained, or a real run's history (no simulated time)
  std::string undrained;    // never drained: what it still waited for at the bound
  // The operator's last state request, when it asked for a stop or a pause (the state and when
  // it asked): the scenario's own, as faults are lifted with a restart; the run then reads no
  // more input, and is not asked to drain.
  std::string left_at_rest;
  int64_t left_at_rest_at = -1;
  // A simulated run that did not drain within its bound: what it had not done yet is late,
  // not lost (liveness fails it). Never true of the history `real --verify` reads, whose run
  // ended before.
  bool never_drained() const { return !undrained.empty(); }
  std::vector<std::string> trace_tail;  // the last trace lines, for violation reports
  std::vector<UserAssertionRecord> user_assertions;
  // Calls of the user's code to the machine's clock or randomness, intercepted and answered
  // from the simulation: "clock_gettime from computation C (job J)", distinct, at most 16.
  std::vector<std::string> nondeterministic_calls;
};

}  // namespace onceflow::checkers
