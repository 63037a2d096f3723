// The engine's messages and fired timers as the checkers' records (checkers/history.h): shared
// by every recorder of a history, the simulator's (simulated/) and `onceflow real --verify`'s
// (real/verify.cc). Header-only, so the checkers library itself needs no engine.
#pragma once

#include <utility>

#include "checkers/history.h"
#include "core/engine.h"
#include "core/message.h"

namespace onceflow::checkers {

inline MessageRecord record_of(const Message& m) {
  return {m.id, m.key, m.stream, m.alignment_ts, m.payload, m.event_ts, m.system_ts};
}

inline MessageRecord record_of(Message&& m) {  // takes m's stream and payload
  return {m.id, m.key, std::move(m.stream), m.alignment_ts, std::move(m.payload), m.event_ts, m.system_ts};
}

inline FiredTimerRecord record_of(const EngineObserver::Epoch::FiredTimer& f) {
  return {f.row,           f.creation,         f.timer.key, f.timer.trigger_ts, f.timer.event_ts, f.timer.timer_stream,
          f.after_consumed, f.watermark};
}

}  // namespace onceflow::checkers
