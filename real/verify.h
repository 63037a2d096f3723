// --verify for `onceflow real`: reads back what a finished run delivered and holds, and holds
// it to the run's committed history: the inputs (the input log and the input topics) and each
// committed computation epoch as the run recorded it (tables::history) are re-executed
// (core/reexecute.h), and the delivery, state and consumption checks compare what the sinks
// and tables hold with that. Prints one JSON object on stdout.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/computation.h"
#include "core/reexecute.h"
#include "core/spec.h"
#include "real/kafka.h"
#include "real/real_store.h"

namespace onceflow::real {

// The lives of a deployment's processes (table kProcessLives, one row each): "running" from
// the process's start; at its end "ended DROPPED IN_DOUBT" when it stopped with nothing in
// flight (drained or stopped), else "cut DROPPED IN_DOUBT" (a second signal, a drain that
// timed out, a process that left): the at-most-once messages it gave up (not sent, or sent
// without an answer), and for a cut life also what it held when it went. A row left
// "running" is a life that was killed or failed (or a process still running). --verify
// allows an at-most-once sink to lack only what these lives account for. A life that ran with
// a bug switch (--bug) says so after that: " bug=NAME" (lives_agree_on_bug, below).
inline constexpr const char* kProcessLives = "process_lives";
std::string process_life_key(Micros started_at, const std::string& process);
std::string process_life_start(const std::string& bug);
// `clean`: the process stopped with nothing in flight.
std::string process_life_end(bool clean, uint64_t dropped, uint64_t in_doubt, const std::string& bug);

// What --verify needs besides the store: where to say how far it got (stderr; null: nowhere)
// and figures to carry in its JSON object (--stats with --verify: one document; null: none).
struct VerifyOptions {
  std::FILE* progress = nullptr;
  const nlohmann::json* stats = nullptr;
  std::string bug;  // the bug switch this life ran with (--bug), named in the JSON; empty: none
};

// Whether an epoch of computation `c`, as a real run recorded it, fired a timer before it was
// due by what the run recorded rather than by what the engine took for its watermark: a
// system-time (or real-time) timer before its process's clock reached its trigger by the commit;
// an event-time one before the computation took an event as new (`newest_event`, the newest
// event time any of its jobs took up to and with this epoch: a job's event watermark, the newest
// it took and the triggers of due timers a repartition moved to it, is never past that when
// each job's epochs are taken in order and every epoch of an older layout before any of a
// newer one). "" when none; else what it fired, for the re-execution check.
std::string fired_before_due(const ComputationSpec& c, Micros newest_event, const EpochHistoryRow& row);

// OK when every life of the store ran with the program's own bug switch `bug` (ONCEFLOW_BUG;
// "" none; the engine's switches do not count), else InvalidArgument naming the lives:
// --verify re-executes the whole history with the program's functions under one switch.
Status lives_agree_on_bug(RealStore& store, const ComputationRegistry& registry, const std::string& bug);

// Returns the exit code: 0 every check passed, 1 one failed; an error when something could
// not be read (the caller reports it, exit 2).
Result<int> verify_run(const PipelineSpec& spec, const ComputationRegistry& registry, RealStore& store,
                       const KafkaConfig& kafka, const VerifyOptions& options = {});

}  // namespace onceflow::real
