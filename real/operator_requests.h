// An operator's requests to a running deployment, made through its store (`onceflow ctl pause`,
// `resume`, `stop`, `repartition`, `set`), so that any host that reaches the store can make
// them, and applied by whichever controller's process of `onceflow real` leads.
//
// A request is a row of its own, numbered in the order they were made:
//   pending   written by ctl;
//   taken     by a leading controller's process (a transaction that finds it pending, so two
//             processes never both take one), which then asks its controller; one taken over
//             30 s ago and not answered (its taker ended) is taken again by the leader;
//   done      the controller stored the change: `answer` is what it answered (the state now
//             stored, "draining" for a stop; the new layout version for repartition and set);
//   refused   the controller refused it (`answer` says why: a paused pipeline is not
//             repartitioned, a name is unknown, ...), or it could not be asked in time.
// ctl withdraws a request no controller took in time (a transaction that finds it still
// pending), so a request it reports as refused is never applied later.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "real/real_store.h"

namespace onceflow::real {

// The store's table of requests: "next" -> the next request's number; "request/<number>" -> one.
inline constexpr const char* kOperatorRequests = "real/operator_requests";

struct OperatorRequest {
  enum class State : uint8_t { kPending, kTaken, kDone, kRefused };
  uint64_t id = 0;
  // "pause", "resume", "stop", "repartition NAME=COUNT ...", "set SETTING=VALUE ...".
  std::string command;
  State state = State::kPending;
  std::string by;      // the controller that took it
  std::string answer;  // done: the controller's answer; refused: why
  int64_t asked_at = 0;  // seconds since the epoch (a wall-clock time, for an operator to read)
  int64_t taken_at = 0;  // likewise; a request taken over 30 s ago and not answered is taken again
};

// Stores a new pending request; returns its number.
Result<uint64_t> submit_request(RealStore& store, const std::string& command);
Result<std::optional<OperatorRequest>> read_request(RealStore& store, uint64_t id);
// Removes a request no controller has taken: true when it was withdrawn, false when one took it
// meanwhile (or it is gone).
Result<bool> withdraw_request(RealStore& store, uint64_t id);

// The requests `tx` sees, oldest first: every one not yet answered, and the last `answered`
// answered ones.
Result<std::vector<OperatorRequest>> recent_requests(RealStore& store, const Transaction& tx, size_t answered);
const char* request_state_name(OperatorRequest::State state);

// A leading controller's process: takes the oldest pending request for `by` (or one taken over
// 30 s ago and never answered: its taker ended); nullopt when none is.
Result<std::optional<OperatorRequest>> take_next_request(RealStore& store, const std::string& by);
// Gives back a request this process took (`taken`, as take_next_request returned it) and could
// not have applied (its controller lost the lead meanwhile): pending again, for the next leader.
// Both leave a request another process took since (it was abandoned) as that one has it.
Status release_request(RealStore& store, const OperatorRequest& taken);
// Records what became of a request this process took.
Status answer_request(RealStore& store, const OperatorRequest& taken, bool done, const std::string& answer);

}  // namespace onceflow::real
