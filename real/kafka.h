// Kafka through librdkafka: a source, exactly-once and at-least-once sinks, a mock cluster.
//
// KafkaSource reads a topic's partitions by offset for the source jobs (the controller
// assigns the partitions; the next offset lives in the pipeline's state and moves with the
// epoch that consumed the records). Records are read with isolation.level=read_committed.
// A record's key is its decimal text when it is one, otherwise a hash of its bytes.
//
// KafkaSink hands an async sink's committed outbox to a topic:
// - exactly_once: one transactional producer per sink job (transactional.id
//   "onceflow.<topic>.<job>", so a new incarnation fences every older producer on a real
//   broker). Each Kafka transaction carries a batch of outbox rows and a progress marker
//   (the batch's last seqNo) written to "<topic>.onceflow-progress", partition = the sink
//   job's partition, keyed by the deployment's instance id and the job (a compacted topic
//   when onceflow creates it). A restarted sink reads its marker and skips what it covers. When the
//   marker is missing although the outbox shows earlier deliveries, the sink stops (the job
//   fails) rather than write duplicates.
// - at_least_once: the idempotent producer without transactions: rows are produced and
//   flushed, then acknowledged; after a crash, what was produced but not yet acknowledged
//   is produced again (duplicates, never loss). With `synchronous: true` there is no outbox:
//   each sink epoch writes its messages and waits for the acks before it commits.
// Blocking librdkafka calls run through RealLoop::run_blocking, so the loop goes on.
//
// KafkaMockCluster: librdkafka's in-process mock cluster (test.mock.num.brokers). In
// librdkafka 2.0 it neither fences an older producer with the same transactional.id nor hides
// aborted transactions from read_committed consumers; docs/real.md lists the checks that
// therefore need a real broker.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/connectors.h"
#include "core/spec.h"
#include "real/loop.h"

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_mock_cluster_s rd_kafka_mock_cluster_t;

namespace onceflow::real {

class KafkaMockCluster {
 public:
  static Result<std::unique_ptr<KafkaMockCluster>> start(int brokers);
  ~KafkaMockCluster();
  const std::string& bootstrap_servers() const { return bootstraps_; }
  Status create_topic(const std::string& topic, int partitions);

 private:
  KafkaMockCluster(rd_kafka_t* handle, rd_kafka_mock_cluster_t* cluster, std::string bootstraps)
      : handle_(handle), cluster_(cluster), bootstraps_(std::move(bootstraps)) {}
  rd_kafka_t* handle_;
  rd_kafka_mock_cluster_t* cluster_;
  std::string bootstraps_;
};

// Creates `topic` with `partitions` partitions unless it exists (admin API; blocking).
// `compact`: cleanup.policy=compact, for progress topics, whose last marker per key must
// never expire.
Status ensure_kafka_topic(const std::string& brokers, const std::string& topic, int partitions, bool compact = false);

class KafkaSource final : public ExternalSource {
 public:
  static Result<std::unique_ptr<KafkaSource>> open(const std::string& brokers, const std::string& topic);
  ~KafkaSource() override;
  Result<std::vector<Record>> read(int partition, uint64_t offset, size_t limit, bool* caught_up) override;
  // Whether the last read of `partition` reached the end of what the topic held then.
  bool at_end(int partition) const;
  // The offset after the last record fetched from `partition` (0 before any read).
  uint64_t next_offset(int partition) const;

 private:
  struct Partition;
  explicit KafkaSource(rd_kafka_t* consumer, std::string topic);
  Partition& partition(int p, uint64_t offset);

  rd_kafka_t* consumer_;
  std::string topic_;
  std::map<int, std::unique_ptr<Partition>> partitions_;
};

class KafkaSink final : public ExternalSink {
 public:
  // `instance` names this deployment (its data directory's store); it is part of every
  // transactional.id and progress-marker key, so that another deployment writing the same
  // topic never reads this one's markers.
  static Result<std::unique_ptr<KafkaSink>> open(RealLoop& loop, const std::string& brokers, const SinkSpec& spec,
                                                 const std::string& instance = "default");
  ~KafkaSink() override;
  Result<uint64_t> deliver(const std::string& job, LeaseId lease, const std::vector<OutboxRow>& rows) override;
  Status write_now(const std::string& job, LeaseId lease, const std::vector<Message>& messages) override;
  static std::string progress_topic(const std::string& topic) { return topic + ".onceflow-progress"; }

 private:
  struct Producer;
  KafkaSink(RealLoop& loop, std::string brokers, const SinkSpec& spec, std::string instance);
  Result<std::shared_ptr<Producer>> producer_for(const std::string& job, LeaseId lease);
  Result<uint64_t> deliver_transactional(Producer& p, const std::string& job, const std::vector<OutboxRow>& rows);
  Result<uint64_t> deliver_idempotent(Producer& p, const std::vector<OutboxRow>& rows);
  Status produce_and_flush(Producer& p, const std::vector<Message>& messages);
  Result<std::optional<uint64_t>> read_marker(const std::string& key, int partition);
  std::string marker_key(const std::string& job) const { return instance_ + "/" + job; }

  RealLoop& loop_;
  std::string brokers_;
  SinkSpec spec_;
  std::string instance_;
  // By sink job. A producer in use by a fiber (inside run_blocking) is kept alive by it.
  std::map<std::string, std::shared_ptr<Producer>> producers_;
  std::map<std::string, LeaseId> newest_lease_;  // by sink job: older incarnations are refused
};

// Every record of `topic` up to its end now, partition by partition (read_committed).
struct KafkaRecord {
  int partition = 0;
  int64_t offset = 0;
  std::string key;
  std::string value;
  Micros timestamp = 0;
  std::string id;  // the MessageId a onceflow sink wrote in the record's header, if any
};
Result<std::vector<KafkaRecord>> read_kafka_topic(const std::string& brokers, const std::string& topic);

}  // namespace onceflow::real
