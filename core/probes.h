// Probes: named places on the engine's recovery paths, in one table (FoundationDB's code
// probes, Antithesis' "sometimes" assertions). Reaching one changes nothing; it tells an
// onlooker (EngineObserver::probe) that the path was taken, so that an exploration can say
// which recovery branches it reached and which it never did. A probe that no soak ever hits
// marks a path nothing tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace onceflow {

// X(enum name, "probe.name", "the branch it marks")
#define ONCEFLOW_PROBES(X)                                                                                   \
  X(kEpochConflict, "epoch.conflict", "an epoch's commit lost a write-write conflict and is retried")        \
  X(kEpochUnavailable, "epoch.unavailable", "an epoch's commit found the store unavailable and is retried") \
  X(kEpochReadFailed, "epoch.read_failed", "an epoch's reads failed; the epoch is abandoned and retried")   \
  X(kEpochFenced, "epoch.fenced", "an epoch's commit was refused because the job's Lease had ended")       \
  X(kEpochAmbiguousCommitted, "epoch.ambiguous_committed", "an ambiguous epoch commit resolved as applied") \
  X(kEpochAmbiguousNotCommitted, "epoch.ambiguous_not_committed",                                          \
    "an ambiguous epoch commit resolved as not applied (and fenced)")                                       \
  X(kEpochFirstOfIncarnation, "epoch.first_of_incarnation",                                                \
    "a job restored from the store under a new Lease committed its first epoch")                           \
  X(kJobStopped, "job.stopped", "a job was asked to stop (its assignment moved or ended)")                  \
  X(kIdleSlowdown, "job.idle_slowdown", "an idle job waited more than one epoch period")                    \
  X(kEpochCatchUp, "epoch.catch_up", "a job behind its input began its next epoch at once")                   \
  X(kEpochWokenByInput, "epoch.woken_by_input", "rows committed into a waiting job's input in its process began its next epoch at once") \
  X(kEpochWokenByWatermark, "epoch.woken_by_watermark", "a producer in its process committed while a job waited for its watermark: the next epoch began at once") \
  X(kInputDedupHit, "dedup.input_duplicate", "a computation dropped an input it had processed before")      \
  X(kSinkDedupHit, "dedup.sink_duplicate", "a sink dropped an input it had taken before")                   \
  X(kSinkHeldBack, "sink.held_back", "a sink took no input: max_in_flight of what it took waited for its target") \
  X(kDedupCleanupForgot, "dedup.cleanup_forgot", "a dedup cleanup forgot entries below the watermark")      \
  X(kDedupCleanupWrapped, "dedup.cleanup_wrapped", "a dedup cleanup reached its partition's end and wrapped") \
  X(kAlignmentWait, "alignment.wait", "an input was left for later: not older than every producer's watermark") \
  X(kComputationHeldBack, "computation.held_back", "a computation took no input: a consumer partition had max_in_flight of its messages untaken") \
  X(kSwiftAcknowledge, "swift.acknowledge", "a swift job acknowledged what its last committed epoch processed") \
  X(kSwiftRecompute, "swift.recompute", "a swift job took again an input an earlier incarnation processed")  \
  X(kTimerFired, "timer.fired", "a timer fired")                                                            \
  X(kTimerFiredAfterRestart, "timer.fired_after_restart",                                                   \
    "a timer fired in the first epoch of a job incarnation, set by an earlier one")                         \
  X(kTimerMerged, "timer.merged", "a timer merged into an equal-trigger timer of its key")                  \
  X(kTimerReadAheadFull, "timer.read_ahead_full", "an epoch found more timer rows than it reads ahead")     \
  X(kSourceCaughtUp, "source.caught_up", "a source read everything there was and took the queue's head time") \
  X(kSourceHeldBack, "source.held_back", "a source read nothing: a consumer partition had max_in_flight of its messages untaken") \
  X(kSourceReadFailed, "source.read_failed", "an external source's read failed; the epoch is retried")      \
  X(kOutboxAcknowledged, "outbox.acknowledged", "an epoch acknowledged delivered outbox rows")              \
  X(kOutboxResend, "outbox.resend", "an incarnation handed over outbox rows an earlier one had delivered")  \
  X(kOutboxBehindTarget, "outbox.behind_target",                                                            \
    "a sink's outbox outgrew a delivery round: no longer kept in memory, it is read from the store")       \
  X(kOutboxTargetDuplicate, "outbox.target_duplicate", "a target dropped a resent outbox row by (producer_id, seqNo)") \
  X(kOutboxDeliveryFailed, "outbox.delivery_failed", "an outbox hand-over failed; it is retried")           \
  X(kOutboxPermanentError, "outbox.permanent_error", "a sink's target refused for good; the sink job fails") \
  X(kSyncWriteFailed, "sink.sync_write_failed", "a synchronous sink's write failed; its epoch is retried")  \
  X(kAmoQueueFull, "amo.queue_full", "the at-most-once queue was full: a counted drop")                     \
  X(kAmoNotSent, "amo.not_sent", "an at-most-once send could not leave: a counted drop")                    \
  X(kAmoInDoubt, "amo.in_doubt", "an at-most-once send got no answer: in doubt")                            \
  X(kAmoSinkDestroyed, "amo.sink_destroyed", "an ended at-most-once sink gave up its queue: counted drops")  \
  X(kAmoAckAmbiguous, "amo.ack_ambiguous", "an acknowledgement before an at-most-once send was ambiguous and resolved") \
  X(kControllerTakeOver, "controller.take_over", "a controller took the lead")                              \
  X(kControllerStandby, "controller.standby", "a controller stood by: another's Lease was active")          \
  X(kControllerStepDown, "controller.step_down", "a controller found its Lease ended and stepped down")     \
  X(kControllerBootAborted, "controller.boot_aborted", "a new leader aborted the Leases of stored assignments") \
  X(kControllerLeaseEnded, "controller.job_lease_ended", "the controller found a job's Lease ended")         \
  X(kControllerWorkerLost, "controller.worker_lost", "the controller moved the jobs of a worker whose Lease ended") \
  X(kControllerRebalance, "controller.rebalance", "the controller moved a job to rebalance")                \
  X(kControllerNotRunning, "controller.not_running", "an assigned job was not reported running in time")    \
  X(kControllerRetiring, "controller.retiring", "a job Lease's abort got no answer: no replacement yet")      \
  X(kControllerUnstored, "controller.unstored", "assignments could not be stored; their Leases are ended first") \
  X(kControllerCommitAmbiguous, "controller.commit_ambiguous", "a controller commit was ambiguous and resolved") \
  X(kControllerStateChanged, "controller.state_changed", "the pipeline was paused, stopped or started")     \
  X(kControllerPaused, "controller.paused", "a request paused a working pipeline")                          \
  X(kControllerStopping, "controller.stopping", "a request stopped the pipeline (a drain began)")            \
  X(kControllerDrained, "controller.drained", "a draining pipeline had nothing in flight and stopped")           \
  X(kControllerRepartitioned, "controller.repartitioned", "a new partition layout was stored after its rows were moved") \
  X(kControllerReconfigured, "controller.reconfigured", "settings of an existing pipeline changed (no drain)")  \
  X(kControllerTargetResharded, "controller.target_resharded", "a sink target's tablet count changed: its partitions are recreated") \
  X(kControllerRespecified, "controller.respecified", "a stopped pipeline was given a new spec")              \
  X(kControllerCompleted, "controller.completed", "every source was finished and nothing left: the pipeline completed") \
  X(kWorkerLeaseLost, "worker.lease_lost", "a worker found its own Lease ended and started a new one")      \
  X(kWorkerJobReplaced, "worker.job_replaced", "a worker's job got a new Lease: the old incarnation stops")  \
  X(kKafkaMarkerSkip, "kafka.marker_skip", "a restarted Kafka sink skipped outbox rows its progress marker covers")

enum class Probe : uint16_t {
#define ONCEFLOW_PROBE_ENUM(id, name, what) id,
  ONCEFLOW_PROBES(ONCEFLOW_PROBE_ENUM)
#undef ONCEFLOW_PROBE_ENUM
};

struct ProbeInfo {
  Probe probe;
  std::string_view name;
  std::string_view what;
};

inline constexpr ProbeInfo kProbes[] = {
#define ONCEFLOW_PROBE_INFO(id, name, what) {Probe::id, name, what},
    ONCEFLOW_PROBES(ONCEFLOW_PROBE_INFO)
#undef ONCEFLOW_PROBE_INFO
};
inline constexpr size_t kProbeCount = std::size(kProbes);

inline std::string_view probe_name(Probe p) { return kProbes[static_cast<size_t>(p)].name; }
std::optional<Probe> parse_probe(std::string_view name);

}  // namespace onceflow
