// PipelineWorld: a pipeline running in the simulator.
//
// Nodes: "store" (the transactional store), "controller", "worker-1".."worker-N",
// "target-<sink>" for each sink whose target is its own system (a queue with
// (producer_id, seqNo) dedup, an HTTP receiver, a static table's master, a ClickHouse), and
// "kafka" when a source or sink uses Kafka. An outside producer appends the workload's
// messages to the source queues (in the store, as Flow's queues live in YTsaurus) or Kafka
// topics at their write times; static tables and service logs hold all their rows from the
// start.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/computation.h"
#include "core/deployment.h"
#include "core/engine.h"
#include "core/reference.h"
#include "core/spec.h"
#include "faults/fault.h"
#include "core/workload.h"
#include "sim/clickhouse.h"
#include "sim/kafka.h"
#include "sim/queue_target.h"
#include "sim/static_table.h"
#include "sim/store.h"
#include "sim/world.h"

namespace onceflow::simulated {

// A crash at a fault point: the node restarts this long after (a type of its own, so that a
// policy answering bool does not convert to one).
struct PointCrash {
  Micros restart_after_us = 0;
};

using sim::BootFn;
using sim::NodeContext;
using sim::StoreData;
using sim::TargetFaults;
using sim::TargetLog;
using sim::World;

struct PipelineWorldOptions {
  uint64_t seed = 1;
  int workers = 3;
  int controllers = 1;  // "controller", "controller-2", ...: one leads, the others stand by
  int spare_workers = 0;  // "worker-spare-N": added down; a rebalance fault brings one in
  PipelineWorkload workload;
  EngineOptions engine;
  BugSwitches bugs;
  size_t trace_keep_lines = 0;
  EngineObserver* observer = nullptr;
  // Decides, for a node reaching a fault point (faults/points.h), whether it crashes there
  // (and when it restarts), or nullopt.
  std::function<std::optional<PointCrash>(const std::string& node, std::string_view point)> fault_point_policy;
  Micros fault_point_restart_us = 300 * kMillis;  // a swarm run's node crashed at a point restarts after
  // http sinks: whether the receiver honours Idempotency-Key (default: it does).
  std::map<std::string, bool> http_honours_idempotency_key;
  bool kafka_epoch_per_transaction = true;
  // clickhouse sinks: their targets (default: ReplicatedMergeTree with ClickHouse's defaults).
  std::map<std::string, sim::ClickHouseTargetConfig> clickhouse_targets;
  // Static spec changes: at `at_us` the operator stops the pipeline, gives the controller
  // `yaml` (a pipeline spec) and starts it again. A queue source whose table it changes gets
  // its input swapped: from then on the workload writes to the new table, which also holds
  // every other earlier message as a backlog (which must not be skipped).
  struct Respec {
    Micros at_us = 0;
    std::string yaml;
    std::string path;  // the file it was read from (a scenario written back names it)
  };
  std::vector<Respec> respecs;
};

class PipelineWorld {
 public:
  PipelineWorld(PipelineSpec spec, const ComputationRegistry& registry, PipelineWorldOptions options);
  ~PipelineWorld();

  // Adds and starts every node and schedules the producer.
  void start();
  // Runs until everything is produced and drained, or until `deadline` (virtual time).
  // Returns true when drained.
  bool run_until_drained(Micros deadline);
  // Runs until `until`, sampling the dedup tables' size every simulated second.
  void run_sampling(Micros until);
  // The most dedup entries seen at once, sampled every second of simulated time while
  // run_until_drained runs.
  uint64_t dedup_entries_max() const { return dedup_entries_max_; }
  bool drained() const;
  // Why the run is not drained ("" when it is): the first of what it still waits for.
  std::string undrained() const;
  // The latest trigger of the system-time timers stored now (INT64_MIN: none): a timer the
  // function set further ahead than the liveness bound is not due yet, and the run waits for it.
  Micros last_system_timer_trigger() const;

  World& world() { return *world_; }
  StoreData& store_data() { return data_; }
  const PipelineSpec& spec() const { return spec_; }
  const std::vector<SourceInput>& inputs() const { return inputs_; }
  // The inputs written so far as their sources emit them (ids, keys, streams, payloads, event
  // times), each cycle of a service log apart.
  const std::vector<Message>& source_messages() const { return source_messages_; }
  // Hands them over at the end of a run: collect() (simulated/pipeline_run.cc) takes these and
  // the target logs' messages into the history, and after it result(), source_messages() and
  // the logs are hollow.
  std::vector<Message> take_source_messages() { return std::move(source_messages_); }
  // Beside each of source_messages(), the queue or topic partition it was appended to, which
  // its source reads in that order (numbered from 1); 0 for static tables and service logs.
  const std::vector<uint32_t>& source_lanes() const { return source_lanes_; }
  std::vector<std::string> worker_names() const;
  std::vector<std::string> controller_names() const;
  std::vector<std::string> spare_worker_names() const;
  const std::map<std::string, TargetLog>& targets() const { return targets_; }
  std::map<std::string, TargetLog>& targets() { return targets_; }
  // The fault switches of the external system on node `node` ("target-<sink>"), or null.
  TargetFaults* target_faults(const std::string& node);
  // The nodes of the external systems the sinks write to (and Kafka, when used), by name.
  std::vector<std::string> target_nodes() const;
  // An operator asks the controller to move the pipeline to `state` ("paused", "stopped",
  // "working"), retrying until the controller answers.
  void set_pipeline_state(const std::string& state);
  Micros last_write_ts() const;
  // An operator asks the controller to repartition (name -> partitions), naming the layout
  // version it last saw, and asks again (reading the version anew) until one takes it.
  void repartition(const std::map<std::string, int>& partitions);
  // The same for settings that change live ("epoch_period=20ms epoch_batch_limit=8").
  void reconfigure(const std::string& settings);
  // Someone reshards the sharded queue an async sink writes (target_tablets): from now on it
  // has `tablets` tablets. The engine is not told; its controller notices.
  void reshard_target(const std::string& sink, int tablets);
  // The spec in force: the stored layout's (core/layout.h) over the one the world started with,
  // as of the last commit.
  const PipelineSpec& current_spec() const { return current_spec_; }
  // Every source ends (core/spec.h finite()): a drained run is also a completed one.
  bool finite_sources() const;
  // A change of the pipeline state row as the controller stored it, with what the store held
  // in flight right after that commit (looked at only for "stopped" and "completed").
  struct StateChange {
    std::string state;
    Version version = 0;
    Micros store_time = 0;
    std::vector<std::string> in_flight;  // "<table>:<key>", at most 8
  };
  const std::vector<StateChange>& state_changes() const { return state_changes_; }
  // The last state the operator asked for (by a scenario's set_state, a pipeline_stop or
  // pipeline_pause fault and its lifting, or a respec's restart) and when; "working" at -1
  // when none was asked for.
  const std::pair<std::string, Micros>& last_state_request() const { return last_state_request_; }
  // Each new layout as a controller stored it.
  struct LayoutChange {
    uint64_t layout_version = 0;
    Version version = 0;
    Micros store_time = 0;
  };
  const std::vector<LayoutChange>& layout_changes() const { return layout_changes_; }

  // What the sinks expose and what the tables hold now.
  PipelineResult result() const;
  // Input dedup rows and entries held now, over every computation's and sink's table (a
  // compact row holds one entry per message it remembers, a full row one).
  struct DedupSize {
    uint64_t rows = 0;
    uint64_t entries = 0;
  };
  DedupSize dedup_size() const;
  sim::KafkaData& kafka() { return kafka_; }
  const std::map<std::string, sim::ClickHouseData>& clickhouse() const { return clickhouse_; }
  const std::map<std::string, sim::StaticTableProgress>& static_tables() const { return static_tables_; }

  // The fault point crashes of this run, in order.
  const std::vector<faults::PointHit>& point_hits() const { return point_hits_; }

 private:
  struct Process;
  std::vector<faults::PointHit> point_hits_;
  class NodeFaultPoints;
  class SimConnectors;
  void heartbeat_queue_heads();
  void record_state_change(const StoreData::CommitRecord& commit);
  std::vector<std::string> in_flight() const;
  void for_each_amo_held(const std::function<void(const std::string& job, uint64_t held)>& each) const;
  void start_targets();
  void load_inputs();
  // Where each input goes when respecs swap a queue source's table (SourceInput::table).
  void plan_input_swaps();
  // The operator's side of one respec: stop (draining after `at`), change, start.
  void respec(const std::string& yaml);
  // Asks `service` for a layout change ("<version><changes>") until a controller takes it.
  void change_layout(const char* service, const std::string& changes);
  // Whether every row of the queues the spec `next` swaps out has been read.
  bool swapped_inputs_read(const PipelineSpec& next) const;
  // Asks the controllers in turn, at most `attempts` times, until one answers; its last answer.
  Result<std::string> ask_controllers(sim::NodeIndex op, const char* service, const std::string& request,
                                      size_t attempts = 100);
  static constexpr Micros kQueueHeartbeatUs = 10 * kMillis;
  BootFn engine_boot(EngineProcess::Role role);

  PipelineSpec spec_;
  const ComputationRegistry& registry_;
  PipelineWorldOptions options_;
  StoreData data_;
  std::map<std::string, TargetLog> targets_;           // by sink
  std::map<std::string, TargetFaults> target_faults_;  // by node
  sim::KafkaData kafka_;
  std::map<std::string, sim::ClickHouseData> clickhouse_;            // by sink
  std::map<std::string, sim::StaticTableProgress> static_tables_;  // by sink
  std::unique_ptr<World> world_;
  std::unique_ptr<SimConnectors> connectors_;
  std::unique_ptr<DeploymentConfig> deployment_;
  bool timers_may_fire(const ComputationSpec& c) const;
  // Whether the store says the pipeline completed (its finite sources read): it takes no
  // more operator requests.
  bool completed() const;
  static bool refused_for_good(const Status& refusal);
  std::vector<SourceInput> inputs_;
  std::vector<Message> source_messages_;
  std::vector<uint32_t> source_lanes_;                         // beside source_messages_
  std::map<std::pair<std::string, int>, uint32_t> lanes_;      // (table, partition) -> lane
  std::map<std::pair<std::string, int>, uint64_t> produced_;  // (table, partition) -> count
  std::map<std::string, std::pair<int, bool>> queue_tables_;  // table -> (partitions, static)
  int operations_pending_ = 0;  // operator requests (states, layouts, respecs) not yet answered: not drained
  uint64_t state_requests_ = 0;  // sequence numbers of the operator's state requests
  uint64_t dedup_entries_max_ = 0;
  std::vector<StateChange> state_changes_;
  std::pair<std::string, Micros> last_state_request_{"working", -1};
  std::vector<LayoutChange> layout_changes_;
  std::string layout_row_;    // the layout row as last seen after a commit
  Layout layout_;             // ... decoded
  PipelineSpec current_spec_;  // with_layout(spec_, layout_)
};

}  // namespace onceflow::simulated
