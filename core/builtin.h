// The built-in computations, registered by name for scenarios:
//
// - Retryable Async Request (seeds/003): StateKeeper and RequestProcessor. StateKeeper turns
//   each event into a request with a random RequestId and sums the responses' lengths per key
//   into the external state `total_length`; RequestProcessor keeps FailedAttempts in its
//   state and retries through a timer every Delay until (RequestId + FailedAttempts) %
//   MaxRetries == 0. One deviation from the seed's code: a request is keyed by its
//   RequestId, not by the event's key, so two requests of one key in flight do not
//   overwrite each other's state; the response carries the event's key back. StateKeeper
//   also writes each answer out ("key=K length=L") on its stream `results`, so that the
//   pipeline's results reach a sink as well as its external state.
// - Keyed aggregation: Counter increments a per-key counter and emits "key=K count=N", so a
//   duplicate or a loss shows in the output.
// - Three stages mixing swift and regular computations: Normalize (swift map) lower-cases
//   a word and keys it by its hash, Annotate (transform) appends the word's length, and
//   WordCount (process function) counts per word.
// - Timers: Deadline sets event-time timers at its events' own times (due as the watermark
//   reaches them), equal ones merging, and system-time reminders; Ticker is a repeating
//   timer that emits on every firing and sets the next.
// - Computations as users write them (core/user_style.h): LongestSoFar, RunningMax,
//   SessionWindow, Lottery.
#pragma once

#include <string>

#include "core/computation.h"

namespace onceflow::builtin {

inline constexpr int kMaxRetries = 3;
inline constexpr const char* kStateKeeperResults = "results";  // StateKeeper's output stream of answers
inline constexpr Micros kRetryDelay = 5 * kMillis;

// Registers every built-in function in `registry`.
void register_all(ComputationRegistry& registry);

// Payload helpers shared with tests and workloads.
std::string request_payload(uint64_t request_id, uint64_t event_key, const std::string& data);
std::string response_payload(uint64_t request_id, uint64_t event_key, int64_t length);
// The external state row of StateKeeper for a key: total_length as decimal text.
inline constexpr const char* kStateKeeperExternalState = "/state";

}  // namespace onceflow::builtin
