#include "simulated/pipeline_world.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

#include "core/controller.h"
#include "core/emitted.h"
#include "core/env/codec.h"
#include "core/job.h"
#include "faults/injector.h"

namespace onceflow::simulated {

using namespace sim;

namespace {
constexpr const char* kStoreNode = "store";
constexpr const char* kOperatorNode = "operator";  // the outside admin that pauses and starts
}  // namespace

// Crashes its node at a fault point when the run's policy says so, and restarts it later.
class PipelineWorld::NodeFaultPoints final : public FaultPointHook {
 public:
  NodeFaultPoints(PipelineWorld& w, NodeIndex node) : w_(w), node_(node) {}
  bool crash_here(std::string_view point) override {
    const auto& policy = w_.options_.fault_point_policy;
    World& world = *w_.world_;
    if (!policy) return false;
    const std::optional<PointCrash> crash = policy(world.name(node_), point);
    if (!crash) return false;
    world.record(node_, fmt::format("fault point {} fires: crash", point));
    w_.point_hits_.push_back({world.name(node_), std::string(point), world.now()});
    const NodeIndex node = node_;
    const Micros restart_at = world.now() + crash->restart_after_us;
    world.scheduler().at(world.now(), kWorldNode, [&world, node, restart_at] {
      world.crash(node);
      world.scheduler().at(restart_at, kWorldNode, [&world, node] {
        if (!world.is_up(node)) world.start(node);
      });
    });
    return true;
  }

 private:
  PipelineWorld& w_;
  NodeIndex node_;
};

// The simulator's connectors: fresh ones for every life of a process, talking to the
// simulated external systems over the process's network endpoint.
class PipelineWorld::SimConnectors final : public ConnectorFactory {
 public:
  explicit SimConnectors(PipelineWorld& w) : w_(w) {}
  void connect(const std::string&, Runtime& runtime, Network& network, ProcessConnectors& out) override {
    const Micros timeout = w_.options_.engine.rpc_timeout_us;
    for (const auto& source : w_.spec_.sources) {
      if (source.type != "kafka") continue;
      out.owned_sources.push_back(std::make_unique<SimKafkaSource>(network, source, timeout));
      out.connectors.sources[source.name] = out.owned_sources.back().get();
    }
    for (const auto& sink : w_.spec_.sinks) {
      std::unique_ptr<ExternalSink> external;
      switch (sink.type) {
        case SinkType::kHttp: external = std::make_unique<SimHttpSink>(network, sink, timeout); break;
        case SinkType::kKafka:
        case SinkType::kArkflowKafka:
          external = std::make_unique<SimKafkaSink>(network, sink, timeout, w_.options_.observer);
          break;
        case SinkType::kStaticTable: external = std::make_unique<SimStaticTableSink>(network, sink, timeout); break;
        case SinkType::kClickHouse:
          external = std::make_unique<SimClickHouseSink>(runtime, network, sink, timeout, w_.options_.observer);
          break;
        case SinkType::kSyncQueue:
        case SinkType::kAsyncQueue: break;
      }
      if (external == nullptr) continue;
      out.connectors.sinks[sink.name] = external.get();
      out.owned_sinks.push_back(std::move(external));
    }
  }

 private:
  PipelineWorld& w_;
};

// One life of an engine process: the simulator's store client and fault points, and the
// process as the shared composition builds it.
struct PipelineWorld::Process {
  Process(NodeContext& node, PipelineWorld& w, EngineProcess::Role role)
      : points(w, node.index),
        store(node.network, kStoreNode, w.options_.engine.rpc_timeout_us),
        engine(*w.deployment_, node.name, role, ProcessBackends{node.runtime, node.network, store, &points}) {}
  NodeFaultPoints points;
  SimStoreClient store;
  EngineProcess engine;
};

PipelineWorld::PipelineWorld(PipelineSpec spec, const ComputationRegistry& registry, PipelineWorldOptions options)
    : spec_(std::move(spec)), registry_(registry), options_(std::move(options)), current_spec_(spec_) {
  assert(validate_pipeline_spec(spec_).is_ok());
  assert(options_.workers >= 1);
  World::Options world_options;
  world_options.seed = options_.seed;
  world_options.trace_keep_lines = options_.trace_keep_lines;
  world_ = std::make_unique<World>(world_options);
  inputs_ = make_workload(spec_, options_.workload, options_.seed);
  plan_input_swaps();
  connectors_ = std::make_unique<SimConnectors>(*this);
  deployment_ = std::make_unique<DeploymentConfig>(DeploymentConfig{
      spec_, registry_, options_.engine, options_.bugs, options_.seed, options_.observer, connectors_.get()});
}

PipelineWorld::~PipelineWorld() { world_.reset(); }  // fibers go before what they use

BootFn PipelineWorld::engine_boot(EngineProcess::Role role) {
  return [this, role](NodeContext& node) -> std::shared_ptr<void> { return std::make_shared<Process>(node, *this, role); };
}

void PipelineWorld::start() {
  data_.after_commit = [this](const StoreData::CommitRecord& commit) { record_state_change(commit); };
  world_->start(world_->add_node(kStoreNode, StoreServer::boot(data_, faults::store_options(options_.bugs))));
  const DeploymentLayout layout = deployment_layout(options_.engine, options_.workers, options_.controllers);
  for (const std::string& name : layout.controllers) {
    world_->start(world_->add_node(name, engine_boot(EngineProcess::Role::kController)));
  }
  for (const std::string& name : layout.workers) world_->start(world_->add_node(name, engine_boot(EngineProcess::Role::kWorker)));
  for (const std::string& name : spare_worker_names()) world_->add_node(name, engine_boot(EngineProcess::Role::kWorker));  // down
  world_->start(world_->add_node(kOperatorNode, [](NodeContext&) { return nullptr; }));
  start_targets();
  heartbeat_queue_heads();
  load_inputs();
  for (const auto& r : options_.respecs) {
    world_->scheduler().at(r.at_us, sim::kWorldNode, [this, yaml = r.yaml] { respec(yaml); });
  }
}

void PipelineWorld::plan_input_swaps() {
  std::map<std::string, std::string> reads;  // queue source -> the table it reads
  for (const auto& s : spec_.sources) {
    if (s.type == "queue") reads[s.name] = table_of(s);
    if (s.type == "queue" || s.type == "static_table") queue_tables_[table_of(s)] = {s.partitions, s.type != "queue"};
  }
  std::vector<PipelineWorldOptions::Respec> respecs = options_.respecs;
  std::stable_sort(respecs.begin(), respecs.end(), [](const auto& a, const auto& b) { return a.at_us < b.at_us; });
  std::map<std::string, uint32_t> generations;  // each swap gives the source a new origin (core/layout.cc)
  for (const auto& r : respecs) {
    const auto next = parse_pipeline_spec_text(r.yaml, "respec");
    assert(next.has_value());
    for (SourceSpec s : next->sources) {
      auto it = reads.find(s.name);
      if (s.type != "queue" || it == reads.end() || it->second == table_of(s)) continue;
      s.generation = ++generations[s.name];
      assert(s.partitions == spec_.source(s.name)->partitions);
      queue_tables_[table_of(s)] = {s.partitions, false};
      // Later messages go to the new table; every other earlier one too, as its backlog.
      std::map<int, uint64_t> earlier;
      for (SourceInput& in : inputs_) {
        const std::string& table = in.table.empty() ? table_of(*spec_.source(in.source)) : in.table;
        if (in.source != s.name || table != it->second) continue;
        if (in.write_ts >= r.at_us || earlier[in.partition]++ % 2 == 1) {
          in.table = table_of(s);
          in.origin = source_origin(s);
        }
      }
      it->second = table_of(s);
    }
  }
}

void PipelineWorld::respec(const std::string& yaml) {
  const NodeIndex op = world_->find(kOperatorNode);
  world_->record(op, "stops the pipeline to give it a new spec");
  ++operations_pending_;
  world_->runtime(op).spawn("respec", [this, op, yaml] {
    const auto next = parse_pipeline_spec_text(yaml, "respec");
    assert(next.has_value());
    for (int attempt = 0; attempt < 1000 && layout_.spec_yaml != yaml; ++attempt) {
      // Started first, so that the stop drains now: a pipeline stopped earlier has an older cut.
      (void)ask_controllers(op, Controller::kSetStateService, fmt::format("{} working", ++state_requests_));
      (void)ask_controllers(op, Controller::kSetStateService, fmt::format("{} stopped", ++state_requests_));
      for (int wait = 0; wait < 600 && data_.latest(tables::kController, "state") == "draining"; ++wait) {
        world_->runtime(op).sleep_for(100 * kMillis);
      }
      if (data_.latest(tables::kController, "state") != "stopped") continue;
      // Like an operator who swaps a queue only once it is consumed: a cut older than the last
      // write (a controller clock behind) left rows of it unread; stop again later.
      if (!swapped_inputs_read(*next)) continue;
      const std::string request = fmt::format("{}\n{}", layout_.version, yaml);
      if (auto reply = ask_controllers(op, Controller::kRespecService, request, controller_names().size())) {
        world_->record(op, "new spec stored as layout version " + *reply);
      }
    }
    (void)ask_controllers(op, Controller::kSetStateService, fmt::format("{} working", ++state_requests_));
    last_state_request_ = {"working", world_->now()};
    --operations_pending_;
  });
}

Result<std::string> PipelineWorld::ask_controllers(NodeIndex op, const char* service, const std::string& request,
                                                   size_t attempts) {
  // The operator does not know which controller leads: it asks each in turn until one takes it.
  const std::vector<std::string> controllers = controller_names();
  Result<std::string> reply = Status::unavailable("not asked");
  for (size_t attempt = 0; attempt < attempts && !completed(); ++attempt) {
    reply = world_->network_endpoint(op).call(controllers[attempt % controllers.size()], service, request,
                                              options_.engine.rpc_timeout_us);
    if (reply) return reply;
    world_->runtime(op).sleep_for(options_.engine.rpc_timeout_us);
  }
  return reply;
}

bool PipelineWorld::swapped_inputs_read(const PipelineSpec& next) const {
  for (const SourceSpec& source : current_spec_.sources) {
    const SourceSpec* after = next.source(source.name);
    if (source.type != "queue" || (after != nullptr && table_of(*after) == table_of(source))) continue;
    for (int p = 0; p < source.partitions; ++p) {
      const auto written = produced_.find({table_of(source), p});
      const auto stored = data_.latest(tables::kSourceOffsets, fmt::format("{}/{}", source_origin(source), p));
      const uint64_t read = stored ? Decoder(*stored).u64() : 0;
      if (written != produced_.end() && read < written->second) return false;
    }
  }
  return true;
}


void PipelineWorld::start_targets() {
  bool kafka = false;
  std::map<std::string, std::string> sink_of_topic;
  for (const auto& source : spec_.sources) {
    if (source.type != "kafka") continue;
    kafka = true;
    kafka_.create_topic(kafka_topic(source), source.partitions);
  }
  for (const auto& sink : spec_.sinks) {
    const std::string node = sink_target_node(sink.name);
    TargetLog& log = targets_[sink.name];
    TargetFaults* faults = sink.type == SinkType::kSyncQueue ? nullptr : &target_faults_[node];
    switch (sink.type) {
      case SinkType::kSyncQueue: targets_.erase(sink.name); break;
      case SinkType::kAsyncQueue:
        log.tablets = sink.target_tablets;
        faults->forget = [&log] { log.evict(); };
        world_->start(world_->add_node(node, queue_target_boot(log, *faults)));
        break;
      case SinkType::kHttp: {
        auto honours = options_.http_honours_idempotency_key.find(sink.name);
        const bool honour = honours == options_.http_honours_idempotency_key.end() || honours->second;
        faults->forget = [&log] { log.evict(); };
        world_->start(world_->add_node(node, http_receiver_boot(log, *faults, honour)));
        break;
      }
      case SinkType::kStaticTable:
        world_->start(world_->add_node(node, static_table_master_boot(log, static_tables_[sink.name], *faults)));
        break;
      case SinkType::kClickHouse: {
        ClickHouseData& data = clickhouse_[sink.name];
        if (auto it = options_.clickhouse_targets.find(sink.name); it != options_.clickhouse_targets.end()) {
          data.config = it->second;
        }
        faults->forget = [&data] { data.forget_tokens(); };
        world_->start(world_->add_node(node, clickhouse_boot(log, data, *faults)));
        break;
      }
      case SinkType::kKafka:
      case SinkType::kArkflowKafka:
        target_faults_.erase(node);  // the sink writes to the "kafka" node
        kafka = true;
        kafka_.create_topic(kafka_topic(sink), sink.partitions);
        kafka_.create_topic(SimKafkaSink::progress_topic(kafka_topic(sink)), sink.partitions);
        sink_of_topic[kafka_topic(sink)] = sink.name;
        break;
    }
  }
  if (!kafka) return;
  // What read_committed consumers of a sink's topic see is what the sink delivered.
  kafka_.on_visible = [this, sink_of_topic](const std::string& topic, int, int64_t, const KafkaRecord& r, Micros now) {
    auto sink = sink_of_topic.find(topic);
    if (sink == sink_of_topic.end()) return;
    auto m = decode_message(r.value);
    assert(m.has_value());
    TargetLog::Entry entry{std::move(*m), r.writer, r.lease, now};
    if (r.state == KafkaRecord::State::kCommitted) {
      entry.written_epoch = r.epoch;
      entry.committed_epoch = r.committed_epoch;
      entry.txn_producer = r.producer_id;
      entry.txn = static_cast<int64_t>(r.txn);
      entry.committed_txn = static_cast<int64_t>(r.committed_txn);
    }
    targets_[sink->second].appended.push_back(std::move(entry));
  };
  TargetFaults& faults = target_faults_[kKafkaNode];
  faults.forget = [this] { kafka_.forget_idempotent_state(); };
  kafka_.epoch_per_transaction = options_.kafka_epoch_per_transaction;
  kafka_.init_keeps_epoch = options_.bugs.kafka_init_keeps_epoch;
  world_->start(world_->add_node(kKafkaNode, kafka_broker_boot(kafka_, faults)));
}

// Queue and Kafka rows are appended at their write times; static tables and service logs
// hold all theirs from the start.
namespace {
// An input as its source emits it, named as the source job names it (core/job_sources.cc).
Message source_message(const SourceInput& in, const SourceSpec& source, const std::string& origin, uint64_t position) {
  Message m;
  m.id = source_message_id(origin, in.partition, position);
  m.key = in.key;
  m.stream = source.output_stream;
  m.event_ts = in.event_ts;
  m.payload = in.payload;
  return m;
}
}  // namespace

void PipelineWorld::load_inputs() {
  for (const SourceInput& in : inputs_) {
    const SourceSpec& source = *spec_.source(in.source);
    if (source.type == "static_table" || source.type == "service_log") {
      const uint64_t offset = produced_[{table_of(source), in.partition}]++;
      const int cycles = source.type == "service_log" ? std::max(1, source.max_cycles) : 1;
      for (int cycle = 0; cycle < cycles; ++cycle) {
        const uint64_t position = source.type == "service_log" ? service_log_offset(static_cast<uint64_t>(cycle), offset) : offset;
        source_messages_.push_back(source_message(in, source, source_origin(source), position));
        source_lanes_.push_back(0);  // a service log's cycles are read one after another
      }
      Encoder row;
      row.u64(in.key).bytes(in.payload).i64(in.event_ts).i64(in.write_ts);
      data_.load(tables::static_table(table_of(source)), tables::partition_prefix(in.partition) + tables::hex16(offset),
                 row.take());
      continue;
    }
    const bool kafka = source.type == "kafka";
    world_->scheduler().at(in.write_ts, kWorldNode, [this, &in, kafka, &source] {
      const std::string& table = in.table.empty() ? table_of(source) : in.table;
      const uint64_t offset = produced_[{table, in.partition}]++;
      source_messages_.push_back(source_message(in, source, in.origin.empty() ? source_origin(source) : in.origin, offset));
      source_lanes_.push_back(lanes_.try_emplace({table, in.partition}, static_cast<uint32_t>(lanes_.size() + 1)).first->second);
      if (kafka) {
        kafka_.append(kafka_topic(source), in.partition,
                      {std::to_string(in.key), in.payload, in.event_ts, KafkaRecord::State::kPlain, 0, "", 0},
                      world_->now());
        return;
      }
      Encoder row;
      row.u64(in.key).bytes(in.payload).i64(in.event_ts).i64(in.write_ts);
      data_.load(tables::queue(table), tables::partition_prefix(in.partition) + tables::hex16(offset), row.take());
    });
  }
}

// The queue's side of alignment: every few milliseconds each partition's head time moves to
// now (nothing older will be appended); after the last write it moves past every message.
void PipelineWorld::heartbeat_queue_heads() {
  const bool done = world_->now() > last_write_ts();
  for (const auto& [table, shape] : queue_tables_) {  // Kafka topics and service logs need no heads
    // A static table has all its rows: nothing older will ever come.
    const Micros head = done || shape.second ? INT64_MAX / 4 : world_->now();
    for (int p = 0; p < shape.first; ++p) {
      Encoder out;
      out.i64(head);
      data_.load(tables::kQueueHeads, fmt::format("{}/{}", table, p), out.take());
    }
  }
  if (done) return;
  world_->scheduler().at(world_->now() + kQueueHeartbeatUs, kWorldNode, [this] { heartbeat_queue_heads(); });
}

std::vector<std::string> PipelineWorld::target_nodes() const {
  std::vector<std::string> out;
  for (const auto& [node, faults] : target_faults_) out.push_back(node);
  return out;
}

TargetFaults* PipelineWorld::target_faults(const std::string& node) {
  auto it = target_faults_.find(node);
  return it == target_faults_.end() ? nullptr : &it->second;
}

void PipelineWorld::set_pipeline_state(const std::string& state) {
  const NodeIndex op = world_->find(kOperatorNode);
  world_->record(op, "asks the controller for " + state);
  const std::string request = fmt::format("{} {}", ++state_requests_, state);
  last_state_request_ = {state, world_->now()};
  ++operations_pending_;
  world_->runtime(op).spawn("set-state", [this, op, request] {
    (void)ask_controllers(op, Controller::kSetStateService, request, 100);
    --operations_pending_;
  });
}

void PipelineWorld::repartition(const std::map<std::string, int>& partitions) {
  std::string changes;
  for (const auto& [name, count] : partitions) changes += fmt::format(" {}={}", name, count);
  change_layout(Controller::kRepartitionService, changes);
}

void PipelineWorld::reconfigure(const std::string& settings) {
  change_layout(Controller::kReconfigureService, " " + settings);
}

void PipelineWorld::reshard_target(const std::string& sink, int tablets) {
  TargetLog& log = targets_.at(sink);
  log.tablets = tablets;
  log.reshards.emplace_back(world_->now(), tablets);
  world_->record(world_->find(sink_target_node(sink)), fmt::format("is resharded to {} tablets", tablets));
}

void PipelineWorld::change_layout(const char* service, const std::string& changes) {
  const NodeIndex op = world_->find(kOperatorNode);
  world_->record(op, fmt::format("asks the controller to {}:{}", service, changes));
  const std::vector<std::string> controllers = controller_names();
  ++operations_pending_;
  world_->runtime(op).spawn(service, [this, op, service, changes, controllers] {
    for (int attempt = 0; attempt < 1000 && !completed(); ++attempt) {
      // The version the operator last saw: what the store says now (a pending change counts).
      const auto named = layout_to_change(data_.latest(tables::kController, kLayoutKey),
                                          data_.latest(tables::kController, kLayoutPendingKey));
      const uint64_t version = named ? named->version : 0;
      const std::string& controller = controllers[static_cast<size_t>(attempt) % controllers.size()];
      auto reply = world_->network_endpoint(op).call(controller, service, fmt::format("{}{}", version, changes),
                                                     options_.engine.rpc_timeout_us);
      if (reply) {
        world_->record(op, fmt::format("{} stored as layout version {}", service, *reply));
        break;
      }
      if (refused_for_good(reply.error())) {
        world_->record(op, fmt::format("gives up the {}: {}", service, reply.error().message()));
        break;
      }
      world_->runtime(op).sleep_for(options_.engine.rpc_timeout_us);
    }
    --operations_pending_;
  });
}

std::vector<std::string> PipelineWorld::spare_worker_names() const {
  std::vector<std::string> out;
  for (int i = 1; i <= options_.spare_workers; ++i) out.push_back(fmt::format("worker-spare-{}", i));
  return out;
}

std::vector<std::string> PipelineWorld::controller_names() const {
  return deployment_layout(options_.engine, options_.workers, options_.controllers).controllers;
}

std::vector<std::string> PipelineWorld::worker_names() const {
  return deployment_layout(options_.engine, options_.workers).workers;
}

Micros PipelineWorld::last_write_ts() const { return inputs_.empty() ? 0 : inputs_.back().write_ts; }

bool PipelineWorld::finite_sources() const {
  return std::all_of(spec_.sources.begin(), spec_.sources.end(), [](const SourceSpec& s) { return finite(s); });
}

void PipelineWorld::record_state_change(const StoreData::CommitRecord& commit) {
  if (auto layout = data_.latest(tables::kController, kLayoutKey); layout && *layout != layout_row_) {
    layout_row_ = *layout;
    layout_ = decode_layout(layout_row_).value();
    current_spec_ = with_layout(spec_, layout_);
    const uint64_t version = layout_.version;
    if (layout_changes_.empty() ? version != 0 : layout_changes_.back().layout_version != version) {
      layout_changes_.push_back({version, commit.version, commit.store_time});
    }
  }
  const auto state = data_.latest(tables::kController, "state");
  if (!state || (!state_changes_.empty() && state_changes_.back().state == *state)) return;
  StateChange change{*state, commit.version, commit.store_time, {}};
  if (*state == "stopped" || *state == "completed") change.in_flight = in_flight();
  state_changes_.push_back(std::move(change));
}

// Stream rows not yet processed, outbox rows not yet acknowledged, and messages an
// at-most-once sink holds in memory, as the store says now.
std::vector<std::string> PipelineWorld::in_flight() const {
  constexpr size_t kShown = 8;
  std::vector<std::string> out;
  for (const auto& [table, rows] : data_.tables()) {
    if (table.rfind("stream/", 0) != 0 && table.rfind("output_messages/", 0) != 0) continue;
    for (const Row& row : data_.read_range(table, "", "", data_.last_version(), kShown)) {
      if (out.size() < kShown) out.push_back(table + ":" + row.key);
    }
  }
  for_each_amo_held([&](const std::string& job, uint64_t held) {
    if (out.size() < kShown) out.push_back(fmt::format("{}:{} holds {} in memory", tables::kJobMeta, job, held));
  });
  return out;
}

// Each at-most-once sink partition whose last commit said it held messages in memory, not
// sent yet (its job's progress, as onceflow real's drain reads it).
void PipelineWorld::for_each_amo_held(const std::function<void(const std::string& job, uint64_t held)>& each) const {
  for (const auto& sink : current_spec_.sinks) {  // a repartitioned sink has the layout's partitions
    if (!sink.at_most_once_strategy.enabled) continue;
    for (int p = 0; p < sink.partitions; ++p) {
      const std::string job = JobId{JobKind::kSink, sink.name, p}.str();
      const auto meta = data_.latest(tables::kJobMeta, job);
      const uint64_t held = meta ? job_progress(*meta).amo_pending : 0;
      if (held != 0) each(job, held);
    }
  }
}

// A layout request the controller will refuse whatever comes (a name or count it does not
// take, InvalidArgument): asking again stalls the run. A stale version, or a paused pipeline,
// is a Conflict with what is stored now: asked again under the version stored then (a paused
// pipeline may be started meanwhile).
bool PipelineWorld::refused_for_good(const Status& refusal) { return refusal.is_invalid_argument(); }

// A completed pipeline takes no more requests: an operator who sees it stops asking.
bool PipelineWorld::completed() const { return data_.latest(tables::kController, "state") == "completed"; }

bool PipelineWorld::drained() const { return undrained().empty(); }

std::string PipelineWorld::undrained() const {
  if (world_->now() < last_write_ts()) return "the input is still being written";
  if (operations_pending_ > 0) return "an operator's request is not done";
  // A layout change under way is made first, and a resharded target is followed.
  if (data_.latest(tables::kController, kLayoutPendingKey)) return "a layout change is under way";
  for (const auto& sink : current_spec_.sinks) {
    if (sink.target_tablets > 0 && targets_.at(sink.name).tablets != sink.partitions) {
      return fmt::format("sink {} has {} partitions for a target of {} tablets", sink.name, sink.partitions,
                         targets_.at(sink.name).tablets);
    }
  }
  if (finite_sources()) {
    const auto state = data_.latest(tables::kController, "state");
    if (state != "completed") return fmt::format("the pipeline is {}, not completed", state.value_or("not started"));
  }
  for (const auto& source : current_spec_.sources) {
    for (int p = 0; p < source.partitions; ++p) {
      auto it = produced_.find({table_of(source), p});
      const uint64_t want = it == produced_.end() ? 0 : it->second;
      const auto stored = data_.latest(tables::kSourceOffsets, fmt::format("{}/{}", source_origin(source), p));
      uint64_t offset = 0;
      uint64_t cycle = 0;
      if (stored) {
        Decoder in(*stored);
        offset = in.u64();
        if (source.type == "service_log") cycle = in.u64();
      }
      if (source.type == "service_log" ? source.max_cycles == 0 || cycle < static_cast<uint64_t>(source.max_cycles)
                                       : offset != want) {
        return source.type == "service_log"
                   ? fmt::format("source {} partition {} is in cycle {}", source.name, p, cycle)
                   : fmt::format("source {} partition {} read {} of {} inputs", source.name, p, offset, want);
      }
    }
  }
  for (const auto& [table, rows] : data_.tables()) {
    if (table.rfind("stream/", 0) != 0 && table.rfind("output_messages/", 0) != 0) continue;
    const auto left = data_.read_range(table, "", "", data_.last_version(), 1);
    if (!left.empty()) return fmt::format("row {}:{} is still there", table, left.front().key);
  }
  // A sink that took a burst sends its queue in memory one message a request, for a while
  // after the store has nothing left in flight.
  std::string held;
  for_each_amo_held([&](const std::string& job, uint64_t n) {
    if (held.empty()) held = fmt::format("{} holds {} at-most-once messages in memory, not sent yet", job, n);
  });
  if (!held.empty()) return held;
  for (const auto& c : current_spec_.computations) {
    if (!c.timer_streams.empty() && timers_may_fire(c)) return fmt::format("timers of {} are still to fire", c.name);
  }
  return "";
}

Micros PipelineWorld::last_system_timer_trigger() const {
  Micros last = INT64_MIN;
  for (const ComputationSpec& c : spec_.computations) {
    for (const std::string& table : tables::timers(c)) {
      for (const Row& row : data_.read_range(table, "", "", data_.last_version(), SIZE_MAX)) {
        const auto stored = stored_timer(row.key, decode_timer_value(row.value));
        if (!stored) continue;
        const TimerStreamSpec* stream = c.timer_stream(stored->second.timer_stream);
        if (stream == nullptr || stream->watermark == Watermark::kEventTime) continue;
        last = std::max(last, stored->second.trigger_ts);
      }
    }
  }
  return last;
}

// Whether a timer of `c` is still to fire (core/job.h: timer_may_fire).
bool PipelineWorld::timers_may_fire(const ComputationSpec& c) const {
  for (const std::string& table : tables::timers(c)) {
    const auto first_from = [&](const std::string& key) -> std::optional<Row> {
      auto rows = data_.read_range(table, key, "", data_.last_version(), 1);
      return rows.empty() ? std::nullopt : std::optional<Row>(std::move(rows.front()));
    };
    if (onceflow::timers_may_fire(c, first_from, [this](const std::string& job) { return data_.latest(tables::kJobMeta, job); })) {
      return true;
    }
  }
  return false;
}

void PipelineWorld::run_sampling(Micros until) {
  for (Micros t = world_->now() + kSeconds; world_->now() < until; t += kSeconds) {
    world_->run_until(std::min(t, until));
    dedup_entries_max_ = std::max(dedup_entries_max_, dedup_size().entries);
  }
}

bool PipelineWorld::run_until_drained(Micros deadline) {
  const Micros slice = 50 * kMillis;
  Micros next_sample = world_->now();
  for (Micros t = world_->now() + slice; t <= deadline + slice; t += slice) {
    world_->run_until(std::min(t, deadline));
    if (world_->now() >= next_sample) {
      dedup_entries_max_ = std::max(dedup_entries_max_, dedup_size().entries);
      next_sample = world_->now() + kSeconds;
    }
    if (drained()) return true;
  }
  return false;
}

PipelineWorld::DedupSize PipelineWorld::dedup_size() const {
  DedupSize size;
  for (const auto& [table, rows] : data_.tables()) {
    const bool full = table.rfind("input_messages/", 0) == 0;
    const bool compact = table.rfind("compact_input_messages/", 0) == 0;
    if (!full && !compact) continue;
    for (const Row& row : data_.read_range(table, "", "", data_.last_version(), SIZE_MAX)) {
      ++size.rows;
      size.entries += full ? 1 : row.value.size() / 16;  // core/dedup.cc: 16 bytes an entry
    }
  }
  return size;
}

PipelineResult PipelineWorld::result() const {
  PipelineResult r;
  for (const auto& sink : spec_.sinks) {
    auto& out = r.sinks[sink.name];
    if (sink.type == SinkType::kSyncQueue) {
      for (const Row& row : data_.read_range(tables::sync_sink(sink.name), "", "", data_.last_version(), SIZE_MAX)) {
        auto m = decode_message(row.value);
        assert(m.has_value());
        out.emplace_back(m->key, m->payload);
      }
    } else if (auto t = targets_.find(sink.name); t != targets_.end()) {
      for (const auto& e : t->second.appended) out.emplace_back(e.message.key, e.message.payload);
    }
    std::sort(out.begin(), out.end());
  }
  for (const auto& [table, rows] : data_.tables()) {
    if (table.rfind("state/", 0) != 0 && table.rfind("external/", 0) != 0) continue;
    for (const Row& row : data_.read_range(table, "", "", data_.last_version(), SIZE_MAX)) {
      r.tables[table][row.key] = row.value;
    }
  }
  std::erase_if(r.tables, [](const auto& t) { return t.second.empty(); });
  return r;
}

}  // namespace onceflow::simulated
