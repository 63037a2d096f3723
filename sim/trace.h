// Trace: what happened in a run, and its rolling hash.
//
// Every scheduler event feeds the scheduler's event hash; facts worth reading (a packet sent,
// a commit, a crash) are recorded here as lines "<time_us> <node> <text>" and fed into the
// same hash. trace_hash() combines both: the same seed and build give the same hash.
// Lines are kept only when asked for (replay, explain), up to a bound; the hash covers all.
//
// Thread-safety: none.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include "core/env/clock.h"

namespace onceflow::sim {

class Trace {
 public:
  // Keeps at most `keep_lines` most recent lines (0: keep none, hash only).
  explicit Trace(size_t keep_lines = 0) : keep_lines_(keep_lines) {}

  void record(Micros time, std::string_view node, std::string_view text);
  // Keeps a line for readers without hashing it: for details whose identity is already hashed
  // some cheaper way. A no-op unless lines are kept.
  void keep_only(Micros time, std::string_view node, std::string_view text);
  uint64_t hash() const { return hash_; }
  uint64_t lines_recorded() const { return recorded_; }
  const std::deque<std::string>& lines() const { return lines_; }
  void set_keep_lines(size_t keep_lines) { keep_lines_ = keep_lines; }
  bool keeping() const { return keep_lines_ > 0; }

 private:
  size_t keep_lines_;
  uint64_t hash_ = 0;
  uint64_t recorded_ = 0;
  std::deque<std::string> lines_;
};

}  // namespace onceflow::sim
