// A simulated Kafka cluster on one node ("kafka"), with the semantics onceflow's Kafka
// connectors rely on:
//  - topics of partitions, each an append-only log; offsets are positions in it;
//  - idempotent producers: a producer id, an epoch and per-partition sequence numbers; a
//    retried batch the broker already appended is acknowledged without appending it again,
//    a batch that skips sequence numbers is refused (OutOfOrderSequence);
//  - transactions: a transactional producer's records stay invisible to read_committed
//    consumers until its transaction commits, and are skipped once it aborts; a consumer's
//    view stops at the first record of a still-open transaction (the last stable offset);
//  - fencing by transactional.id: InitProducerId for a known id bumps its epoch and aborts
//    the previous epoch's open transaction; requests under an older epoch are refused;
//  - transactions that stay open longer than transaction_timeout_us are aborted;
//  - a client retries a timed-out EndTxn, as real clients do. Without KIP-890's epoch bump per
//    transaction (epoch_per_transaction off, as brokers before Kafka 4.0), a delayed copy of an
//    EndTxn that arrives after the producer began its next transaction ends that one instead:
//    its first records commit early (a torn transaction) or abort (lost writes), and a later
//    abort of it comes too late for records already visible (an aborted read). With the bump,
//    each EndTxn moves the producer to a new epoch, and a late copy is refused as fenced.
// The logs and producer states are the brokers' disks (replicated, acks=all): a crash of the
// node makes it unreachable for a while and loses nothing. Eviction (a dedup-window fault)
// forgets the idempotent producers' sequence state, as producer-id expiry does.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/connectors.h"
#include "core/engine.h"
#include "core/spec.h"
#include "sim/queue_target.h"
#include "sim/world.h"

namespace onceflow::sim {

inline constexpr const char* kKafkaNode = "kafka";

struct KafkaRecord {
  enum class State : uint8_t { kPlain, kOpen, kCommitted, kAborted };
  std::string key;
  std::string value;
  Micros timestamp = 0;  // the producer's CreateTime
  State state = State::kPlain;
  uint64_t producer_id = 0;  // 0: written by a plain (non-idempotent) producer
  // Who wrote it, as headers would say: the onceflow job and its Lease (for the checkers).
  std::string writer;
  uint64_t lease = 0;
  // Transactions: the producer epoch that appended it, and the one whose commit made it
  // visible (a fenced producer's record committed by its successor shows as a difference).
  uint32_t epoch = 0;
  uint32_t committed_epoch = 0;
  // Ghost state for the checkers, which no broker has: the writer's own number for the
  // transaction it meant the record for, and the number of the EndTxn that committed it.
  uint64_t txn = 0;
  uint64_t committed_txn = 0;
};

struct KafkaData {
  struct Partition {
    std::vector<KafkaRecord> log;  // offset = index
    int64_t start = 0;             // the log start offset (records below were deleted)
  };
  struct Producer {
    std::string transactional_id;  // empty: idempotent only
    uint32_t epoch = 0;
    std::map<std::pair<std::string, int>, int64_t> next_sequence;  // per topic partition
    // The open transaction: its records, and when it began (-1: none open).
    std::vector<std::pair<std::pair<std::string, int>, int64_t>> open;
    Micros transaction_started_at = -1;
    // KIP-890: the epoch and decision of the EndTxn that ended the last transaction, so that
    // a client's retry of it is answered as before.
    std::optional<std::pair<uint32_t, bool>> last_end;
    // fence_by_partition (a broker bug): the newest epoch that wrote each partition.
    std::map<std::pair<std::string, int>, uint32_t> partition_epoch;
  };
  std::map<std::string, std::vector<Partition>> topics;
  std::map<uint64_t, Producer> producers;
  std::map<std::string, uint64_t> transactional_ids;
  uint64_t next_producer_id = 1;
  Micros transaction_timeout_us = 10 * kSeconds;
  // A broker bug, for the model's own tests (tests/kafka_sim_test.cc): a Produce is checked
  // against the newest epoch that wrote its partition, not the producer's, so a fenced
  // producer's first write to a partition its successor has not written yet is appended, into
  // the successor's open transaction.
  bool fence_by_partition = false;
  // A broker bug (switch kafka-init-keeps-epoch): InitProducerId for a known transactional.id
  // aborts the open transaction but leaves the epoch, so the old producer is not fenced.
  bool init_keeps_epoch = false;
  // KIP-890 part 2: every EndTxn bumps the producer's epoch (Kafka 4.0 brokers). Off: a
  // delayed EndTxn can end the producer's next transaction.
  bool epoch_per_transaction = true;
  // Ghost state: (producer id, writer's transaction number) of transactions whose writer was
  // told they aborted, so that records of them seen by readers show as aborted reads.
  std::set<std::pair<uint64_t, uint64_t>> aborted_by_writer;
  // Called whenever a record becomes visible to read_committed consumers: at a plain append,
  // or when its transaction commits.
  std::function<void(const std::string& topic, int partition, int64_t offset, const KafkaRecord&, Micros now)>
      on_visible;

  void create_topic(const std::string& topic, int partitions);
  bool has_partition(const std::string& topic, int partition) const;
  // An outside producer's plain append (no sequence numbers); returns the offset.
  int64_t append(const std::string& topic, int partition, KafkaRecord record, Micros now);
  // Ends `producer`'s open transaction, if any, making its records visible or skipped.
  void end_transaction(uint64_t producer, bool commit, Micros now, uint64_t txn = 0);
  // Aborts transactions open for longer than the timeout; returns how many.
  int abort_expired_transactions(Micros now);
  // Producer-id expiry: idempotent producers' sequence state is forgotten.
  void forget_idempotent_state();
  // Deletes every record of `topic` (DeleteRecords up to the end, as retention would).
  void delete_records(const std::string& topic);

  struct Fetched {
    std::vector<std::pair<int64_t, const KafkaRecord*>> records;
    int64_t next_offset = 0;  // where the next fetch starts
    bool caught_up = false;   // reached the end (or, read_committed, an open transaction)
  };
  Fetched fetch(const std::string& topic, int partition, int64_t offset, size_t limit, bool read_committed) const;
};

// The broker node: serves the producer and consumer requests below from `data`, and aborts
// timed-out transactions. `faults` may fail requests.
BootFn kafka_broker_boot(KafkaData& data, TargetFaults& faults);

// A Kafka client over a node's network: the subset of the producer and consumer API the
// connectors use.
class SimKafkaClient {
 public:
  struct Producer {
    uint64_t id = 0;
    uint32_t epoch = 0;
    bool transactional = false;
    std::map<std::pair<std::string, int>, int64_t> next_sequence;
    // Ghost: this client's number for its current transaction, unique per producer id (the
    // epoch InitProducerId answered, in the high half).
    uint64_t txn = 1;
  };
  SimKafkaClient(Network& network, Micros timeout_us) : network_(network), timeout_us_(timeout_us) {}
  // InitProducerId: an idempotent producer when `transactional_id` is empty.
  Result<Producer> init_producer(const std::string& transactional_id);
  // Appends `records` to one partition under the producer's next sequence numbers; a timed
  // out request is retried with the same numbers (so it lands once). kAborted: the producer
  // was fenced or lost its sequence state and must not be used again.
  Status produce(Producer& producer, const std::string& topic, int partition, const std::vector<KafkaRecord>& records);
  // EndTxn, retried when it times out; on success the producer moves to its next
  // transaction (and, with KIP-890, the epoch the broker answered).
  Status end_transaction(Producer& producer, bool commit);
  Result<KafkaData::Fetched> fetch(const std::string& topic, int partition, int64_t offset, size_t limit,
                                   bool read_committed, std::vector<KafkaRecord>* records);

 private:
  Network& network_;
  Micros timeout_us_;
};

// A kafka source's reader: fetches read_committed records of the source's topic.
class SimKafkaSource final : public ExternalSource {
 public:
  SimKafkaSource(Network& network, const SourceSpec& spec, Micros timeout_us)
      : client_(network, timeout_us), topic_(kafka_topic(spec)) {}
  Result<std::vector<Record>> read(int partition, uint64_t offset, size_t limit, bool* caught_up) override;

 private:
  SimKafkaClient client_;
  std::string topic_;
};

// The engine side of Flow's Kafka sinks and of an ArkFlow-style transactional output:
//  - kafka, exactly_once: committed outbox rows go in transactions (transactional.id per
//    sink job) together with a progress marker (the last seqNo written) in the topic's
//    progress topic; a new producer reads the marker and skips what it covers, and stops
//    the sink when the marker is gone while its messages may already be in the topic;
//  - kafka, at_least_once: the idempotent producer, no transactions (a restart may repeat);
//  - kafka, at_least_once, synchronous: each epoch's messages, acknowledged before it commits;
//  - arkflow_kafka: each epoch's batch in one transaction under the configured stable
//    transactional_id, committed before the epoch (ArkFlow's source-offset commit) commits;
//    without exactly_once, plain writes.
class SimKafkaSink final : public ExternalSink {
 public:
  // `observer` (may be null) hears of the recovery paths the sink takes (core/probes.h).
  SimKafkaSink(Network& network, const SinkSpec& spec, Micros timeout_us, EngineObserver* observer = nullptr)
      : client_(network, timeout_us), spec_(spec), observer_(observer) {}
  Result<uint64_t> deliver(const std::string& job, LeaseId lease, const std::vector<OutboxRow>& rows) override;
  Status write_now(const std::string& job, LeaseId lease, const std::vector<Message>& messages) override;
  static std::string progress_topic(const std::string& topic) { return topic + ".onceflow-progress"; }
  // The partition of the sink's topic a message goes to.
  static int partition_of(uint64_t key, int partitions) { return static_cast<int>(key % static_cast<uint64_t>(partitions)); }

 private:
  struct JobProducer {
    LeaseId lease = 0;
    SimKafkaClient::Producer producer;
    std::optional<uint64_t> marker;  // exactly-once: read once per producer
  };
  // The job's producer for this Lease (a new one, fencing the old, for a new Lease). A fiber
  // holds on to it across its calls: another fiber may replace it meanwhile.
  Result<std::shared_ptr<JobProducer>> producer_for(const std::string& job, LeaseId lease,
                                                    const std::string& transactional_id);
  void forget(const std::string& job, const JobProducer& p);
  Result<uint64_t> deliver_transactional(JobProducer& p, const std::string& job, LeaseId lease,
                                         const std::vector<OutboxRow>& rows);
  Status produce_messages(JobProducer& p, const std::string& job, LeaseId lease, const std::vector<Message>& messages);
  Status read_committed(const std::string& topic, int partition, const std::function<bool(const KafkaRecord&)>& visit);
  Result<std::optional<uint64_t>> read_marker(const std::string& job, int partition);
  Result<bool> wrote_to_topic(const std::string& job);
  std::string arkflow_transactional_id(const std::string& job) const;

  void report(Probe p) {
    if (observer_ != nullptr) observer_->probe(p);
  }
  SimKafkaClient client_;
  const SinkSpec& spec_;
  EngineObserver* observer_;
  std::map<std::string, std::shared_ptr<JobProducer>> producers_;  // by sink job
  std::map<std::string, LeaseId> newest_lease_;   // by sink job: older incarnations are refused
};

}  // namespace onceflow::sim
