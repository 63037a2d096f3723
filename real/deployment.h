// RealDeployment: a pipeline running for real, in one process, on the real backends.
//
// The engine's processes (a controller and N workers) are composed by core/deployment.h,
// exactly as the simulator composes them; here they run on the wall-clock fiber loop
// (real/loop.h) with an in-process network, against the LevelDB store of the data directory
// (real/data_dir.h). Around them:
// - a producer writes the test workload (core/workload.h) into the store's source queues in
//   batches, each batch recorded in an input log in the same transaction, and resumes where
//   the last life stopped;
// - async queue sinks deliver to LevelDB-backed queue tables with Flow's
//   (producer_id, seqNo) dedup, table and dedup state in one transaction;
// - Kafka sources and sinks go through librdkafka (real/kafka.h).
//
// The run ends when everything is processed and delivered (drained), when stop() is called
// (a signal), or when it cannot go on safely: the store failed (damage, a full disk), a Kafka
// sink must stop for good, or no Kafka broker answered for the configured time. Then
// failure() says why; the data directory stays consistent, and a later run resumes from it.
//
// Thread-safety: run() on one thread; stop() from any thread or a signal handler.
#pragma once

#include <time.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/computation.h"
#include "core/deployment.h"
#include "core/layout.h"
#include "core/reference.h"
#include "core/spec.h"
#include "core/workload.h"
#include "real/clickhouse_sink.h"
#include "real/http_sink.h"
#include "real/kafka.h"
#include "real/metrics.h"
#include "real/real_store.h"
#include "real/loop.h"

namespace onceflow::real {

struct RealOptions {
  std::string data_dir;  // the LevelDB store's directory, or
  std::string store;     // a PostgreSQL store's libpq connection string
  // How a rerun names the store: "--data DIR", or the --store given (never printed: it may
  // hold a password).
  std::string resume_hint() const { return store.empty() ? "--data " + data_dir : "the same --store"; }
  // Which engine processes this process runs. kAll: the controller and --workers workers, as
  // fibers of one process (the default, and the only role on a LevelDB store). On a shared
  // PostgreSQL store, processes of the other roles make one deployment together: any number of
  // workers, and controllers of which one leads by its Lease while the others stand by.
  enum class Role : uint8_t { kAll, kController, kWorker };
  Role role = Role::kAll;
  // The engine process's name for kController and kWorker ("worker-3"); empty: the role, this
  // host's name and the process id. Two live processes must not share one: a worker whose
  // name is held by a live Lease waits until that Lease ends (a killed process's does).
  std::string name;
  int workers = 2;
  uint64_t messages = 10'000;  // input messages the producer writes in all (across restarts)
  uint64_t rate = 0;  // inputs the producer writes per second at most; 0: as fast as it can
  int keys = 16;
  uint64_t seed = 1;  // of the workload and of the processes' generators
  bool verify = false;
  // A bug switch on for this run (--bug): the program's own (ONCEFLOW_BUG) or the engine's
  // (BugSwitches), so that --verify can be seen to catch it. Empty: none.
  std::string bug;
  // Each committed computation epoch records what re-executing it needs (core/reexecute.h),
  // which --verify holds the run to; off, --verify of this store cannot run.
  bool record_history = true;
  bool progress = true;  // a progress line on stderr
  Micros progress_every_us = 0;  // between progress lines; 0: 1 s on a terminal, else 5 s
  bool stats = false;    // a JSON line of figures on stdout at the end (for bench/run.sh)
  // Kafka brokers for kafka sources and sinks: "host:port,...", or "mock" for an in-process
  // mock cluster (gone with the process; `onceflow kafka-mock` keeps one in its own).
  std::string kafka;
  std::string kafka_config_file;  // librdkafka properties (name=value lines), added to the spec's
  Micros kafka_timeout_us = 60 * kSeconds;  // no broker answering for this long stops the run
  // An http or clickhouse sink's server not answering for this long stops the run (exit 2;
  // the store stays consistent and a later run resumes).
  Micros sink_timeout_us = 30 * kSeconds;
  // The first SIGINT or SIGTERM stops the pipeline (a drain, docs/operating.md) and ends the
  // run once it is stopped, or after this long; a second signal ends it at once.
  Micros drain_timeout_us = 30 * kSeconds;
  // Prometheus metrics over HTTP (real/metrics.h): -1 none, 0 a free port.
  int metrics_port = -1;
  std::string metrics_address = "0.0.0.0";
};

// What a deployment recorded in its store, for --verify: the inputs it produced (in order),
// and what an async queue sink's target holds (in append order).
Result<std::vector<SourceInput>> produced_inputs(RealStore& store);
struct TargetEntry {
  std::string producer;  // the sink job, empty for at-most-once sends
  uint64_t seqno = 0;
  LeaseId lease = 0;
  Message message;
};
Result<std::vector<TargetEntry>> target_entries(RealStore& store, const std::string& sink);
// The next offset the built-in producer writes to queue source `source`'s partition: what it
// has written there, in all lives.
Result<uint64_t> produced_to(RealStore& store, const Transaction& tx, const std::string& source, int partition);
// This host's name (empty when the system will not say): in process names.
std::string host_name();

class RealDeployment {
 public:
  RealDeployment(const PipelineSpec& spec, const ComputationRegistry& registry, const RealOptions& options,
                 RealStore& store);
  ~RealDeployment();

  // Connects the Kafka sources and sinks: creates missing topics, refuses a source topic whose
  // partitions differ from the spec's, and a cluster that lacks what the store says was read
  // from it or written to it (kInvalidArgument, naming both). `mock`: topics are made there.
  Status connect_kafka(const KafkaConfig& kafka, KafkaMockCluster* mock);
  // Makes the sinks that write to servers over HTTP (http and clickhouse sinks;
  // kInvalidArgument for a bad url). They connect at their first write.
  Status connect_http_sinks();
  // Refuses (InvalidArgument) to write more inputs than an earlier life wrote in all: once
  // the producer wrote all of its --messages it told the queue sources that nothing more will
  // come (their heads past every time), so later inputs could never be ordered after what the
  // sources published, and would stay in the streams (a drain waiting for them for ever).
  // Also refuses another --keys or --seed than the store's first life gave (kept in the store
  // by that life): later inputs continue its generated workload. Call before run().
  Status refuse_inputs_after_the_end();
  // Serves this process's metrics at http://ADDRESS:PORT/metrics until the deployment ends
  // (port 0: a free one); returns the port.
  Result<int> serve_metrics(const std::string& address, int port);

  // kStopped: the pipeline was stopped (drained) on a signal; kInterrupted: the run ended on
  // a signal before that (a second signal, or the drain timed out).
  // kLeft: a process of a role (a worker's, a standing-by controller's) left on a signal; the
  // pipeline goes on in the others.
  // kStoppedElsewhere: the pipeline was stopped, not by this process, with work left (an
  // operator's request, onceflow ctl stop; another controller's process on a signal).
  enum class Ending { kDrained, kStopped, kStoppedElsewhere, kInterrupted, kLeft, kFailed };
  // Runs until drained, stopped, or failed (then failure() says why). A pipeline a previous
  // run stopped or paused is set working again first.
  Ending run();
  // Async-signal-safe: the first call asks for a drain, the second ends the run at once.
  // A worker's process (--role worker) leaves at the first. A call within 20 ms of the first
  // is the same request: `timeout` signals its command and then its process group, so one
  // request can arrive twice (whether it does depends on when the handler runs).
  void stop() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const int64_t now_us = static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1'000;
    int64_t first = -1;
    if (!first_stop_us_.compare_exchange_strong(first, now_us) && now_us - first < 20'000) return;
    if (stop_signals_.fetch_add(1) >= 1 || o_.role == RealOptions::Role::kWorker) loop_.request_stop();
  }
  const Status& failure() const { return failure_; }
  // kInterrupted because the drain a signal asked for took longer than --drain-timeout.
  bool drain_timed_out() const { return drain_timed_out_; }
  // From inputs' times to their outputs being visible at the sinks, in this life.
  const LatencyHistogram& latency() const { return latency_; }
  // When a job first committed an epoch in this life (the loop's clock; -1: none yet).
  Micros first_epoch_at() const;
  // At-most-once sends this process's sinks gave up (dropped: not sent; in doubt: no answer
  // came, the target may hold them).
  struct AtMostOnceCounts {
    uint64_t dropped = 0;
    uint64_t in_doubt = 0;
  };
  AtMostOnceCounts at_most_once() const;
  // Calls of a computation's function that threw in this life (each gave its epoch up).
  uint64_t computation_exceptions() const;

 private:
  Status refuse_another_workload();  // part of refuse_inputs_after_the_end
  Result<std::string> keep_once(std::string_view key, const std::function<std::string()>& make);
  class Progress;
  class SharedConnectors;
  static DeploymentLayout process_layout(const EngineOptions& options, const RealOptions& o);
  // Runs a controller (and the producer, and the operator's requests): not a worker's process.
  bool controls() const { return o_.role != RealOptions::Role::kWorker; }
  void start_worker_when_free(const std::string& name);
  // This process's controller holds the leader row under a live Lease.
  bool leads();
  // Every 100 ms, reads observed_ from the store (waiting_for() when `ends_by_draining`), and
  // sets the metrics' gauges when they are served.
  void observe(bool ends_by_draining);
  Status create_topic(const std::string& topic, int partitions, bool compact, bool exact);
  Status check_kafka_holds_what_was_done();
  // Whether a stored timer of `c` is still to fire (a drain waits for it).
  Result<bool> timers_to_fire(const ComputationSpec& c);
  std::string instance();
  struct Counts {
    uint64_t produced = 0;  // inputs the producer wrote, in all lives
    uint64_t outputs = 0;   // what queue sinks' targets hold (async) or their tables (sync), in all lives
    // This process's deliveries acknowledged by the targets before the figures above were
    // read: never more than the targets hold (a live count beside a stale read could be).
    uint64_t delivered = 0;
  };
  Counts counts();
  void await_pipeline(Runtime& rt);
  void produce();
  void serve_target(const std::string& sink);
  // The operator's side: asks the controller for `state`, with the next sequence number.
  void request_state(const std::string& state);
  // The set_state request for `state`, with the next sequence number; an error when the store
  // did not answer.
  Result<std::string> state_request(const std::string& state);
  // The leader's process: takes operator requests from the store (real/operator_requests.h),
  // asks its controller, and stores the answers.
  void serve_requests();
  // Runs `write` (an answer to request `id`, or its release) until the store takes it.
  void store_answer(uint64_t id, const std::function<Status()>& write);
  // Asks this process's controller for `command` (an operator request's); its answer, or why
  // it refused.
  Result<std::string> apply_request(const std::string& command);
  // "NAME=COUNT ..." for each computation and queue sink whose count in this run's spec differs
  // from the `stored` layout's (empty for a new pipeline, with none stored), printed as it is
  // found; for a `completed` pipeline, which takes no more work, none (each difference is
  // printed as kept).
  std::string partition_changes(const std::optional<Layout>& stored, bool completed);
  // Asks the controller to repartition until one takes it.
  void request_repartition(const std::string& changes);
  // The layout the pipeline has, or will have once the change under way is made; nullopt for
  // a new pipeline (version 0: the deployment's spec); an error when the store did not answer.
  Result<std::optional<Layout>> stored_layout();
  // The controller's rows `keys`, read in one transaction of their own.
  Result<std::vector<std::optional<std::string>>> stored_rows(const std::vector<std::string>& keys);
  std::optional<std::string> stored_state();
  void watch_kafka();
  // What the run still waits for before it is drained: "" once everything produced was
  // consumed by the sources and no stream row, outbox row or timer is left; else the first
  // thing found missing ("the controller (state 'repartitioning')", "source words partition
  // 1: 40 of 50 inputs read and committed", ...), which the progress line shows.
  // `stopped_is_done`: a stopped pipeline with nothing left waits for nothing.
  std::string waiting_for(bool stopped_is_done = false);
  // The reason to stop now, or OK.
  Status failing() const;
  // The first http or clickhouse sink whose server has not answered for a while: its name, and
  // its health; nullptr when every one answers.
  std::pair<std::string, const ServerHealth*> unreachable_sink() const;
  void print_progress(Micros elapsed, bool last);

  const PipelineSpec& spec_;
  const RealOptions& o_;
  RealStore& store_;
  // Whether the queue heads say no more input comes (the producer wrote all of a --messages).
  bool heads_done(const Transaction& tx);
  KafkaConfig kafka_;
  KafkaMockCluster* mock_ = nullptr;
  Connectors connectors_;
  std::map<std::string, std::unique_ptr<KafkaSource>> kafka_sources_;
  std::map<std::string, std::unique_ptr<KafkaSink>> kafka_sinks_;
  std::map<std::string, std::unique_ptr<HttpSink>> http_sinks_;
  std::map<std::string, std::unique_ptr<ClickHouseSink>> clickhouse_sinks_;
  EngineOptions options_;
  BugSwitches bugs_;
  Metrics metrics_;  // fed by progress_ and the monitor once serve_metrics() serves it
  std::unique_ptr<Progress> progress_;
  std::unique_ptr<MetricsServer> metrics_server_;  // after metrics_, which it serves until it ends
  LatencyHistogram latency_;  // of outputs made visible at their sinks in this life
  // What the monitor fiber last read from the store, for the loop's checks and the progress line.
  struct Observed {
    uint64_t looks = 0;  // how many times it looked
    std::optional<std::string> state;  // the pipeline's; nullopt: none yet, or the read failed
    bool layout_pending = true;
    bool leads = false;  // this process's controller leads
    Counts counts;
    std::optional<std::string> waiting_for;  // nullopt: not looked for; "": drained
  };
  Observed observed_;
  void update_gauges(const Observed& o);
  std::unique_ptr<SharedConnectors> shared_connectors_;
  DeploymentLayout layout_;
  std::unique_ptr<DeploymentConfig> config_;
  RealLoop loop_;
  InputWakeups wakeups_;  // the jobs of every engine process here wake each other
  std::vector<std::unique_ptr<EngineProcess>> processes_;
  std::unique_ptr<WorkloadStream> inputs_;  // of the queue sources, generated as written
  std::map<std::string, std::vector<uint64_t>> source_ends_;  // a controller's: Kafka sources' topic ends
  Micros kafka_unreachable_since_ = -1;  // -1: a broker answered the last health check
  uint64_t delivered_at_last_progress_ = 0;
  Micros last_progress_at_ = 0;
  std::string kafka_error_;
  Status failure_;
  std::atomic<int> stop_signals_{0};
  std::atomic<int64_t> first_stop_us_{-1};  // CLOCK_MONOTONIC of the first stop() (-1: none)
  bool drain_timed_out_ = false;
  bool starting_ = false;  // the start-up requests (resume, repartition) are under way
  // An operator's request this process took and has not answered yet: the process does not
  // end before it is answered (a stop it applied ends the run; its answer must be stored).
  std::optional<uint64_t> request_in_hand_;
};

}  // namespace onceflow::real
