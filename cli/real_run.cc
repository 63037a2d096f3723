#include "cli/real_run.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "checkers/pipeline_checks.h"
#include "core/deployment.h"
#include "core/engine.h"
#include "core/env/codec.h"
#include "core/env/random.h"
#include "core/reference.h"
#include "core/worker.h"
#include "faults/pipeline_run.h"
#include "faults/pipeline_world.h"
#include "real/kafka.h"
#include "real/leveldb_store.h"
#include "real/loop.h"

namespace onceflow::cli {
namespace {

using json = nlohmann::json;

// What the real deployment keeps besides the engine's own tables.
constexpr const char* kProducer = "real/producer";  // "next" -> u64; "<source>/<p>" -> next offset
constexpr const char* kInputLog = "real/inputs";    // hex16(index) -> the input as written
constexpr size_t kProducerBatch = 500;
constexpr Micros kProducerPause = 2 * kMillis;
constexpr Micros kDrainCheckEvery = 100 * kMillis;
constexpr Micros kHeadsDone = INT64_MAX / 4;  // a queue head past every message: no more input

std::string target_table(const std::string& sink) { return "target/" + sink; }
std::string target_state(const std::string& sink) { return "target_state/" + sink; }

std::string u64_bytes(uint64_t v) {
  Encoder e;
  e.u64(v);
  return e.take();
}
uint64_t u64_of(const std::optional<std::string>& bytes) {
  if (!bytes) return 0;
  Decoder d(*bytes);
  return d.u64();
}
// A counter row as `tx` sees it; 0 when absent (or unreadable: the caller's commit fails then).
uint64_t read_u64(Store& store, const Transaction& tx, const std::string& table, const std::string& key) {
  auto v = store.get(tx, table, key);
  return v ? u64_of(*v) : 0;
}

std::atomic<real::RealLoop*> g_loop{nullptr};
std::atomic<int> g_signal{0};
extern "C" void on_stop_signal(int sig) {
  g_signal.store(sig);
  if (real::RealLoop* loop = g_loop.load()) loop->request_stop();
}

// Counts what the engine does, for the progress line.
class Progress final : public EngineObserver {
 public:
  void epoch_committed(const Epoch& e) override {
    ++epochs;
    if (e.job.kind == JobKind::kSink) delivered += e.consumed.size();
  }
  void amo_queued(const std::string&, const Message& m) override { amo_in_queue.insert(m.id); }
  void amo_sent(const std::string&, MessageId id) override { amo_in_queue.erase(id); }
  void amo_dropped(const std::string&, MessageId id, std::string_view) override { amo_in_queue.erase(id); }
  std::set<MessageId> amo_in_queue;  // at-most-once messages queued in memory, not yet sent or dropped
  uint64_t epochs = 0;
  uint64_t delivered = 0;  // messages sink epochs committed in this process
};

class Deployment {
 public:
  Deployment(const PipelineSpec& spec, const ComputationRegistry& registry, const RealOptions& o,
             real::LevelDbStore& store)
      : spec_(spec), registry_(registry), o_(o), store_(store) {
    PipelineWorkload w;
    w.messages = static_cast<int>(o.messages);
    w.keys = o.keys;
    inputs_ = make_workload(spec, w, o.seed);
    std::erase_if(inputs_, [&](const SourceInput& in) { return spec.source(in.source)->type != "queue"; });
  }

  // Connects the kafka sources and sinks (creating their topics when missing).
  Status connect_kafka(const std::string& brokers) {
    brokers_ = brokers;
    for (const auto& source : spec_.sources) {
      if (source.type != "kafka") continue;
      if (Status s = create_topic(kafka_topic(source), source.partitions); !s.is_ok()) return s;
      auto reader = real::KafkaSource::open(brokers, kafka_topic(source));
      if (!reader) return reader.error();
      connectors_.sources[source.name] = reader->get();
      kafka_sources_[source.name] = std::move(*reader);
    }
    for (const auto& sink : spec_.sinks) {
      if (sink.type != SinkType::kKafka) continue;
      if (Status s = create_topic(kafka_topic(sink), sink.partitions); !s.is_ok()) return s;
      const std::string progress = real::KafkaSink::progress_topic(kafka_topic(sink));
      if (Status s = create_topic(progress, sink.partitions, true); !s.is_ok()) return s;
      auto writer = real::KafkaSink::open(loop_, brokers, sink, instance());
      if (!writer) return writer.error();
      connectors_.sinks[sink.name] = writer->get();
      kafka_sinks_[sink.name] = std::move(*writer);
    }
    return Status::ok();
  }
  void use_mock(real::KafkaMockCluster* mock) { mock_ = mock; }

  // Runs until drained or stopped. Returns true when drained.
  bool run() {
    loop_.add_node(layout_.controller);
    for (const std::string& name : layout_.workers) loop_.add_node(name);
    loop_.add_node("producer");
    for (const auto& sink : spec_.sinks) {
      if (sink.type == SinkType::kAsyncQueue) serve_target(sink.name);
    }
    const auto start = [&](const std::string& name, EngineProcess::Role role) {
      nodes_.push_back(std::make_unique<EngineProcess>(
          config_, name, role, ProcessBackends{loop_.runtime(name), loop_.network(name), store_, nullptr}));
    };
    start(layout_.controller, EngineProcess::Role::kController);
    for (const std::string& name : layout_.workers) start(name, EngineProcess::Role::kWorker);
    if (!inputs_.empty()) loop_.runtime("producer").spawn("produce", [this] { produce(); });
    g_loop.store(&loop_);
    if (g_signal.load() != 0) loop_.request_stop();  // a signal came while setting up
    const Micros started = loop_.clock().now();
    bool drained = false;
    Micros next_check = 0, next_progress = started + kSeconds;
    uint64_t last_delivered = 0;
    loop_.run([&] {
      const Micros now = loop_.clock().now();
      // Kafka sources never end: such a run goes on until stopped, unless it is to verify.
      if (now >= next_check && (kafka_sources_.empty() || o_.verify)) {
        next_check = now + kDrainCheckEvery;
        drained = this->drained();
      }
      if (o_.progress && now >= next_progress) {
        print_progress(now - started, progress_.delivered - last_delivered, false);
        last_delivered = progress_.delivered;
        next_progress = now + kSeconds;
      }
      return drained;
    });
    g_loop.store(nullptr);
    if (o_.progress) print_progress(loop_.clock().now() - started, 0, true);
    nodes_.clear();  // after the loop unwound their fibers
    return drained;
  }

  const std::vector<SourceInput>& inputs() const { return inputs_; }

 private:
  Status create_topic(const std::string& topic, int partitions, bool compact = false) {
    if (mock_ != nullptr) return mock_->create_topic(topic, partitions);
    return real::ensure_kafka_topic(brokers_, topic, partitions, compact);
  }

  // This deployment's id, made once and kept in the store: Kafka markers and transactional
  // ids carry it, so another deployment on the same topics never mistakes them for its own.
  std::string instance() {
    for (int attempt = 0; attempt < 10; ++attempt) {
      auto tx = store_.begin();
      if (!tx) continue;
      auto stored = store_.get(*tx, kProducer, "instance");
      if (stored && *stored) {
        store_.abort(*tx);
        return **stored;
      }
      std::random_device os;  // a real deployment: no simulation reaches this
      const std::string id = fmt::format("{:08x}{:08x}", os(), os());
      tx->put(kProducer, "instance", id);
      if (store_.commit(*tx, {}).has_value()) return id;
    }
    return "default";
  }

  uint64_t produced() {
    auto tx = store_.begin();
    if (!tx) return 0;
    const uint64_t next = read_u64(store_, *tx, kProducer, "next");
    store_.abort(*tx);
    return next;
  }

  // Writes the workload into the source queues, a batch per transaction, each row recorded
  // in the input log in the same transaction; resumes where the last life stopped.
  void produce() {
    Runtime& rt = loop_.runtime("producer");
    for (;;) {
      auto tx = store_.begin();
      if (!tx) {
        rt.sleep_for(10 * kMillis);
        continue;
      }
      const uint64_t next = read_u64(store_, *tx, kProducer, "next");
      const bool all = next >= inputs_.size();
      const Micros now = rt.clock().now();
      const uint64_t end = std::min<uint64_t>(inputs_.size(), next + kProducerBatch);
      for (uint64_t k = next; k < end; ++k) {
        const SourceInput& in = inputs_[k];
        const std::string counter = fmt::format("{}/{}", in.source, in.partition);
        const uint64_t offset = read_u64(store_, *tx, kProducer, counter);
        const Micros event_ts = now - (in.write_ts - in.event_ts);
        Encoder row;
        row.u64(in.key).bytes(in.payload).i64(event_ts).i64(now);
        tx->put(tables::queue(in.source), tables::partition_prefix(in.partition) + tables::hex16(offset), row.take());
        tx->put(kProducer, counter, u64_bytes(offset + 1));
        Encoder logged;
        logged.bytes(in.source).u64(static_cast<uint64_t>(in.partition)).u64(in.key).bytes(in.payload).i64(event_ts).i64(now);
        tx->put(kInputLog, tables::hex16(k), logged.take());
      }
      tx->put(kProducer, "next", u64_bytes(end));
      // The queue heads: nothing older than now will be appended; past the end, nothing at all.
      for (const auto& source : spec_.sources) {
        for (int p = 0; p < source.partitions; ++p) {
          Encoder head;
          head.i64(end >= inputs_.size() ? kHeadsDone : now);
          tx->put(tables::kQueueHeads, fmt::format("{}/{}", source.name, p), head.take());
        }
      }
      const bool committed = store_.commit(*tx, {}).has_value();
      if (committed && all) return;
      rt.sleep_for(kProducerPause);
    }
  }

  // The LevelDB-backed queue table an async sink delivers to: appends with Flow's
  // (producer_id, seqNo) dedup, the table and the dedup state in one transaction.
  void serve_target(const std::string& sink) {
    const std::string node = sink_target_node(sink);
    loop_.add_node(node);
    loop_.network(node).serve(kSinkAppendService, [this, sink](const std::string&,
                                                                std::string_view request) -> Result<std::string> {
      Decoder in(request);
      const std::string producer = in.string();
      const uint64_t seqno = in.u64();
      const uint64_t lease = in.u64();
      const std::string message(in.bytes());
      if (!in.done()) return Status::invalid_argument("malformed append");
      auto tx = store_.begin();
      if (!tx) return tx.error();
      const std::string last_key = "p/" + producer;
      if (!producer.empty()) {
        auto last = store_.get(*tx, target_state(sink), last_key);
        if (!last) return last.error();
        if (seqno <= u64_of(*last)) {
          store_.abort(*tx);
          return std::string("duplicate");
        }
        tx->put(target_state(sink), last_key, u64_bytes(seqno));
      }
      auto count = store_.get(*tx, target_state(sink), "count");
      if (!count) return count.error();
      const uint64_t n = u64_of(*count);
      Encoder entry;
      entry.bytes(producer).u64(seqno).u64(lease).bytes(message);
      tx->put(target_table(sink), tables::hex16(n), entry.take());
      tx->put(target_state(sink), "count", u64_bytes(n + 1));
      auto committed = store_.commit(*tx, {});
      if (!committed) return Status::unavailable("the target could not append: " + committed.error().message());
      return std::string("appended");
    });
  }

  // Everything produced has been consumed by the sources, and no stream row, outbox row or
  // timer is left.
  bool drained() {
    auto tx = store_.begin();
    if (!tx) return false;
    bool done = read_u64(store_, *tx, kProducer, "next") >= inputs_.size();
    for (const auto& source : spec_.sources) {
      auto kafka = kafka_sources_.find(source.name);
      for (int p = 0; done && p < source.partitions; ++p) {
        const std::string key = fmt::format("{}/{}", source.name, p);
        const uint64_t read = read_u64(store_, *tx, tables::kSourceOffsets, key);
        if (kafka != kafka_sources_.end()) {
          // Caught up with what the topic holds, and that much committed.
          done = kafka->second->at_end(p) && kafka->second->next_offset(p) == read;
        } else {
          done = read == read_u64(store_, *tx, kProducer, key);
        }
      }
    }
    store_.abort(*tx);
    return done && progress_.amo_in_queue.empty() && !store_.any_rows("stream/") && !store_.any_rows("output_messages/") &&
           !store_.any_rows("timers/");
  }

  void print_progress(Micros elapsed, uint64_t delivered_last_second, bool last) {
    const bool tty = isatty(STDERR_FILENO) != 0;
    if (!tty && !last && (elapsed / kSeconds) % 5 != 0) return;
    fmt::print(stderr, "{}onceflow real: in {}/{}, delivered {} (this run), epochs {}, {} msg/s, {:.0f}s{}",
               tty ? "\r" : "", produced(), inputs_.size(), progress_.delivered, progress_.epochs,
               delivered_last_second, static_cast<double>(elapsed) / 1e6, tty && !last ? "   " : "\n");
  }

  const PipelineSpec& spec_;
  const ComputationRegistry& registry_;
  const RealOptions& o_;
  real::LevelDbStore& store_;
  std::string brokers_;
  real::KafkaMockCluster* mock_ = nullptr;
  Connectors connectors_;
  std::map<std::string, std::unique_ptr<real::KafkaSource>> kafka_sources_;
  std::map<std::string, std::unique_ptr<real::KafkaSink>> kafka_sinks_;
  EngineOptions options_;
  BugSwitches bugs_;
  Progress progress_;
  real::RealLoop loop_;
  // The engine's processes, as the simulator composes them too; connectors are the shared ones.
  class SharedConnectors final : public ConnectorFactory {
   public:
    explicit SharedConnectors(const Connectors& c) : c_(c) {}
    void connect(const std::string&, Runtime&, Network&, ProcessConnectors& out) override { out.connectors = c_; }

   private:
    const Connectors& c_;
  };
  SharedConnectors shared_connectors_{connectors_};
  DeploymentLayout layout_ = deployment_layout(options_, o_.workers);
  DeploymentConfig config_{spec_, registry_, options_, bugs_, o_.seed, &progress_, &shared_connectors_};
  std::vector<std::unique_ptr<EngineProcess>> nodes_;
  std::vector<SourceInput> inputs_;
};

// --- --verify ----------------------------------------------------------------------------

std::vector<Row> rows_of(real::LevelDbStore& store, const std::string& table) {
  auto rows = store.dump(table);
  if (!rows) throw std::runtime_error(rows.error().message());
  return std::move(*rows);
}

std::vector<real::KafkaRecord> topic_records(const std::string& brokers, const std::string& topic) {
  auto records = real::read_kafka_topic(brokers, topic);
  if (!records) throw std::runtime_error(records.error().message());
  return std::move(*records);
}

int verify(const PipelineSpec& spec, const ComputationRegistry& registry, real::LevelDbStore& store,
           const std::string& brokers) {
  std::vector<SourceInput> inputs;
  for (const Row& row : rows_of(store, kInputLog)) {
    Decoder d(row.value);
    SourceInput in;
    in.source = d.string();
    in.partition = static_cast<int>(d.u64());
    in.key = d.u64();
    in.payload = d.string();
    in.event_ts = d.i64();
    in.write_ts = d.i64();
    inputs.push_back(std::move(in));
  }
  for (const auto& source : spec.sources) {
    if (source.type != "kafka") continue;
    for (const auto& record : topic_records(brokers, kafka_topic(source))) {
      inputs.push_back({source.name, record.partition, kafka_key(record.key), record.value, record.timestamp,
                        record.timestamp});
    }
  }
  std::stable_sort(inputs.begin(), inputs.end(),
                   [](const SourceInput& a, const SourceInput& b) { return a.write_ts < b.write_ts; });
  const PipelineResult reference = run_reference(spec, registry, inputs);

  checkers::PipelineHistory h;
  uint64_t outputs = 0, duplicates = 0, lost = 0;
  json sinks = json::object();
  for (const auto& sink : spec.sinks) {
    std::vector<Message> delivered;
    if (sink.type == SinkType::kSyncQueue) {
      for (const Row& row : rows_of(store, tables::sync_sink(sink.name))) {
        if (auto m = decode_message(row.value)) delivered.push_back(std::move(*m));
      }
    } else if (sink.type == SinkType::kKafka) {
      for (const auto& record : topic_records(brokers, kafka_topic(sink))) {
        Message m;
        m.key = kafka_key(record.key);
        m.payload = record.value;
        m.id = record.id.empty() ? 0 : std::stoull(record.id, nullptr, 16);
        h.deliveries.push_back({sink.name, "", 0, 0, {m.id, m.key, m.stream, m.alignment_ts, m.payload}});
        delivered.push_back(std::move(m));
      }
    } else {
      for (const Row& row : rows_of(store, target_table(sink.name))) {
        Decoder d(row.value);
        const std::string producer = d.string();
        const uint64_t seqno = d.u64();
        const uint64_t lease = d.u64();
        auto m = decode_message(d.bytes());
        if (!m) continue;
        (void)seqno;
        h.deliveries.push_back({sink.name, producer, lease, 0, {m->id, m->key, m->stream, m->alignment_ts, m->payload}});
        delivered.push_back(std::move(*m));
      }
    }
    auto& out = h.sink_outputs[sink.name];
    std::map<std::pair<uint64_t, std::string>, int64_t> balance;  // actual minus reference
    for (const Message& m : delivered) {
      out.emplace_back(m.key, m.payload);
      ++balance[{m.key, m.payload}];
    }
    std::sort(out.begin(), out.end());
    auto ref = reference.sinks.find(sink.name);
    const auto expected = ref == reference.sinks.end() ? decltype(ref->second){} : ref->second;
    for (const auto& item : expected) --balance[item];
    uint64_t sink_dup = 0, sink_lost = 0;
    for (const auto& [item, n] : balance) {
      if (n > 0) sink_dup += static_cast<uint64_t>(n);
      if (n < 0) sink_lost += static_cast<uint64_t>(-n);
    }
    outputs += delivered.size();
    duplicates += sink_dup;
    lost += sink_lost;
    sinks[sink.name] = {{"outputs", delivered.size()}, {"expected", expected.size()}, {"duplicates", sink_dup},
                        {"lost", sink_lost}};
    const bool at_least_once = sink.type == SinkType::kKafka && sink.delivery_guarantee == SinkDelivery::kAtLeastOnce;
    h.sinks.push_back({sink.name, faults::default_guarantee(sink), expected, writes_before_commit(sink)});
    sinks[sink.name]["guarantee"] = at_least_once ? "at_least_once" : "exactly_once";
  }
  for (const std::string prefix : {"state/", "external/"}) {
    for (const std::string& table : store.table_names(prefix)) {
      for (const Row& row : rows_of(store, table)) h.tables[table][row.key] = row.value;
    }
  }
  h.reference_tables = reference.tables;
  for (const auto& c : spec.computations) {
    if (c.processing_mode == ProcessingMode::kAtLeastOnceConsistent) h.compare_state = false;
  }
  const std::vector<checkers::Verdict> verdicts = {checkers::DeliveryCheck().check(h), checkers::StateCheck().check(h)};
  json checks = json::array();
  for (const auto& v : verdicts) checks.push_back({{"name", v.check}, {"verdict", v.passed ? "pass" : "fail"}, {"detail", v.detail}});
  const bool passed = checkers::all_passed(verdicts);
  const json verdict{{"verdict", passed ? "pass" : "fail"}, {"inputs", inputs.size()}, {"outputs", outputs},
                     {"duplicates", duplicates}, {"lost", lost}, {"sinks", sinks}, {"checks", checks}};
  fmt::print("{}\n", verdict.dump(2));
  return passed ? 0 : 1;
}

}  // namespace

int run_real(const std::string& spec_path, const PipelineSpec& spec, const ComputationRegistry& registry,
             const RealOptions& o) {
  for (const auto& sink : spec.sinks) {
    if (sink.type != SinkType::kSyncQueue && sink.type != SinkType::kAsyncQueue && sink.type != SinkType::kKafka) {
      fmt::print(stderr, "onceflow: {}: sinks.{}: {} sinks run in the simulator only, not under onceflow real\n",
                 spec_path, sink.name, sink_type_name(sink.type));
      return 2;
    }
  }
  for (const auto& source : spec.sources) {
    if (source.type != "queue" && source.type != "kafka") {
      fmt::print(stderr, "onceflow: {}: sources.{}: {} sources run in the simulator only, not under onceflow real\n",
                 spec_path, source.name, source.type);
      return 2;
    }
  }
  bool uses_kafka = false;
  for (const auto& source : spec.sources) uses_kafka = uses_kafka || source.type == "kafka";
  for (const auto& sink : spec.sinks) uses_kafka = uses_kafka || sink.type == SinkType::kKafka;
  if (uses_kafka && o.kafka.empty()) {
    fmt::print(stderr, "onceflow: {}: the pipeline reads or writes kafka: give --kafka BROKERS (or --kafka mock)\n",
               spec_path);
    return 2;
  }
  std::unique_ptr<real::KafkaMockCluster> mock;
  std::string brokers = o.kafka;
  if (uses_kafka && o.kafka == "mock") {
    auto started = real::KafkaMockCluster::start(3);
    if (!started) {
      fmt::print(stderr, "onceflow: {}\n", started.error().message());
      return 2;
    }
    mock = std::move(*started);
    brokers = mock->bootstrap_servers();
    fmt::print(stderr, "onceflow real: kafka mock cluster at {}\n", brokers);
  }
  std::error_code ec;
  std::filesystem::create_directories(o.data_dir, ec);
  if (ec) {
    fmt::print(stderr, "onceflow: cannot create --data {}: {}\n", o.data_dir, ec.message());
    return 2;
  }
  real::WallClock clock;
  auto store = real::LevelDbStore::open((std::filesystem::path(o.data_dir) / "store").string(), clock);
  if (!store) {
    fmt::print(stderr, "onceflow: {}\n", store.error().message());
    return 2;
  }
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  struct sigaction old_int {}, old_term {};
  sigaction(SIGINT, &action, &old_int);
  sigaction(SIGTERM, &action, &old_term);
  bool drained = false;
  const Micros started = clock.now();
  {
    Deployment deployment(spec, registry, o, **store);
    deployment.use_mock(mock.get());
    if (uses_kafka) {
      if (Status connected = deployment.connect_kafka(brokers); !connected.is_ok()) {
        fmt::print(stderr, "onceflow: kafka at {}: {}\n", brokers, connected.message());
        return 2;
      }
    }
    drained = deployment.run();
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (o.stats) {
    const auto& st = (*store)->stats();
    const double wall_s = static_cast<double>(clock.now() - started) / 1e6;
    fmt::print("{}\n", json{{"messages", o.messages}, {"wall_s", wall_s}, {"commits", st.commits},
                            {"writes", st.writes}, {"bytes", st.bytes}, {"drained", drained}}
                           .dump());
  }
  if (!drained) {
    fmt::print(stderr, "onceflow real: stopped on signal {}; run again with --data {} to resume\n", g_signal.load(),
               o.data_dir);
    return 0;
  }
  if (!o.verify) return 0;
  try {
    return verify(spec, registry, **store, brokers);
  } catch (const std::runtime_error& e) {
    fmt::print(stderr, "onceflow: --verify: {}\n", e.what());
    return 2;
  }
}

namespace {
std::atomic<bool> g_mock_stop{false};
extern "C" void on_mock_signal(int) { g_mock_stop.store(true); }
}  // namespace

int run_kafka_mock(int brokers, const std::vector<std::string>& topics) {
  auto mock = real::KafkaMockCluster::start(brokers);
  if (!mock) {
    fmt::print(stderr, "onceflow: {}\n", mock.error().message());
    return 2;
  }
  for (const std::string& topic : topics) {
    const size_t colon = topic.rfind(':');
    int partitions = 1;
    std::string name = topic;
    if (colon != std::string::npos) {
      name = topic.substr(0, colon);
      try {
        partitions = std::stoi(topic.substr(colon + 1));
      } catch (const std::exception&) {
        partitions = 0;
      }
    }
    if (name.empty() || partitions < 1) {
      fmt::print(stderr, "onceflow: --topic {}: expected NAME or NAME:PARTITIONS\n", topic);
      return 2;
    }
    if (Status s = (*mock)->create_topic(name, partitions); !s.is_ok()) {
      fmt::print(stderr, "onceflow: {}\n", s.message());
      return 2;
    }
  }
  std::signal(SIGINT, on_mock_signal);
  std::signal(SIGTERM, on_mock_signal);
  fmt::print("{}\n", (*mock)->bootstrap_servers());
  std::fflush(stdout);
  while (!g_mock_stop.load()) ::usleep(50'000);
  return 0;
}

}  // namespace onceflow::cli
