// Shared pieces of the engine: job identity, table layout, bug switches, the observer, and
// the environment a controller or worker runs in.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/computation.h"
#include "core/connectors.h"
#include "core/env/network.h"
#include "core/env/random.h"
#include "core/env/runtime.h"
#include "core/env/store.h"
#include "core/message.h"
#include "core/probes.h"
#include "core/spec.h"

namespace onceflow {

// --- Jobs ------------------------------------------------------------------------------

enum class JobKind : uint8_t { kSource, kComputation, kSink };

struct JobId {
  JobKind kind = JobKind::kComputation;
  std::string name;
  int partition = 0;

  std::string str() const;  // "source/events/0", "computation/StateKeeper/1", "sink/out/0"
  static std::optional<JobId> parse(std::string_view text);
  friend auto operator<=>(const JobId&, const JobId&) = default;
};

// Every job of the pipeline, in a stable order.
std::vector<JobId> all_jobs(const PipelineSpec& spec);

// The partition a key belongs to among `partitions`: the hash space is cut into `partitions`
// equal ranges, in order, and a key goes to the range its hash falls in. Changing the count
// splits and merges ranges: each new partition's keys come from the old partitions whose
// ranges overlap its own.
int key_partition(uint64_t key, int partitions);

// --- Tables --------------------------------------------------------------------------------
// The store tables the engine uses. Keys that hold numbers use fixed-width hex so that key
// order is numeric order.
namespace tables {
inline constexpr const char* kController = "controller";  // core/controller.h: leader, assignments
// In kController while the pipeline drains: the cut (i64), also written into every source's
// meta row. Sources read no row as new as it, and their watermarks reach it once they have
// read every row older (core/controller.h).
inline constexpr const char* kDrainCutKey = "drain_cut";
inline constexpr const char* kWorkers = "workers";        // key: worker name (core/controller.h)
inline constexpr const char* kJobMeta = "job_meta";  // key: JobId::str()
inline constexpr const char* kSourceOffsets = "source_offsets";  // key: source_origin()/partition
// The time before which a source queue partition will get no more rows (written by the
// queue's producer side); key: table/partition (the queue's table, table_of()), value: i64.
inline constexpr const char* kQueueHeads = "queue_heads";
std::string queue(std::string_view table);  // a queue source's table_of(); rows "<p>/<offset>"
std::string stream(std::string_view stream);  // rows "<p>/<ts>/<producer>/<epoch>" (core/stream_rows.h)
std::string input_messages(std::string_view computation);  // rows "<p>/<id>"
std::string compact_input_messages(std::string_view computation);  // rows "<p>/<key>"
// A computation's timers of one timer stream: rows "<p>/<trigger>/<key>/<stream>[/<unique>]"
// in trigger order, so that each stream's due timers are at the head of its own table
// whatever the others' watermarks are.
std::string timers(std::string_view computation, std::string_view timer_stream);
// Every timer table of computation `c`, one per timer stream, in the spec's order.
std::vector<std::string> timers(const ComputationSpec& c);
std::string outbox(std::string_view sink);  // rows "<p>/<first seqno>" (core/outbox.h)
std::string history(std::string_view computation);  // rows "<p>/<epoch>" (core/reexecute.h)
// A static table (or a service log's sorted table): rows "<p>/<row index>", values as queue rows.
std::string static_table(std::string_view table);
std::string sync_sink(std::string_view sink);  // rows "<p>/<offset>"
std::string hex16(uint64_t v);
uint64_t parse_hex16(std::string_view digits);  // the inverse of hex16 (0 when malformed)
std::string partition_prefix(int partition);  // "0003/"
}  // namespace tables

// --- Bug switches ---------------------------------------------------------------------------
// Deliberate mistakes an engineer could make, each off by default. They exist so that the
// checkers can be shown to catch them.
struct BugSwitches {
  bool no_lease_prerequisite = false;  // commit epochs without the Lease as prerequisite
  bool no_input_dedup = false;         // exactly-once computations skip input_messages
  bool ambiguous_as_success = false;   // treat an ambiguous commit as committed
  bool ambiguous_as_failure = false;   // treat an ambiguous commit as not committed
  bool new_seqno_on_resend = false;    // async sink: resend under a fresh seqNo
  // async sink: a batch the target answered counts as taken whole, though the target may hold
  // only its first part
  bool batch_ack_whole = false;
  // async sink: an acknowledgement erases every outbox row the target holds any of, though it
  // may hold only the first part of one
  bool outbox_erase_held_in_part = false;
  bool deliver_before_commit = false;  // async sink: send before the epoch commits
  bool timer_delete_apart = false;     // delete fired timers in a separate transaction
  bool dedup_cleanup_early = false;    // drop input_messages rows without the watermark
  bool no_idle_heartbeat = false;      // an idle job does not commit near-empty epochs
  bool no_abort_on_rebalance = false;  // controller moves jobs without aborting Leases
  bool offsets_before_commit = false;  // source offsets committed before the stream rows
  bool callback_before_commit = false; // async sink: delivery callback before the ack commits
  bool uncounted_send_failure = false; // at-most-once queue: a failed send is not counted as a drop
  // at-most-once queue: after a send whose answer was lost, the next message is discarded
  // without a word
  bool amo_silent_loss = false;
  // at-most-once queue: a send that got no answer goes again (it may have arrived)
  bool amo_retry_in_doubt = false;
  // computations draw from the process's generator, which a restarted process seeds as its
  // previous life did: "random" ids repeat across lives
  bool random_per_process = false;
  bool assign_before_persist = false;    // workers hear of new assignments before they are stored
  bool lease_abort_not_retried = false;  // a Lease abort is sent once, its answer ignored, the job replaced at once
  bool controller_without_lease = false; // the controller commits without its Lease and never checks it
  bool timer_fires_after_watermark = false;  // a timer is due only once the watermark is past its trigger
  // a job's event-time watermark follows its inputs' system times, not their event times
  bool event_watermark_from_system_time = false;
  // a job's event-time watermark starts from none in each life instead of from its stored one
  bool event_watermark_not_kept = false;
  bool timer_output_id_by_event_time = false;  // a timer's outputs are named by its event time, not its trigger
  // an epoch's system time is its deadline, the clock's reading plus an epoch period
  bool epoch_time_ahead = false;
  // a due timer of a key the epoch also took a message of is deleted as fired without its
  // function running (as though the message's call stood for the timer's)
  bool timer_dropped_with_message = false;
  // a swift job promises its replays are no older than its own unacknowledged inputs,
  // forgetting that a swift stage above it may replay older ones into it
  bool swift_replay_own_watermark = false;
  // input dedup cleanup trusts the producers' replay watermark alone, forgetting repeats
  // already re-emitted into the job's own inputs behind a full page
  bool dedup_cleanup_ignores_backlog = false;
  // a new leader reads one page (16) of stored assignments and aborts only their Leases
  bool boot_scan_one_page = false;
  // a job whose Lease ended, that never ran or whose worker was lost is never placed again on
  // the worker it was on (by name),
  // even when that worker is the only one
  bool replace_on_another_worker = false;
  // "stop" does not drain: the pipeline stops (as a pause does) with messages in flight
  bool stop_without_drain = false;
  // completion leaves the job Leases to expire instead of ending them
  bool completion_leaves_leases = false;
  // a repartition is stored at once, without a drain: new partitions run while the old ones
  // still do
  bool repartition_without_drain = false;
  // a source whose input is swapped keeps its offsets under its name: the new input is read
  // from the old one's offsets (Flow's "backlog skip")
  bool source_swap_keeps_offsets = false;
  // settings changed live are stored, but the jobs already running are left running with
  // the old ones
  bool reconfigure_keeps_jobs = false;
  // partitions recreated for a resharded target number their rows from 1 under their old
  // producer ids, which the target remembers at higher seqNos
  bool reshard_keeps_producer_ids = false;
  // the controller follows a reshard only of the sink with the most partitions
  bool reshard_watches_widest = false;
  // draining, a job that stamps its outputs with its own clock still waits for the sources
  // at the cut, so a stage that reads a source and a later stage's outputs never drains
  bool drain_waits_for_sources = false;
  // Bugs of the simulated store the engine relies on (names "store-..."); mutants try them on
  // kernel scenarios too. See sim::StoreOptions.
  bool store_resolve_without_fence = false;
  bool store_delete_not_a_write = false;
  bool store_forgets_ended_leases = false;
  // A bug of the simulated Kafka broker (sim::KafkaData::init_keeps_epoch).
  bool kafka_init_keeps_epoch = false;
  // an at-least-once queue sink writes an epoch's messages after the epoch commits (its
  // inputs erased), so a crash in between loses them
  bool alo_write_after_commit = false;
  // a worker runs each of its jobs under the Lease of the assignment row scanned just before
  // the job's own (an off-by-one), which another job, perhaps on another worker, holds
  bool worker_takes_row_before_lease = false;

  // Switches one on by name ("no-lease-prerequisite"); false for an unknown name.
  bool enable(std::string_view name);
  static std::vector<std::string> names();
  // The checks that must catch switch `name` (empty for an unknown name).
  static std::vector<std::string> catchers(std::string_view name);
  // What switch `name` gets wrong, in one line ("" for an unknown name).
  static std::string_view mistake(std::string_view name);
  // Whether `name` is a bug of the simulated store rather than of the engine.
  static bool store_bug(std::string_view name) { return name.rfind("store-", 0) == 0; }
  // Whether `name` is a bug of a simulated component (the store, the Kafka broker), which a
  // real run does not use.
  static bool simulated_only(std::string_view name) { return store_bug(name) || name == "kafka-init-keeps-epoch"; }
  bool any() const;
};

// --- Observer ---------------------------------------------------------------------------------
// What the engine tells an onlooker (the simulator's history recorder). It must not change
// behaviour: the engine never reads anything back from it.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  struct Epoch {
    JobId job;
    std::string node;  // the worker running the job
    LeaseId lease = 0;
    TxId tx = 0;
    uint64_t epoch = 0;
    Version version = 0;
    uint64_t layout_version = 0;      // the layout the job runs with (core/layout.h)
    std::vector<Message> consumed;    // inputs processed (not those dropped as duplicates)
    std::vector<Message> produced;    // messages written to streams or sinks
    // What else the function could read, for re-executing the epoch: its system time and the
    // seed of its random generator.
    Micros now = 0;
    uint64_t random_seed = 0;
    // A reading of the node's clock as the epoch's commit was built (kNoClockReading: not read;
    // only a job that records its history reads it): `now`, an earlier reading of that clock,
    // cannot be past it.
    static constexpr Micros kNoClockReading = INT64_MAX;
    Micros clock_at_commit = kNoClockReading;
    // A timer that fired: its row within the partition (core/emitted.h), creation, the timer,
    // how many of `consumed` were processed before it, and the watermark it was due by.
    struct FiredTimer {
      std::string row;
      uint64_t creation = 0;
      Timer timer;
      size_t after_consumed = 0;
      Micros watermark = 0;
    };
    std::vector<FiredTimer> timers_fired;
    // The state the function read, as the epoch started from it: each (table, key) read
    // before the epoch wrote it, once, with the value read (nullopt: absent).
    struct StateRead {
      std::string table;
      uint64_t key = 0;
      std::optional<std::string> value;
    };
    std::vector<StateRead> state_reads;
    // The timers' identities, "<timers table>:<row key>": rows fired (and deleted) by the
    // epoch, and rows it created (an add that merged into an existing row creates none).
    std::vector<std::string> timer_rows_fired;
    std::vector<std::string> timer_rows_created;
  };
  // An epoch is about to be committed as transaction `epoch.tx`. Whether it applied is the
  // store's to say (the job may crash before it learns): a history asks the store.
  virtual void epoch_committing(const Epoch& /*epoch*/) {}
  // The job learned that its epoch committed.
  virtual void epoch_committed(const Epoch& /*epoch*/) {}
  // Whether epochs record the state rows their function read (Epoch::state_reads): a cost on
  // every state read, for onlookers that re-execute the history.
  virtual bool wants_state_reads() const { return false; }
  // A computation's function made a call its spec does not allow (CollectingOutput::misuse):
  // the epoch is abandoned, and every later one will be too. The deployment should stop.
  virtual void computation_misuse(const std::string& /*computation*/, const std::string& /*what*/) {}
  // A computation's function threw (`what` names the computation, the exception, the message
  // or timer and the epoch): the epoch is given up, and the job retries it.
  virtual void computation_threw(const std::string& /*computation*/, const std::string& /*what*/) {}
  virtual void job_fenced(const JobId& /*job*/, LeaseId /*lease*/) {}
  // An epoch was given up before or at its commit (its reads failed, the commit conflicted or
  // found the store unavailable): nothing of it applied; the job retries. `why` says which.
  virtual void epoch_abandoned(const JobId& /*job*/, LeaseId /*lease*/, uint64_t /*epoch*/, std::string_view /*why*/) {}
  virtual void duplicate_dropped(const JobId& /*job*/, const Message& /*m*/) {}
  // At-most-once sinks: a message held only in the sink's memory (accepted into the
  // in-memory queue, or acknowledged in the outbox just before its one send), sent, or
  // dropped. A crash between queued and sent or dropped loses the message.
  virtual void amo_queued(const std::string& /*sink*/, const Message& /*m*/) {}
  virtual void amo_sent(const std::string& /*sink*/, MessageId /*id*/) {}
  // An at-most-once sink job with the outbox strategy is about to acknowledge (erase) message
  // `id`'s outbox row in transaction `tx`, just before its one send: if that applies and the
  // process crashes before it learns so, the message is lost.
  virtual void amo_acknowledging(const JobId& /*job*/, LeaseId /*lease*/, MessageId /*id*/, TxId /*tx*/) {}
  virtual void amo_dropped(const std::string& /*sink*/, const Message& /*m*/, std::string_view /*why*/) {}
  // At-most-once: the one send of message `id` is about to start; once it has, a failure
  // leaves its fate unknown.
  virtual void amo_sending(const std::string& /*sink*/, MessageId /*id*/) {}
  // At-most-once: the send started and no answer came back (the target may hold the
  // message, or not): in doubt, neither sent nor dropped.
  virtual void amo_in_doubt(const std::string& /*sink*/, const Message& /*m*/, std::string_view /*why*/) {}
  // An async sink's delivery callback: the target holds these messages and epoch `version`
  // of `job`, which acknowledged them, committed.
  virtual void delivery_confirmed(const JobId& /*job*/, const std::vector<MessageId>& /*ids*/, Version /*version*/) {}
  // Controllers: `node` leads under `lease` / stops leading; it is about to commit `tx`
  // under its Lease, storing these job Leases (nullopt: a commit that stores no assignment).
  virtual void controller_leads(const std::string& /*node*/, LeaseId /*lease*/) {}
  virtual void controller_steps_down(const std::string& /*node*/, LeaseId /*lease*/, std::string_view /*why*/) {}
  virtual void controller_committing(const std::string& /*node*/, LeaseId /*lease*/, TxId /*tx*/,
                                     const std::optional<std::map<std::string, LeaseId>>& /*job_leases*/) {}
  // A controller is about to commit `tx`, which moves timer row `from` to `to` (a repartition;
  // "<timers table>:<row key>" each).
  virtual void timer_moving(const std::string& /*from*/, const std::string& /*to*/, TxId /*tx*/) {}
  // A controller started Lease `lease` for job `job` (JobId::str()), to assign it to `worker`.
  virtual void job_lease_started(const std::string& /*job*/, LeaseId /*lease*/, const std::string& /*worker*/) {}
  // A controller ended a job's Lease; `why` says how ("aborted: " and the reason: rebalance,
  // layout changed, pipeline not working, ...; or aborted by a controller taking over).
  virtual void job_lease_aborted(const std::string& /*job*/, LeaseId /*lease*/, std::string_view /*why*/) {}
  // A controller found a job's Lease ended at a ping (it expired, or another controller
  // aborted it).
  virtual void job_lease_found_ended(const std::string& /*job*/, LeaseId /*lease*/) {}
  // The engine took the recovery path `probe` marks (core/probes.h).
  virtual void probe(Probe /*probe*/) {}
  // A structured warning (a connector's, e.g. ClickHouse's dedup window shorter than
  // replay_horizon): a name and attributes.
  virtual void warning(const std::string& /*name*/, const std::vector<std::pair<std::string, std::string>>& /*attrs*/) {}
};

// --- Fault points ------------------------------------------------------------------------------
// Named places in the engine where a simulation may crash the node (FoundationDB's BUGGIFY
// idea); the names are listed in faults/points.h. Real deployments pass no hook.
class FaultPointHook {
 public:
  virtual ~FaultPointHook() = default;
  // True when the node crashes here: the caller then suspends and is unwound.
  virtual bool crash_here(std::string_view point) = 0;
};

// --- Environment ---------------------------------------------------------------------------------

struct EngineOptions {
  Micros heartbeat_interval_us = 100 * kMillis;
  Micros worker_timeout_us = 1 * kSeconds;  // a worker not heard from for this long is lost
  Micros start_grace_us = 600 * kMillis;    // an assigned job must be reported running by then
  Micros rpc_timeout_us = 100 * kMillis;
  // An operator's request that finds the controller busy (a cycle under way) waits this long
  // for its turn before it is answered "busy; ask again": less than the asker's timeout
  // (unset: half of rpc_timeout_us, the timeout of the simulated operator's calls).
  std::optional<Micros> request_wait_us;
  Micros dedup_cleanup_every_epochs = 8;
  // A job whose epochs find no work waits longer and longer between them (1, 2, 4... epoch
  // periods), up to this many; it still commits each, to move its watermarks and to learn
  // whether its Lease is gone.
  int idle_epoch_periods = 4;
  size_t dedup_cleanup_rows = 256;  // input dedup rows one cleanup looks at, at least
  size_t timers_per_epoch = 256;    // timer rows one epoch looks at
  size_t timer_rows_known = 1024;   // timer rows an epoch reads ahead, at most
  std::string controller_node = "controller";
  // Each committed computation epoch writes what re-executing it needs (core/reexecute.h)
  // into tables::history, in its own transaction: what `onceflow real --verify` holds a run to.
  bool record_history = false;
};

// What a controller or worker process runs against. References outlive the process.
class InputWakeups;

struct EngineEnv {
  Runtime& runtime;
  Network& network;
  Store& store;
  Random& random;
  const PipelineSpec& spec;
  const ComputationRegistry& registry;
  const EngineOptions& options;
  const BugSwitches& bugs;
  EngineObserver* observer = nullptr;  // may be null
  FaultPointHook* fault_points = nullptr;  // may be null
  const Connectors* connectors = nullptr;  // external sources and sinks; may be null
  uint64_t seed = 0;  // the deployment's configured seed (the same in every life of a process)
  // The worker process's jobs waiting for input (core/input_wakeups.h); null: epochs only
  // start a period apart.
  InputWakeups* wakeups = nullptr;
};

// Tells the observer, if any, that the path `p` marks was taken.
inline void probe(const EngineEnv& env, Probe p) {
  if (env.observer != nullptr) env.observer->probe(p);
}

// Calls the hook at `point`; when it crashes the node, never returns (the fiber is unwound).
void fault_point(const EngineEnv& env, std::string_view point);

// The name of the node an async queue sink delivers to.
std::string sink_target_node(std::string_view sink);
// Request: a batch of rows from one producer (AppendRequest, core/outbox.h); reply:
// AppendReply, the highest seqNo the target holds from that producer.
inline constexpr const char* kSinkAppendService = "append";
// A sharded target's tablet count (decimal); the controller asks it (core/controller.h).
inline constexpr const char* kSinkDescribeService = "describe";
// The producer id a sink partition's outbox rows are sent under: the job's name, with the
// sink's producer generation after its partitions were recreated for a resharded target
// ("sink/out/2#1"), so that a recreated partition, which numbers its rows from 1 again, is
// a producer the target has never seen. `bugs`: reshard_keeps_producer_ids leaves it out.
std::string producer_id(const JobId& job, const SinkSpec& sink, const BugSwitches& bugs);

}  // namespace onceflow
