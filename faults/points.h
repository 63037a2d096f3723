// The named fault points of the engine, in one table.
//
// Each point is a place where crashing the node is interesting. A run enables a subset of
// them once, from its seed; an enabled point then fires at random with its probability.
#pragma once

#include <string_view>

namespace onceflow::faults {

struct FaultPointInfo {
  std::string_view name;
  std::string_view where;
};

inline constexpr FaultPointInfo kFaultPoints[] = {
    {"epoch.before_commit", "a job has built its epoch transaction and not yet sent the commit"},
    {"epoch.after_commit", "a commit returned (committed or not) and nothing after it has run: "
                           "no outbox delivery, no swift acknowledgement"},
    {"sink.after_delivery", "an async sink delivered one outbox message and has not yet "
                            "committed its acknowledgement"},
    {"sink.after_external_write", "a synchronous sink's write (a Kafka transaction, a ClickHouse INSERT) "
                                  "was acknowledged and its epoch has not committed yet"},
};

}  // namespace onceflow::faults
