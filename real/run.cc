#include "real/run.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <cmath>
#include <array>
#include <csignal>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <chrono>
#include <nlohmann/json.hpp>

#include "real/data_dir.h"
#include "real/user_code_counts.h"
#include "real/kafka.h"
#include "core/controller.h"
#include "core/layout.h"
#include "real/operator_requests.h"
#include "real/status.h"
#include "real/verify.h"
#include "real/wall_clock.h"

namespace onceflow::real {
namespace {

using json = nlohmann::json;

// One row, committed alone (outside any pipeline's transaction, before the deployment's loop
// runs or after it). A database that restarts meanwhile (connections cut, a commit whose
// outcome is unknown) is asked again for up to a minute, as the engine's own commits are: the
// write is the same each time. (A worker started as the server restarted ended here.)
Status put_row(RealStore& store, const std::string& table, const std::string& key, const std::string& value) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (true) {
    Status failed = Status::ok();
    if (auto tx = store.begin()) {
      tx->put(table, key, value);
      auto committed = store.commit(*tx, {});
      if (committed) return Status::ok();
      failed = committed.error();
    } else {
      failed = tx.error();
    }
    const bool passing = failed.is_unavailable() || failed.is_ambiguous() || failed.is_timeout() ||
                         failed.is_unreachable() || failed.is_conflict();
    if (!passing || std::chrono::steady_clock::now() >= deadline) return failed;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

std::atomic<RealDeployment*> g_deployment{nullptr};
std::atomic<int> g_signal{0};
extern "C" void on_stop_signal(int sig) {
  g_signal.store(sig);
  if (RealDeployment* d = g_deployment.load()) d->stop();
}

// SIGINT, SIGTERM and SIGHUP stop the deployment gracefully (a hang-up of the terminal is an
// operator leaving, as for most daemons' foreground runs: stop, drain, keep everything). The
// handlers are in place before anything is opened; a signal that comes before the deployment
// exists stops it as soon as it is attached.
class StopOnSignals {
 public:
  StopOnSignals() {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &action, &old_[i]);
  }
  ~StopOnSignals() {
    detach();
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &old_[i], nullptr);
  }
  void attach(RealDeployment& d) {
    g_deployment.store(&d);
    if (g_signal.load() != 0) d.stop();  // a signal came while setting up
  }
  void detach() { g_deployment.store(nullptr); }

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> old_{};
};

Status check_backends(const PipelineSpec& spec) {
  for (const auto& sink : spec.sinks) {
    if (sink.type != SinkType::kSyncQueue && sink.type != SinkType::kAsyncQueue && sink.type != SinkType::kKafka &&
        sink.type != SinkType::kHttp && sink.type != SinkType::kClickHouse) {
      return Status::invalid_argument(fmt::format("sinks.{}: {} sinks run in the simulator only, not under onceflow real",
                                                  sink.name, sink_type_name(sink.type)));
    }
  }
  for (const auto& source : spec.sources) {
    if (source.type != "queue" && source.type != "kafka") {
      return Status::invalid_argument(fmt::format(
          "sources.{}: {} sources run in the simulator only, not under onceflow real", source.name, source.type));
    }
  }
  return Status::ok();
}

bool uses_kafka(const PipelineSpec& spec) {
  for (const auto& source : spec.sources) {
    if (source.type == "kafka") return true;
  }
  for (const auto& sink : spec.sinks) {
    if (sink.type == SinkType::kKafka) return true;
  }
  return false;
}

int bad(std::string_view command, const std::string& line) {
  fmt::print(stderr, "onceflow {}: {}\n", command, line);
  return 2;
}

// How to reach the cluster: --kafka's brokers, with the spec's librdkafka settings and then
// those of --kafka-config.
Result<KafkaConfig> kafka_config(const PipelineSpec& spec, const RealOptions& o) {
  KafkaConfig kafka;
  kafka.brokers = o.kafka;
  kafka.settings = spec.kafka_settings;
  if (!o.kafka_config_file.empty()) {
    auto file = load_kafka_properties(o.kafka_config_file);
    if (!file) return file.error();
    kafka.settings.insert(kafka.settings.end(), file->begin(), file->end());
  }
  return kafka;
}

// Who stopped a pipeline this process did not stop: the last operator request, when it was
// an answered stop, else another process of the deployment.
std::string stopped_by(RealStore& store) {
  auto tx = store.begin();
  if (!tx) return "by another process";
  auto requests = recent_requests(store, *tx, 1);
  store.abort(*tx);
  if (requests && !requests->empty() && requests->back().command == "stop" &&
      requests->back().state == OperatorRequest::State::kDone) {
    return fmt::format("by an operator's request (onceflow ctl stop, request {})", requests->back().id);
  }
  return "by another of its processes (a signal to it)";
}

}  // namespace

void catch_stop_signals_early() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &action, nullptr);
}

int run_real(const std::string& spec_path, const PipelineSpec& spec, const ComputationRegistry& registry,
             const RealOptions& o) {
  StopOnSignals signals;  // before the store is touched
  if (Status s = check_backends(spec); !s.is_ok()) return bad("real", spec_path + ": " + s.message());
  auto configured = kafka_config(spec, o);
  if (!configured) return bad("real", configured.error().message());
  KafkaConfig kafka = std::move(*configured);
  const bool kafka_used = uses_kafka(spec);
  if (kafka_used && o.kafka.empty()) {
    return bad("real", spec_path + ": the pipeline reads or writes kafka: give --kafka BROKERS (or --kafka mock)");
  }
  std::unique_ptr<KafkaMockCluster> mock;
  if (kafka_used && o.kafka == "mock" && o.role != RealOptions::Role::kAll) {
    return bad("real", "--kafka mock makes a cluster inside this one process; the processes of a deployment need one they "
               "share: run onceflow kafka-mock and give its address to --kafka");
  }
  if (kafka_used && o.kafka == "mock") {
    auto started = KafkaMockCluster::start(3);
    if (!started) return bad("real", started.error().message());
    mock = std::move(*started);
    kafka.brokers = mock->bootstrap_servers();
    fmt::print(stderr, "onceflow real: kafka mock cluster at {}\n", kafka.brokers);
  }
  WallClock clock;
  const Micros opened_at = clock.now();  // recovery is timed from here: opening the store counts
  std::unique_ptr<RealStore> store;
  if (o.store.empty()) {
    auto opened = open_data_dir(o.data_dir, spec, clock);
    if (!opened) return bad("real", opened.error().message());
    store = std::move(*opened);
  } else {
    auto opened = open_pg_store(o.store, spec);
    if (!opened) return bad("real", opened.error().message());
    store = std::move(*opened);
  }
  RealDeployment::Ending ending = RealDeployment::Ending::kInterrupted;
  const Micros started = clock.now();
  LatencyHistogram latency;
  Micros first_epoch_at = -1;
  RealDeployment::AtMostOnceCounts amo;
  uint64_t exceptions = 0;  // calls of a computation's function that threw
  bool drain_timed_out = false;
  UserCodeCounts user_code(registry.bug(o.bug) != nullptr ? o.bug : std::string());
  if (!o.bug.empty()) {
    const UserBug* own = registry.bug(o.bug);
    if (own != nullptr && own->harmless) {
      fmt::print(stderr, "onceflow real: harmless switch '{}' is on: this run must compute the same\n", o.bug);
    } else {
      fmt::print(stderr, "onceflow real: bug switch '{}' is on: this run is broken on purpose\n", o.bug);
    }
  }
  const user_code::HooksScope user_code_scope(&user_code);
  std::string life;
  {
    RealDeployment deployment(spec, registry, o, *store);
    if (Status refused = deployment.refuse_inputs_after_the_end(); !refused.is_ok()) return bad("real", refused.message());
    // A life that would verify a store it cannot: refused before its row makes it worse.
    if (o.verify) {
      if (Status agree = lives_agree_on_bug(*store, registry, o.bug); !agree.is_ok()) return bad("real", "--verify: " + agree.message());
    }
    if (Status connected = deployment.connect_http_sinks(); !connected.is_ok()) {
      return bad("real", spec_path + ": " + connected.message());
    }
    if (kafka_used) {
      if (Status connected = deployment.connect_kafka(kafka, mock.get()); !connected.is_ok()) {
        return bad("real", fmt::format("kafka at {}: {}", kafka.describe(), kafka.redact(connected.message())));
      }
    }
    if (o.metrics_port >= 0) {
      auto port = deployment.serve_metrics(o.metrics_address, o.metrics_port);
      if (!port) return bad("real", port.error().message());
      fmt::print(stderr, "onceflow real: metrics at http://{}:{}/metrics\n", o.metrics_address, *port);
    }
    // This process's life, for --verify (kProcessLives): "running" until it ends by itself.
    life = process_life_key(clock.now(), fmt::format("{}-{}", host_name(), getpid()));
    if (Status s = put_row(*store, kProcessLives, life, process_life_start(o.bug)); !s.is_ok()) return bad("real", s.message());
    signals.attach(deployment);
    struct Detach {
      StopOnSignals& signals;
      ~Detach() { signals.detach(); }
    } detach{signals};
    ending = deployment.run();
    latency = deployment.latency();
    first_epoch_at = deployment.first_epoch_at();
    amo = deployment.at_most_once();
    exceptions = deployment.computation_exceptions();
    drain_timed_out = deployment.drain_timed_out();
    if (ending == RealDeployment::Ending::kFailed) return bad("real", kafka.redact(deployment.failure().message()));
  }
  // The life's end, once the deployment's loop is gone (no group commit of its fibers
  // pending): clean with nothing in flight, else cut short (a second signal, a drain that timed
  // out, a process that left), when an at-most-once sink may have gone with messages it held.
  // A failed run returned above: its row stays "running", as a killed one's.
  const bool clean = ending == RealDeployment::Ending::kDrained || ending == RealDeployment::Ending::kStopped ||
                     ending == RealDeployment::Ending::kStoppedElsewhere;
  if (Status s = put_row(*store, kProcessLives, life, process_life_end(clean, amo.dropped, amo.in_doubt, o.bug)); !s.is_ok()) {
    fmt::print(stderr, "onceflow real: warning: this process's end was not recorded ({})\n", s.message());
  }
  std::optional<json> stats;  // printed alone, or inside --verify's object (one document)
  if (o.stats) {
    const RealStore::Stats st = store->stats();
    const double wall_s = static_cast<double>(clock.now() - started) / 1e6;
    const auto ms = [&](double q) { return static_cast<double>(latency.quantile(q)) / 1e3; };
    // A worker's process writes no input: its figures are its commits and latency. The rate
    // is of the outputs this run delivered (each has a latency sample), so a resumed run or
    // input from Kafka is counted as what went through.
    const bool worker = o.role == RealOptions::Role::kWorker;
    // The producer writes --messages into the queue sources; Kafka sources read what is there.
    const bool produces = std::any_of(spec.sources.begin(), spec.sources.end(),
                                      [](const SourceSpec& s) { return s.type == "queue"; });
    stats = json{{"messages", worker || !produces ? json(nullptr) : json(o.messages)}, {"wall_s", wall_s},
                            {"delivered", latency.count()},
                            {"msgs_per_s", worker ? json(nullptr)
                                                  : json(std::round(static_cast<double>(latency.count()) / std::max(wall_s, 1e-6)))},
                            {"latency_samples", latency.count()}, {"latency_p50_ms", ms(0.5)}, {"latency_p99_ms", ms(0.99)},
                            {"commits", st.commits},
                            {"synced_writes", st.synced_writes}, {"writes", st.writes}, {"bytes", st.bytes},
                            {"scans_past_empty", st.scans_past_empty},
                            {"scans_before_empty", st.scans_before_empty},
                            {"commit_ms_mean", st.commit_wait_us == 0 ? json(nullptr)
                                               : json(std::round(static_cast<double>(st.commit_wait_us) / 1e3 /
                                                                 static_cast<double>(std::max<uint64_t>(1, st.commit_waits)) * 100) / 100)},
                            {"writer_busy", st.write_us == 0 ? json(nullptr)
                                            : json(std::round(static_cast<double>(st.write_us) / 1e6 / std::max(wall_s, 1e-6) * 100) / 100)},
                            {"conflicts", st.conflicts},
                            {"reads", st.reads}, {"amo_dropped", amo.dropped}, {"amo_in_doubt", amo.in_doubt},
                            {"first_epoch_ms", first_epoch_at < 0 ? json(nullptr)
                                                                  : json(static_cast<double>(first_epoch_at - opened_at) / 1e3)},
                            {"drained", ending == RealDeployment::Ending::kDrained},
                            {"computation_exceptions", exceptions},
                            {"assertions", user_code.counts()}};
  }
  if (stats && !(o.verify && ending == RealDeployment::Ending::kDrained)) fmt::print("{}\n", stats->dump());
  // A run asked to --verify that ended before it drained was not verified: exit 3, which a
  // script that waits for a verdict must not read as a pass (0). Its work is in the store, and
  // the next run resumes it.
  const auto unverified = [&] {
    if (!o.verify) return 0;
    fmt::print(stderr, "onceflow real: --verify: not verified, the run ended before it drained (exit 3)\n");
    return 3;
  };
  if (ending == RealDeployment::Ending::kLeft) {
    fmt::print(stderr, "onceflow real: this process leaves on signal {}; the pipeline goes on in the others (a worker's "
               "jobs move to other workers once their Leases end)\n", g_signal.load());
    return unverified();
  }
  if (ending == RealDeployment::Ending::kStopped && o.role == RealOptions::Role::kWorker) {
    fmt::print(stderr, "onceflow real: the pipeline was stopped; this worker's process ends\n");
    return unverified();
  }
  if (ending == RealDeployment::Ending::kStoppedElsewhere) {
    fmt::print(stderr, "onceflow real: the pipeline was stopped {}, nothing in flight; this process ends; run again with "
               "{} to resume\n", stopped_by(*store), o.resume_hint());
    return unverified();
  }
  if (ending == RealDeployment::Ending::kStopped) {
    fmt::print(stderr, "onceflow real: stopped on signal {}, nothing in flight; run again with {} to resume\n",
               g_signal.load(), o.resume_hint());
    return unverified();
  }
  if (ending != RealDeployment::Ending::kDrained && drain_timed_out) {
    fmt::print(stderr, "onceflow real: the drain did not end in --drain-timeout ({}): the run ends with work in flight, "
               "kept in the store; run again with {} to resume\n", format_duration(o.drain_timeout_us), o.resume_hint());
    return unverified();
  }
  if (ending != RealDeployment::Ending::kDrained) {
    fmt::print(stderr, "onceflow real: interrupted on signal {} before the pipeline was stopped; run again with {} "
               "to resume\n", g_signal.load(), o.resume_hint());
    return unverified();
  }
  if (!o.verify) return 0;
  VerifyOptions verify;
  verify.progress = o.progress ? stderr : nullptr;
  verify.stats = stats ? &*stats : nullptr;
  verify.bug = o.bug;
  auto verdict = verify_run(spec, registry, *store, kafka, verify);
  if (!verdict) return bad("real", "--verify: " + kafka.redact(verdict.error().message()));
  return *verdict;
}

namespace {

// The store of a deployment of `spec` for ctl: a LevelDB data directory no run holds, or a
// PostgreSQL store. nullptr after printing why not.
std::unique_ptr<RealStore> open_for_ctl(const PipelineSpec& spec, const RealOptions& o, WallClock& clock) {
  if (o.store.empty()) {
    if (!std::filesystem::exists(std::filesystem::path(o.data_dir) / "onceflow-data")) {
      bad("ctl", fmt::format("{} holds no onceflow real data directory", o.data_dir));
      return nullptr;
    }
    auto opened = open_data_dir(o.data_dir, spec, clock);
    if (!opened) {
      bad("ctl", opened.error().message() + (opened.error().message().find("lock") != std::string::npos
                                          ? " (a running onceflow real holds it: LevelDB opens in one process at a time)"
                                          : ""));
      return nullptr;
    }
    return std::move(*opened);
  }
  auto opened = open_pg_store(o.store, spec, /*existing_only=*/true);
  if (!opened) {
    bad("ctl", opened.error().message());
    return nullptr;
  }
  return std::move(*opened);
}

// The controller's rows an operator's request is followed by: the state, the layout in force
// and whether a change of it is under way.
struct ControllerRows {
  std::optional<std::string> state;
  std::optional<Layout> layout;
  bool pending = false;
};
Result<ControllerRows> read_controller_rows(RealStore& store) {
  auto tx = store.begin();
  if (!tx) return tx.error();
  auto rows = store.get_many(*tx, tables::kController, {"state", kLayoutKey, kLayoutPendingKey});
  store.abort(*tx);
  if (!rows) return rows.error();
  ControllerRows out;
  out.state = (*rows)[0];
  if ((*rows)[1]) out.layout = decode_layout(*(*rows)[1]);
  out.pending = (*rows)[2].has_value();
  return out;
}

double seconds_since(Micros start) { return static_cast<double>(calendar_now() - start) / 1e6; }

}  // namespace

int run_ctl_status(const PipelineSpec& spec, const RealOptions& o, bool as_json, Micros rates_over_us) {
  WallClock clock;
  // Kafka sources' lag needs the topics' ends, from the cluster (--kafka): the store holds
  // only what was read.
  std::optional<KafkaConfig> kafka;
  if (o.kafka.empty() && !o.kafka_config_file.empty()) return bad("ctl", "status --kafka-config: give --kafka BROKERS too");
  if (!o.kafka.empty()) {
    if (o.kafka == "mock") return bad("ctl", "status --kafka: give the brokers of the deployment's cluster, not 'mock'");
    auto configured = kafka_config(spec, o);
    if (!configured) return bad("ctl", configured.error().message());
    kafka = std::move(*configured);
  }
  std::unique_ptr<RealStore> store = open_for_ctl(spec, o, clock);
  if (!store) return 2;
  const Micros first = clock.now();
  auto status = read_status(spec, *store);
  if (!status) return bad("ctl", status.error().message());
  add_kafka_lag(*status, spec, kafka ? &*kafka : nullptr);
  if (rates_over_us > 0 && !o.store.empty()) {
    std::this_thread::sleep_for(std::chrono::microseconds(rates_over_us));
    const Micros second_at = clock.now();  // each read's start: the store's snapshot is taken then
    auto second = read_status(spec, *store);
    if (!second) return bad("ctl", second.error().message());
    add_kafka_lag(*second, spec, kafka ? &*kafka : nullptr);
    add_rates(*second, *status, static_cast<double>(second_at - first) / kSeconds);
    status = std::move(second);
  }
  if (as_json) {
    fmt::print("{}\n", status->dump(2));
  } else {
    fmt::print("{}", format_status(*status));
  }
  return 0;
}

int run_ctl_request(const PipelineSpec& spec, const RealOptions& o, const CtlRequest& request) {
  WallClock clock;
  std::string command = request.verb;
  for (const std::string& arg : request.args) command += " " + arg;
  std::unique_ptr<RealStore> store = open_for_ctl(spec, o, clock);
  if (!store) return 2;
  if (o.store.empty()) {
    return bad("ctl", fmt::format("{} asks a running deployment, and the run of {} has ended (LevelDB opens in one process "
                           "at a time, so a running one is reached only through PostgreSQL): onceflow real resumes it, "
                           "with its spec's partition counts", request.verb, o.data_dir));
  }
  auto rows = read_controller_rows(*store);
  if (!rows) return bad("ctl", rows.error().message());
  if (!rows->state) return bad("ctl", fmt::format("the pipeline {} has never started on this store", spec.name));
  // Checked here, so that a mistake is told at once: the controller checks again.
  if (request.verb == "repartition" || request.verb == "set") {
    if (request.args.empty()) {
      return bad("ctl", fmt::format("{} needs {} ...", request.verb, request.verb == "set" ? "SETTING=VALUE" : "NAME=COUNT"));
    }
    if (!rows->layout) return bad("ctl", "the pipeline has no layout yet; ask again once it works");
    std::set<std::string> named;
    for (const std::string& arg : request.args) {
      const std::string name = arg.substr(0, arg.find('='));
      if (!named.insert(name).second) return bad("ctl", fmt::format("{}: {} is named twice", request.verb, name));
    }
    const std::string text = command.substr(request.verb.size() + 1);
    const PipelineSpec in_force = with_layout(spec, *rows->layout);
    if (request.verb == "set") {
      auto next = reconfigured_layout(*rows->layout, text);
      if (!next) return bad("ctl", fmt::format("set: {}", next.error().message()));
      next->version = rows->layout->version;
      if (*next == *rows->layout) {
        fmt::print("nothing to change: {} in force already\n", text);
        return 0;
      }
    } else {
      auto changes = parse_repartition(in_force, text);
      if (!changes) return bad("ctl", fmt::format("repartition: {}", changes.error().message()));
      const auto count_of = [&](const std::string& name) {
        const ComputationSpec* c = in_force.computation(name);
        return c != nullptr ? c->partitions : in_force.sink(name)->partitions;
      };
      const bool same = std::all_of(changes->begin(), changes->end(), [&](const auto& c) { return count_of(c.first) == c.second; });
      if (same && !rows->pending) {
        fmt::print("nothing to change: {} in force already\n", text);
        return 0;
      }
    }
  }
  const Micros asked_at = calendar_now();
  const Micros deadline = asked_at + request.timeout_us;
  auto id = submit_request(*store, command);
  if (!id) return bad("ctl", "the request could not be stored: " + id.error().message());
  // The leader's process takes it within a fraction of a second.
  std::optional<OperatorRequest> seen;
  while (true) {
    auto r = read_request(*store, *id);
    if (!r) return bad("ctl", fmt::format("request {} could not be read back: {}", *id, r.error().message()));
    seen = *r;
    if (!seen || seen->state == OperatorRequest::State::kDone || seen->state == OperatorRequest::State::kRefused) break;
    if (calendar_now() >= deadline) {
      if (seen->state == OperatorRequest::State::kPending) {
        auto withdrawn = withdraw_request(*store, *id);
        if (withdrawn && *withdrawn) {
          fmt::print(stderr, "onceflow ctl: no controller took request {} ('{}') in {}: is a controller's process "
                     "of onceflow real running on this store? (withdrawn: it will not be applied)\n",
                     *id, command, format_duration(request.timeout_us));
          return 1;
        }
        continue;  // taken meanwhile: its answer comes
      }
      fmt::print(stderr, "onceflow ctl: request {} ('{}') was taken by {} but not answered in {}: its outcome is "
                 "unknown; ctl status shows the pipeline's state\n", *id, command, seen->by,
                 format_duration(request.timeout_us));
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!seen) return bad("ctl", fmt::format("request {} is gone from the store", *id));
  if (seen->state == OperatorRequest::State::kRefused) {
    return bad("ctl", fmt::format("{} refused '{}': {}", seen->by, command, seen->answer));
  }
  const bool versioned = request.verb == "repartition" || request.verb == "set";
  fmt::print("request {} '{}': {} answered {}{} ({:.1f} s)\n", *id, command, seen->by, versioned ? "layout version " : "",
             seen->answer, seconds_since(asked_at));
  std::fflush(stdout);
  if (!request.wait || (request.verb != "stop" && request.verb != "repartition")) return 0;
  // A stop drains, and a repartition drains, moves rows and works again: followed until done.
  const uint64_t version = request.verb == "repartition" ? std::strtoull(seen->answer.c_str(), nullptr, 10) : 0;
  while (true) {
    auto now = read_controller_rows(*store);
    if (now) {
      if (request.verb == "stop" && now->state == "stopped" && !now->pending) {
        fmt::print("stopped: nothing in flight ({:.1f} s)\n", seconds_since(asked_at));
        return 0;
      }
      if (request.verb == "repartition" && !now->pending && now->layout && now->layout->version >= version &&
          now->state != "draining") {
        const PipelineSpec in_force = with_layout(spec, *now->layout);
        std::string counts;
        for (const auto& c : in_force.computations) counts += fmt::format(" {}={}", c.name, c.partitions);
        for (const auto& s : in_force.sinks) {
          if (s.type == SinkType::kAsyncQueue || s.type == SinkType::kSyncQueue) counts += fmt::format(" {}={}", s.name, s.partitions);
        }
        // A working pipeline: followed until every job of the new layout runs (a count the
        // workers cannot carry shows here, rather than "working" while nothing moves).
        size_t running = 0;
        size_t jobs = 0;
        if (auto status = read_status(spec, *store)) {
          const auto& all = (*status)["jobs"];
          jobs = all.size();
          running = static_cast<size_t>(
              std::count_if(all.begin(), all.end(), [](const auto& j) { return j["lease_state"] == "active"; }));
        }
        if (now->state == "working" && running < jobs && calendar_now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          continue;
        }
        fmt::print("repartitioned: layout version {},{}; the pipeline is {}", now->layout->version, counts,
                   now->state.value_or("?"));
        if (now->state == "working") fmt::print(", {} of {} jobs running", running, jobs);
        fmt::print(" ({:.1f} s)\n", seconds_since(asked_at));
        if (now->state == "working" && running < jobs) {
          fmt::print(stderr, "onceflow ctl: only {} of the {} jobs run after {}: the workers may not carry that many "
                     "partitions; ctl status shows them\n", running, jobs, format_duration(request.timeout_us));
          return 1;
        }
        return 0;
      }
    }
    if (calendar_now() >= deadline) {
      fmt::print(stderr, "onceflow ctl: '{}' was taken, and the pipeline is {} after {}; ctl status shows what is "
                 "left\n", command, now && now->state ? *now->state + (now->pending ? " (a layout change pending)" : "")
                                                       : "unknown", format_duration(request.timeout_us));
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

namespace {
std::atomic<int> g_mock_signal{0};
extern "C" void on_mock_signal(int sig) { g_mock_signal.store(sig); }
}  // namespace

int run_kafka_mock(int brokers, const std::vector<std::string>& topics) {
  auto mock = KafkaMockCluster::start(brokers);
  if (!mock) return bad("kafka-mock", mock.error().message());
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
    if (name.empty() || partitions < 1 || partitions > 10'000) {
      return bad("kafka-mock", fmt::format("--topic {}: expected NAME or NAME:PARTITIONS (1 to 10000)", topic.substr(0, 64)));
    }
    if (Status s = (*mock)->create_topic(name, partitions); !s.is_ok()) return bad("kafka-mock", s.message());
  }
  for (int sig : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2}) std::signal(sig, on_mock_signal);
  fmt::print("{}\n", (*mock)->bootstrap_servers());
  std::fflush(stdout);
  while (true) {
    const int sig = g_mock_signal.exchange(0);
    if (sig == SIGINT || sig == SIGTERM) break;
    if (sig == SIGUSR1 || sig == SIGUSR2) {
      (*mock)->set_brokers_up(sig == SIGUSR2);
      fmt::print(stderr, "onceflow kafka-mock: brokers {}\n", sig == SIGUSR2 ? "up" : "down");
    }
    ::usleep(50'000);
  }
  return 0;
}

}  // namespace onceflow::real
