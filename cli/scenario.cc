#include "cli/scenario.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <functional>
#include <sstream>
#include <limits>
#include <set>

#include "core/deployment.h"
#include "core/engine.h"
#include "core/input_checks.h"
#include "core/layout.h"
#include "core/user_code.h"
#include "faults/points.h"

namespace onceflow::cli {

// Every key a scenario file may hold, by where (docs/scenarios.md documents each: scenario_test).
const std::map<std::string, std::set<std::string>>& scenario_keys() {
  static const std::map<std::string, std::set<std::string>> keys{
      {"",
       {"name", "description", "kind", "demonstrates_failure", "workload", "faults", "liveness_bound",
        "guarantees", "pipeline", "topology", "http_receivers", "clickhouse_targets", "knobs", "regression_seeds",
        "kafka_broker", "catches", "operations"}},
      {"topology", {"workers", "spare_workers", "controllers"}},
      {"workload", {"messages", "keys", "interval", "event_disorder"}},
      {"http_receivers.SINK", {"honours_idempotency_key"}},
      {"kafka_broker", {"epoch_per_transaction"}},
      {"clickhouse_targets.SINK",
       {"database", "engine", "dedup_window", "dedup_window_blocks", "same_table_on_all_hosts"}},
      {"workload (kernel)",
       {"clients", "accounts", "initial_balance", "transfers_per_client", "lease_ttl", "ping_interval",
        "rpc_timeout", "think_time_max", "close_percent"}},
      {"operations", {"at", "repartition", "respec", "reconfigure", "reshard_target", "set_state"}},
      {"operations.reshard_target", {"sink", "tablets"}},
      {"faults", {"swarm", "start", "heal_at", "plan", "kinds", "fault_point_probability", "fault_points", "buggify"}},
      {"faults.plan", {"kind", "at", "for", "node", "peer", "probability", "amount", "point"}},
  };
  return keys;
}

namespace {

// The longest duration a scenario may name, of either sign: simulated runs stay short.
constexpr Micros kMaxScenarioDuration = 3600 * kSeconds;
// Jobs a simulated worker runs at most (load_pipeline): 1,402 jobs on 3 workers drained as
// usual, 2,002 never did (2026-12-04, the service-log scenario with more partitions).
constexpr size_t kMaxJobsPerWorker = 500;

// Thrown inside the loader only, turned into a Status at its boundary.
struct ScenarioError {
  std::string message;
};

class Loader {
 public:
  explicit Loader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void fail(const YAML::Node& node, const std::string& key, const std::string& what) const {
    const int line = node.IsDefined() ? node.Mark().line + 1 : 0;
    throw ScenarioError{bounded_message(line > 0 ? fmt::format("{}:{}: {}: {}", path_, line, key, what)
                                                 : fmt::format("{}: {}: {}", path_, key, what))};
  }

  // Refuses keys other than those scenario_keys() allows at `section`, so a typo does not
  // pass silently. `where` names the place in messages ("http_receivers.answers").
  void only_keys(const YAML::Node& map, const std::string& where, const std::string& section) const {
    if (!map.IsMap()) fail(map, where, "expected a mapping");
    const std::set<std::string>& allowed = scenario_keys().at(section);
    for (const auto& entry : map) {
      const std::string key = entry.first.as<std::string>();
      if (allowed.count(key) == 0) {
        std::string known;
        for (const auto& k : allowed) known += (known.empty() ? "" : ", ") + k;
        fail(entry.first, join(where, key), "unknown key (known: " + known + ")");
      }
    }
  }
  void only_keys(const YAML::Node& map, const std::string& where) const { only_keys(map, where, where); }

  static std::string join(const std::string& where, const std::string& key) {
    return where.empty() ? key : where + "." + key;
  }

  std::string string(const YAML::Node& node, const std::string& key) const {
    if (!node.IsScalar()) fail(node, key, "expected a string");
    return node.as<std::string>();
  }

  int64_t integer(const YAML::Node& node, const std::string& key, int64_t min, int64_t max) const {
    if (!node.IsScalar()) fail(node, key, "expected an integer");
    const std::string text = node.as<std::string>();
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || ptr != text.data() + text.size()) {
      fail(node, key, fmt::format("expected an integer, got '{}'", text));
    }
    if (v < min || v > max) fail(node, key, fmt::format("must be in [{}, {}], got {}", min, max, v));
    return v;
  }

  double probability(const YAML::Node& node, const std::string& key) const {
    if (!node.IsScalar()) fail(node, key, "expected a number in [0, 1]");
    const std::string text = node.as<std::string>();
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size() || !(v >= 0 && v <= 1)) {
      fail(node, key, fmt::format("expected a number in [0, 1], got '{}'", text));
    }
    return v;
  }

  bool boolean(const YAML::Node& node, const std::string& key) const {
    bool v = false;
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, v)) {
      fail(node, key, "expected true or false");
    }
    return v;
  }

  // A bound of 0 would read as "the default rule" inside, silently: refused, as leaving the key
  // out says that.
  Micros liveness_bound(const YAML::Node& node) const {
    const Micros bound = duration(node, "liveness_bound");
    if (bound <= 0) fail(node, "liveness_bound", "must be above 0 (leave it out for the default bound)");
    return bound;
  }
  Micros duration(const YAML::Node& node, const std::string& key, Micros longest = kMaxScenarioDuration) const {
    if (!node.IsScalar()) fail(node, key, "expected a duration such as 250ms");
    const std::string text = node.as<std::string>();
    const auto d = parse_duration(text);
    if (!d) fail(node, key, fmt::format("expected a duration such as 250ms, 2s or 500us, got '{}'", text));
    // A simulated run stays within minutes of simulated time (docs/scenarios.md).
    if (*d > longest || *d < -longest) {
      fail(node, key, fmt::format("must be at most {}, got '{}'", format_duration(longest), text));
    }
    return *d;
  }

  Scenario load() {
    if (Status readable = check_input_file(path_); !readable.is_ok()) throw ScenarioError{readable.message()};
    YAML::Node root;
    try {
      root = YAML::LoadFile(path_);
    } catch (const YAML::Exception& e) {
      throw ScenarioError{fmt::format("{}:{}: malformed YAML: {}", path_, e.mark.line + 1, e.msg)};
    }
    if (const auto problem = yaml_problem(root)) {
      throw ScenarioError{fmt::format("{}:{}: {}", path_, problem->line, problem->what)};
    }
    if (!root.IsMap()) throw ScenarioError{path_ + ": expected a mapping at the top level"};
    // A pipeline spec where a scenario was expected: say so, and how a scenario names one.
    if (!root["kind"] && (root["sources"] || root["computations"])) {
      throw ScenarioError{fmt::format("{}: a pipeline spec, not a scenario file (scenarios have a kind; one that runs this "
                                      "spec says kind: pipeline and pipeline: {}; `onceflow real` runs a spec)",
                                      path_, path_)};
    }
    only_keys(root, "");
    Scenario s;
    s.path = path_;
    if (!root["name"]) fail(root, "name", "missing");
    s.name = string(root["name"], "name");
    if (root["description"]) s.description = string(root["description"], "description");
    if (!root["kind"]) fail(root, "kind", "missing (kinds: kernel, pipeline)");
    s.kind = string(root["kind"], "kind");
    if (s.kind != "kernel" && s.kind != "pipeline") {
      fail(root["kind"], "kind", "unknown kind '" + s.kind + "' (kinds: kernel, pipeline)");
    }
    if (root["demonstrates_failure"]) {
      s.demonstrates_failure = boolean(root["demonstrates_failure"], "demonstrates_failure");
    }
    if (const YAML::Node& seeds = root["regression_seeds"]) {
      if (!seeds.IsSequence()) fail(seeds, "regression_seeds", "expected a list of seeds");
      for (const auto& seed : seeds) {
        s.regression_seeds.push_back(static_cast<uint64_t>(integer(seed, "regression_seeds", 0, std::numeric_limits<int64_t>::max())));
      }
    }
    if (const YAML::Node& catches = root["catches"]) {
      if (!catches.IsSequence()) fail(catches, "catches", "expected a list of bug switches");
      // onceflow's switches or the program's own (ONCEFLOW_BUG): which the program has is
      // checked where its registry is known (check_functions).
      for (const auto& bug : catches) {
        const std::string name = string(bug, "catches");
        const bool well_formed = !name.empty() && name.size() <= 64 &&
                                 std::all_of(name.begin(), name.end(), [](char ch) {
                                   return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-';
                                 });
        if (!well_formed) fail(bug, "catches", "'" + name.substr(0, 64) + "' is no bug switch name (1 to 64 of a-z, 0-9 and -)");
        s.catches.push_back(name);
      }
    }
    if (s.kind == "pipeline") return load_pipeline(root, s);
    if (root["workload"]) load_kernel_workload(root["workload"], s);
    if (root["faults"]) load_faults(root["faults"], s);
    if (root["liveness_bound"]) s.kernel.liveness_bound_us = liveness_bound(root["liveness_bound"]);
    if (root["guarantees"]) {
      if (!root["guarantees"].IsSequence()) fail(root["guarantees"], "guarantees", "expected a list");
      for (const auto& g : root["guarantees"]) s.guarantees.push_back(string(g, "guarantees"));
    }
    if (s.guarantees.empty()) {
      s.guarantees = {"conservation", "ledger", "ambiguous-resolution", "lease-fencing", "liveness"};
    }
    return s;
  }

  Scenario load_pipeline(const YAML::Node& root, Scenario& s) {
    if (!root["pipeline"]) fail(root, "pipeline", "missing: the pipeline spec file");
    const std::string relative = string(root["pipeline"], "pipeline");
    s.pipeline_path = (std::filesystem::path(path_).parent_path() / relative).lexically_normal().string();
    auto spec = load_pipeline_spec(s.pipeline_path);
    if (!spec) fail(root["pipeline"], "pipeline", spec.error().message());
    // A simulated run must end: a service log cycles a bounded number of times.
    for (const auto& source : spec->sources) {
      if (source.type == "service_log" && source.max_cycles == 0) {
        fail(root["pipeline"], "pipeline", fmt::format("{}: sources.{}: the simulator needs max_cycles on a service_log "
                                                        "source", s.pipeline_path, source.name));
      }
    }
    // The spec's periods set how long a simulated run lasts (the liveness bound follows them).
    for (const auto& [name, value] : {std::pair<const char*, Micros>{"epoch_period", spec->epoch_period_us},
                                      {"lease_ttl", spec->lease_ttl_us},
                                      {"scheduling_period", spec->scheduling_period_us}}) {
      if (value > kMaxScenarioDuration) {
        fail(root["pipeline"], "pipeline",
             fmt::format("{}: {} is {}; the simulator runs periods of at most {}", s.pipeline_path, name,
                         format_duration(value), format_duration(kMaxScenarioDuration)));
      }
    }
    simulated::PipelineRunOptions& o = s.pipeline;
    o.spec = *spec;
    if (root["topology"]) {
      only_keys(root["topology"], "topology");
      if (root["topology"]["workers"]) o.workers = static_cast<int>(integer(root["topology"]["workers"], "topology.workers", 1, 64));
      if (root["topology"]["controllers"]) {
        o.controllers = static_cast<int>(integer(root["topology"]["controllers"], "topology.controllers", 1, 8));
      }
      if (root["topology"]["spare_workers"]) {
        o.spare_workers = static_cast<int>(integer(root["topology"]["spare_workers"], "topology.spare_workers", 0, 64));
      }
    }
    // What the simulated store keeps alive: every job holds a Lease its worker pings and
    // commits an epoch each period. Past a few hundred jobs a worker, the store's queue grows
    // faster than it drains, Leases lapse and the run never drains (2,000 service-log
    // partitions on 3 workers did: "liveness" failed on a deployment that could not work,
    // not on an engine mistake). Refused here, where the cause can be named.
    const size_t jobs = all_jobs(*spec).size();
    if (jobs > kMaxJobsPerWorker * static_cast<size_t>(o.workers)) {
      fail(root["topology"] ? root["topology"] : root["pipeline"], "topology.workers",
           fmt::format("{} has {} jobs (partitions of its sources, computations and sinks) for {} workers: the "
                       "simulator runs at most {} jobs a worker; give more workers or fewer partitions",
                       s.pipeline_path, jobs, o.workers, kMaxJobsPerWorker));
    }
    if (root["workload"]) {
      const YAML::Node& w = root["workload"];
      only_keys(w, "workload");
      if (w["messages"]) o.workload.messages = static_cast<int>(integer(w["messages"], "workload.messages", 0, 1'000'000));
      if (w["keys"]) o.workload.keys = static_cast<int>(integer(w["keys"], "workload.keys", 1, 1'000'000'000));
      if (w["interval"]) o.workload.interval_us = duration(w["interval"], "workload.interval");
      if (w["event_disorder"]) {
        o.workload.event_disorder_us = duration(w["event_disorder"], "workload.event_disorder");
        if (o.workload.event_disorder_us < 0) fail(w["event_disorder"], "workload.event_disorder", "must not be negative");
      }
      if (static_cast<int64_t>(o.workload.messages) * o.workload.interval_us > kMaxScenarioDuration) {
        fail(w, "workload", fmt::format("{} messages one every {} take longer than {}", o.workload.messages,
                                        format_duration(o.workload.interval_us), format_duration(kMaxScenarioDuration)));
      }
    }
    if (root["guarantees"]) load_sink_guarantees(root["guarantees"], s);
    if (const YAML::Node& receivers = root["http_receivers"]) {
      if (!receivers.IsMap()) fail(receivers, "http_receivers", "expected a mapping of http sink name to its receiver");
      for (const auto& entry : receivers) {
        const std::string sink = entry.first.as<std::string>();
        const std::string key = "http_receivers." + sink;
        const SinkSpec* spec = o.spec.sink(sink);
        if (spec == nullptr || spec->type != SinkType::kHttp) fail(entry.first, key, "no http sink '" + sink + "' in the pipeline");
        only_keys(entry.second, key, "http_receivers.SINK");
        if (const YAML::Node& h = entry.second["honours_idempotency_key"]) {
          if (!h.IsScalar() || (h.Scalar() != "true" && h.Scalar() != "false")) {
            fail(h, key + ".honours_idempotency_key", "expected true or false");
          }
          o.http_honours_idempotency_key[sink] = h.Scalar() == "true";
        }
      }
    }
    if (const YAML::Node& targets = root["clickhouse_targets"]) load_clickhouse_targets(targets, o);
    if (const YAML::Node& kafka = root["kafka_broker"]) {
      only_keys(kafka, "kafka_broker");
      if (kafka["epoch_per_transaction"]) {
        o.kafka_epoch_per_transaction = boolean(kafka["epoch_per_transaction"], "kafka_broker.epoch_per_transaction");
      }
    }
    if (root["faults"]) {
      load_faults(root["faults"], s);
      o.scripted = s.scripted;
      o.faults_start_us = s.kernel.faults_start_us;
      o.heal_at_us = s.kernel.heal_at_us;
    }
    if (root["liveness_bound"]) o.liveness_bound_us = liveness_bound(root["liveness_bound"]);
    if (const YAML::Node& ops = root["operations"]) load_operations(ops, o);
    if (const YAML::Node& knobs = root["knobs"]) load_knobs(knobs, s);
    for (const auto& sink : o.spec.sinks) {
      if (o.sink_guarantees.count(sink.name) > 0) continue;
      auto target = o.clickhouse_targets.find(sink.name);
      o.sink_guarantees[sink.name] =
          simulated::default_guarantee(o.spec, sink, target == o.clickhouse_targets.end() ? nullptr : &target->second);
    }
    // A kind listed for swarm mode that a sink's guarantee excludes would make a clean run fail.
    const auto allowed = simulated::swarm_kinds_for(o);
    for (const faults::FaultKind kind : o.swarm_kinds) {
      if (std::find(allowed.begin(), allowed.end(), kind) != allowed.end()) continue;
      fail(root["faults"]["kinds"], "faults.kinds",
           fmt::format("'{}' is excluded by an at-most-once sink (it sends without a producer id, so duplicated "
                       "requests are duplicated deliveries)",
                       faults::fault_kind_name(kind)));
    }
    s.guarantees.clear();
    for (const auto& [sink, g] : o.sink_guarantees) s.guarantees.push_back(sink + ":" + guarantee_name(g));
    s.guarantees.push_back(std::string("state:") + (o.spec.computations.empty() ? "none" : "reference"));
    return s;
  }

  void load_clickhouse_targets(const YAML::Node& targets, simulated::PipelineRunOptions& o) {
    if (!targets.IsMap()) fail(targets, "clickhouse_targets", "expected a mapping of clickhouse sink name to its target");
    for (const auto& entry : targets) {
      const std::string sink = entry.first.as<std::string>();
      const std::string key = "clickhouse_targets." + sink;
      const SinkSpec* spec = o.spec.sink(sink);
      if (spec == nullptr || spec->type != SinkType::kClickHouse) {
        fail(entry.first, key, "no clickhouse sink '" + sink + "' in the pipeline");
      }
      only_keys(entry.second, key, "clickhouse_targets.SINK");
      sim::ClickHouseTargetConfig& c = o.clickhouse_targets[sink];
      const YAML::Node& t = entry.second;
      if (t["database"]) c.database = string(t["database"], key + ".database");
      if (t["engine"]) c.engine = string(t["engine"], key + ".engine");
      if (t["dedup_window"]) c.window_us = duration(t["dedup_window"], key + ".dedup_window", 366LL * 86'400 * kSeconds);
      if (t["dedup_window_blocks"]) {
        c.window_blocks = static_cast<int>(integer(t["dedup_window_blocks"], key + ".dedup_window_blocks", 1, 100'000'000));
      }
      if (t["same_table_on_all_hosts"]) c.same_table_on_all_hosts = boolean(t["same_table_on_all_hosts"], key + ".same_table_on_all_hosts");
    }
  }

  static std::string guarantee_name(checkers::Guarantee g) {
    switch (g) {
      case checkers::Guarantee::kExactlyOnce: return "exactly_once";
      case checkers::Guarantee::kAtLeastOnce: return "at_least_once";
      case checkers::Guarantee::kAtMostOnce: return "at_most_once";
    }
    return "?";
  }

  void load_sink_guarantees(const YAML::Node& g, Scenario& s) {
    if (!g.IsMap()) fail(g, "guarantees", "expected a mapping of sink name to guarantee");
    for (const auto& entry : g) {
      const std::string sink = entry.first.as<std::string>();
      const std::string key = "guarantees." + sink;
      if (s.pipeline.spec.sink(sink) == nullptr) fail(entry.first, key, "no sink '" + sink + "' in the pipeline");
      const std::string value = string(entry.second, key);
      if (value == "exactly_once") {
        s.pipeline.sink_guarantees[sink] = checkers::Guarantee::kExactlyOnce;
      } else if (value == "at_least_once") {
        s.pipeline.sink_guarantees[sink] = checkers::Guarantee::kAtLeastOnce;
      } else if (value == "at_most_once") {
        s.pipeline.sink_guarantees[sink] = checkers::Guarantee::kAtMostOnce;
      } else {
        fail(entry.second, key, "unknown guarantee '" + value + "' (exactly_once, at_least_once, at_most_once)");
      }
    }
  }

  void load_kernel_workload(const YAML::Node& w, Scenario& s) {
    only_keys(w, "workload", "workload (kernel)");
    auto& o = s.kernel.workload;
    if (w["clients"]) o.clients = static_cast<int>(integer(w["clients"], "workload.clients", 1, 64));
    if (w["accounts"]) o.accounts = static_cast<int>(integer(w["accounts"], "workload.accounts", 2, 10'000));
    if (w["initial_balance"]) {
      o.initial_balance = integer(w["initial_balance"], "workload.initial_balance", 0, 1'000'000'000);
    }
    if (w["transfers_per_client"]) {
      o.transfers_per_client = static_cast<uint64_t>(
          integer(w["transfers_per_client"], "workload.transfers_per_client", 0, 100'000));
    }
    // Periods and timeouts are positive (a zero one would reach the simulator's assertions).
    const auto positive = [&](const char* key) {
      const Micros d = duration(w[key], std::string("workload.") + key);
      if (d <= 0) fail(w[key], std::string("workload.") + key, "must be positive");
      return d;
    };
    if (w["lease_ttl"]) o.lease_ttl_us = positive("lease_ttl");
    if (w["ping_interval"]) o.ping_interval_us = positive("ping_interval");
    if (w["rpc_timeout"]) o.rpc_timeout_us = positive("rpc_timeout");
    if (w["think_time_max"]) {
      o.think_time_us_max = duration(w["think_time_max"], "workload.think_time_max");
      if (o.think_time_us_max < 0) fail(w["think_time_max"], "workload.think_time_max", "must not be negative");
    }
    if (w["close_percent"]) o.close_percent = static_cast<int>(integer(w["close_percent"], "workload.close_percent", 0, 100));
    if (o.ping_interval_us >= o.lease_ttl_us) {
      fail(w, "workload.ping_interval", "must be shorter than workload.lease_ttl");
    }
  }

  // operations: [{at: 1s, repartition: {Name: count, ...}}, {at: 2s, respec: FILE},
  // {at: 3s, reconfigure: {...}}, {at: 4s, reshard_target: {sink: NAME, tablets: N}},
  // {at: 5s, set_state: stopped}, ...]
  void load_operations(const YAML::Node& ops, simulated::PipelineRunOptions& o) {
    constexpr const char* kForm =
        "{at, repartition}, {at, respec}, {at, reconfigure}, {at, reshard_target} or {at, set_state}";
    if (!ops.IsSequence()) fail(ops, "operations", fmt::format("expected a list of {}", kForm));
    for (const auto& op : ops) {
      if (!op.IsMap()) fail(op, "operations", fmt::format("expected one of {}", kForm));
      only_keys(op, "operations");
      if (!op["at"]) fail(op, "operations.at", "missing");
      const Micros at = duration(op["at"], "operations.at");
      if (static_cast<int>(op["repartition"].IsDefined()) + op["respec"].IsDefined() + op["reconfigure"].IsDefined() +
              op["reshard_target"].IsDefined() + op["set_state"].IsDefined() >
          1) {
        fail(op, "operations", "one of repartition, respec, reconfigure, reshard_target and set_state per operation");
      }
      if (op["set_state"]) {
        const std::string state = string(op["set_state"], "operations.set_state");
        if (state != "stopped" && state != "stopped now" && state != "paused" && state != "working") {
          fail(op["set_state"], "operations.set_state",
               fmt::format("expected stopped, 'stopped now', paused or working, got '{}'", state.substr(0, 40)));
        }
        o.state_requests.emplace_back(at, state);
        continue;
      }
      if (op["reshard_target"]) {
        load_reshard_target(op["reshard_target"], at, o);
        continue;
      }
      if (op["reconfigure"]) {
        load_reconfigure(op["reconfigure"], at, o);
        continue;
      }
      if (op["respec"]) {
        load_respec(op["respec"], at, o);
        continue;
      }
      if (!op["repartition"]) fail(op, "operations.repartition", "missing (or respec, or reconfigure)");
      simulated::PipelineRunOptions::Repartition r;
      r.at_us = at;
      const YAML::Node& parts = op["repartition"];
      if (!parts.IsMap() || parts.size() == 0) fail(parts, "operations.repartition", "expected a mapping {NAME: COUNT, ...}");
      std::string text;
      for (const auto& item : parts) {
        const std::string name = string(item.first, "operations.repartition");
        const std::string where = "operations.repartition." + name.substr(0, 40);
        r.partitions[name] = static_cast<int>(integer(item.second, where, 1, kMaxPartitions));
        text += fmt::format("{}={} ", name, r.partitions[name]);
      }
      if (auto checked = parse_repartition(o.spec, text); !checked) fail(parts, "operations.repartition", checked.error().message());
      o.repartitions.push_back(std::move(r));
    }
  }

  // reshard_target: {sink: NAME, tablets: N}: the sharded queue a sink writes gets N tablets.
  void load_reshard_target(const YAML::Node& node, Micros at, simulated::PipelineRunOptions& o) {
    constexpr const char* kWhere = "operations.reshard_target";
    if (!node.IsMap()) fail(node, kWhere, "expected a mapping {sink: NAME, tablets: N}");
    only_keys(node, kWhere, "operations.reshard_target");
    if (!node["sink"]) fail(node, "operations.reshard_target.sink", "missing");
    if (!node["tablets"]) fail(node, "operations.reshard_target.tablets", "missing");
    simulated::PipelineRunOptions::TargetReshard r;
    r.at_us = at;
    r.sink = string(node["sink"], "operations.reshard_target.sink");
    r.tablets = static_cast<int>(integer(node["tablets"], "operations.reshard_target.tablets", 1, kMaxPartitions));
    const SinkSpec* sink = o.spec.sink(r.sink);
    if (sink == nullptr || sink->target_tablets == 0) {
      fail(node["sink"], "operations.reshard_target.sink",
           fmt::format("'{}' is not a sink with a sharded target (target_tablets)", r.sink.substr(0, 40)));
    }
    o.target_reshards.push_back(std::move(r));
  }

  // reconfigure: {epoch_period: 20ms, epoch_batch_limit: 8}: settings changed live.
  void load_reconfigure(const YAML::Node& node, Micros at, simulated::PipelineRunOptions& o) {
    if (!node.IsMap() || node.size() == 0) {
      fail(node, "operations.reconfigure", "expected a mapping {epoch_period: DURATION, epoch_batch_limit: N}");
    }
    std::string text;
    for (const auto& item : node) {
      const std::string name = string(item.first, "operations.reconfigure");
      text += fmt::format("{}{}={}", text.empty() ? "" : " ", name.substr(0, 40), string(item.second, "operations.reconfigure." + name.substr(0, 40)));
    }
    if (auto checked = reconfigured_layout(Layout{}, text); !checked) fail(node, "operations.reconfigure", checked.error().message());
    o.reconfigures.emplace_back(at, std::move(text));
  }

  // respec: a pipeline spec file (relative to the scenario) the pipeline is given while
  // stopped. The simulator's expected outputs come from the scenario's pipeline, so the new
  // spec may swap inputs (a queue source's table) but must process as the old one does.
  void load_respec(const YAML::Node& node, Micros at, simulated::PipelineRunOptions& o) {
    const std::string relative = string(node, "operations.respec");
    const std::string path = (std::filesystem::path(path_).parent_path() / relative).lexically_normal().string();
    auto text = read_pipeline_spec_file(path);
    if (!text) fail(node, "operations.respec", text.error().message());
    auto next = parse_pipeline_spec_text(*text, path);
    if (!next) fail(node, "operations.respec", next.error().message());
    if (table_shape(without_inputs(*next)) != table_shape(without_inputs(o.spec))) {
      fail(node, "operations.respec",
           fmt::format("{}: the simulator checks against the scenario's pipeline, so a respec may change only the "
                       "tables its queue sources read",
                       relative));
    }
    if (auto checked = respecified_layout(o.spec, Layout{}, *text); !checked) {
      fail(node, "operations.respec", fmt::format("{}: {}", relative, checked.error().message()));
    }
    o.respecs.push_back({at, std::move(*text), std::filesystem::absolute(path).lexically_normal().string()});
  }

  // `spec` with its queue sources' tables cleared: what a respec in the simulator may change.
  static PipelineSpec without_inputs(PipelineSpec spec) {
    for (auto& s : spec.sources) {
      if (s.type == "queue") s.table.clear();
    }
    return spec;
  }

  // knobs: random | fixed | {name: value, ...}
  void load_knobs(const YAML::Node& k, Scenario& s) {
    if (k.IsScalar()) {
      s.knobs = string(k, "knobs");
      if (s.knobs != "random" && s.knobs != "fixed") fail(k, "knobs", "expected random, fixed or a mapping of knobs");
      return;
    }
    if (!k.IsMap()) fail(k, "knobs", "expected random, fixed or a mapping of knobs");
    s.knobs = "fixed";
    for (const auto& item : k) {
      const std::string name = item.first.as<std::string>();
      const std::string where = "knobs." + name.substr(0, 40);
      const auto info = std::find_if(simulated::kKnobs.begin(), simulated::kKnobs.end(),
                                     [&](const simulated::KnobInfo& i) { return i.name == name; });
      if (info == simulated::kKnobs.end()) fail(item.first, where, "unknown knob");
      s.pipeline.knobs[name] = info->duration ? duration(item.second, where) : integer(item.second, where, 1, 1'000'000);
    }
    PipelineSpec spec = s.pipeline.spec;
    EngineOptions engine;
    if (Status ok = simulated::apply_knobs(s.pipeline.knobs, spec, engine); !ok.is_ok()) fail(k, "knobs", ok.message());
  }

  void load_faults(const YAML::Node& f, Scenario& s) {
    only_keys(f, "faults");
    if (f["fault_points"]) s.pipeline.fault_points_when_scripted = boolean(f["fault_points"], "faults.fault_points");
    if (f["kinds"]) {
      if (!f["kinds"].IsSequence()) fail(f["kinds"], "faults.kinds", "expected a list of fault kinds");
      for (const auto& k : f["kinds"]) {
        const auto kind = faults::parse_fault_kind(string(k, "faults.kinds"));
        if (!kind) fail(k, "faults.kinds", "unknown fault kind '" + k.as<std::string>() + "'");
        if (*kind == faults::FaultKind::kPointCrash) {
          fail(k, "faults.kinds", "point_crash is scripted only (swarm runs crash at fault points by fault_point_probability)");
        }
        s.pipeline.swarm_kinds.push_back(*kind);
      }
    }
    if (f["fault_point_probability"]) {
      s.pipeline.fault_point_probability = probability(f["fault_point_probability"], "faults.fault_point_probability");
    }
    if (f["buggify"]) {  // the user's ONCEFLOW_BUGGIFY sites enabled, by name (a shrunk scenario's)
      if (!f["buggify"].IsSequence()) fail(f["buggify"], "faults.buggify", "expected a list of ONCEFLOW_BUGGIFY site names");
      // Names this program has no site of enable nothing: a typo would test nothing, silently.
      std::set<std::string> known;
      for (const UserSite& site : user_code::sites()) {
        if (site.kind == UserSiteKind::kBuggify) known.insert(site.name);
      }
      std::set<std::string> sites;
      for (const auto& site : f["buggify"]) {
        std::string name = string(site, "faults.buggify");
        if (known.count(name) == 0) {
          std::string names;
          for (const std::string& k : known) names += (names.empty() ? "'" : ", '") + k + "'";
          fail(site, "faults.buggify",
               fmt::format("no ONCEFLOW_BUGGIFY site of this program is named '{}' ({})", name,
                           known.empty() ? std::string("it has none") : "it has " + names));
        }
        sites.insert(std::move(name));
      }
      s.pipeline.buggify_sites = std::move(sites);
    }
    if (f["swarm"]) s.swarm = boolean(f["swarm"], "faults.swarm");
    if (f["start"]) s.kernel.faults_start_us = duration(f["start"], "faults.start");
    if (f["heal_at"]) s.kernel.heal_at_us = duration(f["heal_at"], "faults.heal_at");
    if (s.kernel.heal_at_us <= s.kernel.faults_start_us) {
      fail(f, "faults.heal_at", "must come after faults.start");
    }
    s.scripted.heal_at_us = s.kernel.heal_at_us;
    if (!f["plan"]) return;
    if (!f["plan"].IsSequence()) fail(f["plan"], "faults.plan", "expected a list of faults");
    int i = 0;
    for (const auto& item : f["plan"]) {
      const std::string where = fmt::format("faults.plan[{}]", i++);
      s.scripted.faults.push_back(load_fault(item, where, s));
    }
    if (s.swarm) {
      fail(f["plan"], "faults.plan",
           "runs only with swarm: false; under swarm faults (the default) it would be ignored: add swarm: false, or "
           "drop the plan");
    }
  }

  faults::Fault load_fault(const YAML::Node& item, const std::string& where, const Scenario& s) {
    only_keys(item, where, "faults.plan");
    faults::Fault f;
    if (!item["kind"]) fail(item, where + ".kind", "missing");
    const std::string kind = string(item["kind"], where + ".kind");
    const auto parsed = faults::parse_fault_kind(kind);
    if (!parsed) fail(item["kind"], where + ".kind", "unknown fault kind '" + kind + "'");
    f.kind = *parsed;
    if (!item["at"]) fail(item, where + ".at", "missing");
    f.at_us = duration(item["at"], where + ".at");
    if (item["for"]) f.duration_us = duration(item["for"], where + ".for");
    if (f.at_us + f.duration_us > heal_at_of(s)) {
      fail(item, where, "ends after faults.heal_at");
    }
    const std::set<std::string> nodes = kernel_nodes(s);
    const bool engine_level = f.kind >= faults::FaultKind::kLeasePingLoss;
    if (engine_level && s.kind != "pipeline") fail(item["kind"], where + ".kind", "'" + kind + "' needs kind: pipeline");
    if (!faults::fault_is_global(f.kind)) {
      if (!item["node"]) fail(item, where + ".node", "missing");
      f.node = string(item["node"], where + ".node");
      if (nodes.count(f.node) == 0) fail(item["node"], where + ".node", "no node '" + f.node + "'");
      const bool needs_target = f.kind == faults::FaultKind::kSinkErrors || f.kind == faults::FaultKind::kSinkRejects ||
                                f.kind == faults::FaultKind::kDedupEviction;
      const bool spare = f.node.rfind("worker-spare-", 0) == 0;
      if ((f.kind == faults::FaultKind::kRebalance) != spare) {
        fail(item["node"], where + ".node",
             spare ? "a spare worker only joins (kind: rebalance)" : "'rebalance' brings in a spare worker (worker-spare-N)");
      }
      if (needs_target && f.node.rfind("target-", 0) != 0) {
        fail(item["node"], where + ".node", "'" + kind + "' acts on a sink target node (target-<sink>)");
      }
    }
    if (faults::fault_needs_peer(f.kind)) {
      if (!item["peer"]) fail(item, where + ".peer", "missing");
      f.peer = string(item["peer"], where + ".peer");
      if (nodes.count(f.peer) == 0) fail(item["peer"], where + ".peer", "no node '" + f.peer + "'");
    }
    if (f.kind == faults::FaultKind::kPointCrash) {
      if (!item["point"]) fail(item, where + ".point", "missing: the fault point to crash at (faults/points.h)");
      if (f.node.rfind("worker-", 0) != 0 && f.node.rfind("controller", 0) != 0) {
        fail(item["node"], where + ".node", "fault points are in the engine's processes: a worker or a controller");
      }
      f.point = string(item["point"], where + ".point");
      const bool known = std::any_of(std::begin(faults::kFaultPoints), std::end(faults::kFaultPoints),
                                     [&](const faults::FaultPointInfo& p) { return p.name == f.point; });
      if (!known) {
        std::string names;
        for (const auto& p : faults::kFaultPoints) names += (names.empty() ? "" : ", ") + std::string(p.name);
        fail(item["point"], where + ".point", "no fault point '" + f.point + "' (known: " + names + ")");
      }
    } else if (item["point"]) {
      fail(item["point"], where + ".point", "only a point_crash names a fault point");
    }
    if (item["probability"]) f.intensity = probability(item["probability"], where + ".probability");
    if (item["amount"]) {
      const bool negative = item["amount"].as<std::string>().rfind('-', 0) == 0;
      YAML::Node magnitude(negative ? item["amount"].as<std::string>().substr(1) : item["amount"].as<std::string>());
      f.amount_us = duration(magnitude, where + ".amount") * (negative ? -1 : 1);
    }
    return f;
  }

  static Micros heal_at_of(const Scenario& s) { return s.kernel.heal_at_us; }

  static std::set<std::string> kernel_nodes(const Scenario& s) {
    if (s.kind == "pipeline") {
      std::set<std::string> nodes{"store"};
      const DeploymentLayout layout = deployment_layout(EngineOptions{}, s.pipeline.workers, s.pipeline.controllers);
      nodes.insert(layout.controllers.begin(), layout.controllers.end());
      nodes.insert(layout.workers.begin(), layout.workers.end());
      for (int i = 1; i <= s.pipeline.spare_workers; ++i) nodes.insert(fmt::format("worker-spare-{}", i));
      for (const auto& sink : s.pipeline.spec.sinks) {
        if (sink.type == SinkType::kAsyncQueue || sink.type == SinkType::kHttp) nodes.insert(sink_target_node(sink.name));
      }
      return nodes;
    }
    std::set<std::string> nodes{sim::BankWorkload::kStoreNode};
    for (int i = 1; i <= s.kernel.workload.clients; ++i) nodes.insert(fmt::format("client-{}", i));
    return nodes;
  }

 private:
  std::string path_;
};

}  // namespace

bool random_knobs(const Scenario& s, bool swarm) { return s.knobs == "random" || (s.knobs.empty() && swarm); }

Result<Scenario> load_scenario(const std::string& path) {
  try {
    return Loader(path).load();
  } catch (const ScenarioError& e) {
    return Status::invalid_argument(e.message);
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(fmt::format("{}:{}: {}", path, e.mark.line + 1, e.msg));
  }
}

namespace {
// "epoch_period=20ms epoch_batch_limit=8" as (name, value) pairs.
std::vector<std::pair<std::string, std::string>> split_settings(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  for (std::string item; in >> item;) {
    const size_t eq = item.find('=');
    out.emplace_back(item.substr(0, eq), eq == std::string::npos ? "" : item.substr(eq + 1));
  }
  return out;
}

// The operator's actions of a pipeline scenario, in time order (a shrunk scenario keeps them).
void write_operations(YAML::Emitter& y, const simulated::PipelineRunOptions& o) {
  std::vector<std::pair<Micros, std::function<void()>>> ops;
  const auto op = [&y](Micros at, const char* what) {
    y << YAML::Flow << YAML::BeginMap << YAML::Key << "at" << YAML::Value << format_time(at) << YAML::Key << what
      << YAML::Value;
  };
  for (const auto& r : o.repartitions) {
    ops.emplace_back(r.at_us, [&, &r = r] {
      op(r.at_us, "repartition");
      y << YAML::BeginMap;
      for (const auto& [name, count] : r.partitions) y << YAML::Key << name << YAML::Value << count;
      y << YAML::EndMap << YAML::EndMap;
    });
  }
  for (const auto& r : o.reconfigures) {
    ops.emplace_back(r.first, [&, &r = r] {
      op(r.first, "reconfigure");
      y << YAML::BeginMap;
      for (const auto& item : split_settings(r.second)) y << YAML::Key << item.first << YAML::Value << item.second;
      y << YAML::EndMap << YAML::EndMap;
    });
  }
  for (const auto& r : o.respecs) {
    ops.emplace_back(r.at_us, [&, &r = r] {
      op(r.at_us, "respec");
      y << r.path << YAML::EndMap;
    });
  }
  for (const auto& r : o.target_reshards) {
    ops.emplace_back(r.at_us, [&, &r = r] {
      op(r.at_us, "reshard_target");
      y << YAML::BeginMap << YAML::Key << "sink" << YAML::Value << r.sink << YAML::Key << "tablets" << YAML::Value
        << r.tablets << YAML::EndMap << YAML::EndMap;
    });
  }
  for (const auto& r : o.state_requests) {
    ops.emplace_back(r.first, [&, &r = r] {
      op(r.first, "set_state");
      y << r.second << YAML::EndMap;
    });
  }
  if (ops.empty()) return;
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  y << YAML::Key << "operations" << YAML::Value << YAML::BeginSeq;
  for (const auto& [at, write] : ops) write();
  y << YAML::EndSeq;
}
}  // namespace

std::string scenario_yaml(const Scenario& s, const std::string& name, const std::string& description) {
  YAML::Emitter y;
  y << YAML::BeginMap;
  y << YAML::Key << "name" << YAML::Value << name;
  y << YAML::Key << "description" << YAML::Value << description;
  y << YAML::Key << "kind" << YAML::Value << s.kind;
  if (s.kind == "pipeline") {
    y << YAML::Key << "pipeline" << YAML::Value
      << std::filesystem::absolute(s.pipeline_path).lexically_normal().string();
    y << YAML::Key << "topology" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "workers"
      << YAML::Value << s.pipeline.workers << YAML::Key << "controllers" << YAML::Value << s.pipeline.controllers
      << YAML::Key << "spare_workers" << YAML::Value << s.pipeline.spare_workers
      << YAML::EndMap;
    y << YAML::Key << "workload" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "messages"
      << YAML::Value << s.pipeline.workload.messages << YAML::Key << "keys" << YAML::Value << s.pipeline.workload.keys
      << YAML::Key << "interval" << YAML::Value << format_time(s.pipeline.workload.interval_us) << YAML::Key
      << "event_disorder" << YAML::Value << format_time(s.pipeline.workload.event_disorder_us) << YAML::EndMap;
    y << YAML::Key << "guarantees" << YAML::Value << YAML::BeginMap;
    for (const auto& [sink, g] : s.pipeline.sink_guarantees) {
      y << YAML::Key << sink << YAML::Value
        << (g == checkers::Guarantee::kExactlyOnce ? "exactly_once"
                                                     : g == checkers::Guarantee::kAtLeastOnce ? "at_least_once" : "at_most_once");
    }
    y << YAML::EndMap;
    // The external systems' own behaviour is part of the scenario.
    if (!s.pipeline.http_honours_idempotency_key.empty()) {
      y << YAML::Key << "http_receivers" << YAML::Value << YAML::BeginMap;
      for (const auto& [sink, honours] : s.pipeline.http_honours_idempotency_key) {
        y << YAML::Key << sink << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "honours_idempotency_key"
          << YAML::Value << honours << YAML::EndMap;
      }
      y << YAML::EndMap;
    }
    if (!s.pipeline.kafka_epoch_per_transaction) {
      y << YAML::Key << "kafka_broker" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key
        << "epoch_per_transaction" << YAML::Value << false << YAML::EndMap;
    }
    if (!s.pipeline.clickhouse_targets.empty()) {
      y << YAML::Key << "clickhouse_targets" << YAML::Value << YAML::BeginMap;
      for (const auto& [sink, c] : s.pipeline.clickhouse_targets) {
        y << YAML::Key << sink << YAML::Value << YAML::Flow << YAML::BeginMap;
        y << YAML::Key << "database" << YAML::Value << c.database << YAML::Key << "engine" << YAML::Value << c.engine;
        y << YAML::Key << "dedup_window" << YAML::Value << format_time(c.window_us);
        y << YAML::Key << "dedup_window_blocks" << YAML::Value << c.window_blocks;
        y << YAML::Key << "same_table_on_all_hosts" << YAML::Value << c.same_table_on_all_hosts << YAML::EndMap;
      }
      y << YAML::EndMap;
    }
    if (s.pipeline.liveness_bound_us > 0) {
      y << YAML::Key << "liveness_bound" << YAML::Value << format_time(s.pipeline.liveness_bound_us);
    }
    write_operations(y, s.pipeline);
    if (!s.pipeline.knobs.empty()) {
      y << YAML::Key << "knobs" << YAML::Value << YAML::BeginMap;
      for (const auto& [name, value] : s.pipeline.knobs) {
        const std::string& knob = name;  // clang 14 cannot capture a structured binding
        const auto info = std::find_if(simulated::kKnobs.begin(), simulated::kKnobs.end(),
                                       [&](const simulated::KnobInfo& i) { return i.name == knob; });
        y << YAML::Key << name << YAML::Value;
        if (info != simulated::kKnobs.end() && info->duration) {
          y << format_time(value);
        } else {
          y << value;
        }
      }
      y << YAML::EndMap;
    } else if (s.knobs == "random") {
      y << YAML::Key << "knobs" << YAML::Value << "random";
    }
  } else {
    y << YAML::Key << "workload" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "clients" << YAML::Value
      << s.kernel.workload.clients << YAML::Key << "transfers_per_client" << YAML::Value
      << s.kernel.workload.transfers_per_client << YAML::EndMap;
  }
  y << YAML::Key << "faults" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "swarm" << YAML::Value << false;
  y << YAML::Key << "start" << YAML::Value << "0s";
  y << YAML::Key << "heal_at" << YAML::Value << format_time(s.scripted.heal_at_us);
  if (s.kind == "pipeline") {
    y << YAML::Key << "fault_points" << YAML::Value << s.pipeline.fault_points_when_scripted;
    y << YAML::Key << "fault_point_probability" << YAML::Value << s.pipeline.fault_point_probability;
    if (s.pipeline.buggify_sites) {
      y << YAML::Key << "buggify" << YAML::Value << YAML::Flow << YAML::BeginSeq;
      for (const std::string& site : *s.pipeline.buggify_sites) y << site;
      y << YAML::EndSeq;
    }
  }
  y << YAML::Key << "plan" << YAML::Value << YAML::BeginSeq;
  for (const auto& f : s.scripted.faults) {
    y << YAML::Flow << YAML::BeginMap << YAML::Key << "kind" << YAML::Value << std::string(faults::fault_kind_name(f.kind));
    if (!f.node.empty()) y << YAML::Key << "node" << YAML::Value << f.node;
    if (!f.peer.empty()) y << YAML::Key << "peer" << YAML::Value << f.peer;
    if (!f.point.empty()) y << YAML::Key << "point" << YAML::Value << f.point;
    y << YAML::Key << "at" << YAML::Value << format_time(f.at_us) << YAML::Key << "for" << YAML::Value
      << format_time(f.duration_us);
    if (f.intensity > 0) y << YAML::Key << "probability" << YAML::Value << f.intensity;
    if (f.amount_us != 0) {
      y << YAML::Key << "amount" << YAML::Value << format_time(f.amount_us);
    }
    y << YAML::EndMap;
  }
  y << YAML::EndSeq << YAML::EndMap << YAML::EndMap;
  return y.c_str();
}

}  // namespace onceflow::cli
