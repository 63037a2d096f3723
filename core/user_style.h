// Computations as a user writes them, for the scenario library: their outputs depend on the
// order messages arrive in, on when timers fire, on randomness and on the system time, all
// of which the guarantee leaves to the engine. They are here to show that the checks hold
// any correct computation to the guarantee and nothing more (docs/guarantees.md):
//
// - LongestSoFar: per key, the longest word seen so far, emitted each time it grows. Fed from
//   two source partitions, a key's words arrive in an order the engine chooses.
// - RunningMax: per key, the largest value seen (a word's hash mod 1000), reported through a
//   50 ms processing-time timer armed by the first message after a report.
// - SessionWindow: per key, event-time sessions closed by a gap timer (30 ms of event time without a word):
//   emits the session's start, end and word count.
// - Lottery: per message, a draw from random() and the epoch's current_timestamp() in the
//   output, and a per-key count in state (allowed for regular computations, as Flow says).
// - Escalation and AlertTotals, two stages: Escalation gathers each key's words into a batch a
//   processing-time timer reports after a random delay (a report sometimes arms the next
//   timer itself), and every third word raises an alert on another key at once; the report
//   goes out on the key of its batch's size. AlertTotals keeps per-key totals of the alerts.
// - OrderPaymentJoin: orders and payments of a key from two sources, matched first come first
//   served; an order still unmatched expires by an event-time timer kJoinWindow after it, once
//   the job's event-time watermark (which follows both inputs) passes; payments wait. Which
//   order meets which payment, and which expire, is the arrival order and the watermark's
//   pace: the engine's choices.
// - FanOut: each word in one to three pieces on keys of their own (how many is the key's count
//   so far), and every fifth word of a key a timer whose firing reports to two keys: several
//   outputs of one input or one firing, each its own message.
//
// Planted bugs in them (state in a member, a swift map reading the machine's clock) live in
// tests/user_style_test.cc: nothing a simulation runs by default may read the clock.
#pragma once

#include "core/computation.h"

namespace onceflow::user_style {

inline constexpr Micros kReportDelay = 50 * kMillis;
inline constexpr Micros kSessionGap = 30 * kMillis;
inline constexpr Micros kJoinWindow = 20 * kMillis;

// Registers LongestSoFar, RunningMax, SessionWindow, Lottery, Escalation, AlertTotals,
// OrderPaymentJoin and FanOut.
void register_all(ComputationRegistry& registry);
// RunningMax's value of a message: its payload's hash mod 1000.
int64_t value_of(const Message& m);

}  // namespace onceflow::user_style
