// The sending side of an async sink's outbox.
//
// An epoch of an async sink commits its outputs as outbox rows numbered by consecutive
// seqNos; after the commit the rows are sent to the target with (producer id, seqNo), and
// the target appends a message only if its seqNo is above the last one it saw from that
// producer. The sender remembers (in memory only) the highest seqNo the target acknowledged
// and resends everything above it, in order, so that a lost request, a lost reply or a
// restarted sender never makes the target append a message twice or skip one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/env/status.h"

namespace onceflow {

struct OutboxRow {
  uint64_t seqno = 0;
  std::string message;     // the encoded message
  bool batch_end = false;  // batching sinks: the last row of an epoch (a batch boundary)
};

class OutboxSender {
 public:
  // new_seqno_on_resend: the bug switch that numbers every send afresh (breaks dedup).
  explicit OutboxSender(bool new_seqno_on_resend = false) : new_seqno_on_resend_(new_seqno_on_resend) {}

  using Send = std::function<Status(uint64_t seqno, const std::string& message)>;
  // Sends the rows above delivered(), in seqNo order, until a send fails; returns that
  // failure, or OK when every row was acknowledged. REQUIRES: rows sorted by seqno.
  Status deliver(const std::vector<OutboxRow>& rows, const Send& send);
  // For a connector that takes rows in batches (core/connectors.h): hands every row above
  // delivered() to `send` at once; `send` answers the highest seqNo the target now holds.
  // Returns its failure, or OK. REQUIRES: rows sorted by seqno.
  using SendAll = std::function<Result<uint64_t>(const std::vector<OutboxRow>& pending)>;
  Status deliver_all(const std::vector<OutboxRow>& rows, const SendAll& send);

  uint64_t delivered() const { return delivered_; }
  // Counts every row up to `seqno` as handed over (at-most-once: sent or given up).
  void skip_to(uint64_t seqno) { delivered_ = std::max(delivered_, seqno); }

 private:
  bool new_seqno_on_resend_;
  uint64_t delivered_ = 0;
  uint64_t resend_salt_ = 0;
};

}  // namespace onceflow
