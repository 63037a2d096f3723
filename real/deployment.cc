#include "real/deployment.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <random>
#include <utility>
#include <vector>

#include "core/controller.h"
#include "core/emitted.h"
#include "core/outbox.h"
#include "core/env/codec.h"
#include "core/job.h"
#include "core/stream_rows.h"
#include "core/workload.h"
#include "real/operator_requests.h"
#include "real/status.h"
#include "real/wall_clock.h"

namespace onceflow::real {
namespace {

// What the real deployment keeps besides the engine's own tables.
constexpr const char* kProducer = "real/producer";  // "next" -> u64; "<source>/<p>" -> next offset
// hex16(index of a batch's first input) -> the inputs the producer wrote in that transaction
constexpr const char* kInputLog = "real/inputs";
constexpr size_t kProducerBatch = 2000;
constexpr Micros kProducerPause = 2 * kMillis;
constexpr Micros kPipelineStartWait = 10 * kSeconds;  // then the producer writes anyway
constexpr Micros kDrainCheckEvery = 100 * kMillis;
constexpr const char* kOperator = "operator";  // the node that asks the controller to stop or resume
constexpr Micros kRequestsPollEvery = 200 * kMillis;  // the leader's process looks for operator requests
constexpr Micros kHoldForAnswer = 10 * kSeconds;     // how long an ending waits for a request's answer
// A call to a controller of this process waits only for that controller's commits (one busy
// with a cycle, or not leading, answers Unavailable at once). It is given this long: with the
// engine's RPC timeout (100 ms) a commit slowed by a loaded machine timed the call out while
// the controller went on to apply the change, and the request sent again was applied twice
// (a setting's layout version bumped twice) or refused (the layout had moved on).
constexpr Micros kOwnControllerTimeout = 30 * kSeconds;
constexpr Micros kKafkaCheckEvery = 1 * kSeconds;
// How long an http or clickhouse sink waits for its server to connect, take a request or
// answer (a Replicated table's INSERT waits for ZooKeeper).
constexpr Micros kServerTimeout = 10 * kSeconds;
constexpr Micros kStartPingTimeout = 3 * kSeconds;
constexpr int kKafkaCheckTimeoutMs = 2'000;
constexpr Micros kHeadsDone = INT64_MAX / 4;  // a queue head past every message: no more input

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

std::string source_key(const std::string& source, int partition) { return fmt::format("{}/{}", source, partition); }

std::string target_table(const std::string& sink) { return "target/" + sink; }
std::string target_state(const std::string& sink) { return "target_state/" + sink; }

// A target row holds the entries one append added, keyed by the position of the first (16
// hex): the producer and its Lease once, each entry's seqNo (as the difference from the one
// before), and the messages as a stream row holds them (a sink sends messages of one stream).
std::string encode_target_row(const std::string& producer, LeaseId lease, const std::vector<uint64_t>& seqnos,
                              const std::vector<Message>& messages) {
  Encoder out;
  out.bytes(producer).u64(lease).u64(seqnos.size());
  uint64_t before = 0;
  for (const uint64_t seqno : seqnos) out.u64(seqno - std::exchange(before, seqno));
  out.bytes(stream_rows::encode(messages));
  return out.take();
}

bool decode_target_row(std::string_view value, std::vector<TargetEntry>* out) {
  Decoder d(value);
  const std::string producer = d.string();
  const LeaseId lease = d.u64();
  const uint64_t count = d.u64();
  if (!d.ok() || count == 0 || count > value.size()) return false;
  std::vector<uint64_t> seqnos;
  uint64_t seqno = 0;
  for (uint64_t i = 0; i < count && d.ok(); ++i) seqnos.push_back(seqno += d.u64());
  auto messages = stream_rows::decode(d.bytes());
  if (!d.done() || !messages || messages->size() != count) return false;
  for (size_t i = 0; i < messages->size(); ++i) out->push_back({producer, seqnos[i], lease, std::move((*messages)[i])});
  return true;
}

}  // namespace

Result<std::vector<SourceInput>> produced_inputs(RealStore& store) {
  auto rows = store.dump(kInputLog);
  if (!rows) return rows.error();
  std::vector<SourceInput> inputs;
  for (const Row& row : *rows) {
    Decoder d(row.value);
    // Rows hold consecutive inputs: a row that does not start where the last one ended is damage.
    const uint64_t count = d.u64();
    if (tables::parse_hex16(row.key) != inputs.size() || count > row.value.size()) {
      return Status::corruption(fmt::format("{}: input log row {} is out of place", store.where(), row.key));
    }
    for (uint64_t i = 0; d.ok() && i < count; ++i) {
      SourceInput& in = inputs.emplace_back();
      in.source = d.string();
      in.partition = static_cast<int>(d.u64());
      in.key = d.u64();
      in.payload = d.string();
      in.event_ts = d.i64();
      in.write_ts = d.i64();
    }
    if (!d.done()) return Status::corruption(fmt::format("{}: input log row {} does not decode", store.where(), row.key));
  }
  return inputs;
}

Result<uint64_t> produced_to(RealStore& store, const Transaction& tx, const std::string& source, int partition) {
  auto row = store.get(tx, kProducer, source_key(source, partition));
  if (!row) return row.error();
  return u64_of(*row);
}

Result<std::vector<TargetEntry>> target_entries(RealStore& store, const std::string& sink) {
  auto rows = store.dump(target_table(sink));
  if (!rows) return rows.error();
  std::vector<TargetEntry> out;
  for (const Row& row : *rows) {
    if (!decode_target_row(row.value, &out)) {
      return Status::corruption(fmt::format("{}: target row {} of sink {} does not decode", store.where(), row.key, sink));
    }
  }
  return out;
}

void describe_metrics(Metrics& m) {
  using T = Metrics::Type;
  m.describe("onceflow_epochs_committed_total", T::kCounter, "Epochs committed by the jobs of this process.");
  m.describe("onceflow_epoch_commit_seconds", T::kHistogram, "Time an epoch's commit took, from its start to the store's answer.");
  m.describe("onceflow_source_messages_total", T::kCounter, "Messages read by the source jobs of this process, in committed epochs.");
  m.describe("onceflow_sink_messages_total", T::kCounter, "Messages the targets of this process's sinks acknowledged.");
  m.describe("onceflow_source_lag_messages", T::kGauge, "Records written to a source's partition and not yet read in a committed epoch (a Kafka topic's end as the cluster last told it; its transaction markers count).");
  m.describe("onceflow_at_most_once_dropped_total", T::kCounter, "At-most-once messages dropped (not sent).");
  m.describe("onceflow_at_most_once_in_doubt_total", T::kCounter, "At-most-once sends that got no answer: the target may hold them.");
  m.describe("onceflow_job_leases_granted_total", T::kCounter, "Job Leases this process's controller granted.");
  m.describe("onceflow_job_leases_aborted_total", T::kCounter, "Job Leases this process's controller aborted.");
  m.describe("onceflow_leases_lost_total", T::kCounter, "Leases found ended under their holder (worker, job, controller).");
  m.describe("onceflow_delivery_retries_total", T::kCounter, "Deliveries to a sink's target that failed and are retried.");
  m.describe("onceflow_store_errors_total", T::kCounter, "Store operations that failed or whose outcome was ambiguous.");
  m.describe("onceflow_engine_events_total", T::kCounter, "Engine events by probe name (onceflow list --probes).");
  m.describe("onceflow_pipeline_state", T::kGauge, "1 for the pipeline's state as this process last read it.");
  m.describe("onceflow_controller_leading", T::kGauge, "1 when this process's controller leads.");
  m.describe("onceflow_store_commits_total", T::kCounter, "Transactions this process committed to the store.");
  m.describe("onceflow_store_conflicts_total", T::kCounter, "Commits refused for a write-write conflict.");
  m.describe("onceflow_lease_renewals_total", T::kCounter,
             "Lease renewals (pings that kept a worker's, job's or controller's Lease alive) this process made.");
  m.describe("onceflow_sink_outbox_undelivered_messages", T::kGauge,
             "Messages a sink partition's committed outbox holds that its target has not acknowledged.");
  m.describe("onceflow_build_info", T::kGauge, "1, labelled with the version of onceflow this process runs.");
  m.describe("onceflow_computation_exceptions_total", T::kCounter,
             "Calls of a computation's function that threw; each gave its epoch up, which the job retries.");
}

// Counts what the engine does, for the progress line: a delivery counts once the target
// acknowledged it (an outbox row's acknowledgement, a synchronous sink's committed epoch,
// an at-most-once send), not when its outbox row was written.
// The same events feed the process's metrics (--metrics-port; real/metrics.h).
class RealDeployment::Progress final : public EngineObserver {
 public:
  explicit Progress(const PipelineSpec& spec) : spec_(spec) {}
  // Where the events are counted for --metrics-port; none (the default): nothing is.
  void count_into(Metrics* metrics) {
    if (metrics != nullptr) start_metrics(*metrics);
    metrics_ = metrics;
  }
  // Every series this process may count is there from the first scrape, at 0 (so that rate()
  // and increase() see its first events).
  void start_metrics(Metrics& m) {
    describe_metrics(m);
    m.set("onceflow_build_info", {{"version", ONCEFLOW_VERSION}}, 1);
    for (const auto& source : spec_.sources) m.add("onceflow_source_messages_total", {{"source", source.name}}, 0);
    for (const auto& c : spec_.computations) m.add("onceflow_computation_exceptions_total", {{"computation", c.name}}, 0);
    for (const auto& sink : spec_.sinks) {
      m.add("onceflow_sink_messages_total", {{"sink", sink.name}}, 0);
      if (sink.delivery_guarantee == SinkDelivery::kAtMostOnce) {
        m.add("onceflow_at_most_once_dropped_total", {{"sink", sink.name}}, 0);
        m.add("onceflow_at_most_once_in_doubt_total", {{"sink", sink.name}}, 0);
      }
    }
    for (const char* lease : {"worker", "job", "controller"}) m.add("onceflow_leases_lost_total", {{"lease", lease}}, 0);
    for (const char* name : {"onceflow_delivery_retries_total", "onceflow_store_errors_total",
                             "onceflow_job_leases_granted_total", "onceflow_job_leases_aborted_total",
                             "onceflow_lease_renewals_total"}) {
      m.add(name, {}, 0);
    }
  }
  void computation_misuse(const std::string& computation, const std::string& what) override {
    if (misuse.empty()) misuse = fmt::format("computation {}: {}; nothing of that epoch was committed", computation, what);
  }
  std::string misuse;  // the first call a computation's spec does not allow
  // On stderr once per distinct one (the job retries the epoch: the same input may throw
  // again and again).
  void computation_threw(const std::string& computation, const std::string& what) override {
    ++threw;
    if (metrics_ != nullptr) metrics_->add("onceflow_computation_exceptions_total", {{"computation", computation}});
    const std::string line = "onceflow real: " + what + "; the epoch is given up and retried";
    if (warned_.insert(line).second) fmt::print(stderr, "{}\n", line);
  }
  uint64_t threw = 0;  // calls of a computation's function that threw, for the progress line
  void epoch_committing(const Epoch& e) override {
    if (metrics_ != nullptr) committing_[e.job.str()] = clock_.now();
  }
  void epoch_committed(const Epoch& e) override {
    if (epochs++ == 0) first_epoch_at = clock_.now();
    if (metrics_ != nullptr) count_epoch(e);
    if (e.job.kind != JobKind::kSink) return;
    const SinkSpec* sink = spec_.sink(e.job.name);
    if (sink->type == SinkType::kSyncQueue || writes_before_commit(*sink)) delivered_to(e.job.name, e.consumed.size());
  }
  void count_epoch(const Epoch& e) {
    static constexpr std::array<const char*, 3> kKinds = {"source", "computation", "sink"};
    const std::string kind = kKinds[static_cast<size_t>(e.job.kind)];
    metrics_->add("onceflow_epochs_committed_total",
                 {{"kind", kind}, {"name", e.job.name}, {"partition", std::to_string(e.job.partition)}});
    if (auto it = committing_.find(e.job.str()); it != committing_.end()) {
      metrics_->observe("onceflow_epoch_commit_seconds", {{"kind", kind}},
                       static_cast<double>(clock_.now() - it->second) / 1e6);
      committing_.erase(it);
    }
    if (e.job.kind == JobKind::kSource && !e.produced.empty()) {
      metrics_->add("onceflow_source_messages_total", {{"source", e.job.name}}, static_cast<double>(e.produced.size()));
    }
  }
  void delivery_confirmed(const JobId& job, const std::vector<MessageId>& ids, Version) override {
    delivered_to(job.name, ids.size());
  }
  void amo_sent(const std::string& sink, MessageId) override { delivered_to(sink, 1); }
  void amo_dropped(const std::string& sink, const Message&, std::string_view) override {
    ++amo.dropped;
    if (metrics_ != nullptr) metrics_->add("onceflow_at_most_once_dropped_total", {{"sink", sink}});
  }
  // A send that got no answer in time (a slow synced write at the target, say).
  void amo_in_doubt(const std::string& sink, const Message&, std::string_view) override {
    ++amo.in_doubt;
    if (metrics_ != nullptr) metrics_->add("onceflow_at_most_once_in_doubt_total", {{"sink", sink}});
  }
  // A structured warning (a ClickHouse target that degrades the guarantee, ...), on stderr
  // once per distinct one.
  void warning(const std::string& name, const std::vector<std::pair<std::string, std::string>>& attrs) override {
    std::string line = "onceflow real: warning " + name + ":";
    for (const auto& [key, value] : attrs) line += fmt::format(" {}={}", key, value);
    if (warned_.insert(line).second) fmt::print(stderr, "{}\n", line);
  }
  void job_lease_started(const std::string&, LeaseId, const std::string&) override {
    if (metrics_ != nullptr) metrics_->add("onceflow_job_leases_granted_total", {});
  }
  void job_lease_aborted(const std::string&, LeaseId, std::string_view) override {
    if (metrics_ != nullptr) metrics_->add("onceflow_job_leases_aborted_total", {});
  }
  void probe(Probe p) override {
    if (metrics_ == nullptr) return;
    metrics_->add("onceflow_engine_events_total", {{"event", std::string(probe_name(p))}});
    switch (p) {
      case Probe::kOutboxDeliveryFailed:
      case Probe::kSyncWriteFailed: metrics_->add("onceflow_delivery_retries_total", {}); break;
      case Probe::kEpochUnavailable:
      case Probe::kEpochReadFailed:
      case Probe::kEpochAmbiguousCommitted:
      case Probe::kEpochAmbiguousNotCommitted:
      case Probe::kControllerUnstored:
      case Probe::kControllerCommitAmbiguous: metrics_->add("onceflow_store_errors_total", {}); break;
      case Probe::kWorkerLeaseLost: metrics_->add("onceflow_leases_lost_total", {{"lease", "worker"}}); break;
      case Probe::kEpochFenced: metrics_->add("onceflow_leases_lost_total", {{"lease", "job"}}); break;
      case Probe::kControllerStepDown: metrics_->add("onceflow_leases_lost_total", {{"lease", "controller"}}); break;
      default: break;
    }
  }
  AtMostOnceCounts amo;  // at-most-once sends given up in this process
  uint64_t epochs = 0;
  Micros first_epoch_at = -1;  // when a job first committed an epoch in this life
  uint64_t delivered = 0;  // acknowledged by their targets, in this process's life

 private:
  void delivered_to(const std::string& sink, size_t n) {
    delivered += n;
    if (metrics_ != nullptr) metrics_->add("onceflow_sink_messages_total", {{"sink", sink}}, static_cast<double>(n));
  }
  const PipelineSpec& spec_;
  Metrics* metrics_ = nullptr;
  WallClock clock_;  // the loop's clock (real/wall_clock.h)
  std::map<std::string, Micros> committing_;  // by job: when its epoch's commit began
  std::set<std::string> warned_;
};

// The real deployment's connectors are its own, shared by every process it runs.
class RealDeployment::SharedConnectors final : public ConnectorFactory {
 public:
  explicit SharedConnectors(const Connectors& c) : c_(c) {}
  void connect(const std::string&, Runtime&, Network&, ProcessConnectors& out) override { out.connectors = c_; }

 private:
  const Connectors& c_;
};

RealDeployment::RealDeployment(const PipelineSpec& spec, const ComputationRegistry& registry, const RealOptions& o,
                               RealStore& store)
    : spec_(spec),
      o_(o),
      store_(store),
      progress_(std::make_unique<Progress>(spec)),
      shared_connectors_(std::make_unique<SharedConnectors>(connectors_)),
      layout_(process_layout(options_, o)) {
  options_.record_history = o.record_history;  // what --verify re-executes
  // --bug naming an engine switch; the program's own (never an engine switch's name) are the
  // user code's (run_real), and the command line refused any other name.
  if (!o.bug.empty()) (void)bugs_.enable(o.bug);
  // A request waits for a cycle on a loaded store (well within kOwnControllerTimeout) rather
  // than being refused until the asker gives up; asked again after a longer cycle.
  options_.request_wait_us = 2 * kSeconds;
  config_ = std::make_unique<DeploymentConfig>(
      DeploymentConfig{spec_, registry, options_, bugs_, o.seed, progress_.get(), shared_connectors_.get()});
  PipelineWorkload w;
  w.messages = static_cast<int>(o.messages);
  w.keys = o.keys;
  inputs_ = std::make_unique<WorkloadStream>(spec_, w, o.seed, [](const SourceSpec& s) { return s.type == "queue"; });
}

RealDeployment::~RealDeployment() = default;

Micros RealDeployment::first_epoch_at() const { return progress_->first_epoch_at; }
RealDeployment::AtMostOnceCounts RealDeployment::at_most_once() const { return progress_->amo; }
uint64_t RealDeployment::computation_exceptions() const { return progress_->threw; }

Status RealDeployment::create_topic(const std::string& topic, int partitions, bool compact, bool exact) {
  if (mock_ != nullptr) return mock_->create_topic(topic, partitions);
  return ensure_kafka_topic(kafka_, topic, partitions, compact, exact);
}

Status RealDeployment::connect_kafka(const KafkaConfig& kafka, KafkaMockCluster* mock) {
  kafka_ = kafka;
  mock_ = mock;
  for (const auto& source : spec_.sources) {
    if (source.type != "kafka") continue;
    // A source reads the partitions its spec names: a topic with others would be read in part.
    if (Status s = create_topic(kafka_topic(source), source.partitions, false, true); !s.is_ok()) return s;
    auto reader = KafkaSource::open(kafka_, kafka_topic(source));
    if (!reader) return reader.error();
    connectors_.sources[source.name] = reader->get();
    kafka_sources_[source.name] = std::move(*reader);
  }
  for (const auto& sink : spec_.sinks) {
    if (sink.type != SinkType::kKafka) continue;
    if (Status s = create_topic(kafka_topic(sink), sink.partitions, false, false); !s.is_ok()) return s;
    const std::string progress = KafkaSink::progress_topic(kafka_topic(sink));
    if (Status s = create_topic(progress, sink.partitions, true, false); !s.is_ok()) return s;
    auto writer = KafkaSink::open(loop_, kafka_, sink, instance());
    if (!writer) return writer.error();
    connectors_.sinks[sink.name] = writer->get();
    (*writer)->set_latency(&latency_);
    kafka_sinks_[sink.name] = std::move(*writer);
  }
  return check_kafka_holds_what_was_done();
}

Status RealDeployment::connect_http_sinks() {
  for (const auto& sink : spec_.sinks) {
    if (sink.type == SinkType::kClickHouse) {
      auto writer = ClickHouseSink::open(loop_, sink, kServerTimeout, progress_.get());
      if (!writer) return writer.error();
      // A server that does not answer now is most likely a wrong url: said at once, not after
      // --sink-timeout (the target itself is validated at the first write, as the seed says).
      for (const std::string& url : sink.shard_hosts.empty() ? std::vector<std::string>{sink.url} : sink.shard_hosts) {
        if (!ClickHouseServer(url, kStartPingTimeout).ping()) {
          return Status::unavailable(
              fmt::format("sinks.{}: ClickHouse at {} does not answer (GET /ping)", sink.name, shown_url(url)));
        }
      }
      connectors_.sinks[sink.name] = writer->get();
      (*writer)->set_latency(&latency_);
      clickhouse_sinks_[sink.name] = std::move(*writer);
      continue;
    }
    if (sink.type != SinkType::kHttp) continue;
    auto writer = HttpSink::open(loop_, sink, kServerTimeout);
    if (!writer) return writer.error();
    connectors_.sinks[sink.name] = writer->get();
    (*writer)->set_latency(&latency_);
    http_sinks_[sink.name] = std::move(*writer);
  }
  return Status::ok();
}

// A source never read past its topic's end, and a sink's topic holds at least what its
// target acknowledged: otherwise this is not the cluster the data directory was made with
// (or a topic was recreated), and going on would skip input or report loss.
Status RealDeployment::check_kafka_holds_what_was_done() {
  auto tx = store_.begin();
  if (!tx) return tx.error();
  Status result;
  for (const auto& source : spec_.sources) {
    if (source.type != "kafka" || !result.is_ok()) continue;
    auto ends = kafka_topic_ends(kafka_, kafka_topic(source));
    if (!ends) return ends.error();
    for (int p = 0; p < source.partitions && result.is_ok(); ++p) {
      auto stored = store_.get(*tx, tables::kSourceOffsets, source_key(source_origin(source), p));
      if (!stored) return stored.error();
      const uint64_t read = u64_of(*stored);
      const uint64_t end = static_cast<size_t>(p) < ends->size() ? (*ends)[static_cast<size_t>(p)] : 0;
      if (read <= end) continue;
      result = Status::invalid_argument(fmt::format(
          "kafka topic {} partition {} ends at offset {}, but {} has read it up to offset {}: this is not the cluster "
          "(or the topic) that store was made with",
          kafka_topic(source), p, end, store_.where(), read));
    }
  }
  for (const auto& sink : spec_.sinks) {
    if (sink.type != SinkType::kKafka || !result.is_ok()) continue;
    uint64_t acknowledged = 0;
    for (int p = 0; p < sink.partitions; ++p) {
      auto meta = store_.get(*tx, tables::kJobMeta, JobId{JobKind::kSink, sink.name, p}.str());
      if (!meta) return meta.error();
      if (!*meta) continue;
      if (auto progress = sink_progress(**meta)) acknowledged += progress->acked_seqno;
    }
    auto ends = kafka_topic_ends(kafka_, kafka_topic(sink));
    if (!ends) return ends.error();
    uint64_t held = 0;
    for (uint64_t end : *ends) held += end;
    if (held >= acknowledged) continue;
    result = Status::invalid_argument(fmt::format(
        "kafka topic {} holds {} records, but {} says {} were delivered to it: this is not the cluster (or the topic) "
        "that store was made with",
        kafka_topic(sink), held, store_.where(), acknowledged));
  }
  store_.abort(*tx);
  return result;
}

// This deployment's id, made once and kept in the store: Kafka markers and transactional ids
// carry it, so another deployment on the same topics never mistakes them for its own.
std::string RealDeployment::instance() {
  auto kept = keep_once("instance", [] {
    std::random_device os;  // a real deployment: no simulation reaches this
    return fmt::format("{:08x}{:08x}", os(), os());
  });
  return kept ? *kept : "default";
}

// The producer's row `key`: as stored, or `make()`'s value, stored now by the first to ask.
Result<std::string> RealDeployment::keep_once(std::string_view key, const std::function<std::string()>& make) {
  Status last = Status::unavailable(fmt::format("{}: the row {} could not be kept", store_.where(), key));
  for (int attempt = 0; attempt < 10; ++attempt) {
    auto tx = store_.begin();
    if (!tx) {
      last = tx.error();
      continue;
    }
    auto stored = store_.get(*tx, kProducer, std::string(key));
    if (!stored) {
      store_.abort(*tx);
      last = stored.error();
      continue;
    }
    if (*stored) {
      store_.abort(*tx);
      return **stored;
    }
    const std::string value = make();
    tx->put(kProducer, std::string(key), value);
    if (store_.commit(*tx, {}).has_value()) return value;
  }
  return last;
}

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return host;
}

// The engine processes this process runs: every one for --role all, else the one named.
DeploymentLayout RealDeployment::process_layout(const EngineOptions& options, const RealOptions& o) {
  using Role = RealOptions::Role;
  if (o.role == Role::kAll) return deployment_layout(options, o.workers);
  std::string name = o.name;
  if (name.empty()) {
    name = fmt::format("{}-{}-{}", o.role == Role::kWorker ? "worker" : "controller", host_name(), getpid());
  }
  DeploymentLayout layout;
  (o.role == Role::kWorker ? layout.workers : layout.controllers).push_back(name);
  return layout;
}

// A worker takes the name of one that may still be alive (a process killed a moment ago, or
// one running now by mistake) only once that one's Lease has ended: two processes under one
// name would run the same jobs.
void RealDeployment::start_worker_when_free(const std::string& name) {
  Runtime& rt = loop_.runtime(name);
  bool said = false;
  while (true) {
    auto tx = store_.begin();
    if (tx) {
      auto row = store_.get(*tx, tables::kWorkers, name);
      store_.abort(*tx);
      if (row) {
        const auto worker = *row ? decode_worker(**row) : std::nullopt;
        const auto state = worker ? store_.lease_state(worker->lease) : Result<LeaseState>(LeaseState::kUnknown);
        if (state && *state != LeaseState::kActive) break;
        if (state && !said) {
          fmt::print(stderr, "onceflow real: {}: waiting for the Lease of an earlier process of this name to end "
                     "(one killed a moment ago, or one alive now: then give this one another --name)\n", name);
          said = true;
        }
      }
    }
    rt.sleep_for(kSeconds / 2);
  }
  processes_.push_back(std::make_unique<EngineProcess>(
      *config_, name, EngineProcess::Role::kWorker, ProcessBackends{rt, loop_.network(name), store_, nullptr, &wakeups_}));
}

bool RealDeployment::leads() {
  auto tx = store_.begin();
  if (!tx) return false;
  auto row = store_.get(*tx, tables::kController, kLeaderKey);
  store_.abort(*tx);
  if (!row || !*row) return false;
  const auto leader = decode_leader(**row);
  if (!leader) return false;
  auto state = store_.lease_state(leader->lease);
  return state && *state == LeaseState::kActive && !layout_.controllers.empty() &&
         leader->node == layout_.controllers.front();
}

RealDeployment::Ending RealDeployment::run() {
  using Role = RealOptions::Role;
  for (const std::string& name : layout_.controllers) loop_.add_node(name);
  for (const std::string& name : layout_.workers) loop_.add_node(name);
  loop_.add_node("producer");
  loop_.add_node(kOperator);
  // Every process serves the queue sinks' targets: an append is one transaction in the
  // store, so any process's copy takes it, and the delivering job asks its own.
  for (const auto& sink : spec_.sinks) {
    if (sink.type == SinkType::kAsyncQueue) serve_target(sink.name);
  }
  for (const std::string& name : layout_.controllers) {
    processes_.push_back(std::make_unique<EngineProcess>(
        *config_, name, EngineProcess::Role::kController,
        ProcessBackends{loop_.runtime(name), loop_.network(name), store_, nullptr, &wakeups_}));
  }
  for (const std::string& name : layout_.workers) {
    if (o_.role == Role::kAll) {
      processes_.push_back(std::make_unique<EngineProcess>(
          *config_, name, EngineProcess::Role::kWorker,
          ProcessBackends{loop_.runtime(name), loop_.network(name), store_, nullptr, &wakeups_}));
    } else {
      loop_.runtime(name).spawn("start", [this, name] { start_worker_when_free(name); });
    }
  }
  // The controllers' processes write the test workload (under several, their batches
  // conflict in the store, so each input is written once) and ask for a stopped pipeline to
  // work again.
  if (controls() && inputs_->size() > 0) loop_.runtime("producer").spawn("produce", [this] { produce(); });
  if (controls()) {
    // A pipeline an earlier run stopped (or paused) works again, with the partition counts of
    // this run's spec: a repartition when they differ from those in force.
    // A stop signal ends these requests (a "working" sent after the stop would undo it): the
    // stop is asked only once they are over.
    starting_ = true;
    loop_.runtime(kOperator).spawn("resume", [this] {
      struct Started {
        bool& starting;
        ~Started() { starting = false; }
      } started{starting_};
      // What the store holds, asked again while it does not answer: a failed read taken for
      // "a new pipeline" would skip the resume or the repartition.
      auto rows = stored_rows({"state", kLayoutKey, kLayoutPendingKey});
      for (int attempt = 0; !rows && attempt < 600 && stop_signals_.load() == 0; ++attempt) {
        if (attempt % 50 == 0) {
          fmt::print(stderr, "onceflow real: the store did not say the pipeline's state: asking again ({})\n",
                     rows.error().message());
        }
        loop_.runtime(kOperator).sleep_for(100 * kMillis);
        rows = stored_rows({"state", kLayoutKey, kLayoutPendingKey});
      }
      if (!rows) return;  // stopping, or a store that never answered (the run's checks say so)
      const std::optional<std::string>& state = (*rows)[0];
      const std::string changes = partition_changes(layout_to_change((*rows)[1], (*rows)[2]), state == "completed");
      const bool resume = state && *state != "working" && *state != "completed";
      if (state == "paused" && !changes.empty()) request_state("working");  // a paused pipeline is not repartitioned
      if (!changes.empty() && stop_signals_.load() == 0) request_repartition(changes);
      if (resume) request_state("working");
    });
    loop_.runtime(kOperator).spawn("requests", [this] { serve_requests(); });
  }
  if (!kafka_sources_.empty() || !kafka_sinks_.empty()) {
    loop_.add_node("kafka-health");
    loop_.runtime("kafka-health").spawn("watch", [this] { watch_kafka(); });
  }
  // The store is read for the loop's checks by a fiber of its own: a slow store (a busy
  // database) must not hold up the engine's fibers, which share the loop's thread.
  const bool ends_by_draining = controls() && (kafka_sources_.empty() || o_.verify);
  loop_.add_node("monitor");
  loop_.runtime("monitor").spawn("observe", [this, ends_by_draining] { observe(ends_by_draining); });
  const Micros started = loop_.clock().now();
  const Micros progress_every =
      o_.progress_every_us > 0 ? o_.progress_every_us : (isatty(STDERR_FILENO) != 0 ? kSeconds : 5 * kSeconds);
  Ending ending = Ending::kInterrupted;
  Micros next_progress = started + progress_every;
  Micros drain_deadline = -1;  // set by the first signal
  bool stopping_drained = false;  // a controller's process found the pipeline drained and stops it
  bool seen_working = false;      // a worker's process saw the pipeline not stopped
  uint64_t looked_at = 0;         // the observation the checks last acted on
  // A controller's process that took an operator's request ends once it stored the answer
  // (ctl waits for it; a stop it applied ends the run before that, else), or kHoldForAnswer
  // after it would have ended.
  Micros held_since = -1;  // since when an ending waits for an answer (-1: none waits)
  bool said_unanswered = false;
  const auto end_as = [&](Ending e, Micros now) {
    if (request_in_hand_ && (held_since < 0 || now - held_since < kHoldForAnswer)) {
      if (held_since < 0) held_since = now;
      return false;
    }
    if (request_in_hand_ && !std::exchange(said_unanswered, true)) {
      fmt::print(stderr, "onceflow real: request {} is not answered after {:.0f} s more: the run ends without its answer\n",
                 *request_in_hand_, static_cast<double>(kHoldForAnswer) / 1e6);
    }
    ending = e;
    return true;
  };
  // A signal stops "now": what the sources have not read stays for the next run, so that a
  // loaded run stops in the time of what is in flight. A run that drained (to verify) has
  // read everything: its stop is the ordinary one.
  const auto ask_stop = [this](bool now) {
    loop_.runtime(kOperator).spawn("stop", [this, now] {
      while (starting_) loop_.runtime(kOperator).sleep_for(10 * kMillis);
      request_state(now ? "stopped now" : "stopped");
    });
  };
  // Commits of the fibers are grouped into shared synced writes while the loop runs.
  store_.set_loop(&loop_);
  struct Ungroup {
    RealStore& store;
    ~Ungroup() { store.set_loop(nullptr); }
  } ungroup{store_};
  loop_.run([&] {
    const Micros now = loop_.clock().now();
    if (!request_in_hand_) held_since = -1;  // a later request gets a hold of its own
    if (Status failing_now = failing(); !failing_now.is_ok()) {
      failure_ = failing_now;
      ending = Ending::kFailed;
      return true;
    }
    if (o_.progress && now >= next_progress) {
      print_progress(now - started, false);
      next_progress = now + progress_every;
    }
    const bool fresh = observed_.looks != looked_at;  // a new observation since the last turn
    looked_at = observed_.looks;
    const std::optional<std::string>& state = observed_.state;
    const bool at_rest = state && (*state == "stopped" || *state == "completed") && !observed_.layout_pending;
    // Seen working: a state other than stopped or completed. Not a layout change pending on a
    // stopped pipeline: a run that resumes one with other partition counts repartitions it
    // first, and once that is applied the pipeline is still stopped until the resume's
    // "working" is; taking that moment for a stop from elsewhere ended such a run at once.
    const bool working = state && *state != "stopped" && *state != "completed";
    if (o_.role == Role::kWorker) {
      // A worker's process leaves on a signal (its jobs move on once their Leases end), and
      // ends once the pipeline it worked for is stopped or completed.
      if (stop_signals_.load() > 0) {
        ending = Ending::kLeft;
        return true;
      }
      if (!fresh) return false;
      if (working) seen_working = true;
      if (seen_working && at_rest) ending = Ending::kStopped;
      return ending == Ending::kStopped;
    }
    if (stop_signals_.load() > 0 && drain_deadline < 0) {
      drain_deadline = now + o_.drain_timeout_us;
      if (o_.role == Role::kController && !observed_.leads) {
        fmt::print(stderr, "onceflow real: {} stands by: it leaves; to stop the pipeline, signal the leading "
                   "controller's process\n", layout_.controllers.front());
        ending = Ending::kLeft;
        return true;
      }
      fmt::print(stderr, "onceflow real: stopping: draining what is in flight (a second signal ends the run at once)\n");
      if (!stopping_drained) ask_stop(true);
    }
    const auto drain_over = [&] { return drain_deadline >= 0 && now >= drain_deadline && (drain_timed_out_ = true); };
    if (!fresh) return drain_over();
    if (drain_deadline >= 0 || stopping_drained) {
      // A pipeline that completed as the signal came refuses the stop, and has nothing in
      // flight either: the drain is over (it waited out --drain-timeout before, a CI run
      // found).
      // A completed pipeline read all of its input and has nothing in flight: drained, even
      // when a signal came as it completed (--verify verifies it).
      if (state == "stopped" || state == "completed") {
        return end_as(drain_deadline >= 0 && state == "stopped" ? Ending::kStopped : Ending::kDrained, now);
      }
      return drain_over();
    }
    // Kafka sources never end: such a run goes on until stopped, unless it is to verify.
    if (ends_by_draining && observed_.waiting_for == "") {
      if (o_.role == Role::kAll) return end_as(Ending::kDrained, now);
      // The workers' processes end once the pipeline is stopped; a run started again
      // resumes it.
      stopping_drained = true;
      ask_stop(false);
      return false;
    }
    // Stopped elsewhere (an operator's request, another controller's process on a signal)
    // with work left, after it worked in this life.
    if (working) seen_working = true;
    if (seen_working && at_rest && state == "stopped" && !starting_) return end_as(Ending::kStoppedElsewhere, now);
    return false;
  });
  // stop() ends a worker's loop at once.
  if (o_.role == Role::kWorker && ending == Ending::kInterrupted) ending = Ending::kLeft;
  if (o_.progress) print_progress(loop_.clock().now() - started, true);
  processes_.clear();  // after the loop unwound their fibers
  return ending;
}

std::optional<std::string> RealDeployment::stored_state() {
  auto rows = stored_rows({"state"});
  if (!rows) return std::nullopt;
  return (*rows)[0];
}

void RealDeployment::observe(bool ends_by_draining) {
  Runtime& rt = loop_.runtime("monitor");
  while (true) {
    Observed o;
    // The state and the layout change under way in one snapshot (a repartition passes
    // through "stopped" on its way back to work).
    if (auto tx = store_.begin()) {
      auto state = store_.get(*tx, tables::kController, "state");
      auto pending = store_.get(*tx, tables::kController, kLayoutPendingKey);
      store_.abort(*tx);
      if (state) o.state = *state;
      o.layout_pending = !pending || pending->has_value();
    }
    o.leads = o_.role == RealOptions::Role::kController && leads();
    o.counts = counts();
    // Looked for once the pipeline's state is read: "what is left" is only then true.
    // Under several controllers' processes, the one that found the pipeline drained stops it:
    // for the others, stopped with nothing left is drained too.
    if (ends_by_draining) o.waiting_for = waiting_for(o_.role == RealOptions::Role::kController);
    o.looks = observed_.looks + 1;
    if (metrics_server_) update_gauges(o);
    observed_ = std::move(o);
    rt.sleep_for(kDrainCheckEvery);
  }
}

void RealDeployment::update_gauges(const Observed& o) {
  metrics_.clear("onceflow_pipeline_state");
  if (o.state) metrics_.set("onceflow_pipeline_state", {{"state", *o.state}}, 1);
  const bool leading = o_.role == RealOptions::Role::kAll || o.leads;  // kAll: its controller is the only one
  if (controls()) metrics_.set("onceflow_controller_leading", {}, leading ? 1 : 0);
  const RealStore::Stats st = store_.stats();
  metrics_.set("onceflow_store_commits_total", {}, static_cast<double>(st.commits));
  metrics_.set("onceflow_store_conflicts_total", {}, static_cast<double>(st.conflicts));
  metrics_.set("onceflow_lease_renewals_total", {}, static_cast<double>(st.lease_renewals));
  // The deployment's gauges (lag, outboxes) come from the leading controller's process alone:
  // from every process, a sum over the deployment's targets would count each several times.
  metrics_.clear("onceflow_source_lag_messages");
  metrics_.clear("onceflow_sink_outbox_undelivered_messages");
  if (!leading) return;
  // Sources' lag: what was written to a partition less what committed epochs read. A queue's
  // producer keeps what it wrote in the store; a Kafka topic's end is the cluster's, as it last
  // told it (watch_kafka, every second).
  auto tx = store_.begin();
  if (!tx) return;
  for (const auto& source : spec_.sources) {
    const auto kafka_ends = source.type == "kafka" ? source_ends_.find(source.name) : source_ends_.end();
    if (source.type != "queue" && kafka_ends == source_ends_.end()) continue;
    for (int p = 0; p < source.partitions; ++p) {
      const uint64_t read = read_u64(store_, *tx, tables::kSourceOffsets, source_key(source_origin(source), p));
      const auto at = static_cast<size_t>(p);
      if (kafka_ends != source_ends_.end() && at >= kafka_ends->second.size()) continue;
      const uint64_t written = kafka_ends != source_ends_.end() ? kafka_ends->second[at]
                                                                 : read_u64(store_, *tx, kProducer, source_key(source.name, p));
      metrics_.set("onceflow_source_lag_messages", {{"source", source.name}, {"partition", std::to_string(p)}},
                   static_cast<double>(source_lag(written, read)));
    }
  }
  // Sinks' outboxes: written by committed epochs and not yet acknowledged by the target.
  for (const auto& sink : spec_.sinks) {
    std::vector<std::string> keys;
    for (int p = 0; p < sink.partitions; ++p) keys.push_back(JobId{JobKind::kSink, sink.name, p}.str());
    auto metas = store_.get_many(*tx, tables::kJobMeta, keys);
    if (!metas) break;
    for (size_t p = 0; p < keys.size(); ++p) {
      const auto progress = (*metas)[p] ? sink_progress(*(*metas)[p]) : std::nullopt;
      if (!progress) continue;
      metrics_.set("onceflow_sink_outbox_undelivered_messages", {{"sink", sink.name}, {"partition", std::to_string(p)}},
                   static_cast<double>(outbox_counts(*progress).undelivered));
    }
  }
  store_.abort(*tx);
}

Result<int> RealDeployment::serve_metrics(const std::string& address, int port) {
  auto server = MetricsServer::start(metrics_, address, port);
  if (!server) return server.error();
  progress_->count_into(&metrics_);
  metrics_server_ = std::move(*server);
  return metrics_server_->port();
}

std::string RealDeployment::partition_changes(const std::optional<Layout>& stored, bool completed) {
  if (!stored) return {};  // a new pipeline: its spec's counts
  const PipelineSpec in_force = with_layout(spec_, *stored);
  std::string changes;
  const auto compare = [&](const std::string& name, int now, int wanted) {
    if (now == wanted) return;
    if (completed) {  // it takes no more work: there is nothing to repartition
      fmt::print(stderr, "onceflow real: {} stays at {} partitions, not {}: the pipeline has completed\n", name, now,
                 wanted);
      return;
    }
    changes += fmt::format("{}{}={}", changes.empty() ? "" : " ", name, wanted);
    fmt::print(stderr, "onceflow real: repartitioning {} from {} to {} partitions (a drain first)\n", name, now, wanted);
  };
  for (const auto& c : spec_.computations) compare(c.name, in_force.computation(c.name)->partitions, c.partitions);
  for (const auto& s : spec_.sinks) {
    if (s.type == SinkType::kAsyncQueue || s.type == SinkType::kSyncQueue) {
      compare(s.name, in_force.sink(s.name)->partitions, s.partitions);
    }
  }
  return changes;
}

Result<std::vector<std::optional<std::string>>> RealDeployment::stored_rows(const std::vector<std::string>& keys) {
  auto tx = store_.begin();
  if (!tx) return tx.error();
  auto rows = store_.get_many(*tx, tables::kController, keys);
  store_.abort(*tx);
  return rows;
}

Result<std::optional<Layout>> RealDeployment::stored_layout() {
  auto rows = stored_rows({kLayoutKey, kLayoutPendingKey});
  if (!rows) return rows.error();
  return layout_to_change((*rows)[0], (*rows)[1]);
}

void RealDeployment::request_repartition(const std::string& changes) {
  Runtime& rt = loop_.runtime(kOperator);
  for (int attempt = 0; attempt < 600; ++attempt) {
    if (stop_signals_.load() > 0) return;  // stopping: the next run asks again
    const auto layout = stored_layout();
    if (!layout) {  // the store did not answer: ask it again
      rt.sleep_for(100 * kMillis);
      continue;
    }
    const uint64_t version = *layout ? (*layout)->version : 0;
    const std::string& controller = layout_.controllers[static_cast<size_t>(attempt) % layout_.controllers.size()];
    auto reply = loop_.network(kOperator).call(controller, Controller::kRepartitionService,
                                               fmt::format("{} {}", version, changes), kOwnControllerTimeout);
    if (reply) return;
    rt.sleep_for(100 * kMillis);  // no leader yet, or it was busy
  }
}

void RealDeployment::request_state(const std::string& state) {
  Runtime& rt = loop_.runtime(kOperator);
  for (int attempt = 0; attempt < 600; ++attempt) {
    if (state == "working" && stop_signals_.load() > 0) return;  // stopping: never back to work
    // Another controller's process stopped it (under several, the leader's takes the request).
    if (state.starts_with("stopped") && stored_state() == "stopped") return;
    const std::string& controller = layout_.controllers[static_cast<size_t>(attempt) % layout_.controllers.size()];
    const auto request = state_request(state);
    auto reply = request ? loop_.network(kOperator).call(controller, Controller::kSetStateService, *request,
                                                         kOwnControllerTimeout)
                         : Result<std::string>(request.error());
    if (reply) return;
    rt.sleep_for(100 * kMillis);  // no leader yet, or it was busy
  }
}

Result<std::string> RealDeployment::state_request(const std::string& state) {
  // A failed read must not become sequence 0: the controller answers a request older than
  // the last it applied with its state, without applying it.
  auto rows = stored_rows({"state_seq"});
  if (!rows) return rows.error();
  const uint64_t seq = (*rows)[0] ? std::stoull(*(*rows)[0]) : 0;
  return fmt::format("{} {}", seq + 1, state);
}

void RealDeployment::serve_requests() {
  Runtime& rt = loop_.runtime(kOperator);
  while (true) {
    rt.sleep_for(kRequestsPollEvery);
    // Only the leader's process takes requests (and none while its own start-up requests are
    // under way, or once it stops); a single process's controller is the only one.
    if (starting_ || stop_signals_.load() > 0) continue;
    if (o_.role == RealOptions::Role::kController && !observed_.leads) continue;
    const std::string& controller = layout_.controllers.front();
    auto taken = take_next_request(store_, controller);
    if (!taken || !*taken) continue;
    const OperatorRequest& request = **taken;
    request_in_hand_ = request.id;
    auto answer = apply_request(request.command);
    if (!answer && answer.error().is_unavailable()) {
      // Its controller lost the lead (or stayed busy): the request goes back for the next leader.
      fmt::print(stderr, "onceflow real: {} gives back '{}' (request {}): {}\n", controller, request.command, request.id,
                 answer.error().message());
    store_answer(request.id, [&] { return release_request(store_, request); });
      continue;
    }
    fmt::print(stderr, "onceflow real: {} asked for '{}' (request {}): {}\n", controller, request.command, request.id,
               answer ? *answer : "refused: " + answer.error().message());
    store_answer(request.id, [&] {
      return answer_request(store_, request, answer.has_value(), answer ? *answer : answer.error().message());
    });
  }
}

void RealDeployment::store_answer(uint64_t id, const std::function<Status()>& write) {
  Runtime& rt = loop_.runtime(kOperator);
  Status written = Status::ok();
  // A store that fails for a moment (a busy database) is asked again; one that keeps failing
  // leaves the request taken: ctl says its outcome is unknown.
  for (int attempt = 0; attempt < 50; ++attempt) {
    written = write();
    if (written.is_ok()) break;
    rt.sleep_for(100 * kMillis);
  }
  if (!written.is_ok()) {
    fmt::print(stderr, "onceflow real: the answer to request {} could not be stored: {}\n", id, written.message());
  }
  request_in_hand_.reset();
}

Result<std::string> RealDeployment::apply_request(const std::string& command) {
  const size_t space = command.find(' ');
  const std::string verb = command.substr(0, space);
  const std::string rest = space == std::string::npos ? "" : command.substr(space + 1);
  // The controller's service and the request for it, from what the store says now: an invalid
  // argument is the answer; a store that does not answer for a moment (every connection busy)
  // is asked again.
  const auto prepare = [&]() -> Result<std::pair<const char*, std::string>> {
    if (verb == "pause" || verb == "resume" || verb == "stop") {
      // A stop under way is not undone by a pause or a resume (the stop was answered; its
      // drain goes on). A repartition's drain, with its change pending, may be paused.
      if (verb != "stop") {
        auto rows = stored_rows({"state", kLayoutPendingKey});
        if (!rows) return rows.error();
        if ((*rows)[0] == "draining" && !(*rows)[1]) {
          return Status::invalid_argument(
              "the pipeline is stopping (a stop drains what is in flight): once it is stopped, onceflow real starts it again");
        }
      }
      auto request = state_request(verb == "pause" ? "paused" : verb == "resume" ? "working" : "stopped");
      if (!request) return request.error();
      return std::pair{Controller::kSetStateService, std::move(*request)};
    }
    if (verb == "repartition" || verb == "set") {
      // No layout stored means version 0, the deployment's spec (this process's controller leads).
      const auto layout = stored_layout();
      if (!layout) return layout.error();
      return std::pair{verb == "repartition" ? Controller::kRepartitionService : Controller::kReconfigureService,
                       fmt::format("{} {}", *layout ? (*layout)->version : 0, rest)};
    }
    return Status::invalid_argument(fmt::format("no request '{}' (pause, resume, stop, repartition, set)", verb));
  };
  Runtime& rt = loop_.runtime(kOperator);
  Status last = Status::unavailable("the controller was not asked");
  // A controller busy with a cycle, or one taking over, answers Unavailable for a moment. A
  // Conflict (another layout version stored since the read, or a paused pipeline) is asked
  // again a few times under what the store says then before it is the answer.
  int conflicts = 0;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const Micros began = loop_.clock().now();
    auto prepared = prepare();
    if (!prepared && prepared.error().is_invalid_argument()) return prepared.error();
    if (prepared) {
      auto reply = loop_.network(kOperator).call(layout_.controllers.front(), prepared->first, prepared->second,
                                                 kOwnControllerTimeout);
      const bool again = !reply && (reply.error().is_unavailable() || reply.error().is_timeout() ||
                                    (reply.error().is_conflict() && ++conflicts <= 3));
      if (!again) return reply;
      last = reply.error();
    } else {
      last = prepared.error();
    }
    // A request that is not taken at once says why in the log: the first try, then now and
    // then (whether the store or the controller did not answer, and for how long it waited).
    if (attempt == 0 || attempt % 20 == 19) {
      fmt::print(stderr, "onceflow real: {} still asks {} for '{}' (try {}, {:.1f} s): {}\n",
                 layout_.controllers.front(), prepared ? "its controller" : "the store", command, attempt + 1,
                 static_cast<double>(loop_.clock().now() - began) / 1e6, last.message());
    }
    rt.sleep_for(100 * kMillis);
  }
  return Status::unavailable("the controller did not take it: " + last.message());
}

std::pair<std::string, const ServerHealth*> RealDeployment::unreachable_sink() const {
  std::pair<std::string, const ServerHealth*> worst{"", nullptr};
  const auto look = [&](const std::string& name, const ServerHealth& h) {
    if (h.unreachable_since >= 0 && (worst.second == nullptr || h.unreachable_since < worst.second->unreachable_since)) {
      worst = {name, &h};
    }
  };
  for (const auto& [name, sink] : http_sinks_) look(name, sink->health());
  for (const auto& [name, sink] : clickhouse_sinks_) look(name, sink->health());
  return worst;
}

Status RealDeployment::failing() const {
  if (!store_.failed().is_ok()) return store_.failed();
  if (!progress_->misuse.empty()) return Status::invalid_argument(progress_->misuse);
  for (const auto& [name, sink] : kafka_sinks_) {
    if (!sink->failed().is_ok()) return Status::invalid_argument(fmt::format("sink {}: {}", name, sink->failed().message()));
  }
  for (const auto& [name, sink] : http_sinks_) {
    if (!sink->failed().is_ok()) return Status::invalid_argument(fmt::format("sink {}: {}", name, sink->failed().message()));
  }
  for (const auto& [name, sink] : clickhouse_sinks_) {
    if (!sink->failed().is_ok()) return sink->failed();
  }
  if (const auto [name, health] = unreachable_sink();
      health != nullptr && loop_.clock().now() - health->unreachable_since >= o_.sink_timeout_us) {
    const SinkSpec* sink = spec_.sink(name);
    return Status::unavailable(fmt::format(
        "sink {}: {} has not answered for {:.0f} s ({}); the store is consistent: run again with {} once it is back",
        name, sink->url.empty() ? "its servers" : shown_url(sink->url), static_cast<double>(o_.sink_timeout_us) / 1e6,
        health->last_error, o_.resume_hint()));
  }
  if (kafka_unreachable_since_ >= 0 && loop_.clock().now() - kafka_unreachable_since_ >= o_.kafka_timeout_us) {
    return Status::unavailable(fmt::format(
        "kafka at {}: no broker answered for {:.0f} s ({}); the store is consistent: run again with {} "
        "once the cluster is back",
        kafka_.describe(), static_cast<double>(o_.kafka_timeout_us) / 1e6, kafka_.redact(kafka_error_), o_.resume_hint()));
  }
  return Status::ok();
}

// Asks the cluster for its metadata every second; the run stops once no broker has answered
// for the configured time.
void RealDeployment::watch_kafka() {
  Runtime& rt = loop_.runtime("kafka-health");
  while (true) {
    Status reachable;
    loop_.run_blocking([&] { reachable = kafka_reachable(kafka_, kKafkaCheckTimeoutMs); });
    if (reachable.is_ok()) {
      kafka_unreachable_since_ = -1;
      // For a controller's waiting_for(), and for the lag gauge where metrics are served (each
      // asks the cluster, which may take seconds when brokers go: not for nothing).
      if (o_.role == RealOptions::Role::kController || (metrics_server_ && o_.role != RealOptions::Role::kWorker)) {
        for (const auto& source : kafka_sources_) {
          const std::string topic = kafka_topic(*spec_.source(source.first));
          Result<std::vector<uint64_t>> ends = std::vector<uint64_t>{};
          loop_.run_blocking([&] { ends = kafka_topic_ends(kafka_, topic); });
          if (ends) source_ends_[source.first] = *ends;
        }
      }
    } else {
      if (kafka_unreachable_since_ < 0) kafka_unreachable_since_ = rt.clock().now() - kKafkaCheckTimeoutMs * kMillis;
      kafka_error_ = reachable.message();
    }
    rt.sleep_for(kKafkaCheckEvery);
  }
}

RealDeployment::Counts RealDeployment::counts() {
  const uint64_t delivered = progress_->delivered;  // before the snapshot: all of it is in it
  auto tx = store_.begin();
  if (!tx) return observed_.counts;  // the store failed: the last figures stand
  Counts c;
  c.delivered = delivered;
  c.produced = read_u64(store_, *tx, kProducer, "next");
  std::vector<std::string> sync_sinks;  // their jobs' meta rows, which count the rows written
  for (const auto& sink : spec_.sinks) {
    if (sink.type == SinkType::kAsyncQueue) c.outputs += read_u64(store_, *tx, target_state(sink.name), "count");
    if (sink.type != SinkType::kSyncQueue) continue;
    for (int p = 0; p < sink.partitions; ++p) sync_sinks.push_back(JobId{JobKind::kSink, sink.name, p}.str());
  }
  if (!sync_sinks.empty()) {
    if (auto metas = store_.get_many(*tx, tables::kJobMeta, sync_sinks)) {
      for (const auto& meta : *metas) c.outputs += meta ? job_progress(*meta).sink_rows : 0;
    }
  }
  store_.abort(*tx);
  return c;
}

// On a fresh run, returns once every job of the pipeline has committed an epoch, or after
// kPipelineStartWait: inputs written before would wait for the jobs to start, and their
// latency would be the pipeline's start-up, not its processing. A resumed run does not wait:
// its jobs may be those of a new layout that a repartition creates only once the sources'
// watermarks, which the producer's queue heads move, pass its cut.
void RealDeployment::await_pipeline(Runtime& rt) {
  if (auto tx = store_.begin()) {
    auto next = store_.get(*tx, kProducer, "next");
    store_.abort(*tx);
    if (next && *next) return;  // a resumed run; after a failed read, wait as on a fresh one
  }
  std::vector<std::string> metas;
  for (const JobId& job : all_jobs(spec_)) metas.push_back(job.str());
  const Micros give_up = rt.clock().now() + kPipelineStartWait;
  while (rt.clock().now() < give_up) {
    if (auto tx = store_.begin()) {
      auto rows = store_.get_many(*tx, tables::kJobMeta, metas);
      store_.abort(*tx);
      if (rows && std::all_of(rows->begin(), rows->end(), [](const auto& row) { return row.has_value(); })) return;
    }
    rt.sleep_for(kProducerPause);
  }
}

bool RealDeployment::heads_done(const Transaction& tx) {
  const auto queue = std::find_if(spec_.sources.begin(), spec_.sources.end(), [](const SourceSpec& s) { return s.type == "queue"; });
  if (queue == spec_.sources.end()) return false;
  auto head = store_.get(tx, tables::kQueueHeads, source_key(table_of(*queue), 0));
  if (!head || !head->has_value()) return false;
  Decoder in(**head);
  return in.i64() == kHeadsDone;
}

Status RealDeployment::refuse_inputs_after_the_end() {
  if (!controls() || inputs_->size() == 0) return Status::ok();
  if (Status same = refuse_another_workload(); !same.is_ok()) return same;
  auto tx = store_.begin();
  if (!tx) return tx.error();
  auto next = store_.get(*tx, kProducer, "next");
  const bool done = next && heads_done(*tx);
  store_.abort(*tx);
  if (!next) return next.error();
  const uint64_t written = u64_of(*next);
  if (!done || written >= inputs_->size()) return Status::ok();
  return Status::invalid_argument(fmt::format(
      "the pipeline in {} had all its inputs at {} (an earlier life wrote all its --messages and told the sources "
      "nothing more would come): --messages {} would add {} that could not be ordered after them; give "
      "--messages {} to run or verify it again, or start on a fresh store",
      store_.where(), written, inputs_->size(), inputs_->size() - written, written));
}

// The workload's --keys and --seed are kept with the store by its first life: a later life's
// inputs continue that one's generated sequence, so other values would write another workload
// behind it (the input log keeps --verify right, but the run is no longer the one asked for).
Status RealDeployment::refuse_another_workload() {
  const std::string asked = fmt::format("--keys {} --seed {}", o_.keys, o_.seed);
  auto kept = keep_once("workload", [&] { return asked; });
  if (!kept) return kept.error();
  if (*kept == asked) return Status::ok();
  return Status::invalid_argument(fmt::format(
      "the pipeline in {} was started with {}, and this run gives {}: its inputs would not continue the "
      "workload already written; give {} to run or verify it again, or start on a fresh store",
      store_.where(), *kept, asked, *kept));
}

// Writes the workload into the source queues, a batch per transaction, the batch recorded as
// one row of the input log in the same transaction; resumes where the last life stopped.
void RealDeployment::produce() {
  Runtime& rt = loop_.runtime("producer");
  await_pipeline(rt);
  const Micros started = rt.clock().now();
  std::optional<uint64_t> first;  // the next input when this life began
  // The queue partitions the inputs go to, in spec order; an input's is found by its source's
  // first partition here plus its own partition number.
  struct QueuePartition {
    std::string counter;  // its next offset's row in kProducer
    std::string table;    // the queue table
    int partition;
  };
  std::vector<QueuePartition> queues;
  std::vector<std::string> counters;            // their counter rows, as one read asks for them
  std::map<std::string, size_t, std::less<>> first_queue;  // source -> index of its partition 0
  for (const auto& source : spec_.sources) {
    if (source.type != "queue") continue;
    first_queue.emplace(source.name, queues.size());
    for (int p = 0; p < source.partitions; ++p) {
      queues.push_back({source_key(source.name, p), tables::queue(table_of(source)), p});
      counters.push_back(queues.back().counter);
    }
  }
  for (;;) {
    auto tx = store_.begin();
    if (!tx) {
      rt.sleep_for(10 * kMillis);
      continue;
    }
    const uint64_t next = read_u64(store_, *tx, kProducer, "next");
    if (!first) first = next;
    if (next < inputs_->size() && heads_done(*tx)) {
      // Another controller's process wrote all of a smaller --messages since this one started
      // (each refuses this at its start): the sources were told nothing more comes.
      store_.abort(*tx);
      fmt::print(stderr, "onceflow real: the producer stops at {} inputs, not {}: another process wrote all of its "
                 "--messages and told the sources nothing more comes\n", next, inputs_->size());
      return;
    }
    const bool all = next >= inputs_->size();
    const Micros now = rt.clock().now();
    // Event times are calendar times, as a Kafka record's are (the latency is taken from them).
    const Micros calendar = calendar_now();
    // Never below what earlier lives wrote (a smaller --messages writes nothing more).
    uint64_t end = std::max(next, std::min<uint64_t>(inputs_->size(), next + kProducerBatch));
    if (o_.rate > 0) {  // no more than `rate` a second since this life began
      const auto allowed = *first + static_cast<uint64_t>(static_cast<double>(o_.rate) * static_cast<double>(now - started) / 1e6);
      end = std::min(end, std::max(next, allowed));
      if (end == next && !all) {
        store_.abort(*tx);
        rt.sleep_for(kProducerPause);
        continue;
      }
    }
    // Stopping: no new input from the first signal on, but the heads still move, so that the
    // sources' watermarks pass the drain's cut.
    if (stop_signals_.load() > 0) end = next;
    // Every queue partition's next offset, in one read.
    auto stored = store_.get_many(*tx, kProducer, counters);
    if (!stored) {
      store_.abort(*tx);
      rt.sleep_for(10 * kMillis);
      continue;
    }
    std::vector<uint64_t> offsets;
    for (const auto& row : *stored) offsets.push_back(u64_of(row));
    const std::vector<uint64_t> offsets_before = offsets;
    Encoder logged;  // the batch, as one row of the input log
    logged.u64(end - next);
    for (uint64_t k = next; k < end; ++k) {
      const SourceInput& in = inputs_->at(k);
      const size_t q = first_queue.find(in.source)->second + static_cast<size_t>(in.partition);
      const uint64_t offset = offsets[q]++;
      const Micros event_ts = calendar - (in.write_ts - in.event_ts);
      Encoder row;
      row.u64(in.key).bytes(in.payload).i64(event_ts).i64(now);
      tx->put(queues[q].table, tables::partition_prefix(in.partition) + tables::hex16(offset), row.take());
      logged.bytes(in.source).u64(static_cast<uint64_t>(in.partition)).u64(in.key).bytes(in.payload).i64(event_ts).i64(now);
    }
    if (end > next) tx->put(kInputLog, tables::hex16(next), logged.take());
    std::vector<InputWakeups::Input> written;  // (queue table, partition) of those appended to
    for (size_t q = 0; q < queues.size(); ++q) {
      if (offsets[q] == offsets_before[q]) continue;
      tx->put(kProducer, queues[q].counter, u64_bytes(offsets[q]));
      written.emplace_back(queues[q].table, queues[q].partition);
    }
    tx->put(kProducer, "next", u64_bytes(end));
    // The queue heads: nothing older than now will be appended; past the end, nothing at all.
    for (const auto& source : spec_.sources) {
      for (int p = 0; p < source.partitions; ++p) {
        Encoder head;
        head.i64(end >= inputs_->size() ? kHeadsDone : now);
        tx->put(tables::kQueueHeads, source_key(table_of(source), p), head.take());
      }
    }
    const bool committed = store_.commit(*tx, {}).has_value();
    if (committed && end > next) {  // the sources reading them start their next epoch now
      wakeups_.committed(rt, written);
    }
    if (committed && all) return;
    rt.sleep_for(kProducerPause);
  }
}

// The LevelDB-backed queue table an async sink delivers to: appends with Flow's
// (producer_id, seqNo) dedup, the table and the dedup state in one transaction.
void RealDeployment::serve_target(const std::string& sink) {
  const std::string node = sink_target_node(sink);
  const std::string state = target_state(sink);
  loop_.add_node(node);
  // Appends run one at a time, as a queue's do: two at once would read the same count, write
  // the same rows, and all but one would fail as a conflict and be sent again.
  struct Turn {
    bool busy = false;
    std::vector<fibers::Scheduler::WakeToken> waiting;
  };
  loop_.network(node).serve(kSinkAppendService, [this, sink, state, turn = std::make_shared<Turn>()](
                                                    const std::string&, std::string_view request) -> Result<std::string> {
    auto req = decode_append(request);  // the queue table here is not sharded: the tablet is unused
    if (!req) return Status::invalid_argument("malformed append");
    fibers::Scheduler& scheduler = loop_.scheduler();
    while (turn->busy) {
      turn->waiting.push_back(scheduler.wake_token());
      (void)scheduler.park(fibers::kNever);
    }
    turn->busy = true;
    struct Release {  // also when the fiber is unwound; every waiter looks again
      Turn& turn;
      fibers::Scheduler& scheduler;
      ~Release() {
        turn.busy = false;
        for (const auto& token : std::exchange(turn.waiting, {})) scheduler.wake(token);
      }
    } release{*turn, scheduler};
    auto tx = store_.begin();
    if (!tx) return tx.error();
    const std::string last_key = "p/" + req->producer;
    uint64_t last = 0;
    if (!req->producer.empty()) {
      auto stored = store_.get(*tx, state, last_key);
      if (!stored) return stored.error();
      last = u64_of(*stored);
    }
    auto count = store_.get(*tx, state, "count");
    if (!count) return count.error();
    uint64_t n = u64_of(*count);
    // The whole batch in one transaction, as one row: the entries above the producer's last
    // seqNo, in order.
    AppendReply reply;
    std::vector<uint64_t> seqnos;
    std::vector<Message> messages;
    for (const auto& e : req->entries) {
      if (!req->producer.empty() && e.seqno <= last) {
        ++reply.duplicates;
        continue;
      }
      auto m = decode_message(e.message);
      if (!m) return Status::invalid_argument("an appended message does not decode");
      if (!messages.empty() && m->stream != messages.front().stream) return Status::invalid_argument("an append mixes streams");
      messages.push_back(std::move(*m));
      seqnos.push_back(e.seqno);
      if (!req->producer.empty()) last = e.seqno;
      ++reply.appended;
    }
    if (reply.appended == 0) {
      store_.abort(*tx);
    } else {
      tx->put(target_table(sink), tables::hex16(n), encode_target_row(req->producer, req->lease, seqnos, messages));
      n += reply.appended;
      if (!req->producer.empty()) tx->put(state, last_key, u64_bytes(last));
      tx->put(state, "count", u64_bytes(n));
      auto committed = store_.commit(*tx, {});
      if (!committed) return Status::unavailable("the target could not append: " + committed.error().message());
      const Micros visible_at = calendar_now();
      for (const Message& m : messages) latency_.add(visible_at - m.event_ts);
    }
    reply.held = last;
    return encode_append_reply(reply);
  });
  // The table is never resharded here: it has the tablets the spec gives it.
  const SinkSpec* spec = spec_.sink(sink);
  const int tablets = spec != nullptr ? spec->target_tablets : 0;
  loop_.network(node).serve(kSinkDescribeService, [tablets](const std::string&, std::string_view) -> Result<std::string> {
    return std::to_string(tablets);
  });
}

// Everything produced has been consumed by the sources, and no stream row, outbox row or
// timer is left; else what is not yet.
std::string RealDeployment::waiting_for(bool stopped_is_done) {
  auto tx = store_.begin();
  if (!tx) return "the store (" + tx.error().message() + ")";
  std::string missing;
  // Fewer inputs than asked are all there will be once the heads say so (another controller's
  // process wrote all of a smaller --messages: the producer stopped).
  if (const uint64_t next = read_u64(store_, *tx, kProducer, "next"); next < inputs_->size() && !heads_done(*tx)) {
    missing = fmt::format("the producer: {} of {} inputs written", next, inputs_->size());
  }
  for (const auto& source : spec_.sources) {
    auto kafka = kafka_sources_.find(source.name);
    for (int p = 0; missing.empty() && p < source.partitions; ++p) {
      const uint64_t read = read_u64(store_, *tx, tables::kSourceOffsets, source_key(source_origin(source), p));
      if (kafka != kafka_sources_.end() && o_.role == RealOptions::Role::kController) {
        // The workers' consumers are in other processes: caught up with the topic's end as
        // the cluster last told it (a topic whose last records are a transaction's markers
        // is never caught up with this way; the test inputs are written without).
        const auto ends = source_ends_.find(source.name);
        const uint64_t end = ends != source_ends_.end() && static_cast<size_t>(p) < ends->second.size()
                                 ? ends->second[static_cast<size_t>(p)] : UINT64_MAX;
        if (end == UINT64_MAX) {
          missing = fmt::format("source {} partition {}: the topic's end, from the cluster", source.name, p);
        } else if (read != end) {
          missing = fmt::format("source {} partition {}: {} of {} offsets committed", source.name, p, read, end);
        }
      } else if (kafka != kafka_sources_.end()) {
        // Caught up with what the topic holds, and that much committed.
        if (!kafka->second->at_end(p)) {
          missing = fmt::format("source {} partition {}: the consumer to reach the end of the topic ({} fetched)",
                                source.name, p, kafka->second->next_offset(p));
        } else if (kafka->second->next_offset(p) != read) {
          missing = fmt::format("source {} partition {}: {} of {} offsets committed", source.name, p, read,
                                kafka->second->next_offset(p));
        }
      } else if (const uint64_t produced = read_u64(store_, *tx, kProducer, source_key(source.name, p)); read != produced) {
        missing = fmt::format("source {} partition {}: {} of {} inputs read and committed", source.name, p, read, produced);
      }
    }
  }
  // A drain for a repartition is not the end: the new layout is stored and the pipeline works.
  auto state = store_.get(*tx, tables::kController, "state");
  auto pending = store_.get(*tx, tables::kController, kLayoutPendingKey);
  // What the at-most-once sinks hold in memory, as their epochs committed it (the senders may
  // be in other processes).
  auto amo_pending = at_most_once_pending(store_, *tx, spec_);
  store_.abort(*tx);
  if (!state || !pending || !amo_pending) return "the store (a read failed)";
  if (pending->has_value()) return "a layout change under way";
  if (state->has_value() && **state != "working" && **state != "completed" && !(stopped_is_done && **state == "stopped")) {
    return fmt::format("the controller (state '{}')", **state);
  }
  if (!missing.empty()) return missing;
  if (*amo_pending != 0) {
    return fmt::format("{} at-most-once messages still in the senders' queues", *amo_pending);
  }
  for (const auto& [prefix, what] : {std::pair{"stream/", "stream rows (messages between computations)"},
                                     std::pair{"output_messages/", "outbox rows (messages not yet delivered)"}}) {
    auto any = store_.any_rows(prefix);
    if (!any) return "the store (" + any.error().message() + ")";
    if (*any) return what;
  }
  auto any = store_.any_rows("timers/");
  if (!any) return "the store (" + any.error().message() + ")";
  if (!*any) return "";
  for (const auto& c : spec_.computations) {
    auto waiting = timers_to_fire(c);
    if (!waiting) return "the store (" + waiting.error().message() + ")";
    if (*waiting) return "timers";
  }
  return "";
}

// Whether a stored timer of `c` is still to fire (core/job.h: timer_may_fire).
Result<bool> RealDeployment::timers_to_fire(const ComputationSpec& c) {
  Status failed;
  const auto meta_of = [&](const std::string& job) -> std::optional<std::string> {
    auto tx = store_.begin();
    if (!tx) {
      failed = tx.error();
      return std::nullopt;
    }
    auto meta = store_.get(*tx, tables::kJobMeta, job);
    store_.abort(*tx);
    if (!meta) failed = meta.error();
    return meta && *meta ? std::optional<std::string>(**meta) : std::nullopt;
  };
  for (const std::string& table : tables::timers(c)) {
    const auto first_from = [&](const std::string& key) -> std::optional<Row> {
      auto tx = store_.begin();
      if (!tx) {
        failed = tx.error();
        return std::nullopt;
      }
      auto rows = store_.scan(*tx, table, key, "", 1);
      store_.abort(*tx);
      if (!rows) failed = rows.error();
      return rows && !rows->empty() ? std::optional<Row>(std::move(rows->front())) : std::nullopt;
    };
    const bool may = timers_may_fire(c, first_from, meta_of);
    if (!failed.is_ok()) return failed;
    if (may) return true;
  }
  return false;
}

void RealDeployment::print_progress(Micros elapsed, bool last) {
  const bool tty = isatty(STDERR_FILENO) != 0;
  const double seconds = static_cast<double>(elapsed) / 1e6;
  if (last) observed_.counts = counts();  // the final figures, read now
  // The figures of one look: what was delivered before the store was read, beside what it held.
  const uint64_t delivered = observed_.counts.delivered;
  const double interval_s = static_cast<double>(std::max<Micros>(elapsed - last_progress_at_, 1)) / 1e6;
  const auto rate = static_cast<uint64_t>(static_cast<double>(delivered - delivered_at_last_progress_) / interval_s);
  std::string kafka;
  if (kafka_unreachable_since_ >= 0) {
    kafka = fmt::format(", kafka unreachable for {:.0f} s",
                        static_cast<double>(loop_.clock().now() - kafka_unreachable_since_) / 1e6);
  }
  if (const auto [name, health] = unreachable_sink(); health != nullptr) {
    kafka += fmt::format(", sink {} unreachable for {:.0f} s", name,
                         static_cast<double>(loop_.clock().now() - health->unreachable_since) / 1e6);
  }
  const Counts& c = observed_.counts;
  std::string outputs;
  if (std::any_of(spec_.sinks.begin(), spec_.sinks.end(),
                  [](const SinkSpec& s) { return s.type == SinkType::kAsyncQueue || s.type == SinkType::kSyncQueue; })) {
    outputs = fmt::format(", outputs {} in all", c.outputs);
  }
  std::string latency;
  if (latency_.count() > 0) {
    latency = fmt::format(", latency p50 {:.1f} ms p99 {:.1f} ms", static_cast<double>(latency_.quantile(0.5)) / 1e3,
                          static_cast<double>(latency_.quantile(0.99)) / 1e3);
  }
  // A run that ends by draining says what it still waits for.
  const std::optional<std::string>& left = observed_.waiting_for;
  const std::string waiting = !last && left && !left->empty() ? "; waiting for " + *left : "";
  // A process of a role names itself, and a controller's says whether it leads.
  std::string who;
  if (o_.role == RealOptions::Role::kWorker) who = fmt::format(" ({})", layout_.workers.front());
  if (o_.role == RealOptions::Role::kController) {
    who = fmt::format(" ({}, {})", layout_.controllers.front(), observed_.leads ? "leads" : "stands by");
  }
  std::string trouble;  // what the user's code or an at-most-once sink lost or gave up
  if (progress_->threw > 0) trouble = fmt::format(", {} calls threw (epochs given up and retried)", progress_->threw);
  if (progress_->amo.dropped + progress_->amo.in_doubt > 0) {
    trouble += fmt::format(", at most once: {} dropped, {} in doubt", progress_->amo.dropped, progress_->amo.in_doubt);
  }
  const std::string in = controls() ? fmt::format("{}/{}", c.produced, inputs_->size()) : std::to_string(c.produced);
  // A controller's process delivers nothing and commits no epoch itself: the workers' do.
  const std::string work = o_.role == RealOptions::Role::kController
                               ? std::string()
                               : fmt::format(", delivered {} this run ({} msg/s, acknowledged by the targets){}{}, epochs {}",
                                             delivered, rate, trouble, latency, progress_->epochs);
  fmt::print(stderr, "{}onceflow real{}: in {}{}{}, {:.0f}s{}{}{}", tty ? "\r" : "", who, in, outputs, work, seconds, kafka,
             waiting, tty && !last ? "\x1b[K" : "\n");
  delivered_at_last_progress_ = delivered;
  last_progress_at_ = elapsed;
}

}  // namespace onceflow::real
