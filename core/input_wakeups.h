// Input wake-ups: the jobs of one worker process that wait for their next epoch, by the
// stream partitions they read. An epoch that committed rows for a partition wakes the job of
// this process reading it at once, so that a message goes down a chain of stages without
// waiting an epoch period at each; a job in another process finds the rows at its next epoch.
// Wake-ups go through the runtime's scheduler, so a simulated run stays deterministic.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/env/runtime.h"

namespace onceflow {

class InputWakeups {
 public:
  // A stream partition: (stream table, partition).
  using Input = std::pair<std::string, int>;
  // A stream's producers' watermarks, as an Input: "committed" by every epoch a producer of
  // the stream commits, rows or not. A consumer that left inputs for a producer's watermark
  // waits for it as well as for rows.
  static Input watermark(const std::string& stream_table) { return {stream_table, -1}; }

  // How many commits wrote rows for `inputs` so far. A job reads it before its epoch begins.
  uint64_t commits(const std::vector<Input>& inputs) const;
  // Suspends the calling fiber until the clock reads `t` or rows are committed for one of
  // `inputs`; returns at once when some were since commits() said `seen` (while the job's
  // epoch ran). True when rows came.
  bool wait(Runtime& runtime, const std::vector<Input>& inputs, Micros t, uint64_t seen);
  // Rows for `written` were committed: the jobs waiting for them start their next epoch now.
  void committed(Runtime& runtime, const std::vector<Input>& written);

 private:
  struct Waiting {
    Runtime::Waiter waiter;
    bool operator==(const Waiting& o) const {
      return waiter.fiber == o.waiter.fiber && waiter.generation == o.waiter.generation;
    }
  };
  std::multimap<Input, Waiting> waiting_;
  std::map<Input, uint64_t> commits_;
};

}  // namespace onceflow
