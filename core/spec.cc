#include "core/spec.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <sstream>

#include "core/env/random.h"
#include "core/input_checks.h"

namespace onceflow {

SinkDelivery promised_delivery(const SinkSpec& sink, bool target_deduplicates) {
  if (sink.at_most_once_strategy.enabled) return SinkDelivery::kAtMostOnce;
  switch (sink.type) {
    case SinkType::kHttp: return SinkDelivery::kAtLeastOnce;
    case SinkType::kArkflowKafka: return sink.exactly_once ? SinkDelivery::kExactlyOnce : SinkDelivery::kAtLeastOnce;
    case SinkType::kKafka:
    case SinkType::kClickHouse:
      if (sink.delivery_guarantee != SinkDelivery::kExactlyOnce) return sink.delivery_guarantee;
      if (sink.type == SinkType::kClickHouse && !target_deduplicates) return SinkDelivery::kAtLeastOnce;
      return SinkDelivery::kExactlyOnce;
    case SinkType::kAsyncQueue:
      return sink.delivery_guarantee == SinkDelivery::kAtLeastOnce ? SinkDelivery::kAtLeastOnce : SinkDelivery::kExactlyOnce;
    case SinkType::kSyncQueue:
    case SinkType::kStaticTable: return SinkDelivery::kExactlyOnce;
  }
  return SinkDelivery::kExactlyOnce;
}

SinkDelivery pipeline_delivery(const PipelineSpec& spec, const SinkSpec& sink, bool target_deduplicates) {
  const SinkDelivery promised = promised_delivery(sink, target_deduplicates);
  if (promised == SinkDelivery::kExactlyOnce && spec.repeats_late(sink.input_stream)) return SinkDelivery::kAtLeastOnce;
  return promised;
}

std::string_view processing_mode_name(ProcessingMode mode) {
  switch (mode) {
    case ProcessingMode::kExactlyOnce:
      return "exactly_once";
    case ProcessingMode::kAtLeastOnceConsistent:
      return "at_least_once_consistent";
  }
  return "unknown";
}

std::string_view computation_type_name(ComputationType type) {
  switch (type) {
    case ComputationType::kTransform:
      return "transform";
    case ComputationType::kSwiftMap:
      return "swift_map";
    case ComputationType::kProcessFunction:
      return "process_function";
  }
  return "unknown";
}

std::string_view watermark_name(Watermark watermark) {
  switch (watermark) {
    case Watermark::kEventTime:
      return "event_time";
    case Watermark::kSystemTime:
      return "system_time";
    case Watermark::kRealTime:
      return "real_time";
  }
  return "unknown";
}

std::string_view sink_type_name(SinkType type) {
  switch (type) {
    case SinkType::kSyncQueue:
      return "sync_queue";
    case SinkType::kAsyncQueue:
      return "async_queue";
    case SinkType::kKafka:
      return "kafka";
    case SinkType::kHttp:
      return "http";
    case SinkType::kStaticTable:
      return "static_table";
    case SinkType::kClickHouse:
      return "clickhouse";
    case SinkType::kArkflowKafka:
      return "arkflow_kafka";
  }
  return "unknown";
}

std::string_view delivery_name(SinkDelivery delivery) {
  switch (delivery) {
    case SinkDelivery::kExactlyOnce:
      return "exactly_once";
    case SinkDelivery::kAtLeastOnce:
      return "at_least_once";
    case SinkDelivery::kAtMostOnce:
      return "at_most_once";
  }
  return "unknown";
}

namespace {

template <typename T>
const T* find_named(const std::vector<T>& items, std::string_view name) {
  for (const auto& item : items) {
    if (item.name == name) return &item;
  }
  return nullptr;
}

}  // namespace

const TimerStreamSpec* ComputationSpec::timer_stream(std::string_view name) const {
  return find_named(timer_streams, name);
}

const ComputationSpec* PipelineSpec::computation(std::string_view name) const {
  return find_named(computations, name);
}
const SourceSpec* PipelineSpec::source(std::string_view name) const {
  return find_named(sources, name);
}
bool PipelineSpec::repeats_late(std::string_view stream) const {
  // Upstream from `stream` through the computations that produce it (a cycle is walked once).
  std::vector<std::string_view> todo{stream};
  std::set<std::string_view> seen{stream};
  while (!todo.empty()) {
    const std::string_view s = todo.back();
    todo.pop_back();
    for (const ComputationSpec& c : computations) {
      if (std::find(c.output_streams.begin(), c.output_streams.end(), s) == c.output_streams.end()) continue;
      if (c.processing_mode == ProcessingMode::kAtLeastOnceConsistent) return true;
      for (const std::string& in : c.input_streams) {
        if (seen.insert(in).second) todo.push_back(in);
      }
    }
  }
  return false;
}

const SinkSpec* PipelineSpec::sink(std::string_view name) const { return find_named(sinks, name); }

namespace {

// The keys leading to a value, e.g. {"computations", "StateKeeper", "partitions"}.
using Path = std::vector<std::string>;

// A broken rule or a bad value at `path`. Thrown inside this file only and turned into a
// Status at its boundaries. `line` is 1-based, 0 when the YAML node is not known.
struct Violation {
  Path path;
  std::string what;
  int line = 0;
};

std::string dotted(const Path& path) {
  std::string out;
  for (const auto& key : path) out += (out.empty() ? "" : ".") + key;
  return out;
}

Path at(Path path, std::string key) {
  path.push_back(std::move(key));
  return path;
}

// "WHERE:LINE: dotted.key: what", leaving out the parts that are unknown.
std::string message_of(const Violation& v, const std::string& where) {
  std::string out = where;
  if (v.line > 0) out = out.empty() ? std::to_string(v.line) : fmt::format("{}:{}", out, v.line);
  if (!out.empty()) out = fmt::format("{}: ", out);
  if (!v.path.empty()) out = fmt::format("{}{}: ", out, dotted(v.path));
  return bounded_message(fmt::format("{}{}", out, v.what));
}

// ---- Validation -------------------------------------------------------------------------

[[noreturn]] void violate(Path path, std::string what) {
  throw Violation{std::move(path), std::move(what)};
}

void check_range(int64_t value, int64_t min, int64_t max, const Path& path) {
  if (value < min || value > max) {
    violate(path, "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " +
                      std::to_string(value));
  }
}

void check_partitions(int partitions, const Path& owner) {
  check_range(partitions, 1, 4096, at(owner, "partitions"));
}

// Names of sources, computations, sinks, streams and timer streams become parts of table
// names ("timers/<computation>/<timer stream>") and of the "<table>:<key>" strings reports
// parse, so they must not hold '/' or ':' (or control characters).
void check_name(const std::string& name, const Path& path) {
  if (name.empty()) violate(path, "a name must not be empty");
  for (const char c : name) {
    if (c == '/' || c == ':' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      violate(path, fmt::format("'{}': a name must not contain '/', ':' or control characters", name.substr(0, 40)));
    }
  }
}

void check_top_level(const PipelineSpec& spec) {
  if (spec.name.empty()) violate({"name"}, "must not be empty");
  if (spec.epoch_period_us <= 0) violate({"epoch_period"}, "must be positive");
  if (spec.lease_ttl_us <= 0) violate({"lease_ttl"}, "must be positive");
  if (spec.scheduling_period_us <= 0) violate({"scheduling_period"}, "must be positive");
  check_range(spec.epoch_batch_limit, 1, 100'000, {"epoch_batch_limit"});
  if (spec.sources.empty()) violate({"sources"}, "needs at least one source");
}

void check_source(const SourceSpec& s) {
  const Path owner{"sources", s.name};
  if (s.type != "queue" && s.type != "kafka" && s.type != "static_table" && s.type != "service_log") {
    violate(at(owner, "type"),
            "unknown source type '" + s.type + "' (types: queue, kafka, static_table, service_log)");
  }
  if (!s.topic.empty() && s.type != "kafka") violate(at(owner, "topic"), "only kafka sources read a topic");
  if (!s.table.empty() && s.type == "kafka") violate(at(owner, "table"), "a kafka source reads a topic, not a table");
  if (s.max_cycles != 0 && s.type != "service_log") {
    violate(at(owner, "max_cycles"), "only service_log sources cycle");
  }
  check_range(s.max_cycles, 0, 1'000'000, at(owner, "max_cycles"));
  check_partitions(s.partitions, owner);
  if (s.output_stream.empty()) violate(at(owner, "output_stream"), "missing");
  check_name(s.name, owner);
  check_name(s.output_stream, at(owner, "output_stream"));
}

void check_computation(const ComputationSpec& c) {
  const Path owner{"computations", c.name};
  if (c.processing_function.empty()) violate(at(owner, "processing_function"), "missing");
  if (c.input_streams.empty()) violate(at(owner, "input_streams"), "needs at least one stream");
  check_partitions(c.partitions, owner);
  if (c.processing_mode == ProcessingMode::kAtLeastOnceConsistent &&
      c.type == ComputationType::kSwiftMap) {
    violate(
        at(owner, "processing_mode"),
        "at_least_once_consistent is allowed only on transform and process_function computations");
  }
  const Path parameters = at(owner, "parameters");
  if (c.allow_batching_with_relaxed_guarantees && c.type != ComputationType::kSwiftMap) {
    violate(at(parameters, "allow_batching_with_relaxed_guarantees"),
            "allowed only on swift_map computations");
  }
  check_range(c.batch_size, 1, 100'000, at(parameters, "batch_size"));
  if (!c.timer_streams.empty() && c.type != ComputationType::kProcessFunction) {
    violate(at(owner, "timer_streams"), "timer_streams need type process_function");
  }
  check_name(c.name, owner);
  for (const auto& s : c.input_streams) check_name(s, at(owner, "input_streams"));
  for (const auto& s : c.output_streams) check_name(s, at(owner, "output_streams"));
  for (const auto& t : c.timer_streams) check_name(t.name, at(at(owner, "timer_streams"), t.name));
}

void check_sink(const SinkSpec& s) {
  const Path owner{"sinks", s.name};
  if (s.input_stream.empty()) violate(at(owner, "input_stream"), "missing");
  check_name(s.name, owner);
  check_name(s.input_stream, at(owner, "input_stream"));
  check_partitions(s.partitions, owner);
  if (s.target_tablets != 0) {
    if (s.type != SinkType::kAsyncQueue) violate(at(owner, "target_tablets"), "only async_queue sinks write a sharded target");
    check_range(s.target_tablets, 1, 1024, at(owner, "target_tablets"));
    if (s.partitions != s.target_tablets) {
      violate(at(owner, "partitions"), "a sink with target_tablets has one partition per tablet (leave partitions out)");
    }
  }
  const Path strategy = at(owner, "at_most_once_strategy");
  if (s.at_most_once_strategy.enabled && s.type == SinkType::kHttp) {
    violate(at(strategy, "enabled"),
            "http sinks are at-least-once (POSTs are retried outside the epoch): at_most_once_strategy is not "
            "supported on them");
  } else if (s.at_most_once_strategy.enabled && s.type != SinkType::kAsyncQueue &&
             !(s.type == SinkType::kClickHouse && s.delivery_guarantee == SinkDelivery::kAtMostOnce)) {
    violate(at(strategy, "enabled"),
            "at_most_once_strategy is supported only by async queue sinks and clickhouse sinks with "
            "delivery_guarantee: at_most_once");
  }
  const bool kafka = s.type == SinkType::kKafka || s.type == SinkType::kArkflowKafka;
  if (!kafka && !s.topic.empty()) violate(at(owner, "topic"), "only kafka sinks write a topic");
  if (s.type == SinkType::kKafka && s.delivery_guarantee == SinkDelivery::kAtMostOnce) {
    violate(at(owner, "delivery_guarantee"), "kafka sinks are exactly_once or at_least_once");
  }
  if (s.type == SinkType::kAsyncQueue && s.delivery_guarantee == SinkDelivery::kAtMostOnce) {
    violate(at(owner, "delivery_guarantee"),
            "async queue sinks are exactly_once or at_least_once (at most once is at_most_once_strategy)");
  }
  if (s.type == SinkType::kAsyncQueue && s.delivery_guarantee == SinkDelivery::kAtLeastOnce &&
      s.at_most_once_strategy.enabled) {
    violate(at(strategy, "enabled"), "an at_least_once sink cannot have an at_most_once_strategy");
  }
  check_range(s.transaction_messages, 1, 1'000'000, at(owner, "transaction_messages"));
  check_range(s.delivery_batch_messages, 1, 100'000, at(owner, "delivery_batch_messages"));
  if (s.synchronous && (s.type != SinkType::kKafka || s.delivery_guarantee != SinkDelivery::kAtLeastOnce)) {
    violate(at(owner, "synchronous"), "only kafka sinks with delivery_guarantee: at_least_once write synchronously");
  }
  if (!s.table.empty() && s.type != SinkType::kStaticTable && s.type != SinkType::kClickHouse) {
    violate(at(owner, "table"), "only static_table and clickhouse sinks write a table");
  }
  if (s.type != SinkType::kClickHouse && !s.shard_hosts.empty()) {
    violate(at(owner, "shard_hosts"), "only clickhouse sinks are sharded over hosts");
  }
  if (!s.url.empty() && s.type != SinkType::kHttp && s.type != SinkType::kClickHouse) {
    violate(at(owner, "url"), "only http and clickhouse sinks write to a URL");
  }
  if (s.type == SinkType::kClickHouse) {
    check_range(s.max_batch_messages, 1, 1'000'000, at(owner, "max_batch_messages"));
    check_range(s.max_insert_attempts, 1, 1'000'000, at(owner, "max_insert_attempts"));
    if (s.replay_horizon_us <= 0) violate(at(owner, "replay_horizon"), "must be positive");
    if (!s.shard_hosts.empty() && s.delivery_guarantee != SinkDelivery::kExactlyOnce) {
      violate(at(owner, "shard_hosts"), "only the exactly-once (batching) clickhouse sink is sharded");
    }
    std::set<std::string> shards;
    for (const std::string& shard : s.shard_hosts) {
      if (shard.empty() || !shards.insert(shard).second) {
        violate(at(owner, "shard_hosts"), "shard names must be non-empty and distinct");
      }
    }
  }
  if (s.type == SinkType::kArkflowKafka) {
    if (s.exactly_once && s.transactional_id.empty()) {
      violate(at(owner, "transactional_id"),
              "exactly_once: true requires a non-empty transactional_id (stable across restarts, unique per "
              "producer)");
    }
    if (s.exactly_once && !s.durability_enabled) {
      violate(at(owner, "durability"),
              "exactly_once: true needs durability.enabled: true (the input WAL), or a crash between read and "
              "output loses the range");
    }
    if (s.durability_sync != "group_commit") {
      violate(at(at(owner, "durability"), "sync"), "unknown sync mode '" + s.durability_sync + "' (modes: group_commit)");
    }
  } else if (s.exactly_once || !s.transactional_id.empty()) {
    violate(at(owner, s.exactly_once ? "exactly_once" : "transactional_id"), "only arkflow_kafka sinks take it");
  }
  if (s.at_most_once_strategy.total_queue_bytes_limit < 1) {
    violate(at(strategy, "total_queue_bytes_limit"), "must be at least 1");
  }
  if (s.at_most_once_strategy.suspend_destruction_duration_us < 0) {
    violate(at(strategy, "suspend_destruction_duration"), "must not be negative");
  }
}

// Sources, computations and sinks share one namespace.
void check_names_unique(const PipelineSpec& spec) {
  std::map<std::string, Path> seen;
  const auto claim = [&](const char* kind, const std::string& name) {
    const Path owner{kind, name};
    const auto [it, inserted] = seen.emplace(name, owner);
    if (!inserted) violate(owner, "name '" + name + "' is already used by " + dotted(it->second));
  };
  for (const auto& s : spec.sources) claim("sources", s.name);
  for (const auto& c : spec.computations) claim("computations", c.name);
  for (const auto& s : spec.sinks) claim("sinks", s.name);
}

// Every stream has exactly one producer, and at most one consumer. Cycles among
// computations are allowed (Flow's Retryable Request pipeline has one).
void check_streams(const PipelineSpec& spec) {
  std::map<std::string, Path> producers;
  const auto produce = [&](const std::string& stream, const Path& owner, const char* key) {
    const auto [it, inserted] = producers.emplace(stream, owner);
    if (!inserted) {
      violate(at(owner, key),
              "stream '" + stream + "' is produced twice (also by " + dotted(it->second) + ")");
    }
  };
  for (const auto& s : spec.sources) produce(s.output_stream, {"sources", s.name}, "output_stream");
  for (const auto& c : spec.computations) {
    for (const auto& out : c.output_streams) {
      produce(out, {"computations", c.name}, "output_streams");
    }
  }
  std::map<std::string, Path> consumers;
  const auto consume = [&](const std::string& stream, const Path& owner, const char* key) {
    if (producers.count(stream) == 0) violate(at(owner, key), "unknown stream '" + stream + "'");
    const auto [it, inserted] = consumers.emplace(stream, owner);
    if (!inserted) {
      violate(at(owner, key),
              "stream '" + stream + "' is consumed twice (also by " + dotted(it->second) + ")");
    }
  };
  for (const auto& c : spec.computations) {
    for (const auto& in : c.input_streams) consume(in, {"computations", c.name}, "input_streams");
  }
  for (const auto& s : spec.sinks) consume(s.input_stream, {"sinks", s.name}, "input_stream");
}

void check_spec(const PipelineSpec& spec) {
  check_top_level(spec);
  for (const auto& s : spec.sources) check_source(s);
  for (const auto& c : spec.computations) check_computation(c);
  for (const auto& s : spec.sinks) check_sink(s);
  check_names_unique(spec);
  check_streams(spec);
}

// ---- Parsing ----------------------------------------------------------------------------

int line_of(const YAML::Node& node) { return node.IsDefined() ? node.Mark().line + 1 : 0; }

[[noreturn]] void fail(const YAML::Node& node, Path path, std::string what) {
  throw Violation{std::move(path), std::move(what), line_of(node)};
}

// The line of the deepest key along `path` that the document has, 0 if none (for rules
// checked on the parsed spec, whose nodes are gone by then).
int key_line(const YAML::Node& map, std::span<const std::string> path) {
  if (path.empty() || !map.IsMap()) return 0;
  for (const auto& entry : map) {
    if (entry.first.Scalar() != path.front()) continue;
    const int deeper = key_line(entry.second, path.subspan(1));
    return deeper > 0 ? deeper : line_of(entry.first);
  }
  return 0;
}

// Refuses keys other than `known`, so a typo does not pass silently.
void only_keys(const YAML::Node& map, const Path& path, const std::set<std::string>& known) {
  if (!map.IsMap()) fail(map, path, "expected a mapping");
  for (const auto& entry : map) {
    const std::string key = entry.first.Scalar();
    if (known.count(key) > 0) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    fail(entry.first, at(path, key), "unknown key (known: " + list + ")");
  }
}

std::string string_value(const YAML::Node& node, const Path& path) {
  if (!node.IsScalar()) fail(node, path, "expected a string");
  return node.Scalar();
}

int64_t integer_value(const YAML::Node& node, const Path& path, int64_t min, int64_t max) {
  if (!node.IsScalar()) fail(node, path, "expected an integer");
  const std::string& text = node.Scalar();
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    fail(node, path, "expected an integer, got '" + text + "'");
  }
  if (value < min || value > max) {
    fail(node, path,
         "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " + text);
  }
  return value;
}

int int_value(const YAML::Node& node, const Path& path) {
  return static_cast<int>(
      integer_value(node, path, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
}

bool bool_value(const YAML::Node& node, const Path& path) {
  bool value = false;
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value)) {
    fail(node, path, "expected true or false");
  }
  return value;
}

Micros duration_value(const YAML::Node& node, const Path& path) {
  const auto text = node.IsScalar() ? node.Scalar() : std::string();
  const auto us = parse_duration(text);
  if (!us) fail(node, path, "expected a duration such as 250ms, 2s or 500us, got '" + text + "'");
  return *us;
}

std::vector<std::string> string_list(const YAML::Node& node, const Path& path) {
  if (!node.IsSequence()) fail(node, path, "expected a list of stream names");
  std::vector<std::string> out;
  for (const auto& item : node) out.push_back(string_value(item, path));
  return out;
}

template <typename E, size_t N>
E enum_value(const YAML::Node& node, const Path& path, const std::array<E, N>& values,
             std::string_view (*name)(E)) {
  const std::string text = string_value(node, path);
  std::string allowed;
  for (const E value : values) {
    if (name(value) == text) return value;
    allowed += (allowed.empty() ? "" : ", ") + std::string(name(value));
  }
  fail(node, path, "unknown value '" + text + "' (allowed: " + allowed + ")");
}

// A mapping of names to items (sources, computations, sinks, timer streams); absent or
// null means none.
template <typename T, typename ParseOne>
std::vector<T> named_items(const YAML::Node& map, const Path& path, ParseOne parse_one) {
  std::vector<T> out;
  std::set<std::string> names;
  if (!map || map.IsNull()) return out;
  if (!map.IsMap()) fail(map, path, "expected a mapping of names to entries");
  for (const auto& entry : map) {
    const std::string name = string_value(entry.first, path);
    if (!names.insert(name).second) fail(entry.first, at(path, name), "defined twice");
    out.push_back(parse_one(entry.second, at(path, name)));
    out.back().name = name;
  }
  return out;
}

SourceSpec parse_source(const YAML::Node& node, const Path& path) {
  only_keys(node, path, {"type", "partitions", "output_stream", "topic", "table", "max_cycles"});
  SourceSpec s;
  if (const auto v = node["topic"]) s.topic = string_value(v, at(path, "topic"));
  if (const auto v = node["table"]) s.table = string_value(v, at(path, "table"));
  if (const auto v = node["max_cycles"]) s.max_cycles = int_value(v, at(path, "max_cycles"));
  if (const auto v = node["type"]) s.type = string_value(v, at(path, "type"));
  if (const auto v = node["partitions"]) s.partitions = int_value(v, at(path, "partitions"));
  if (const auto v = node["output_stream"]) {
    s.output_stream = string_value(v, at(path, "output_stream"));
  }
  return s;
}

TimerStreamSpec parse_timer_stream(const YAML::Node& node, const Path& path) {
  TimerStreamSpec t;
  if (node.IsNull()) return t;
  only_keys(node, path, {"watermark", "deduplicate_equal_timestamps"});
  static constexpr std::array kWatermarks{Watermark::kEventTime, Watermark::kSystemTime,
                                          Watermark::kRealTime};
  if (const auto v = node["watermark"]) {
    t.watermark = enum_value(v, at(path, "watermark"), kWatermarks, watermark_name);
  }
  if (const auto v = node["deduplicate_equal_timestamps"]) {
    t.deduplicate_equal_timestamps = bool_value(v, at(path, "deduplicate_equal_timestamps"));
  }
  return t;
}

void parse_parameters(const YAML::Node& node, const Path& path, ComputationSpec& c) {
  only_keys(node, path,
            {"allow_batching_with_relaxed_guarantees", "use_compact_input_messages",
             "experimental_enable_non_uint_key", "batch_size"});
  if (const auto v = node["allow_batching_with_relaxed_guarantees"]) {
    c.allow_batching_with_relaxed_guarantees =
        bool_value(v, at(path, "allow_batching_with_relaxed_guarantees"));
  }
  if (const auto v = node["use_compact_input_messages"]) {
    c.use_compact_input_messages = bool_value(v, at(path, "use_compact_input_messages"));
  }
  if (const auto v = node["experimental_enable_non_uint_key"]) {
    c.experimental_enable_non_uint_key =
        bool_value(v, at(path, "experimental_enable_non_uint_key"));
  }
  if (const auto v = node["batch_size"]) c.batch_size = int_value(v, at(path, "batch_size"));
}

ComputationSpec parse_computation(const YAML::Node& node, const Path& path) {
  only_keys(node, path,
            {"type", "processing_function", "input_streams", "output_streams", "partitions",
             "processing_mode", "parameters", "timer_streams"});
  static constexpr std::array kTypes{ComputationType::kTransform, ComputationType::kSwiftMap,
                                     ComputationType::kProcessFunction};
  static constexpr std::array kModes{ProcessingMode::kExactlyOnce,
                                     ProcessingMode::kAtLeastOnceConsistent};
  ComputationSpec c;
  if (const auto v = node["type"]) {
    c.type = enum_value(v, at(path, "type"), kTypes, computation_type_name);
  }
  if (const auto v = node["processing_function"]) {
    c.processing_function = string_value(v, at(path, "processing_function"));
  }
  if (const auto v = node["input_streams"]) {
    c.input_streams = string_list(v, at(path, "input_streams"));
  }
  if (const auto v = node["output_streams"]) {
    c.output_streams = string_list(v, at(path, "output_streams"));
  }
  if (const auto v = node["partitions"]) c.partitions = int_value(v, at(path, "partitions"));
  if (const auto v = node["processing_mode"]) {
    c.processing_mode = enum_value(v, at(path, "processing_mode"), kModes, processing_mode_name);
  }
  if (const auto v = node["parameters"]) parse_parameters(v, at(path, "parameters"), c);
  c.timer_streams = named_items<TimerStreamSpec>(node["timer_streams"], at(path, "timer_streams"),
                                                 parse_timer_stream);
  return c;
}

AtMostOnceStrategy parse_at_most_once(const YAML::Node& node, const Path& path) {
  only_keys(node, path, {"enabled", "total_queue_bytes_limit", "suspend_destruction_duration"});
  constexpr int64_t kMaxMillis = std::numeric_limits<Micros>::max() / kMillis;
  AtMostOnceStrategy a;
  if (const auto v = node["enabled"]) a.enabled = bool_value(v, at(path, "enabled"));
  if (const auto v = node["total_queue_bytes_limit"]) {
    a.total_queue_bytes_limit = static_cast<uint64_t>(integer_value(
        v, at(path, "total_queue_bytes_limit"), 0, std::numeric_limits<int64_t>::max()));
  }
  if (const auto v = node["suspend_destruction_duration"]) {  // milliseconds, as in Flow
    a.suspend_destruction_duration_us =
        integer_value(v, at(path, "suspend_destruction_duration"), 0, kMaxMillis) * kMillis;
  }
  return a;
}

SinkSpec parse_sink(const YAML::Node& node, const Path& path) {
  only_keys(node, path,
            {"type", "input_stream", "partitions", "at_most_once_strategy", "topic", "delivery_guarantee",
             "transaction_messages", "synchronous", "idempotency_key", "table", "shard_hosts", "max_batch_messages",
             "max_insert_attempts", "replay_horizon", "exactly_once", "transactional_id", "durability", "target_tablets",
             "delivery_batch_messages", "delivery_batch_bytes", "url"});
  static constexpr std::array kTypes{SinkType::kSyncQueue,   SinkType::kAsyncQueue, SinkType::kKafka,
                                     SinkType::kHttp,        SinkType::kStaticTable, SinkType::kClickHouse,
                                     SinkType::kArkflowKafka};
  static constexpr std::array kDeliveries{SinkDelivery::kExactlyOnce, SinkDelivery::kAtLeastOnce,
                                          SinkDelivery::kAtMostOnce};
  SinkSpec s;
  if (const auto v = node["type"]) s.type = enum_value(v, at(path, "type"), kTypes, sink_type_name);
  if (const auto v = node["topic"]) s.topic = string_value(v, at(path, "topic"));
  if (const auto v = node["table"]) s.table = string_value(v, at(path, "table"));
  if (const auto v = node["url"]) s.url = string_value(v, at(path, "url"));
  if (const auto v = node["shard_hosts"]) s.shard_hosts = string_list(v, at(path, "shard_hosts"));
  if (const auto v = node["max_batch_messages"]) s.max_batch_messages = int_value(v, at(path, "max_batch_messages"));
  if (const auto v = node["delivery_batch_messages"]) {
    s.delivery_batch_messages = int_value(v, at(path, "delivery_batch_messages"));
  }
  if (const auto v = node["delivery_batch_bytes"]) {
    s.delivery_batch_bytes = integer_value(v, at(path, "delivery_batch_bytes"), 1024, 64 << 20);
  }
  if (const auto v = node["max_insert_attempts"]) {
    s.max_insert_attempts = int_value(v, at(path, "max_insert_attempts"));
  }
  if (const auto v = node["replay_horizon"]) s.replay_horizon_us = duration_value(v, at(path, "replay_horizon"));
  if (const auto v = node["exactly_once"]) s.exactly_once = bool_value(v, at(path, "exactly_once"));
  if (const auto v = node["transactional_id"]) s.transactional_id = string_value(v, at(path, "transactional_id"));
  if (const auto v = node["durability"]) {
    const Path durability = at(path, "durability");
    only_keys(v, durability, {"enabled", "path", "sync"});
    if (const auto e = v["enabled"]) s.durability_enabled = bool_value(e, at(durability, "enabled"));
    if (const auto p = v["path"]) (void)string_value(p, at(durability, "path"));  // the WAL is the store's streams
    if (const auto y = v["sync"]) s.durability_sync = string_value(y, at(durability, "sync"));
  }
  if (const auto v = node["delivery_guarantee"]) {
    s.delivery_guarantee = enum_value(v, at(path, "delivery_guarantee"), kDeliveries, delivery_name);
    if (s.type == SinkType::kHttp && s.delivery_guarantee != SinkDelivery::kAtLeastOnce) {
      fail(v, at(path, "delivery_guarantee"),
           "http sinks are at_least_once (a receiver that keeps one request per Idempotency-Key holds each once)");
    }
  }
  if (const auto v = node["synchronous"]) s.synchronous = bool_value(v, at(path, "synchronous"));
  if (const auto v = node["idempotency_key"]) {
    if (s.type != SinkType::kHttp) fail(v, at(path, "idempotency_key"), "only http sinks send an Idempotency-Key");
    s.idempotency_key = bool_value(v, at(path, "idempotency_key"));
  }
  if (const auto v = node["transaction_messages"]) {
    s.transaction_messages = int_value(v, at(path, "transaction_messages"));
  }
  if (const auto v = node["input_stream"]) {
    s.input_stream = string_value(v, at(path, "input_stream"));
  }
  if (const auto v = node["target_tablets"]) {
    s.target_tablets = int_value(v, at(path, "target_tablets"));
    s.partitions = s.target_tablets;  // one writer per tablet, unless partitions says otherwise (refused)
  }
  if (const auto v = node["partitions"]) s.partitions = int_value(v, at(path, "partitions"));
  if (const auto v = node["at_most_once_strategy"]) {
    s.at_most_once_strategy = parse_at_most_once(v, at(path, "at_most_once_strategy"));
  }
  return s;
}

PipelineSpec parse_spec(const YAML::Node& root) {
  if (!root.IsMap()) fail(root, {}, "expected a mapping at the top level");
  only_keys(root, {},
            {"name", "epoch_period", "lease_ttl", "scheduling_period", "epoch_batch_limit",
             "max_in_flight", "sources", "computations", "sinks", "kafka"});
  PipelineSpec spec;
  if (const auto v = root["name"]) spec.name = string_value(v, {"name"});
  if (const auto v = root["kafka"]) {
    if (!v.IsMap()) fail(v, {"kafka"}, "expected a mapping of librdkafka settings (name: value)");
    for (const auto& item : v) {
      const std::string name = item.first.as<std::string>();
      // Values are never echoed: they may be secrets.
      if (!item.second.IsScalar()) fail(item.second, {"kafka", name}, "expected a scalar value");
      spec.kafka_settings.emplace_back(name, item.second.as<std::string>());
    }
  }
  if (const auto v = root["epoch_period"]) {
    spec.epoch_period_us = duration_value(v, {"epoch_period"});
  }
  if (const auto v = root["lease_ttl"]) spec.lease_ttl_us = duration_value(v, {"lease_ttl"});
  if (const auto v = root["scheduling_period"]) {
    spec.scheduling_period_us = duration_value(v, {"scheduling_period"});
  }
  if (const auto v = root["epoch_batch_limit"]) {
    spec.epoch_batch_limit = static_cast<int>(integer_value(v, {"epoch_batch_limit"}, 1, 100'000));
  }
  if (const auto v = root["max_in_flight"]) {
    spec.max_in_flight = integer_value(v, {"max_in_flight"}, 0, 1'000'000'000);
  }
  spec.sources = named_items<SourceSpec>(root["sources"], {"sources"}, parse_source);
  spec.computations =
      named_items<ComputationSpec>(root["computations"], {"computations"}, parse_computation);
  spec.sinks = named_items<SinkSpec>(root["sinks"], {"sinks"}, parse_sink);
  return spec;
}

}  // namespace

Result<PipelineSpec> parse_pipeline_spec(const YAML::Node& node, const std::string& where) {
  try {
    PipelineSpec spec = parse_spec(node);
    check_spec(spec);
    return spec;
  } catch (Violation& v) {
    if (v.line == 0) v.line = key_line(node, v.path);
    if (v.line == 0) v.line = line_of(node);
    return Status::invalid_argument(message_of(v, where));
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(message_of(Violation{{}, e.msg, e.mark.line + 1}, where));
  }
}

Result<PipelineSpec> parse_pipeline_spec_text(const std::string& yaml, const std::string& where) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(message_of(Violation{{}, "malformed YAML: " + e.msg, e.mark.line + 1}, where));
  }
  if (const auto problem = yaml_problem(root)) {
    return Status::invalid_argument(message_of(Violation{{}, problem->what, problem->line}, where));
  }
  // A scenario file where a spec was expected: say so, and which spec it names.
  if (root.IsMap() && root["kind"] && !root["sources"] && !root["computations"]) {
    const YAML::Node pipeline = root["pipeline"];
    std::string named;  // as a path from here (a scenario names its spec relative to itself), to paste
    if (pipeline && pipeline.IsScalar()) {
      const std::filesystem::path spec(pipeline.Scalar());
      named = spec.is_absolute() ? spec.string() : (std::filesystem::path(where).parent_path() / spec).lexically_normal().string();
      const bool pasteable = named.size() <= 200 && named.find_first_of("\n\r") == std::string::npos;
      named = ": its pipeline is " + (pasteable ? named : short_value(named));
    }
    return Status::invalid_argument(fmt::format(
        "{}: a scenario file, not a pipeline spec (no sources or computations; scenarios have a kind){}", where, named));
  }
  return parse_pipeline_spec(root, where);
}

Result<PipelineSpec> load_pipeline_spec(const std::string& path) {
  auto text = read_pipeline_spec_file(path);
  if (!text) return text.error();
  return parse_pipeline_spec_text(*text, path);
}

Result<std::string> read_pipeline_spec_file(const std::string& path) {
  if (Status readable = check_input_file(path); !readable.is_ok()) return readable;
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::invalid_argument(fmt::format("{}: cannot be read", path));
  return text.str();
}

Status validate_pipeline_spec(const PipelineSpec& spec) {
  try {
    check_spec(spec);
    return Status::ok();
  } catch (const Violation& v) {
    return Status::invalid_argument(message_of(v, ""));
  }
}

std::optional<Micros> parse_duration(std::string_view text_view) {
  const std::string text(text_view);
  size_t unit_at = 0;
  while (unit_at < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[unit_at])) || text[unit_at] == '.')) {
    ++unit_at;
  }
  if (unit_at == 0) return std::nullopt;
  const std::string number = text.substr(0, unit_at);
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size()) return std::nullopt;
  static constexpr std::array<std::pair<std::string_view, double>, 6> kUnits{
      {{"", 1}, {"us", 1}, {"ms", 1e3}, {"s", 1e6}, {"m", 60e6}, {"min", 60e6}}};
  const std::string unit = text.substr(unit_at);
  const auto* found =
      std::find_if(kUnits.begin(), kUnits.end(), [&](const auto& u) { return u.first == unit; });
  if (found == kUnits.end()) return std::nullopt;
  const double us = value * found->second;
  if (!(us >= 0 && us < 9e15)) return std::nullopt;
  return static_cast<Micros>(std::llround(us));
}

std::string format_duration(Micros us) {
  if (us != 0 && us % (60 * kSeconds) == 0) return fmt::format("{}m", us / (60 * kSeconds));
  if (us != 0 && us % kSeconds == 0) return fmt::format("{}s", us / kSeconds);
  if (us != 0 && us % kMillis == 0) return fmt::format("{}ms", us / kMillis);
  return fmt::format("{}us", us);
}

// Everything that decides which tables a pipeline has and how their rows are keyed: names,
// types, partitions, streams, dedup layouts, timer streams, sink kinds. Timing and batch
// sizes are left out: they change no row.
uint64_t source_identity(const SourceSpec& s) {
  return hash_bytes(fmt::format("{}\n{}\n{}", s.type, s.type == "kafka" ? kafka_topic(s) : std::string(), table_of(s)));
}

std::string source_origin(const SourceSpec& s) {
  return s.generation == 0 ? s.name : fmt::format("{}#{}", s.name, s.generation);
}

std::string table_shape(const PipelineSpec& spec) {
  std::string out;
  for (const auto& s : spec.sources) {
    out += fmt::format("source {} {} {} {} {} {}\n", s.name, s.type, s.partitions, s.output_stream, s.topic, s.table);
  }
  for (const auto& c : spec.computations) {
    // Partition counts of computations and queue sinks are not the shape: they change live
    // (core/layout.h) and the layout keeps the counts in force.
    out += fmt::format("computation {} {} {} {} {} {}", c.name, computation_type_name(c.type),
                       c.processing_function, processing_mode_name(c.processing_mode),
                       c.compact_input_messages(), c.allow_batching_with_relaxed_guarantees);
    for (const auto& in : c.input_streams) out += " in " + in;
    for (const auto& o : c.output_streams) out += " out " + o;
    for (const auto& t : c.timer_streams) {
      out += fmt::format(" timer {} {} {}", t.name, watermark_name(t.watermark), t.deduplicate_equal_timestamps);
    }
    out += '\n';
  }
  for (const auto& s : spec.sinks) {
    const bool queue = s.type == SinkType::kAsyncQueue || s.type == SinkType::kSyncQueue;
    out += fmt::format("sink {} {} {} {} {} {} {} {}\n", s.name, sink_type_name(s.type), s.input_stream,
                       queue ? -1 : s.partitions, s.at_most_once_strategy.enabled, s.topic,
                       delivery_name(s.delivery_guarantee), s.synchronous);
    // A sharded ClickHouse sink sends each row to shard key % shards, each shard a server that
    // deduplicates only what it was sent: with other shards, or the same in another order, a
    // batch sent again after a restart would reach servers that never had it. Each shard is
    // named as its batches' tokens name it, "scheme://host:port" (no credentials or path).
    for (const std::string& host : s.shard_hosts) {
      const size_t scheme = host.find("://");
      std::string_view origin(host);
      origin.remove_prefix(scheme == std::string::npos ? 0 : scheme + 3);
      origin = origin.substr(0, origin.find_first_of("/?"));
      if (const size_t at = origin.rfind('@'); at != std::string_view::npos) origin.remove_prefix(at + 1);
      out.insert(out.size() - 1, fmt::format(" shard {}{}", scheme == std::string::npos ? "" : host.substr(0, scheme + 3), origin));
    }
  }
  return out;
}

}  // namespace onceflow
