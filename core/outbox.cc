#include "core/outbox.h"

#include <algorithm>

namespace onceflow {

Status OutboxSender::deliver(const std::vector<OutboxRow>& rows, const Send& send) {
  for (const OutboxRow& row : rows) {
    if (row.seqno <= delivered_ && !new_seqno_on_resend_) continue;
    uint64_t seqno = row.seqno;
    if (new_seqno_on_resend_) seqno += (++resend_salt_) << 32;  // a fresh number for each send
    Status sent = send(seqno, row.message);
    if (!sent.is_ok()) return sent;
    delivered_ = std::max<uint64_t>(delivered_, seqno & 0xffffffffULL);
  }
  return Status::ok();
}

Status OutboxSender::deliver_all(const std::vector<OutboxRow>& rows, const SendAll& send) {
  // Rows acknowledged already wait only for the next epoch to erase them.
  const auto first = std::find_if(rows.begin(), rows.end(), [&](const OutboxRow& row) { return row.seqno > delivered_; });
  if (first == rows.end()) return Status::ok();
  auto held = first == rows.begin() ? send(rows) : send(std::vector<OutboxRow>(first, rows.end()));
  if (!held) return held.error();
  delivered_ = std::max(delivered_, *held);
  return Status::ok();
}

}  // namespace onceflow
