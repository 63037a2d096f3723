#include "real/kafka.h"

#include <fmt/format.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <fstream>
#include <deque>
#include <charconv>
#include <optional>

#include "core/env/random.h"
#include "core/message.h"
#include "real/wall_clock.h"

namespace onceflow::real {
namespace {

constexpr int kBlockingTimeoutMs = 30'000;
constexpr const char* kIdHeader = "onceflow-id";

using Settings = KafkaConfig::Settings;

}  // namespace

// What a client's callbacks need: the config (its log lines are redacted by it) and a count
// of deliveries that failed. It outlives its client.
struct KafkaClientContext {
  KafkaConfig kafka;
  std::atomic<uint64_t> failed{0};
};

namespace {

using ClientContext = KafkaClientContext;

void on_log(const rd_kafka_t* rk, int level, const char* facility, const char* text) {
  const auto* context = static_cast<const ClientContext*>(rd_kafka_opaque(rk));
  const std::string line = context != nullptr ? context->kafka.redact(text) : std::string(text);
  fmt::print(stderr, "onceflow: kafka: %{}|{}| {}\n", level, facility, line);
}

void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) static_cast<ClientContext*>(opaque)->failed.fetch_add(1);
}

// A client with the user's settings first, then `own` (which the engine relies on, so they
// win). `context` must outlive the client.
Result<rd_kafka_t*> make_client(rd_kafka_type_t type, ClientContext& context, const Settings& own) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  Settings all;
  if (!context.kafka.brokers.empty()) all.emplace_back("bootstrap.servers", context.kafka.brokers);
  all.insert(all.end(), context.kafka.settings.begin(), context.kafka.settings.end());
  all.insert(all.end(), own.begin(), own.end());
  for (const auto& [name, value] : all) {
    if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      const std::string shown = KafkaConfig::secret_setting(name) ? "***" : context.kafka.redact(value);
      return Status::invalid_argument(
          fmt::format("kafka setting {}={}: {}", name, shown, context.kafka.redact(err)));
    }
  }
  rd_kafka_conf_set(conf, "log_level", "3", err, sizeof err);  // errors only
  rd_kafka_conf_set_log_cb(conf, on_log);
  if (type == RD_KAFKA_PRODUCER) rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
  rd_kafka_conf_set_opaque(conf, &context);
  rd_kafka_t* rk = rd_kafka_new(type, conf, err, sizeof err);
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    return Status::unavailable(fmt::format("cannot create a kafka client: {}", context.kafka.redact(err)));
  }
  return rk;
}

// A client for one call: destroyed with it.
struct TemporaryClient {
  ClientContext context;
  rd_kafka_t* rk = nullptr;
  ~TemporaryClient() {
    if (rk != nullptr) rd_kafka_destroy(rk);
  }
};
Result<std::unique_ptr<TemporaryClient>> temporary_client(rd_kafka_type_t type, const KafkaConfig& kafka,
                                                          const Settings& own) {
  auto client = std::make_unique<TemporaryClient>();
  client->context.kafka = kafka;
  auto rk = make_client(type, client->context, own);
  if (!rk) return rk.error();
  client->rk = *rk;
  return client;
}

Status from_error(rd_kafka_error_t* error, std::string_view what) {
  if (error == nullptr) return Status::ok();
  Status s = Status::unavailable(fmt::format("{}: {}", what, rd_kafka_error_string(error)));
  rd_kafka_error_destroy(error);
  return s;
}

std::string header_value(const rd_kafka_message_t* m, const char* name) {
  rd_kafka_headers_t* headers = nullptr;
  if (rd_kafka_message_headers(m, &headers) != RD_KAFKA_RESP_ERR_NO_ERROR) return "";
  const void* value = nullptr;
  size_t size = 0;
  if (rd_kafka_header_get_last(headers, name, &value, &size) != RD_KAFKA_RESP_ERR_NO_ERROR) return "";
  return std::string(static_cast<const char*>(value), size);
}

// Produces one engine message as a record of `topic`: its key as decimal text, its MessageId
// in the onceflow-id header (copied: the message need not outlive the call).
Status produce_message(rd_kafka_t* rk, const std::string& topic, const Message& m) {
  const std::string key = std::to_string(m.key);
  const std::string id = format_id(m.id);
  const rd_kafka_resp_err_t err = rd_kafka_producev(
      rk, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_KEY(key.data(), key.size()),
      RD_KAFKA_V_VALUE(const_cast<char*>(m.payload.data()), m.payload.size()),
      RD_KAFKA_V_HEADER(kIdHeader, id.data(), static_cast<ssize_t>(id.size())), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
      RD_KAFKA_V_END);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return Status::unavailable(fmt::format("produce: {}", rd_kafka_err2str(err)));
  return Status::ok();
}

// The partitions of `topic`, or an error when it does not exist.
Result<int> partition_count(rd_kafka_t* rk, const std::string& topic) {
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  const rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, rkt, &md, 10'000);
  rd_kafka_topic_destroy(rkt);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status::unavailable(fmt::format("kafka metadata of {}: {}", topic, rd_kafka_err2str(err)));
  }
  int partitions = -1;
  if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR) partitions = md->topics[0].partition_cnt;
  rd_kafka_metadata_destroy(md);
  if (partitions < 0) return Status::not_found("no kafka topic " + topic);
  return partitions;
}

}  // namespace

// --- Mock cluster -----------------------------------------------------------------------------

Result<std::unique_ptr<KafkaMockCluster>> KafkaMockCluster::start(int brokers) {
  static ClientContext mock_context;  // no settings and no deliveries: nothing in it changes
  auto rk = make_client(RD_KAFKA_PRODUCER, mock_context, {{"test.mock.num.brokers", std::to_string(brokers)}});
  if (!rk) return rk.error();
  rd_kafka_mock_cluster_t* cluster = rd_kafka_handle_mock_cluster(*rk);
  if (cluster == nullptr) {
    rd_kafka_destroy(*rk);
    return Status::unavailable("librdkafka did not start a mock cluster");
  }
  return std::unique_ptr<KafkaMockCluster>(
      new KafkaMockCluster(*rk, cluster, rd_kafka_mock_cluster_bootstraps(cluster), brokers));
}

KafkaMockCluster::~KafkaMockCluster() { rd_kafka_destroy(handle_); }

void KafkaMockCluster::set_brokers_up(bool up) {
  for (int id = 1; id <= brokers_; ++id) {
    if (up) {
      rd_kafka_mock_broker_set_up(cluster_, id);
    } else {
      rd_kafka_mock_broker_set_down(cluster_, id);
    }
  }
}

Status KafkaMockCluster::create_topic(const std::string& topic, int partitions) {
  const rd_kafka_resp_err_t err = rd_kafka_mock_topic_create(cluster_, topic.c_str(), partitions, 1);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status::unavailable(fmt::format("cannot create topic {}: {}", topic, rd_kafka_err2str(err)));
  }
  return Status::ok();
}

Status ensure_kafka_topic(const KafkaConfig& kafka, const std::string& topic, int partitions, bool compact,
                          bool exact) {
  auto client = temporary_client(RD_KAFKA_PRODUCER, kafka, {});
  if (!client) return client.error();
  rd_kafka_t* const* rk = &(*client)->rk;
  Status result = Status::ok();
  auto existing = partition_count(*rk, topic);
  if (existing) {
    if (*existing < partitions || (exact && *existing != partitions)) {
      result = Status::invalid_argument(
          fmt::format("kafka topic {} has {} partitions, the pipeline's spec names {}: give the spec {} partitions",
                      topic, *existing, partitions, *existing));
    }
  } else if (existing.error().is_unavailable()) {
    result = Status::unavailable(kafka.redact(existing.error().message()));
  } else {
    char err[256];
    rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(topic.c_str(), partitions, -1, err, sizeof err);
    if (compact) rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact");
    rd_kafka_queue_t* queue = rd_kafka_queue_new(*rk);
    rd_kafka_CreateTopics(*rk, &nt, 1, nullptr, queue);
    rd_kafka_event_t* ev = rd_kafka_queue_poll(queue, kBlockingTimeoutMs);
    const rd_kafka_CreateTopics_result_t* res = ev != nullptr ? rd_kafka_event_CreateTopics_result(ev) : nullptr;
    if (res == nullptr) {
      result = Status::unavailable("no answer to creating kafka topic " + topic);
    } else {
      size_t n = 0;
      const rd_kafka_topic_result_t** topics = rd_kafka_CreateTopics_result_topics(res, &n);
      const rd_kafka_resp_err_t e = n == 1 ? rd_kafka_topic_result_error(topics[0]) : rd_kafka_event_error(ev);
      if (e != RD_KAFKA_RESP_ERR_NO_ERROR && e != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
        result = Status::unavailable(fmt::format("cannot create kafka topic {}: {}", topic, rd_kafka_err2str(e)));
      }
    }
    if (ev != nullptr) rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(queue);
    rd_kafka_NewTopic_destroy(nt);
  }
  return result;
}

Result<std::vector<uint64_t>> kafka_topic_ends(const KafkaConfig& kafka, const std::string& topic) {
  auto client = temporary_client(RD_KAFKA_CONSUMER, kafka, {{"group.id", "onceflow.ends"}});
  if (!client) return client.error();
  rd_kafka_t* rk = (*client)->rk;
  auto partitions = partition_count(rk, topic);
  if (!partitions) return partitions.error();
  std::vector<uint64_t> ends;
  for (int p = 0; p < *partitions; ++p) {
    int64_t low = 0, high = 0;
    const rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(rk, topic.c_str(), p, &low, &high, 10'000);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return Status::unavailable(fmt::format("the end of kafka topic {} partition {}: {}", topic, p, rd_kafka_err2str(err)));
    }
    ends.push_back(static_cast<uint64_t>(high));
  }
  return ends;
}

Status kafka_reachable(const KafkaConfig& kafka, int timeout_ms) {
  auto client = temporary_client(RD_KAFKA_PRODUCER, kafka, {});
  if (!client) return client.error();
  const rd_kafka_metadata_t* md = nullptr;
  const rd_kafka_resp_err_t err = rd_kafka_metadata((*client)->rk, 0, nullptr, &md, timeout_ms);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) return Status::unavailable(rd_kafka_err2str(err));
  rd_kafka_metadata_destroy(md);
  return Status::ok();
}

// --- Source -----------------------------------------------------------------------------------

// One partition's reader: a consumer of its own, read through its consumer queue, and what it
// fetched and is not yet known to be committed. One consumer per partition, because a
// partition queue split off a shared consumer after its assignment lets the first fetched
// records go to the shared queue, where nobody reads them: kafka_alo_crash_test lost 3,149
// records so (librdkafka issue #3231 and its maintainer's advice in hw-kafka-client#107).
// A retried epoch reads the same records again from the buffer. A read from an offset
// outside the buffer (an older incarnation of the job, or a newer one, reading from where it
// stands) gets a new consumer positioned there rather than a seek, after which records
// fetched from the old position could still come.
struct KafkaSource::Partition {
  ClientContext context;         // outlives rk
  rd_kafka_t* rk = nullptr;
  rd_kafka_queue_t* queue = nullptr;
  uint64_t base = 0;               // `buffered` holds every record of [base, fetched)
  uint64_t fetched = 0;            // the offset after the last record fetched
  bool at_end = false;             // the last fetch reached the end of the partition
  std::deque<Record> buffered;     // fetched records, from the lowest offset still asked for
  ~Partition() {
    if (queue != nullptr) rd_kafka_queue_destroy(queue);
    if (rk != nullptr) rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  }
};

Result<std::unique_ptr<KafkaSource>> KafkaSource::open(const KafkaConfig& kafka, const std::string& topic) {
  return std::unique_ptr<KafkaSource>(new KafkaSource(kafka, topic));
}

KafkaSource::KafkaSource(KafkaConfig kafka, std::string topic) : kafka_(std::move(kafka)), topic_(std::move(topic)) {}

KafkaSource::~KafkaSource() = default;

Result<KafkaSource::Partition*> KafkaSource::partition(int p, uint64_t offset) {
  auto it = partitions_.find(p);
  if (it != partitions_.end()) {
    Partition& part = *it->second;
    if (offset >= part.base && offset <= part.fetched) {
      while (!part.buffered.empty() && part.buffered.front().offset < offset) part.buffered.pop_front();
      part.base = offset;
      return &part;
    }
    partitions_.erase(it);  // positioned elsewhere: a new consumer
  }
  auto part = std::make_unique<Partition>();
  part->context.kafka = kafka_;
  auto rk = make_client(RD_KAFKA_CONSUMER, part->context,
                        {{"group.id", "onceflow." + topic_},
                         {"enable.auto.commit", "false"},
                         {"enable.partition.eof", "true"},
                         {"isolation.level", "read_committed"},
                         {"auto.offset.reset", "earliest"}});
  if (!rk) return rk.error();
  part->rk = *rk;
  // Everything the consumer has (records, errors, its events) comes through one queue, read
  // below; it is set up before the assignment starts any fetch.
  rd_kafka_poll_set_consumer(part->rk);
  part->queue = rd_kafka_queue_get_consumer(part->rk);
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(list, topic_.c_str(), p)->offset = static_cast<int64_t>(offset);
  const rd_kafka_resp_err_t err = rd_kafka_assign(part->rk, list);
  rd_kafka_topic_partition_list_destroy(list);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status::unavailable(fmt::format("assign {} partition {}: {}", topic_, p, rd_kafka_err2str(err)));
  }
  part->base = part->fetched = offset;
  Partition* raw = part.get();
  partitions_[p] = std::move(part);
  return raw;
}

Result<std::vector<ExternalSource::Record>> KafkaSource::read(int p, uint64_t offset, size_t limit, bool* caught_up) {
  auto found = partition(p, offset);
  if (!found) return found.error();
  Partition& part = **found;
  if (part.buffered.size() < limit) {
    std::vector<rd_kafka_message_t*> batch(limit - part.buffered.size());
    const ssize_t n = rd_kafka_consume_batch_queue(part.queue, 0, batch.data(), batch.size());
    for (ssize_t i = 0; i < n; ++i) {
      rd_kafka_message_t* m = batch[static_cast<size_t>(i)];
      if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        part.at_end = true;
      } else if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && m->partition == p &&
                 m->offset >= static_cast<int64_t>(part.fetched)) {
        Record r;
        r.offset = static_cast<uint64_t>(m->offset);
        r.key = kafka_key(std::string_view(static_cast<const char*>(m->key), m->key_len));
        r.payload.assign(static_cast<const char*>(m->payload), m->len);
        rd_kafka_timestamp_type_t type;
        const int64_t ms = rd_kafka_message_timestamp(m, &type);
        r.timestamp = ms >= 0 ? ms * kMillis : 0;
        part.fetched = r.offset + 1;
        part.at_end = false;
        part.buffered.push_back(std::move(r));
      }
      rd_kafka_message_destroy(m);
    }
  }
  const size_t n = std::min(limit, part.buffered.size());
  std::vector<Record> out(part.buffered.begin(), part.buffered.begin() + static_cast<long>(n));
  *caught_up = part.at_end && n == part.buffered.size() && n < limit;
  return out;
}

bool KafkaSource::at_end(int p) const {
  auto it = partitions_.find(p);
  return it != partitions_.end() && it->second->at_end;
}

uint64_t KafkaSource::next_offset(int p) const {
  auto it = partitions_.find(p);
  return it == partitions_.end() ? 0 : it->second->fetched;
}

// --- Sink -------------------------------------------------------------------------------------

struct KafkaSink::Producer {
  ClientContext context;  // outlives rk
  rd_kafka_t* rk = nullptr;
  LeaseId lease = 0;
  int partition = 0;
  bool marker_read = false;
  bool fatal = false;  // a fatal librdkafka error: replace it
  uint64_t marker = 0;  // the last seqNo a committed transaction carried
  ~Producer() {
    if (rk != nullptr) rd_kafka_destroy(rk);
  }
};

Result<std::unique_ptr<KafkaSink>> KafkaSink::open(RealLoop& loop, const KafkaConfig& kafka, const SinkSpec& spec,
                                                   const std::string& instance) {
  return std::unique_ptr<KafkaSink>(new KafkaSink(loop, kafka, spec, instance));
}

KafkaSink::KafkaSink(RealLoop& loop, KafkaConfig kafka, const SinkSpec& spec, std::string instance)
    : loop_(loop), kafka_(std::move(kafka)), spec_(spec), instance_(std::move(instance)) {}

KafkaSink::~KafkaSink() = default;

Result<std::shared_ptr<KafkaSink::Producer>> KafkaSink::producer_for(const std::string& job, LeaseId lease) {
  LeaseId& newest = newest_lease_[job];
  if (lease < newest) return Status::aborted(job + ": a newer incarnation owns the producer");
  auto it = producers_.find(job);
  if (it != producers_.end() && it->second->lease == lease && !it->second->fatal) return it->second;
  newest = lease;
  if (it != producers_.end()) producers_.erase(it);  // the older incarnation is over, or it broke
  auto p = std::make_shared<Producer>();
  p->lease = lease;
  p->partition = std::stoi(job.substr(job.rfind('/') + 1));
  Settings settings{{"enable.idempotence", "true"}, {"linger.ms", "5"}};
  const bool transactional = spec_.delivery_guarantee == SinkDelivery::kExactlyOnce;
  if (transactional) {
    settings.emplace_back("transactional.id", fmt::format("onceflow.{}.{}.{}", instance_, kafka_topic(spec_), job));
  }
  p->context.kafka = kafka_;
  auto rk = make_client(RD_KAFKA_PRODUCER, p->context, settings);
  if (!rk) return rk.error();
  p->rk = *rk;
  if (transactional) {
    Status init;
    // Fences every older producer with this transactional.id (on a real broker).
    loop_.run_blocking([&] { init = from_error(rd_kafka_init_transactions(p->rk, kBlockingTimeoutMs), "init_transactions"); });
    if (!init.is_ok()) return init;
    if (!hides_aborted_) hides_aborted_ = kafka_.hides_aborted;
    if (!hides_aborted_) {
      loop_.run_blocking([&] {
        char* id = rd_kafka_clusterid(p->rk, kBlockingTimeoutMs);
        if (id == nullptr) return;  // not known yet: treated as a cluster that serves them
        hides_aborted_ = !std::string_view(id).starts_with("mockCluster");
        rd_kafka_mem_free(p->rk, id);
      });
    }
  }
  producers_[job] = p;
  return p;
}

Result<uint64_t> KafkaSink::deliver(const std::string& job, LeaseId lease, const std::vector<OutboxRow>& rows) {
  auto p = producer_for(job, lease);
  if (!p) return p.error();
  const std::shared_ptr<Producer> keep = *p;  // alive for this call, whatever happens meanwhile
  auto delivered = spec_.delivery_guarantee == SinkDelivery::kExactlyOnce ? deliver_transactional(*keep, job, rows)
                                                                          : deliver_idempotent(*keep, rows);
  if (!delivered && delivered.error().is_invalid_argument() && failed_.is_ok()) failed_ = delivered.error();
  if (!delivered) return Status(delivered.error().code(), kafka_.redact(delivered.error().message()));
  return delivered;
}

// The last marker `key` committed in `partition` of the progress topic: read from the end
// backwards in growing windows, and only answered once the read reached the end.
Result<std::optional<uint64_t>> KafkaSink::read_marker(const std::string& key, int partition) {
  std::optional<uint64_t> marker;
  Status status;
  const std::string topic = progress_topic(kafka_topic(spec_));
  loop_.run_blocking([&] {
    auto client = temporary_client(RD_KAFKA_CONSUMER, kafka_,
                                   {{"group.id", "onceflow.progress"},
                                    {"enable.auto.commit", "false"},
                                    {"enable.partition.eof", "true"},
                                    {"isolation.level", "read_committed"}});
    if (!client) {
      status = client.error();
      return;
    }
    rd_kafka_t* const* rk = &(*client)->rk;
    int64_t low = 0, high = 0;
    const rd_kafka_resp_err_t err =
        rd_kafka_query_watermark_offsets(*rk, topic.c_str(), partition, &low, &high, kBlockingTimeoutMs);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      status = Status::unavailable(fmt::format("watermarks of {}: {}", topic, rd_kafka_err2str(err)));
    }
    for (int64_t window = 64; status.is_ok() && high > low && !marker; window *= 8) {
      const int64_t start = std::max<int64_t>(low, high - window);
      rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
      rd_kafka_topic_partition_list_add(list, topic.c_str(), partition)->offset = start;
      rd_kafka_assign(*rk, list);
      rd_kafka_topic_partition_list_destroy(list);
      bool eof = false;
      for (int polls = 0; polls < 600 && !eof; ++polls) {
        rd_kafka_message_t* m = rd_kafka_consumer_poll(*rk, 100);
        if (m == nullptr) continue;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
          eof = true;
        } else if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR &&
                   std::string_view(static_cast<const char*>(m->key), m->key_len) == key) {
          uint64_t seqno = 0;
          const auto* text = static_cast<const char*>(m->payload);
          std::from_chars(text, text + m->len, seqno);
          marker = seqno;
        }
        rd_kafka_message_destroy(m);
      }
      if (!eof) status = Status::unavailable(fmt::format("reading {} did not reach its end", topic));
      if (start == low) break;
    }
  });
  if (!status.is_ok()) return status;
  return marker;
}

Result<uint64_t> KafkaSink::deliver_transactional(Producer& p, const std::string& job,
                                                  const std::vector<OutboxRow>& rows) {
  if (!p.marker_read) {
    auto marker = read_marker(marker_key(job), p.partition);
    if (!marker) return marker.error();
    const std::string& topic = kafka_topic(spec_);
    if (Status lost = check_progress_marker(job, *marker, rows, topic, progress_topic(topic)); !lost.is_ok()) return lost;
    p.marker = marker->value_or(0);
    p.marker_read = true;
  }
  std::vector<const OutboxRow*> batch;
  for (const OutboxRow& row : rows) {
    if (row.seqno > p.marker && batch.size() < static_cast<size_t>(spec_.transaction_messages)) batch.push_back(&row);
  }
  if (batch.empty()) return p.marker;
  const uint64_t last = batch.back()->seqno;
  std::vector<Micros> event_times;
  Status status;
  const std::string topic = kafka_topic(spec_);
  const std::string progress = progress_topic(topic);
  const std::string marker_key_text = marker_key(job);
  const bool hides_aborted = hides_aborted_.value_or(false);
  loop_.run_blocking([&] {
    status = from_error(rd_kafka_begin_transaction(p.rk), "begin_transaction");
    if (!status.is_ok()) return;
    p.context.failed.store(0);
    for (const OutboxRow* row : batch) {
      auto m = decode_message(row->message);
      if (!m) continue;
      event_times.push_back(m->event_ts);
      status = produce_message(p.rk, topic, *m);
      if (!status.is_ok()) break;
    }
    // On a cluster that serves aborted records to read_committed readers (librdkafka's mock
    // does), the rows are in their partitions' logs before the marker is produced: a marker that
    // reached its log while the rows did not (brokers lost between the two) would make a
    // restarted sink skip rows nobody can read, a loss. A broker hides an aborted transaction's
    // records, the marker's with them, so it is spared this round trip.
    if (status.is_ok() && !hides_aborted && rd_kafka_flush(p.rk, kBlockingTimeoutMs) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      status = Status::unavailable("flush timed out");
    }
    if (status.is_ok() && p.context.failed.exchange(0) > 0) status = Status::unavailable("some rows were not delivered");
    std::string value = std::to_string(last);
    if (status.is_ok()) {
      const rd_kafka_resp_err_t err = rd_kafka_producev(
          p.rk, RD_KAFKA_V_TOPIC(progress.c_str()), RD_KAFKA_V_PARTITION(p.partition),
          RD_KAFKA_V_KEY(marker_key_text.data(), marker_key_text.size()), RD_KAFKA_V_VALUE(value.data(), value.size()),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
      if (err != RD_KAFKA_RESP_ERR_NO_ERROR) status = Status::unavailable(fmt::format("produce marker: {}", rd_kafka_err2str(err)));
    }
    if (status.is_ok()) {
      rd_kafka_error_t* error = rd_kafka_commit_transaction(p.rk, kBlockingTimeoutMs);
      if (error == nullptr) return;
      status = Status::unavailable(fmt::format("commit_transaction: {}", rd_kafka_error_string(error)));
      rd_kafka_error_destroy(error);
    }
    (void)from_error(rd_kafka_abort_transaction(p.rk, kBlockingTimeoutMs), "abort_transaction");
  });
  if (!status.is_ok()) {
    auto it = producers_.find(job);
    if (it != producers_.end() && it->second.get() == &p) producers_.erase(it);  // start over, re-read the marker
    return status;
  }
  acknowledged_ += batch.size();
  visible(event_times);
  p.marker = last;
  return last;
}

void KafkaSink::visible(const std::vector<Micros>& event_times) {
  if (latency_ == nullptr) return;
  const Micros now = calendar_now();  // event times are calendar times (a record's timestamp)
  for (const Micros t : event_times) latency_->add(now - t);
}

Status KafkaSink::produce_and_flush(Producer& p, const std::vector<Message>& messages) {
  Status status;
  const std::string topic = kafka_topic(spec_);
  loop_.run_blocking([&] {
    for (const Message& m : messages) {
      status = produce_message(p.rk, topic, m);
      if (!status.is_ok()) return;
    }
    if (rd_kafka_flush(p.rk, kBlockingTimeoutMs) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      status = Status::unavailable("flush timed out");
    }
  });
  if (status.is_ok() && p.context.failed.exchange(0) > 0) status = Status::unavailable("some messages were not delivered");
  if (status.is_ok()) {
    acknowledged_ += messages.size();
    std::vector<Micros> event_times;
    for (const Message& m : messages) event_times.push_back(m.event_ts);
    visible(event_times);
  }
  if (!status.is_ok() && rd_kafka_fatal_error(p.rk, nullptr, 0) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    p.fatal = true;  // the idempotent producer cannot go on: the next delivery makes a new one
  }
  return status;
}

Result<uint64_t> KafkaSink::deliver_idempotent(Producer& p, const std::vector<OutboxRow>& rows) {
  if (rows.empty()) return uint64_t{0};
  std::vector<Message> messages;
  messages.reserve(rows.size());
  for (const OutboxRow& row : rows) {
    if (auto m = decode_message(row.message)) messages.push_back(std::move(*m));
  }
  if (Status s = produce_and_flush(p, messages); !s.is_ok()) return s;
  return rows.back().seqno;
}

Status KafkaSink::write_now(const std::string& job, LeaseId lease, const std::vector<Message>& messages) {
  if (spec_.delivery_guarantee != SinkDelivery::kAtLeastOnce) {
    return Status::invalid_argument("only at-least-once kafka sinks write synchronously");
  }
  auto p = producer_for(job, lease);
  if (!p) return p.error();
  return produce_and_flush(**p, messages);
}

// --- Reading a whole topic --------------------------------------------------------------------

Result<std::vector<KafkaRecord>> read_kafka_topic(const KafkaConfig& kafka, const std::string& topic) {
  auto client = temporary_client(RD_KAFKA_CONSUMER, kafka,
                                 {{"group.id", "onceflow.verify"},
                                  {"enable.auto.commit", "false"},
                                  {"enable.partition.eof", "true"},
                                  {"isolation.level", "read_committed"}});
  if (!client) return client.error();
  rd_kafka_t* const* rk = &(*client)->rk;
  auto partitions = partition_count(*rk, topic);
  if (!partitions) return partitions.error();
  const auto n_partitions = static_cast<size_t>(*partitions);
  // The end is the high watermark now: a read_committed reader's end of a partition comes
  // earlier while a transaction is open there (a killed producer's, until the broker aborts
  // it), and what was committed after that transaction shows only then.
  std::vector<int64_t> high(n_partitions, 0);
  for (int p = 0; p < *partitions; ++p) {
    int64_t low = 0;
    const rd_kafka_resp_err_t err =
        rd_kafka_query_watermark_offsets(*rk, topic.c_str(), p, &low, &high[static_cast<size_t>(p)], 10'000);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return Status::unavailable(fmt::format("watermarks of {}: {}", topic, rd_kafka_err2str(err)));
    }
    // Not "every record": counting what is left as all there was would report loss.
    if (low > 0) {
      return Status::invalid_argument(fmt::format(
          "kafka topic {} partition {} starts at offset {}, not 0: the cluster deleted its oldest records (retention; "
          "librdkafka's mock cluster keeps a few MB a partition), so what it held cannot be checked",
          topic, p, low));
    }
  }
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(*partitions);
  for (int p = 0; p < *partitions; ++p) {
    rd_kafka_topic_partition_list_add(list, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  }
  rd_kafka_assign(*rk, list);
  rd_kafka_topic_partition_list_destroy(list);
  std::vector<int64_t> next(n_partitions, 0);  // how far each partition is read
  const auto all_read = [&] {
    for (size_t p = 0; p < n_partitions; ++p) {
      if (next[p] < high[p]) return false;
    }
    return true;
  };
  std::vector<KafkaRecord> out;
  // Waits 90 s at most without progress: longer than a producer's transaction timeout (60 s
  // by default), after which a broker aborts what a killed producer left open.
  for (int idle = 0; !all_read() && idle < 900;) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(*rk, 100);
    if (m == nullptr) {
      ++idle;
      continue;
    }
    const auto p = static_cast<size_t>(m->partition);
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      // The reader's end: its position says how far that is, past control records too.
      rd_kafka_topic_partition_list_t* at = rd_kafka_topic_partition_list_new(1);
      rd_kafka_topic_partition_list_add(at, topic.c_str(), m->partition);
      if (rd_kafka_position(*rk, at) == RD_KAFKA_RESP_ERR_NO_ERROR) next[p] = std::max(next[p], at->elems[0].offset);
      rd_kafka_topic_partition_list_destroy(at);
      ++idle;  // an end that does not move is no progress
    } else if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      idle = 0;
      next[p] = std::max(next[p], m->offset + 1);
      KafkaRecord r;
      r.partition = m->partition;
      r.offset = m->offset;
      r.key.assign(static_cast<const char*>(m->key), m->key_len);
      r.value.assign(static_cast<const char*>(m->payload), m->len);
      rd_kafka_timestamp_type_t type;
      r.timestamp = rd_kafka_message_timestamp(m, &type) * kMillis;
      r.id = header_value(m, kIdHeader);
      out.push_back(std::move(r));
    }
    rd_kafka_message_destroy(m);
  }
  if (!all_read()) return Status::timeout("reading " + topic + " did not reach its end");
  return out;
}

}  // namespace onceflow::real

namespace onceflow::real {

// --- Settings and secrets ---------------------------------------------------------------------

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The user:password parts of a broker string ("SASL_SSL://user:pass@host:9092,...").
std::vector<std::string> broker_userinfos(std::string_view brokers) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= brokers.size()) {
    const size_t end = std::min(brokers.find(',', start), brokers.size());
    std::string_view server = brokers.substr(start, end - start);
    if (const size_t scheme = server.find("://"); scheme != std::string_view::npos) server.remove_prefix(scheme + 3);
    if (const size_t at = server.rfind('@'); at != std::string_view::npos && at > 0) {
      out.emplace_back(server.substr(0, at));
    }
    start = end + 1;
  }
  return out;
}

void replace_all(std::string& text, std::string_view what, std::string_view with) {
  if (what.empty()) return;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + with.size())) {
    text.replace(at, what.size(), with);
  }
}

}  // namespace

bool KafkaConfig::secret_setting(std::string_view name) {
  const std::string n = lower(name);
  for (const char* word : {"password", "secret", "jaas", ".pem", "ssl.key", "oauthbearer.config", "token"}) {
    if (n.find(word) != std::string::npos) return true;
  }
  return false;
}

std::string KafkaConfig::redact(std::string_view text) const {
  std::vector<std::string> secrets;
  for (const auto& [name, value] : settings) {
    if (secret_setting(name) && !value.empty()) secrets.push_back(value);
  }
  for (const std::string& userinfo : broker_userinfos(brokers)) {
    secrets.push_back(userinfo);
    if (const size_t colon = userinfo.find(':'); colon != std::string::npos && colon + 1 < userinfo.size()) {
      secrets.push_back(userinfo.substr(colon + 1));
    }
  }
  // Longer secrets first, so that one containing another is replaced whole.
  std::sort(secrets.begin(), secrets.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  std::string out(text);
  for (const std::string& secret : secrets) replace_all(out, secret, "***");
  return out;
}

std::string KafkaConfig::describe() const { return redact(brokers); }

Result<KafkaConfig::Settings> load_kafka_properties(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::invalid_argument(fmt::format("--kafka-config {}: cannot read the file", path));
  Settings out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) {
      return Status::invalid_argument(fmt::format("{}:{}: expected name=value", path, number));
    }
    const auto trim = [](std::string text) {
      const auto a = text.find_first_not_of(" \t\r");
      const auto b = text.find_last_not_of(" \t\r");
      return a == std::string::npos ? std::string() : text.substr(a, b - a + 1);
    };
    std::string name = trim(line.substr(0, eq));
    if (name.empty()) return Status::invalid_argument(fmt::format("{}:{}: a setting without a name", path, number));
    out.emplace_back(std::move(name), trim(line.substr(eq + 1)));
  }
  return out;
}

}  // namespace onceflow::real
