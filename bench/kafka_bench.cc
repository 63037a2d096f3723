// Kafka figures for bench/run.sh, side by side on one in-process mock cluster: the
// exactly-once sink against the raw transactional producer with the same transaction size,
// and the at-least-once sink against the raw idempotent producer flushing batches of the
// same size. The exactly-once sink is timed twice: on the path it takes with a broker (told
// the cluster hides aborted records) and on the mock's own (it serves them, so the sink
// flushes a transaction's rows before its marker). Each ratio is the median over rounds of
// rates measured back to back; the rates printed are the best rounds'. Prints one JSON object.
//   kafka_bench [MESSAGES] [TRANSACTION] [BATCH] [ROUNDS]
#include <fmt/format.h>
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "core/message.h"
#include "real/kafka.h"
#include "real/loop.h"

using namespace onceflow;

namespace {

double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<OutboxRow> outbox(long n) {
  std::vector<OutboxRow> rows;
  for (long i = 1; i <= n; ++i) {
    Message m;
    m.id = static_cast<uint64_t>(i);
    m.key = static_cast<uint64_t>(i % 64);
    m.payload = fmt::format("key={} count={:08}", i % 64, i);
    rows.push_back({static_cast<uint64_t>(i), encode_message(m)});
  }
  return rows;
}

rd_kafka_t* producer(const std::string& brokers, bool transactional, const std::string& id) {
  char err[256];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", brokers.c_str(), err, sizeof err);
  rd_kafka_conf_set(conf, "enable.idempotence", "true", err, sizeof err);
  rd_kafka_conf_set(conf, "linger.ms", "5", err, sizeof err);
  if (transactional) rd_kafka_conf_set(conf, "transactional.id", id.c_str(), err, sizeof err);
  // Configured as KafkaSink's producers are, delivery reports included.
  rd_kafka_conf_set_dr_msg_cb(conf, [](rd_kafka_t*, const rd_kafka_message_t*, void*) {});
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (transactional) {
    if (rd_kafka_error_t* e = rd_kafka_init_transactions(rk, 30'000)) {
      fmt::print(stderr, "init_transactions: {}\n", rd_kafka_error_string(e));
      std::exit(1);
    }
  }
  return rk;
}

void produce(rd_kafka_t* rk, const std::string& topic, const OutboxRow& row) {
  auto m = decode_message(row.message);
  std::string key = std::to_string(m->key);
  rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_KEY(key.data(), key.size()),
                    RD_KAFKA_V_VALUE(m->payload.data(), m->payload.size()), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                    RD_KAFKA_V_END);
}

// Messages per second of the raw producer: transactions (or flushed batches) of `chunk`; the
// first chunk (producer id, metadata, connections) is not timed. REQUIRES: rows > chunk.
double raw(const std::string& brokers, const std::string& topic, const std::vector<OutboxRow>& rows, size_t chunk,
           bool transactional) {
  rd_kafka_t* rk = producer(brokers, transactional, "bench-raw-" + topic);
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < rows.size(); i += chunk) {
    if (i == chunk) start = std::chrono::steady_clock::now();  // the first chunk warms up
    if (transactional) rd_kafka_begin_transaction(rk);
    for (size_t j = i; j < std::min(rows.size(), i + chunk); ++j) produce(rk, topic, rows[j]);
    if (transactional) {
      if (rd_kafka_error_t* e = rd_kafka_commit_transaction(rk, 30'000)) {
        fmt::print(stderr, "commit: {}\n", rd_kafka_error_string(e));
        std::exit(1);
      }
    } else {
      rd_kafka_flush(rk, 30'000);
    }
  }
  const double seconds = since(start);
  rd_kafka_destroy(rk);
  return static_cast<double>(rows.size() - chunk) / seconds;
}

// Messages per second through a KafkaSink: the outbox handed over in chunks, as sink epochs do.
double sink(const std::string& brokers, const std::string& topic, const std::vector<OutboxRow>& rows, size_t chunk,
            SinkDelivery delivery, std::optional<bool> hides_aborted) {
  real::KafkaConfig kafka(brokers);
  kafka.hides_aborted = hides_aborted;
  SinkSpec spec;
  spec.name = "out";
  spec.type = SinkType::kKafka;
  spec.topic = topic;
  spec.delivery_guarantee = delivery;
  spec.transaction_messages = static_cast<int>(chunk);
  real::RealLoop loop;
  loop.add_node("sink");
  double rate = 0;
  bool done = false;
  // The outbox pages as a sink epoch hands them over, cut before the clock starts (the raw
  // producer reads its rows in place).
  std::vector<std::vector<OutboxRow>> parts;
  for (size_t i = 0; i < rows.size(); i += chunk) {
    parts.emplace_back(rows.begin() + static_cast<long>(i), rows.begin() + static_cast<long>(std::min(rows.size(), i + chunk)));
  }
  loop.runtime("sink").spawn("bench", [&] {
    auto s = real::KafkaSink::open(loop, kafka, spec);
    auto start = std::chrono::steady_clock::now();
    for (size_t n = 0; n < parts.size(); ++n) {
      if (n == 1) start = std::chrono::steady_clock::now();  // the first chunk warms up
      auto r = (*s)->deliver("sink/out/0", 1, parts[n]);
      if (!r) {
        fmt::print(stderr, "deliver: {}\n", r.error().message());
        std::exit(1);
      }
    }
    rate = static_cast<double>(rows.size() - chunk) / since(start);
    done = true;
  });
  loop.run([&] { return done; });
  return rate;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Comparison {
  double raw = 0;    // best of the rounds
  double sink = 0;   // best of the rounds
  double ratio = 0;  // the median over rounds of sink / raw, each pair measured back to back
  double mock_path_sink = 0;   // exactly-once only: the sink on the mock's own path
  double mock_path_ratio = 0;
};

// `rounds` rounds of the raw producer then the sink, on a fresh mock cluster (a cluster that
// served transactions serves idempotent producers slower afterwards). The ratio is taken
// within each round, so that a quiet or busy moment of the machine touches both sides.
Comparison compare(const std::vector<OutboxRow>& rows, size_t chunk, bool transactional, int rounds) {
  auto mock = real::KafkaMockCluster::start(3);
  if (!mock) std::exit(1);
  const std::string brokers = (*mock)->bootstrap_servers();
  const SinkDelivery delivery = transactional ? SinkDelivery::kExactlyOnce : SinkDelivery::kAtLeastOnce;
  Comparison c;
  std::vector<double> ratios, mock_ratios;
  for (int r = 0; r < rounds; ++r) {
    const std::string raw_topic = fmt::format("raw{}", r), sink_topic = fmt::format("sink{}", r);
    const std::string mock_topic = fmt::format("sink-mock-path{}", r);
    for (const std::string& topic : {raw_topic, sink_topic, mock_topic}) (void)(*mock)->create_topic(topic, 1);
    for (const std::string& topic : {sink_topic, mock_topic}) (void)(*mock)->create_topic(real::KafkaSink::progress_topic(topic), 1);
    const double raw_rate = raw(brokers, raw_topic, rows, chunk, transactional);
    const double sink_rate = sink(brokers, sink_topic, rows, chunk, delivery, true);
    c.raw = std::max(c.raw, raw_rate);
    c.sink = std::max(c.sink, sink_rate);
    ratios.push_back(sink_rate / raw_rate);
    if (transactional) {
      const double mock_rate = sink(brokers, mock_topic, rows, chunk, delivery, std::nullopt);
      c.mock_path_sink = std::max(c.mock_path_sink, mock_rate);
      mock_ratios.push_back(mock_rate / raw_rate);
    }
  }
  c.ratio = median(ratios);
  if (transactional) c.mock_path_ratio = median(mock_ratios);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const long messages = argc > 1 ? std::atol(argv[1]) : 20'000;
  const size_t transaction = argc > 2 ? static_cast<size_t>(std::atol(argv[2])) : 256;
  const size_t batch = argc > 3 ? static_cast<size_t>(std::atol(argv[3])) : 256;
  const int rounds = argc > 4 ? std::atoi(argv[4]) : 2;
  const auto rows = outbox(messages);
  const Comparison idempotent = compare(rows, batch, false, rounds);
  const Comparison transactional = compare(rows, transaction, true, rounds);
  fmt::print(
      "{{\"messages\": {}, \"transaction_messages\": {}, \"batch\": {}, \"rounds\": {}, "
      "\"raw_txn_producer_msgs_per_s\": {:.0f}, \"kafka_eos_sink_msgs_per_s\": {:.0f}, "
      "\"eos_over_raw_txn_median\": {:.3f}, \"kafka_eos_sink_mock_path_msgs_per_s\": {:.0f}, "
      "\"eos_mock_path_over_raw_txn_median\": {:.3f}, \"raw_idempotent_producer_msgs_per_s\": {:.0f}, "
      "\"kafka_alo_sink_msgs_per_s\": {:.0f}, \"alo_over_raw_idempotent_median\": {:.3f}}}\n",
      messages, transaction, batch, rounds, transactional.raw, transactional.sink, transactional.ratio,
      transactional.mock_path_sink, transactional.mock_path_ratio, idempotent.raw, idempotent.sink, idempotent.ratio);
  return 0;
}
