// Kafka through librdkafka: a source, exactly-once and at-least-once sinks, a mock cluster.
//
// KafkaSource reads a topic's partitions by offset for the source jobs (the controller
// assigns the partitions; the next offset lives in the pipeline's state and moves with the
// epoch that consumed the records), each partition with a consumer of its own. Records are
// read with isolation.level=read_committed.
// A record's key is its decimal text when it is one, otherwise a hash of its bytes.
//
// KafkaSink hands an async sink's committed outbox to a topic:
// - exactly_once: one transactional producer per sink job (transactional.id
//   "onceflow.<topic>.<job>", so a new incarnation fences every older producer on a real
//   broker). Each Kafka transaction carries a batch of outbox rows and a progress marker
//   (the batch's last seqNo) written to "<topic>.onceflow-progress", partition = the sink
//   job's partition, keyed by the deployment's instance id and the job (a compacted topic
//   when onceflow creates it); on a cluster that serves aborted records (the mock), only
//   once the batch's rows are acknowledged by their partitions. A restarted sink reads its marker and skips what it covers. When the
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
#include <optional>
#include <string>
#include <vector>

#include "core/connectors.h"
#include "core/spec.h"
#include "real/latency.h"
#include "real/loop.h"

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_mock_cluster_s rd_kafka_mock_cluster_t;

namespace onceflow::real {

// How to reach a Kafka cluster: its bootstrap servers and any further librdkafka settings
// (security.protocol, sasl.*, ssl.*, ...), applied to every client onceflow makes. Secrets
// never appear in a message: describe() leaves a user:password out of the broker string, and
// redact() replaces every secret (the values of settings whose names say password, secret,
// key material or JAAS, and such a user:password) with "***". librdkafka's own log lines go
// through redact() too.
struct KafkaConfig {
  using Settings = std::vector<std::pair<std::string, std::string>>;
  KafkaConfig() = default;
  // From a broker string alone (tests and tools).
  KafkaConfig(std::string bootstrap) : brokers(std::move(bootstrap)) {}  // NOLINT: implicit on purpose
  std::string brokers;
  Settings settings;
  // Whether the cluster hides an aborted transaction's records from read_committed readers,
  // as brokers do. Unset: asked of the cluster (librdkafka's mock cluster serves them, and its
  // cluster id starts with "mockCluster"). kafka_bench sets it to time a broker's path on the
  // mock.
  std::optional<bool> hides_aborted;

  std::string describe() const;
  std::string redact(std::string_view text) const;
  static bool secret_setting(std::string_view name);
};
// Reads librdkafka properties ("name=value" lines; '#' starts a comment) from `path`.
Result<KafkaConfig::Settings> load_kafka_properties(const std::string& path);

class KafkaMockCluster {
 public:
  static Result<std::unique_ptr<KafkaMockCluster>> start(int brokers);
  ~KafkaMockCluster();
  const std::string& bootstrap_servers() const { return bootstraps_; }
  Status create_topic(const std::string& topic, int partitions);
  // Takes every broker down (connections closed, none accepted) or brings them back.
  void set_brokers_up(bool up);

 private:
  KafkaMockCluster(rd_kafka_t* handle, rd_kafka_mock_cluster_t* cluster, std::string bootstraps, int brokers)
      : handle_(handle), cluster_(cluster), bootstraps_(std::move(bootstraps)), brokers_(brokers) {}
  rd_kafka_t* handle_;
  rd_kafka_mock_cluster_t* cluster_;
  std::string bootstraps_;
  int brokers_;
};

// Creates `topic` with `partitions` partitions unless it exists (admin API; blocking). An
// existing topic with fewer partitions is refused (kInvalidArgument, naming both counts);
// with `exact`, so is one with more (a source must read every partition its topic has).
// `compact`: cleanup.policy=compact, for progress topics, whose last marker per key must
// never expire.
Status ensure_kafka_topic(const KafkaConfig& kafka, const std::string& topic, int partitions, bool compact = false,
                          bool exact = false);
// The offset after the last record of each partition of `topic` (its high watermarks).
Result<std::vector<uint64_t>> kafka_topic_ends(const KafkaConfig& kafka, const std::string& topic);
// Asks the cluster for its metadata: OK when a broker answered within `timeout_ms`.
Status kafka_reachable(const KafkaConfig& kafka, int timeout_ms);

class KafkaSource final : public ExternalSource {
 public:
  static Result<std::unique_ptr<KafkaSource>> open(const KafkaConfig& kafka, const std::string& topic);
  ~KafkaSource() override;
  Result<std::vector<Record>> read(int partition, uint64_t offset, size_t limit, bool* caught_up) override;
  // Whether the last read of `partition` reached the end of what the topic held then.
  bool at_end(int partition) const;
  // The offset after the last record fetched from `partition` (0 before any read).
  uint64_t next_offset(int partition) const;

 private:
  struct Partition;
  KafkaSource(KafkaConfig kafka, std::string topic);
  // The reader of partition `p`, positioned to serve `offset`.
  Result<Partition*> partition(int p, uint64_t offset);

  KafkaConfig kafka_;
  std::string topic_;
  std::map<int, std::unique_ptr<Partition>> partitions_;
};

class KafkaSink final : public ExternalSink {
 public:
  // `instance` names this deployment (its data directory's store); it is part of every
  // transactional.id and progress-marker key, so that another deployment writing the same
  // topic never reads this one's markers.
  static Result<std::unique_ptr<KafkaSink>> open(RealLoop& loop, const KafkaConfig& kafka, const SinkSpec& spec,
                                                 const std::string& instance = "default");
  ~KafkaSink() override;
  Result<uint64_t> deliver(const std::string& job, LeaseId lease, const std::vector<OutboxRow>& rows) override;
  Status write_now(const std::string& job, LeaseId lease, const std::vector<Message>& messages) override;
  static std::string progress_topic(const std::string& topic) { return topic + ".onceflow-progress"; }
  // OK, or why the sink stopped for good (a lost progress marker): the deployment stops then.
  const Status& failed() const { return failed_; }
  // Records handed over and acknowledged by the cluster so far.
  uint64_t acknowledged() const { return acknowledged_; }
  // Whether the cluster hides aborted transactions' records (then a transaction's marker goes
  // with its rows; else after them): unknown until an exactly-once producer has connected.
  std::optional<bool> cluster_hides_aborted() const { return hides_aborted_; }
  // Where to count each record's latency once it is visible (committed, or acknowledged).
  void set_latency(LatencyHistogram* latency) { latency_ = latency; }

 private:
  struct Producer;
  KafkaSink(RealLoop& loop, KafkaConfig kafka, const SinkSpec& spec, std::string instance);
  Result<std::shared_ptr<Producer>> producer_for(const std::string& job, LeaseId lease);
  Result<uint64_t> deliver_transactional(Producer& p, const std::string& job, const std::vector<OutboxRow>& rows);
  Result<uint64_t> deliver_idempotent(Producer& p, const std::vector<OutboxRow>& rows);
  Status produce_and_flush(Producer& p, const std::vector<Message>& messages);
  Result<std::optional<uint64_t>> read_marker(const std::string& key, int partition);
  std::string marker_key(const std::string& job) const { return instance_ + "/" + job; }

  RealLoop& loop_;
  KafkaConfig kafka_;
  SinkSpec spec_;
  Status failed_;
  uint64_t acknowledged_ = 0;
  LatencyHistogram* latency_ = nullptr;
  void visible(const std::vector<Micros>& event_times);
  std::string instance_;
  // By sink job. A producer in use by a fiber (inside run_blocking) is kept alive by it.
  std::map<std::string, std::shared_ptr<Producer>> producers_;
  std::map<std::string, LeaseId> newest_lease_;  // by sink job: older incarnations are refused
  std::optional<bool> hides_aborted_;  // kafka_.hides_aborted, or the cluster's answer once known
};

// Every record of `topic` up to its end now, partition by partition (read_committed); an
// error for a topic whose oldest records were deleted.
struct KafkaRecord {
  int partition = 0;
  int64_t offset = 0;
  std::string key;
  std::string value;
  Micros timestamp = 0;
  std::string id;  // the MessageId a onceflow sink wrote in the record's header, if any
};
Result<std::vector<KafkaRecord>> read_kafka_topic(const KafkaConfig& kafka, const std::string& topic);

}  // namespace onceflow::real
