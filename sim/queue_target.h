// A simulated queue that async sinks deliver to, with Flow's Queue API deduplication: a
// message carrying (producer_id, seqNo) is appended only if seqNo is above the last one seen
// from that producer; a repeat is acknowledged without appending. A message without a
// producer id is always appended. The log is the target's disk: it survives crashes.
// Request: a batch of rows from one producer (AppendRequest, core/outbox.h: producer id, the
// sender's Lease, recorded for the fencing checker, tablet, and (seqNo, message) pairs),
// applied in order; under sink errors the target may take only a first part of a batch.
// Reply: AppendReply, the highest seqNo it holds from the producer. A sharded target (tablets > 0) keeps each message in the tablet the sink partition
// writes, folded into the tablets it has now (a partition of a sink not yet recreated after a
// reshard may name one that is gone); the producer sessions are the queue's, whatever the
// tablet, as the producer table of a YTsaurus queue is. It tells its tablet count
// (kSinkDescribeService) to the controller, which keeps the sink's partitions equal to it.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/connectors.h"
#include "core/engine.h"
#include "core/message.h"
#include "core/spec.h"
#include "sim/world.h"

namespace onceflow::sim {

// What the fault injector does to an external system: fail its requests, and make it forget
// its dedup memory (as a finite deduplication window does). The system's owner sets `forget`.
struct TargetFaults {
  double error_probability = 0;   // transient: the sender retries
  double reject_probability = 0;  // permanent: "this request will never succeed"
  uint64_t errors = 0;
  uint64_t rejections = 0;
  uint64_t evictions = 0;
  uint64_t partial = 0;  // batches of which the target took only the first part
  // How many of a batch of `batch` rows the target takes: under error_probability it may
  // take only the first part (as a target with a request size limit does), answering the
  // highest seqNo it holds; the sender must send the rest again.
  size_t accepted_prefix(Random& random, size_t batch);
  std::function<void()> forget;
  // The failure the switches above inject into one request, if any (counted).
  std::optional<Status> injected_failure(Random& random);
  void evict() {
    ++evictions;
    if (forget) forget();
  }
};

// What a sink's target made visible, in order; the target's disk (it survives crashes).
struct TargetLog {
  struct Entry {
    Message message;
    std::string producer;  // empty for at-most-once sends
    uint64_t lease = 0;    // the sending job's Lease, as it said
    Micros time = 0;       // virtual time of the append
    // A transactional target (Kafka): the producer epoch that wrote it and the one whose
    // commit made it visible; -1 for other targets.
    int64_t written_epoch = -1;
    int64_t committed_epoch = -1;
    // The writer's number for the transaction it meant the record for, and the number of the
    // EndTxn that committed it (ghost state of the simulated broker); -1: not transactional.
    uint64_t txn_producer = 0;
    int64_t txn = -1;
    int64_t committed_txn = -1;
    int tablet = -1;  // a sharded queue's tablet that holds it; -1 for other targets
    bool network_copy = false;  // appended from the link's duplicate of a request (a `duplicate` fault)
  };
  std::vector<Entry> appended;
  // A sharded queue: its tablets now (0: not sharded), changed by a reshard at the times given.
  int tablets = 0;
  std::vector<std::pair<Micros, int>> reshards;
  std::map<std::string, uint64_t> last_seqno;
  uint64_t deduplicated = 0;
  // http receivers that honour Idempotency-Key: the keys seen.
  std::set<std::string> idempotency_keys;
  // Forgets the dedup state (seqNos and keys).
  void evict() {
    last_seqno.clear();
    idempotency_keys.clear();
  }
  // Flow's Queue API dedup: appends `message` unless `producer` already sent this seqNo or
  // a later one (an empty producer always appends). Returns whether it appended.
  bool append(const std::string& producer, uint64_t seqno, uint64_t lease, Message message, Micros now, int tablet = -1);
};

BootFn queue_target_boot(TargetLog& log, TargetFaults& faults);

// An HTTP receiver an http sink POSTs to (service kHttpPostService): appends every request,
// except, when it honours Idempotency-Key, one whose key it has seen. Request: key (empty:
// none), producer, Lease, message.
inline constexpr const char* kHttpPostService = "http_post";
BootFn http_receiver_boot(TargetLog& log, TargetFaults& faults, bool honour_idempotency_key);

// The engine side of a sink whose target is a node of its own ("target-<sink>"), reached
// over the calling node's network.
class SimTargetSink : public ExternalSink {
 public:
  SimTargetSink(Network& network, const SinkSpec& spec, Micros timeout_us)
      : network_(network), spec_(spec), timeout_us_(timeout_us) {}

 protected:
  Result<std::string> call(const std::string& service, std::string request) {
    return network_.call(sink_target_node(spec_.name), service, std::move(request), timeout_us_);
  }

  Network& network_;
  const SinkSpec& spec_;
  Micros timeout_us_;
};

// An http sink in the simulator: POSTs committed outbox rows in order to its receiver.
class SimHttpSink final : public SimTargetSink {
 public:
  using SimTargetSink::SimTargetSink;
  Result<uint64_t> deliver(const std::string& job, LeaseId lease, const std::vector<OutboxRow>& rows) override;
};

}  // namespace onceflow::sim
