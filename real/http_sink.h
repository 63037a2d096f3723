// The http sink of `onceflow real`: POSTs each committed outbox message to the sink's `url`,
// one request per message, in seqNo order, the body being the message's payload.
//
// At least once: a message is acknowledged (and its outbox row may go) once the receiver
// answered 2xx; no answer, 408, 409 (a receiver still working on the first request of that
// Idempotency-Key), 425, 429 or 5xx is retried (the outbox keeps the row, and a
// restarted sink sends it again), so a receiver may get a message twice. With
// `idempotency_key: true` (the default) every request carries the header
//   Idempotency-Key: <MessageId, 16 hex digits>
// stable across retries, restarts and replays, by which a receiver that honours it keeps
// one of each. Every request also carries `Onceflow-Message-Key` (the message's key,
// decimal) and `Onceflow-Producer` (the sink job). Any other answer (a 4xx the receiver
// means: this request is wrong) stops the sink for good, naming the message: going on would
// skip it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/connectors.h"
#include "core/spec.h"
#include "real/http.h"
#include "real/latency.h"
#include "real/loop.h"

namespace onceflow::real {

class HttpSink final : public ExternalSink {
 public:
  // kInvalidArgument when the spec's url is missing or not an http(s) URL.
  static Result<std::unique_ptr<HttpSink>> open(RealLoop& loop, const SinkSpec& spec, Micros timeout);
  ~HttpSink() override;
  Result<uint64_t> deliver(const std::string& job, LeaseId lease, const std::vector<OutboxRow>& rows) override;
  // OK, or why the sink stopped for good (the receiver refused a message): the deployment stops.
  const Status& failed() const { return failed_; }
  uint64_t acknowledged() const { return acknowledged_; }
  const ServerHealth& health() const { return health_; }
  void set_latency(LatencyHistogram* latency) { latency_ = latency; }

 private:
  HttpSink(RealLoop& loop, const SinkSpec& spec, HttpUrl url, Micros timeout);

  RealLoop& loop_;
  SinkSpec spec_;
  HttpUrl url_;
  Micros timeout_;
  Status failed_;
  ServerHealth health_;
  Backoff backoff_;  // between deliveries while the receiver fails
  uint64_t acknowledged_ = 0;
  LatencyHistogram* latency_ = nullptr;
  // By sink job: each job's requests go over a connection of its own, one at a time.
  std::map<std::string, std::shared_ptr<HttpClient>> clients_;
};

}  // namespace onceflow::real
