#include "core/outbox.h"

#include <algorithm>

#include "core/env/codec.h"
#include "core/stream_rows.h"

namespace onceflow {

std::string OutboxRowWriter::take(std::vector<Message>* kept) {
  std::string row = stream_rows::encode(messages_);
  if (kept != nullptr) *kept = std::move(messages_);
  messages_.clear();
  return row;
}

void append_outbox_rows(uint64_t first, const std::vector<Message>& messages, bool batch_end, std::vector<OutboxRow>* out) {
  if (messages.empty()) return;
  uint64_t seqno = first;
  for (const Message& m : messages) out->push_back({seqno++, encode_message(m), false, m.id});
  out->back().batch_end = batch_end;
}

bool decode_outbox_row(uint64_t first, std::string_view value, bool batch_end, std::vector<OutboxRow>* out) {
  auto messages = stream_rows::decode(value);
  if (!messages || messages->empty()) return false;  // a row holds at least one message
  append_outbox_rows(first, *messages, batch_end, out);
  return true;
}

std::string encode_append(const AppendRequest& r) {
  Encoder out;
  out.bytes(r.producer).u64(r.lease).u64(r.tablet).u64(r.entries.size());
  for (const auto& e : r.entries) out.u64(e.seqno).bytes(e.message);
  return out.take();
}

std::optional<AppendRequest> decode_append(std::string_view request) {
  Decoder in(request);
  AppendRequest r;
  r.producer = in.string();
  r.lease = in.u64();
  r.tablet = in.u64();
  const uint64_t n = in.u64();
  // Each entry takes at least two bytes: a count beyond that is malformed, not an allocation.
  if (!in.ok() || n > request.size() / 2) return std::nullopt;
  r.entries.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t seqno = in.u64();
    const std::string_view message = in.bytes();
    r.entries.push_back({seqno, message});
  }
  if (!in.done()) return std::nullopt;
  return r;
}

std::string encode_append_reply(const AppendReply& r) {
  Encoder out;
  out.u64(r.held).u64(r.appended).u64(r.duplicates);
  return out.take();
}

std::optional<AppendReply> decode_append_reply(std::string_view reply) {
  Decoder in(reply);
  AppendReply r;
  r.held = in.u64();
  r.appended = in.u64();
  r.duplicates = in.u64();
  if (!in.done()) return std::nullopt;
  return r;
}

Status OutboxSender::deliver(const std::vector<OutboxRow>& rows, const BatchLimits& limits, const SendBatch& send) {
  size_t next = 0;
  std::vector<AppendRequest::Entry> batch;
  while (true) {
    // With the resend bug every row goes again (under a fresh number), acknowledged or not.
    while (!bugs_.new_seqno_on_resend && next < rows.size() && rows[next].seqno <= delivered_) ++next;
    if (next == rows.size()) return Status::ok();
    batch.clear();
    size_t bytes = 0;
    const size_t first = next;
    for (; next < rows.size() && batch.size() < std::max<size_t>(1, limits.messages); ++next) {
      const size_t size = rows[next].message.size();
      if (!batch.empty() && bytes + size > limits.bytes) break;
      uint64_t seqno = rows[next].seqno;
      if (bugs_.new_seqno_on_resend) seqno += (++resend_salt_) << 32;  // a fresh number for each send
      batch.push_back({seqno, rows[next].message});
      bytes += size;
    }
    auto held = send(batch);
    if (!held) return held.error();
    const uint64_t last = rows[next - 1].seqno;
    const uint64_t taken = bugs_.new_seqno_on_resend ? (*held & 0xffffffffULL) : *held;
    delivered_ = std::max(delivered_, bugs_.batch_ack_whole ? last : taken);
    if (bugs_.new_seqno_on_resend) continue;  // `next` is past the batch already
    if (delivered_ < rows[first].seqno) return Status::unavailable("the target took none of the batch");
    next = first;  // on from the first row the target does not hold
  }
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
