#include "real/http_sink.h"

#include <fmt/format.h>

#include "real/wall_clock.h"

namespace onceflow::real {

Result<std::unique_ptr<HttpSink>> HttpSink::open(RealLoop& loop, const SinkSpec& spec, Micros timeout) {
  if (spec.url.empty()) {
    return Status::invalid_argument(fmt::format("sinks.{}.url: an http sink needs the receiver's URL", spec.name));
  }
  auto url = parse_http_url(spec.url);
  if (!url) return Status::invalid_argument(fmt::format("sinks.{}.url: {}", spec.name, url.error().message()));
  return std::unique_ptr<HttpSink>(new HttpSink(loop, spec, std::move(*url), timeout));
}

HttpSink::HttpSink(RealLoop& loop, const SinkSpec& spec, HttpUrl url, Micros timeout)
    : loop_(loop), spec_(spec), url_(std::move(url)), timeout_(timeout) {}

HttpSink::~HttpSink() = default;

Result<uint64_t> HttpSink::deliver(const std::string& job, LeaseId lease, const std::vector<OutboxRow>& rows) {
  (void)lease;  // a receiver tells repeats by the Idempotency-Key, not by who sends
  if (!failed_.is_ok()) return failed_;
  std::vector<Message> messages;
  messages.reserve(rows.size());
  for (const OutboxRow& row : rows) {
    auto m = decode_message(row.message);
    if (!m) return Status::corruption(fmt::format("sink {}: an outbox row does not decode", spec_.name));
    messages.push_back(std::move(*m));
  }
  if (const Micros pause = backoff_.pause(); pause > 0) loop_.pause_fiber(pause);
  std::shared_ptr<HttpClient>& slot = clients_[job];
  if (!slot) slot = std::make_shared<HttpClient>(url_, timeout_);
  const std::shared_ptr<HttpClient> client = slot;  // alive while the helper thread uses it
  size_t sent = 0;
  HttpReply last;
  loop_.run_blocking([&] {
    for (; sent < messages.size(); ++sent) {
      const Message& m = messages[sent];
      HttpClient::Headers headers{{"Onceflow-Message-Key", std::to_string(m.key)}, {"Onceflow-Producer", job}};
      if (spec_.idempotency_key) headers.emplace_back("Idempotency-Key", format_id(m.id));
      last = client->post(url_.target, headers, m.payload, "application/octet-stream");
      if (!last.ok()) return;
    }
  });
  if (sent > 0) {
    backoff_.succeeded();
  } else if (!messages.empty()) {
    backoff_.failed();
  }
  if (sent > 0 || last.outcome == HttpReply::Outcome::kAnswered) {
    health_.answered();
  } else {
    health_.failed(loop_.clock().now(), last.describe());
  }
  acknowledged_ += sent;
  if (latency_ != nullptr && sent > 0) {
    const Micros now = calendar_now();
    for (size_t i = 0; i < sent; ++i) latency_->add(now - messages[i].event_ts);
  }
  // 409: a receiver that keeps Idempotency-Keys is still working on the first request of this
  // key (the IETF draft's answer to a concurrent retry): the retry comes later.
  if (sent < messages.size() && !last.transient() && last.status != 409) {
    failed_ = Status::invalid_argument(fmt::format(
        "the receiver at {} refuses message {} ({}); the sink stops rather than skip it", url_.shown,
        message_label(messages[sent]), last.describe()));
    if (sent == 0) return failed_;
  }
  if (sent > 0) return rows[sent - 1].seqno;  // the rest waits for the next attempt
  return Status::unavailable(fmt::format("the receiver at {}: {}", url_.shown, last.describe()));
}

}  // namespace onceflow::real
