// Job: one partition of a source, computation or sink, run by a worker under one Lease.
//
// A job keeps nothing between epochs that the store does not also have (a swift job's
// not-yet-acknowledged inputs excepted, which is what makes it swift), so restoring from
// the last committed epoch is simply reading the store. Each epoch is ONE transaction with
// the job's Lease as prerequisite: stream rows written downstream, consumed rows deleted,
// input_messages rows, state, timer adds and deletes, source offsets, sync-sink rows and
// outbox rows, and the job's meta row. An idle job still commits its meta row, so it learns
// that its Lease is gone. kPrerequisiteFailed stops the job for good (it was a zombie);
// kAmbiguous is resolved with Store::resolve before anything else happens.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "core/dedup.h"
#include "core/engine.h"
#include "core/delivery.h"
#include "core/emitted.h"
#include "core/input_wakeups.h"
#include "core/stream_rows.h"
#include "core/user_code.h"

namespace onceflow {

// The job that reads a stream: its kind, name and partitions.
struct StreamConsumer {
  JobKind kind = JobKind::kComputation;
  std::string name;
  int partitions = 0;
};

// What a sink job's meta row (tables::kJobMeta) says of its outbox, for tools that hold a
// target against the store: seqNos below next_seqno were written to the outbox, and every
// one up to acked_seqno was acknowledged by the target. nullopt when the row does not decode.
struct SinkProgress {
  uint64_t next_seqno = 1;
  uint64_t acked_seqno = 0;
};
std::optional<SinkProgress> sink_progress(std::string_view meta_row);
// What a job's meta row says for draining and completion: messages an at-most-once sink holds
// in memory (or took in its last epoch, to be queued), whether a finite source has read all
// of its input (zero and false for a row written before these were kept), and its watermark.
struct JobProgress {
  uint64_t epoch = 0;  // the number of its last committed epoch (0: none)
  uint64_t amo_pending = 0;
  bool finished = false;
  Micros low_watermark = INT64_MIN;   // no new message the job emits will be older
  Micros last_output_ts = INT64_MIN;  // a source: the newest alignment time it emitted
  Micros event_watermark = INT64_MIN;  // a computation: the newest event time it took
  uint64_t sink_rows = 0;  // a sync queue sink: the rows it wrote into its table (tables::sync_sink)
};
JobProgress job_progress(std::string_view meta_row);
// Whether a stored timer of computation `c` is still to fire: a system-time timer is (its
// time comes); an event-time one when its partition's event watermark (JobProgress) has
// reached its trigger. One past that waits for newer input: once none is coming, the pipeline
// is drained with it pending.
bool timer_may_fire(const ComputationSpec& c, const Timer& t, Micros partition_event_watermark);
// Whether any row of one of computation `c`'s timer tables (keys "<partition>/<row>", each
// partition's rows in trigger order, so only its first one needs a look) may still fire.
// `first_from(key)` reads the table's first row at or after `key` (nullopt: none); `meta`
// reads a job's meta row (tables::kJobMeta) by JobId::str(). A row this code did not write
// counts as one that may fire. One read per partition holding timers, however many it holds.
// A timer row's key ("<partition>/<trigger>/<key>/<stream>[/<unique>]") read back: its
// partition and timer (with `value`'s event time); nullopt for a key this code does not write.
std::optional<std::pair<int, Timer>> stored_timer(std::string_view key, const TimerValue& value);
bool timers_may_fire(const ComputationSpec& c, const std::function<std::optional<Row>(const std::string& key)>& first_from,
                     const std::function<std::optional<std::string>(const std::string& job)>& meta);
// The at-most-once messages the sinks of `spec` still hold in memory (queued or being sent),
// as their jobs' last committed epochs say: a drain waits for none.
Result<uint64_t> at_most_once_pending(Store& store, const Transaction& tx, const PipelineSpec& spec);
// A source's meta row with the drain cut set (nullopt: cleared). The controller writes it
// there, so a source learns the cut from the row it reads in every epoch anyway.
std::string with_drain_cut(std::string_view meta_row, std::optional<Micros> cut);
// A computation partition's meta row (nullopt: none yet) whose outputs will be stamped above
// `floor`: a repartition gives each new owner of a key a floor above every old owner's stamps,
// so that a key's outputs stay in order across the change whatever the clocks say.
std::string with_output_floor(std::optional<std::string_view> meta_row, Micros floor);
// A computation partition's meta row (nullopt: none yet) whose event watermark (the newest
// event time it took, which event-time timers wait for) is at least `floor`: a repartition
// gives the partition a timer that was due where it came from, and it stays due.
std::string with_event_watermark_floor(std::optional<std::string_view> meta_row, Micros floor);
// A source partition's meta row once its input was swapped for another: not finished, and its
// watermark and newest stamp at `newest`, the newest time any partition of the source emitted
// (the old input's end, a head past every time, says nothing of the new input), so that what
// it reads from the new input is stamped later than anything the source emitted before.
std::string with_input_swapped(std::string_view meta_row, Micros newest);
// A sink partition's meta row once the partition was recreated for a resharded target: a new
// producer, whose outbox rows are numbered from 1 (its outbox is empty).
std::string with_new_producer(std::string_view meta_row);

class Job {
 public:
  Job(const EngineEnv& env, JobId id, LeaseId lease);
  ~Job();

  // The fiber body: epochs until stopped or fenced.
  void run();
  // Asks the job to end after its current epoch.
  void request_stop() { stop_requested_ = true; }
  bool finished() const { return finished_; }
  bool fenced() const { return fenced_; }
  // False once the job and its at-most-once sender have both ended: it may be destroyed.
  bool busy() const { return !finished_ || (delivery_ != nullptr && delivery_->sender_running()); }
  const JobId& id() const { return id_; }
  LeaseId lease() const { return lease_; }

 private:
  struct Meta;
  friend JobProgress job_progress(std::string_view meta_row);
  friend std::string with_drain_cut(std::string_view meta_row, std::optional<Micros> cut);
  friend std::string with_output_floor(std::optional<std::string_view> meta_row, Micros floor);
  friend std::string with_event_watermark_floor(std::optional<std::string_view> meta_row, Micros floor);
  friend std::string with_input_swapped(std::string_view meta_row, Micros newest);
  friend std::string with_new_producer(std::string_view meta_row);
  class EpochTx;
  class Context;
  class StateForward;
  class DedupRows;

  enum class Outcome { kCommitted, kRetry, kFenced };
  Outcome run_epoch();
  Outcome commit(EpochTx& etx);
  Outcome resolve_ambiguous(EpochTx& etx);
  void after_commit(EpochTx& etx);
  void step_source(EpochTx& etx);
  // Backpressure: whether a consumer partition holds spec.max_in_flight or more of this
  // job's messages not yet taken (see untaken_), so that the epoch takes no input.
  bool holds_back(EpochTx& etx);
  // A consumer's side of it: what its producers' holds_back reads (Meta::taken_below).
  void publish_taken(EpochTx& etx, Micros taken_below, Micros takes_below);
  void step_external_source(EpochTx& etx, ExternalSource& external, const std::string& offset_key, uint64_t offset);
  void step_service_log(EpochTx& etx, const std::string& cursor_key);
  ExternalSource* external_source() const;
  ExternalSink* external_sink() const;
  void step_computation(EpochTx& etx);
  void step_sink(EpochTx& etx);
  // Reads the inputs of this partition in (alignment_ts, id) order, at most a page of new
  // ones per stream. `unseen_from` is the alignment time from which inputs may exist that
  // were not returned.
  struct Input {
    uint32_t read;  // its row, as EpochTx::inputs numbers them
    Message m;
  };
  bool read_inputs(EpochTx& etx, const std::vector<std::string>& streams, std::vector<Input>* rows,
                   Micros* unseen_from);
  // A swift job's input it processed in its last committed epoch (acknowledged in this one).
  bool processed(const EpochTx& etx, const Input& in) const;
  void prefetch_dedup(EpochTx& etx, const std::vector<Input>& rows, Micros watermark);
  // What input dedup may forget now: entries older than this (see clean_dedup).
  Micros dedup_forget_below(EpochTx& etx, Micros backlog_from);
  void clean_dedup(EpochTx& etx, Micros backlog_from);
  // The lowest emit (alignment) or replay watermark among the producers of the job's inputs;
  // `take_below`, when given, gets the bound of what the job may take now (the same, except
  // while draining: see the definition).
  Micros producers_watermark(EpochTx& etx, bool replay, Micros* take_below = nullptr);
  void prefetch_state(EpochTx& etx, const std::vector<Input>& rows, Micros watermark);
  // The time up to which timers of `timer_stream` are due (its watermark).
  Micros timer_watermark(const std::string& timer_stream, Micros event_watermark, Micros now) const;
  bool due(const Timer& t, Micros event_watermark, Micros now) const;
  // A due timer's row: its table (one of timers_tables_), key and value, and the timer.
  struct DueTimer {
    const std::string* table;
    std::string key;
    TimerValue value;
    Timer timer;
  };
  // The timers due at `event_watermark` and the epoch's time, in trigger order, at most
  // timers_per_epoch.
  std::vector<DueTimer> due_timers(EpochTx& etx, Micros event_watermark);
  void fire_timers(EpochTx& etx);
  bool misused(EpochTx& etx, const CollectingOutput& out);
  // Runs `run`, a call of the function, as `call`. An exception out of it gives the epoch up
  // (gave_up_for_throw); after a read failed it was told "no such row" and may throw on that:
  // only the read failure counts. Defined and used in job_computation.cc.
  template <typename Call>
  void call_function(EpochTx& etx, const UserCall& call, Call&& run);
  // The epoch is given up for what the function threw (`what`: which, where), and reported.
  void gave_up_for_throw(EpochTx& etx, const std::string& what);
  void add_timer(EpochTx& etx, const Timer& t, uint64_t unique);
  void emit(EpochTx& etx, Message m);
  Micros next_output_ts(EpochTx& etx);

  const EngineEnv& env_;
  JobId id_;
  LeaseId lease_;
  const ComputationSpec* computation_ = nullptr;
  const SourceSpec* source_ = nullptr;
  std::string origin_;  // a source: source_origin(), the name its offsets and ids are kept under
  const SinkSpec* sink_ = nullptr;
  std::unique_ptr<ProcessFunction> function_;
  std::string init_threw_;  // what the function's init() threw, where: every epoch is given up
  // What the function draws from: seeded per epoch by the job and the epoch's number. Only
  // one epoch of a given number ever commits (each commit rewrites the job's meta row), so
  // no two committed epochs draw the same numbers, whichever process life ran them; a
  // process's own generator would start over in every life.
  Xoshiro256StarStar function_random_{0};
  Random& function_random();
  // What user code running in `etx` is told about its call (core/user_code.h).
  UserCall user_call(EpochTx& etx, uint64_t message, uint64_t key, bool timer);
  std::string job_name_;  // id_.str()
  struct Consumer {
    int partitions = 0;  // of the stream's consumer; 0 when nothing reads it
    std::string table;   // the stream's table
    // Backpressure (spec.max_in_flight) along the stream: its consumer, which holds this job
    // back (nullopt: none, or along a cycle, or a source that is not a queue or static table).
    std::optional<StreamConsumer> presses;
  };
  std::map<std::string, Consumer> consumers_;  // by output stream
  std::string prefix_;                         // the partition's key prefix in every table
  std::map<std::string, std::string> timers_tables_;  // computations: timer stream -> its table
  std::string outbox_table_;                   // sinks
  std::vector<InputWakeups::Input> wake_inputs_;  // the stream partitions whose rows wake the job
  // Those and the input streams' watermarks (InputWakeups::watermark): what wakes the job
  // after an epoch that left inputs for a producer's watermark.
  std::vector<InputWakeups::Input> watermark_inputs_;
  std::vector<InputWakeups::Input> watermark_outputs_;  // the output streams' watermarks
  std::unique_ptr<StateBackend> state_backend_;  // forwards to the current epoch
  std::vector<std::string> state_tables_;        // the tables the function's state clients use
  std::string meta_key_;                         // this job's row in job_meta
  std::vector<std::string> producer_metas_;      // the job_meta rows of the inputs' producers
  std::vector<bool> source_producers_;           // which of them are sources
  std::vector<std::string> epoch_metas_;         // those and meta_key_
  EpochTx* current_ = nullptr;
  bool stop_requested_ = false;
  bool finished_ = false;
  bool fenced_ = false;
  bool held_ = false;    // its last epoch took no input, held back (holds_back)
  bool idle_ = false;    // the last epoch had no work
  bool behind_ = false;  // the last epoch committed a whole page of some input: more waits
  bool aligned_ = false;  // the last epoch left an input for a producer's watermark
  bool next_by_watermark_ = false;   // the next epoch begins because a watermark moved
  bool epoch_by_watermark_ = false;  // so did the current one
  uint64_t committed_epochs_ = 0;  // by this incarnation
  int idle_epochs_ = 0;  // consecutive idle epochs
  // Backpressure (spec.max_in_flight): the stream rows this job's committed epochs put for
  // consumers that press, per (stream table, consumer partition), until the consumer
  // partition says it took them (core/stream_rows.h). Kept by this
  // incarnation only: a new one starts with none, so it may read one bound more.
  struct Untaken {
    std::string consumer_meta;  // the consumer partition's row in job_meta
    UntakenRows rows;
  };
  std::map<std::pair<std::string, int>, Untaken> untaken_;
  // Swift jobs: rows processed by the last committed epoch, acknowledged by the next one.
  std::set<InputRef> pending_ack_;
  // Sinks: what happens after the epochs (core/delivery.h).
  std::unique_ptr<Delivery> delivery_;
  // Computations and sinks: their input dedup table and its layout.
  std::string dedup_table_;
  DedupTable dedup_{DedupLayout::kFull, 0};
  uint64_t dedup_recorded_ = 0;  // entries recorded since the last cleanup (sets its budget)
};

}  // namespace onceflow
