// Controller: owns the pipeline's state, its jobs and one Lease per job.
//
// Workers and controllers meet only in the store (table tables::kController):
// - "leader": the Lease and node of the controller in charge. A controller leads only under
//   a Lease of its own: it takes over only once the row's Lease has ended (a standby waits),
//   and every commit of its state names that Lease as prerequisite, so a controller paused
//   past its Lease (a zombie) can neither store nor hand out anything after a successor took
//   over. It pings its Lease every cycle and steps down once it has ended.
// - "job/<id>": a job's assignment (worker, job Lease). Workers read their assignments from
//   these rows, so an assignment is visible exactly when it is stored, never before. Once new
//   ones are stored, the leader tells each worker they name to read them (kAssignedService),
//   which it does at once instead of at its next heartbeat; the message carries nothing, so a
//   lost or late one costs only that wait.
// - "worker/<name>": what a worker reports (tables::kWorkers): its own Lease (alive while
//   pinged) and the jobs it runs, with their Leases.
//
// Each scheduling cycle the leader pings every job's Lease; removes the job whose Lease ended,
// whose worker's Lease ended, whose worker does not report it running, or that a rebalance
// moves (aborting the Lease of each job it removes); and schedules a replacement under a new
// Lease, but only once every earlier Lease of that job is known to have ended (aborted or
// found ended). A Lease started for an assignment that could not be stored is aborted, with
// retries, before its job is assigned again. On taking over, it reads the persisted
// assignments and aborts every Lease in them before scheduling anew. When the pipeline is
// paused, stopped or completed it aborts every Lease and schedules nothing.
//
// Stopping drains first: a stop request moves a working (or paused) pipeline to "draining",
// with a cut past every row a source has emitted (tables::kDrainCutKey). Sources read no row
// as new as the cut and publish it as their watermark once they have read every older one,
// so every message they emitted can be taken downstream (alignment waits for no one), and
// every job runs until nothing is in flight: no stream row left to process, no outbox row
// unacknowledged, no at-most-once queue holding a message. Then every Lease is aborted and, when a last look
// (with no job left that could write) still finds nothing in flight, the pipeline is
// "stopped". A pipeline whose sources are all finite (static tables, service logs with
// max_cycles) completes by itself the same way once every source has read all of its input
// and no timer is left: "completed" ends every job Lease explicitly, and nothing is ever
// scheduled again.
//
// A sink whose target is a sharded queue (target_tablets) has one partition per tablet. While
// the pipeline works, the leader asks each such target its tablet count every cycle; a count
// other than the one stored in the layout starts a repartition of the sink to that count, with
// the count, in one commit. When it is made (after the drain: the old partitions' outboxes
// are empty), the sink's partitions are recreated: they number their rows from 1 again, under
// producer ids of the next generation (producer_id() in core/engine.h).
#pragma once

#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/engine.h"
#include "core/layout.h"

namespace onceflow {

enum class PipelineState : uint8_t { kWorking, kPaused, kDraining, kStopped, kCompleted };
std::string_view pipeline_state_name(PipelineState state);
// Also takes "running", the name "working" had before draining existed.
std::optional<PipelineState> parse_pipeline_state(std::string_view name);

// The rows controllers and workers share.
struct LeaderRow {
  LeaseId lease = 0;
  std::string node;
};
struct AssignmentRow {
  std::string worker;
  LeaseId lease = 0;
  Micros assigned_at = 0;       // by the assigning controller's clock
  uint64_t layout_version = 0;  // the partition layout (core/layout.h) the job runs with
};
struct WorkerRow {
  LeaseId lease = 0;                        // the worker's own Lease: alive while it is
  std::map<std::string, LeaseId> running;  // JobId::str() -> the job's Lease
};
std::string encode_leader(const LeaderRow& row);
std::optional<LeaderRow> decode_leader(std::string_view bytes);
std::string encode_assignment(const AssignmentRow& row);
std::optional<AssignmentRow> decode_assignment(std::string_view bytes);
std::string encode_worker(const WorkerRow& row);
std::optional<WorkerRow> decode_worker(std::string_view bytes);
inline constexpr const char* kLeaderKey = "leader";
inline constexpr const char* kJobKeyPrefix = "job/";

class Controller {
 public:
  // `node`: this controller's name, written into the leader row.
  Controller(const EngineEnv& env, std::string node);

  // Request "<sequence number> <state>"; a request older than the last applied is ignored.
  // A controller that does not lead answers Unavailable. "stopped" (or "draining") starts a
  // drain whose cut is past every input written before the request (the controller's clock):
  // the queues' backlog is processed before "stopped". "stopped now" cuts just past what the
  // sources have emitted: what they have not read stays for the restart, so the stop takes
  // the time of what is in flight (a signal to `onceflow real` asks for it). The answer is the
  // state now stored ("draining"). "completed" is refused: a pipeline completes by itself.
  static constexpr const char* kSetStateService = "set_state";
  // Only with the assign-before-persist bug switch: assignments pushed to a worker.
  static constexpr const char* kPushService = "push_assignments";
  // Served by workers: assignments naming this worker were stored; read them now. Empty
  // request and answer.
  static constexpr const char* kAssignedService = "assignments_stored";
  // Request "<layout version> NAME=COUNT ...": repartitions computations and queue sinks
  // (core/layout.h) if the stored layout is at that version (a compare-and-swap); the answer
  // is the new version. A working pipeline drains, the change is made, and it works again; a
  // stopped one stays stopped; a paused or completed one refuses.
  // Refusals of the layout services, by code: InvalidArgument for good (a name, count or
  // setting it does not take, a completed pipeline); Conflict when another layout version is
  // stored, or the pipeline is paused (asked again later, it may be taken); Unavailable when
  // this controller does not lead or could not store the change.
  static constexpr const char* kRepartitionService = "repartition";
  // Request "<layout version>\n<pipeline spec YAML>": a static change (computations, streams,
  // sources), taken only while the pipeline is stopped and the stored layout is at that
  // version (respecified_layout() in core/layout.h says what may change). A source whose
  // input changed starts its new input from the beginning under a new origin; the old input's
  // offsets are erased in the same commit. The answer is the new layout version; the pipeline
  // stays stopped until it is started.
  static constexpr const char* kRespecService = "respec";
  // Request "<layout version> SETTING=VALUE ..." (epoch_period, epoch_batch_limit): changes
  // settings of a pipeline that exists, working or not, under a compare-and-swap on the stored
  // layout's version; no drain. Every job of an older layout is ended and started again under
  // a new Lease with the new settings. The answer is the new version.
  static constexpr const char* kReconfigureService = "reconfigure";

 private:
  struct Assignment {
    AssignmentRow row;
    // Removed, but its Lease is not yet known to have ended: no replacement until it has, or
    // the old job and its replacement could both commit.
    bool retiring = false;
  };
  struct Workers {
    std::vector<std::string> live;  // their Leases are active
    std::map<std::string, std::map<std::string, LeaseId>> running;  // worker -> job -> Lease
  };

  void loop();
  void cycle();
  // True while this controller leads: takes over when the leader row's Lease has ended, pings
  // its own Lease, steps down when that has ended.
  bool lead();
  bool take_over();
  void step_down(const char* why);
  // Reads the previous leader's assignments and aborts their Leases: whatever ran under them
  // is fenced before anything new is scheduled.
  bool boot();
  std::optional<Workers> read_workers();
  // Pings the Lease of every assigned job; returns the jobs whose Lease has ended.
  std::set<std::string> ping_job_leases();
  void schedule(const Workers& workers, const std::set<std::string>& ended, Micros now);
  // Aborts the job's Lease and forgets the job; when the abort cannot be confirmed, the job
  // stays as retiring. Returns true when the job is gone.
  bool remove(const std::string& job, const char* why);
  // Why an assigned job must go, or nullptr when it stays.
  const char* removal_reason(const std::string& id, const Assignment& a, const std::string* target,
                             const Workers& workers, bool lease_ended, Micros now);
  // Tries to end the Leases of assignments that were never stored; true when none is left.
  bool end_unstored_leases();
  // Stores `assignments` and the pipeline state under this controller's Lease; true when
  // they are stored (an ambiguous commit is resolved first).
  bool persist(const std::map<std::string, Assignment>& assignments);
  bool persist_state();  // the pipeline state alone
  bool put_state(Transaction& tx);
  // `now`: cut just past what the sources emitted, not at the clock.
  bool put_drain_cut(Transaction& tx, bool now = false);
  std::vector<std::string> source_metas() const;
  std::vector<std::string> drain_metas() const;  // those and the computations' with timers
  // Draining: every source has read all of its rows older than the cut.
  bool sources_at_cut();
  // Whether the store holds nothing in flight: no stream row, no outbox row, no message in an
  // at-most-once queue, and, with `with_timers`, no timer. nullopt when the store did not say.
  std::optional<bool> nothing_in_flight(bool with_timers);
  std::optional<bool> in_flight_answer(const Transaction& tx, bool with_timers);
  // Whether every source is finite and has read all of its input.
  bool sources_finished();
  // Every Lease has ended while quiescing: a last look decides between `quiescing_` and
  // going back to work.
  void finish_quiescing();
  // Commits `tx` under this controller's Lease (an ambiguous outcome resolved); `conflicted`,
  // when given, says whether it failed on a conflict with another commit.
  bool commit_as_leader(const Transaction& tx, bool* conflicted = nullptr);
  void push_unstored(const std::map<std::string, Assignment>& added);  // the bug switch
  void tell_assigned(const std::map<std::string, Assignment>& added);
  Result<std::string> on_set_state(std::string_view request);
  Result<std::string> on_repartition(std::string_view request);
  Result<std::string> on_respec(std::string_view request);
  Result<std::string> on_reconfigure(std::string_view request);
  // Waits for a cycle or another request under way to end (options.request_wait_us at most),
  // so that a request is queued behind them rather than refused; then why it cannot be taken
  // (this controller does not lead, or is still busy), or ok.
  Status take_turn();
  // Ends busy_ and wakes the requests waiting for their turn.
  void end_busy();
  // Stores `next` as the layout, with the state, and runs with it; false (nothing changed)
  // when it could not be stored.
  bool store_layout(const Layout& next);
  // Puts the counts in force of every computation and queue sink into the layout read at boot,
  // so that a deployment whose spec names other counts runs with these until a repartition
  // changes them; a layout at version 0 that differs from the deployment's spec becomes
  // version 1, so that workers read it instead of running their spec.
  void complete_layout();
  // Ends the jobs assigned under an older layout than the one stored (a reconfigure).
  void remove_stale_layout_jobs();
  // Asks every sharded sink target its tablet count; when one differs from the count last
  // seen (kept in the layout, so that a reshard between two passes is seen by a successor),
  // starts a change that recreates the sink's partitions, one per tablet, under the next
  // producer generation. True when it started one.
  bool follow_resharded_targets();
  // Starts the change to `next` (a repartition): a working pipeline drains first; a stopped
  // one stays stopped. Stored with the state; false (nothing changed) when it could not be.
  bool begin_layout_change(const Layout& next);
  // Into `tx`: erases the offsets of every source whose input `next` swaps out and clears
  // the finished mark of its partitions.
  bool forget_swapped_inputs(Transaction& tx, const PipelineSpec& next);
  // Every job Lease has ended and nothing is in flight: moves the rows of the pending change
  // (some pages per call) and, once all are in place, stores the new layout.
  void apply_pending_layout();
  // Gives each partition of computation `c` that takes a moved timer which was due where it
  // was that timer's trigger as a floor of its event watermark, in `tx` (false: the store
  // failed). `moved`: "<table>:<key>" from, to, in the order moved.
  bool keep_moved_timers_due(Transaction& tx, const ComputationSpec& c,
                             std::span<const std::pair<std::string, std::string>> moved);
  // Marks a state request or a repartition as under way (busy_) for its lifetime.
  struct Busy;

  const EngineEnv& env_;
  std::string node_;
  LeaseId lease_ = 0;  // this controller's Lease while it leads
  // A cycle or a state request is under way. Their steps suspend on the store, so without
  // this one could step down or change assignments under the other.
  bool busy_ = false;
  std::vector<Runtime::Waiter> turn_waiters_;  // requests waiting for busy_ to end
  bool booted_ = false;
  PipelineState state_ = PipelineState::kWorking;
  // Set while every job Lease is being ended on the way to "stopped" or "completed".
  std::optional<PipelineState> quiescing_;
  std::optional<Micros> drain_cut_;    // while draining, once stored
  std::optional<Micros> cut_written_;  // what the transaction being built stores
  bool stop_now_ = false;  // the stop being stored was asked for "now" (its cut)
  PipelineSpec spec_;                  // the spec with layout_'s partition counts
  Layout layout_;
  std::optional<Layout> pending_;      // a repartition under way
  bool resume_after_layout_ = false;   // work again once it is made (else stay stopped)
  uint64_t state_seq_ = 0;  // the sequence number of the last state request applied
  bool state_dirty_ = false;
  std::map<std::string, Assignment> assignments_;  // by JobId::str(), only persisted ones
  std::map<std::string, LeaseId> unstored_;        // job -> a Lease of an assignment never stored
  std::set<std::string> live_workers_;             // as the last cycle found them
  std::map<std::string, std::string> avoided_;     // bug replace-on-another-worker: job -> worker it failed on
};

}  // namespace onceflow
