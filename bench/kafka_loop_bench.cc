// The baselines of the Kafka end-to-end figures in bench/run.sh: scenarios/real/
// kafka_aggregation*.yaml (topic events -> a count per key -> a topic of counts) written by hand
// the Kafka Streams way, as a consume-transform-produce loop on librdkafka:
//   eos: a transactional producer; per transaction of TRANSACTION input records, the counts'
//        records and the consumer's positions (send_offsets_to_transaction) commit together;
//   alo: an idempotent producer, no transactions; per batch of TRANSACTION records the
//        producer is flushed, then the positions are committed.
// The counts are kept in memory (a Streams state store would add a changelog topic: the loop
// is the lower bound of what such a program does). `preload` writes the input first, so that
// neither side is timed writing it.
//   kafka_loop_bench preload BROKERS TOPIC MESSAGES KEYS
//   kafka_loop_bench eos|alo BROKERS TOPIC OUT_TOPIC MESSAGES TRANSACTION
// The loop prints one JSON object: messages, seconds from its first record to its last commit,
// msgs_per_s.
#include <fmt/format.h>
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

namespace {

[[noreturn]] void die(const std::string& what) {
  fmt::print(stderr, "kafka_loop_bench: {}\n", what);
  std::exit(1);
}

void set(rd_kafka_conf_t* conf, const char* name, const std::string& value) {
  char err[256];
  if (rd_kafka_conf_set(conf, name, value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) die(err);
}

rd_kafka_t* make(rd_kafka_type_t type, rd_kafka_conf_t* conf) {
  char err[256];
  rd_kafka_t* rk = rd_kafka_new(type, conf, err, sizeof err);
  if (rk == nullptr) die(err);
  return rk;
}

void check(rd_kafka_error_t* error, const char* what) {
  if (error == nullptr) return;
  const std::string text = rd_kafka_error_string(error);
  rd_kafka_error_destroy(error);
  die(fmt::format("{}: {}", what, text));
}

int partitions_of(rd_kafka_t* rk, const std::string& topic) {
  rd_kafka_topic_t* t = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  if (rd_kafka_metadata(rk, 0, t, &md, 10'000) != RD_KAFKA_RESP_ERR_NO_ERROR) die("no metadata for " + topic);
  const int n = md->topic_cnt == 1 ? md->topics[0].partition_cnt : 0;
  rd_kafka_metadata_destroy(md);
  rd_kafka_topic_destroy(t);
  if (n <= 0) die("topic " + topic + " has no partitions");
  return n;
}

// Queues one record, waiting while the producer's queue is full.
void produce(rd_kafka_t* rk, const std::string& topic, std::string& key, std::string& value) {
  while (rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_KEY(key.data(), key.size()),
                           RD_KAFKA_V_VALUE(value.data(), value.size()), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                           RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
    rd_kafka_poll(rk, 10);
  }
}

void preload(const std::string& brokers, const std::string& topic, long messages, long keys) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  set(conf, "bootstrap.servers", brokers);
  set(conf, "enable.idempotence", "true");
  set(conf, "linger.ms", "5");
  rd_kafka_t* rk = make(RD_KAFKA_PRODUCER, conf);
  for (long i = 0; i < messages; ++i) {
    std::string key = std::to_string(i % keys);
    std::string value = fmt::format("w{}", i);
    produce(rk, topic, key, value);
  }
  if (rd_kafka_flush(rk, 120'000) != RD_KAFKA_RESP_ERR_NO_ERROR) die("the preload did not finish");
  rd_kafka_destroy(rk);
}

void loop(bool exactly_once, const std::string& brokers, const std::string& topic, const std::string& out_topic,
          long messages, long transaction) {
  rd_kafka_conf_t* pconf = rd_kafka_conf_new();
  set(pconf, "bootstrap.servers", brokers);
  set(pconf, "enable.idempotence", "true");
  set(pconf, "linger.ms", "5");
  if (exactly_once) set(pconf, "transactional.id", "kafka-loop-bench");
  rd_kafka_t* producer = make(RD_KAFKA_PRODUCER, pconf);
  if (exactly_once) check(rd_kafka_init_transactions(producer, 30'000), "init_transactions");

  rd_kafka_conf_t* cconf = rd_kafka_conf_new();
  set(cconf, "bootstrap.servers", brokers);
  set(cconf, "group.id", exactly_once ? "kafka-loop-bench-eos" : "kafka-loop-bench-alo");
  set(cconf, "enable.auto.commit", "false");
  set(cconf, "isolation.level", "read_committed");
  rd_kafka_t* consumer = make(RD_KAFKA_CONSUMER, cconf);
  rd_kafka_poll_set_consumer(consumer);
  // Every partition from its start, assigned (no group rebalance to wait for).
  const int partitions = partitions_of(consumer, topic);
  rd_kafka_topic_partition_list_t* assignment = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p) {
    rd_kafka_topic_partition_list_add(assignment, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  }
  if (rd_kafka_assign(consumer, assignment) != RD_KAFKA_RESP_ERR_NO_ERROR) die("assign");

  std::map<std::string, uint64_t> counts;
  long done = 0;
  std::optional<std::chrono::steady_clock::time_point> first;
  while (done < messages) {
    if (exactly_once) check(rd_kafka_begin_transaction(producer), "begin_transaction");
    long in_batch = 0;
    while (in_batch < transaction && done < messages) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer, 100);
      if (m == nullptr) continue;
      if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) die(rd_kafka_message_errstr(m));
        rd_kafka_message_destroy(m);
        continue;
      }
      if (!first) first = std::chrono::steady_clock::now();
      std::string key(static_cast<const char*>(m->key), m->key_len);
      std::string value = fmt::format("{}", ++counts[key]);
      rd_kafka_message_destroy(m);
      produce(producer, out_topic, key, value);
      ++in_batch;
      ++done;
    }
    // The positions reached: the next record of each partition.
    rd_kafka_topic_partition_list_t* positions = rd_kafka_topic_partition_list_copy(assignment);
    if (rd_kafka_position(consumer, positions) != RD_KAFKA_RESP_ERR_NO_ERROR) die("position");
    if (exactly_once) {
      rd_kafka_consumer_group_metadata_t* group = rd_kafka_consumer_group_metadata(consumer);
      check(rd_kafka_send_offsets_to_transaction(producer, positions, group, -1), "send_offsets_to_transaction");
      rd_kafka_consumer_group_metadata_destroy(group);
      check(rd_kafka_commit_transaction(producer, -1), "commit_transaction");
    } else {
      if (rd_kafka_flush(producer, 60'000) != RD_KAFKA_RESP_ERR_NO_ERROR) die("flush");
      if (rd_kafka_commit(consumer, positions, 0) != RD_KAFKA_RESP_ERR_NO_ERROR) die("commit");
    }
    rd_kafka_topic_partition_list_destroy(positions);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - *first).count();
  fmt::print("{{\"messages\": {}, \"seconds\": {:.3f}, \"msgs_per_s\": {:.0f}}}\n", messages, seconds,
             static_cast<double>(messages) / seconds);
  rd_kafka_topic_partition_list_destroy(assignment);
  rd_kafka_consumer_close(consumer);
  rd_kafka_destroy(consumer);
  rd_kafka_destroy(producer);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "preload" && argc == 6) {
    preload(argv[2], argv[3], std::atol(argv[4]), std::max(1L, std::atol(argv[5])));
    return 0;
  }
  if ((mode == "eos" || mode == "alo") && argc == 7) {
    loop(mode == "eos", argv[2], argv[3], argv[4], std::atol(argv[5]), std::max(1L, std::atol(argv[6])));
    return 0;
  }
  fmt::print(stderr,
             "usage: kafka_loop_bench preload BROKERS TOPIC MESSAGES KEYS\n"
             "       kafka_loop_bench eos|alo BROKERS TOPIC OUT_TOPIC MESSAGES TRANSACTION\n");
  return 2;
}
