// Checkers for a simulated pipeline run, one class per invariant.
//
// Each reads only a PipelineHistory (checkers/history.h) and returns a Verdict. A failing
// Verdict's detail names the ids involved (MessageIds and Lease ids as 16 hex digits) and
// ends with " — replay: <command>" when the history carries a replay command. Checkers hold
// no state: check() may be called on any number of histories, in any order.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "checkers/history.h"
#include "checkers/verdict.h"

namespace onceflow::checkers {

class PipelineChecker {
 public:
  virtual ~PipelineChecker() = default;
  virtual std::string_view name() const = 0;
  virtual Verdict check(const PipelineHistory& history) const = 0;
};

// Each sink holds what the re-executed committed history put on its stream, by MessageId:
// exactly once each; at least once (extras only copies of one id); at most once (a missing
// one dropped or in doubt). An output no re-execution produced is "unexpected", one MessageId
// visible twice is a "duplicate". A history that was not re-executed is held to its reference
// run instead (equal multisets of (key, payload)).
class DeliveryCheck final : public PipelineChecker {
 public:
  std::string_view name() const override { return "delivery"; }
  Verdict check(const PipelineHistory& history) const override;
};

// Each committed epoch started from the state that re-executing the committed epochs before it
// gives (every row its function read before writing it), and the state and external tables
// at the end equal the re-execution's. A history that was not re-executed is held to its
// reference run instead (but for the tables of at-least-once-consistent computations).
class StateCheck final : public PipelineChecker {
 public:
  std::string_view name() const override { return "state"; }
  Verdict check(const PipelineHistory& history) const override;
};

// Every source input is emitted by exactly one committed source epoch, unchanged; every
// message a committed epoch produced is taken by each consumer of its stream in exactly one
// committed epoch (exactly-once consumers) or at least one (swift maps,
// at-least-once-consistent computations, sinks without input dedup); and every consumed
// message equals, field by field, one that was committed under its id.
class ConsumptionCheck final : public PipelineChecker {
 public:
  std::string_view name() const override { return "consumption"; }
  Verdict check(const PipelineHistory& history) const override;
};

// Every committed computation epoch is what its function gives when re-executed from the
// committed history (same messages in the same order, same timers, time and seed, the state
// the epochs before it left): the same outputs by MessageId and content, the same timers
// set, and no timer fired that the re-execution does not hold.
class ReexecutionCheck final : public PipelineChecker {
 public:
  std::string_view name() const override { return "re-execution"; }
  Verdict check(const PipelineHistory& history) const override;
};

// No epoch committed outside its Lease's lifetime, and no output became visible before the
// sink's epoch that decided it had committed (under its then valid Lease).
class FencingCheck final : public PipelineChecker {
 public:
  std::string_view name() const override { return "fencing"; }
  Verdict check(const PipelineHistory& history) const override;
};

// A controller decides only while it leads: every commit of a controller's state applied
// inside its own Lease; every job Lease an epoch committed under was stored by such a commit
// (no worker ran under an assignment that was never stored); and when a job's new Lease is
// stored, every Lease stored for that job before has ended (one live Lease per job).
class ControllerCheck final : public PipelineChecker {
 public:
  std::string_view name() const override { return "controller"; }
  Verdict check(const PipelineHistory& history) const override;
};

// A sink's delivery callback fires only for messages its target holds, and only after the
// epoch that acknowledged them committed.
class DeliveryCallbackCheck final : public PipelineChecker {
 public:
  std::string_view name() const override { return "delivery-callback"; }
  Verdict check(const PipelineHistory& history) const override;
};

// Every timer fired in at most one epoch (its deletion committed with it), never before its
// timer stream's watermark reached its trigger, and a drained run has no timer left.
class TimerCheck final : public PipelineChecker {
 public:
  std::string_view name() const override { return "timers"; }
  Verdict check(const PipelineHistory& history) const override;
};

// What `timers` can ask of a history that records no timer rows per epoch (a real run's):
// the timers stored at the end are those its re-executed committed epochs hold.
class TimersAtEndCheck final : public PipelineChecker {
 public:
  std::string_view name() const override { return "timers"; }
  Verdict check(const PipelineHistory& history) const override;
};

// Per (consumer computation, key, stream, producer), first consumptions arrive in
// non-decreasing alignment timestamp order. The producer is a source or computation with all
// of its partitions, so the order is held across a repartition of either side.
class OrderingCheck final : public PipelineChecker {
 public:
  std::string_view name() const override { return "ordering"; }
  Verdict check(const PipelineHistory& history) const override;
};

// A swift computation produces each MessageId with one payload, however often it re-runs.
class SwiftDeterminismCheck final : public PipelineChecker {
 public:
  std::string_view name() const override { return "swift-determinism"; }
  Verdict check(const PipelineHistory& history) const override;
};

// A pipeline is stopped only after draining and completes only once: when the controller
// stores "stopped" or "completed", nothing is in flight (no stream row, no unacknowledged
// outbox row, no message in an at-most-once queue) and no job Lease is active; after
// "completed", no epoch commits and no job Lease is stored again. And a drain ends: a pipeline
// left draining reaches "stopped" within the liveness bound after the calm.
class LifecycleCheck final : public PipelineChecker {
 public:
  std::string_view name() const override { return "lifecycle"; }
  Verdict check(const PipelineHistory& history) const override;
};

// A new layout takes effect: once a controller stored one (a repartition, a new spec, new
// settings), no epoch of a job still running with an older one commits later than the grace
// (history.layout_grace) after it. And a sharded sink target that was resharded is followed:
// the sink ends with one partition per tablet the target has. n/a when no layout was stored
// or no epoch came that late.
class LayoutCheck final : public PipelineChecker {
 public:
  std::string_view name() const override { return "layout"; }
  Verdict check(const PipelineHistory& history) const override;
};

// After the faults heal, the pipeline drains within the bound.
class LivenessCheck final : public PipelineChecker {
 public:
  std::string_view name() const override { return "liveness"; }
  Verdict check(const PipelineHistory& history) const override;
};

// The assertions in the user's code (core/user_code.h) held: no `always` evaluated false, no
// `unreachable` reached. n/a when the program has no such assertion.
class AssertionsCheck final : public PipelineChecker {
 public:
  std::string_view name() const override { return "assertions"; }
  Verdict check(const PipelineHistory& history) const override;
};

std::vector<std::unique_ptr<PipelineChecker>> all_pipeline_checkers();
std::vector<Verdict> run_pipeline_checks(const PipelineHistory& history);

}  // namespace onceflow::checkers
