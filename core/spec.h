// PipelineSpec: what a pipeline is made of, with Flow's names.
//
// A pipeline has sources, computations, internal streams and sinks. A source is read by
// its own reader jobs (one per source partition), which give each message its MessageId and
// write it into the source's output stream. A computation reads one or more streams and
// writes zero or more; it runs as one job per partition, and a message goes to the partition
// whose hash range holds its key (key_partition() in core/engine.h). A sink reads one stream. Streams are named implicitly: a stream
// exists when some source or computation names it as an output.
//
// The spec is loaded from YAML (load_pipeline_spec) and validated; an invalid spec is
// refused with a one-line error naming the key and line at fault.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/env/clock.h"
#include "core/env/status.h"

namespace YAML {
class Node;
}

namespace onceflow {

enum class ProcessingMode : uint8_t { kExactlyOnce, kAtLeastOnceConsistent };
enum class ComputationType : uint8_t { kTransform, kSwiftMap, kProcessFunction };
enum class Watermark : uint8_t { kEventTime, kSystemTime, kRealTime };
enum class SinkType : uint8_t { kSyncQueue, kAsyncQueue, kKafka, kHttp, kStaticTable, kClickHouse, kArkflowKafka };
// What a Kafka or ClickHouse sink promises (its `delivery_guarantee`). Kafka: exactly once
// (transactions with a progress marker) or at least once (the idempotent producer, no
// transactions). ClickHouse: exactly once (batches with a dedup token), at least once
// (synchronous inserts) or at most once.
enum class SinkDelivery : uint8_t { kExactlyOnce, kAtLeastOnce, kAtMostOnce };

std::string_view processing_mode_name(ProcessingMode mode);
std::string_view computation_type_name(ComputationType type);
std::string_view watermark_name(Watermark watermark);
std::string_view sink_type_name(SinkType type);
std::string_view delivery_name(SinkDelivery delivery);

struct TimerStreamSpec {
  std::string name;
  Watermark watermark = Watermark::kEventTime;
  bool deduplicate_equal_timestamps = true;
};

struct ComputationSpec {
  std::string name;
  ComputationType type = ComputationType::kTransform;
  std::string processing_function;          // a name in the ComputationRegistry
  std::vector<std::string> input_streams;   // at least one
  std::vector<std::string> output_streams;  // may be empty
  int partitions = 1;
  ProcessingMode processing_mode = ProcessingMode::kExactlyOnce;
  // parameters:
  bool allow_batching_with_relaxed_guarantees = false;  // swift_map only
  bool experimental_enable_non_uint_key = false;
  std::optional<bool> use_compact_input_messages;  // unset: !experimental_enable_non_uint_key
  int batch_size = 8;  // messages per batch when batching is allowed
  std::vector<TimerStreamSpec> timer_streams;  // process_function only

  // The dedup table this computation uses: the seed's selection rule plus the override.
  bool compact_input_messages() const {
    return use_compact_input_messages.value_or(!experimental_enable_non_uint_key);
  }
  // Its timer stream of that name; null when it has none.
  const TimerStreamSpec* timer_stream(std::string_view name) const;
};

struct SourceSpec {
  std::string name;
  // "queue" (in the store), "kafka", "static_table" (a finite table, read by row ranges) or
  // "service_log" (a sorted table read over and over, one cycle after another).
  std::string type = "queue";
  int partitions = 1;
  std::string output_stream;
  std::string topic;  // kafka: the topic read (default: the source's name)
  std::string table;  // queue, static_table, service_log: the table read (default: the source's name)
  int max_cycles = 0;  // service_log: stop after this many cycles (0: never)
  // Not in the YAML: how many times the input behind this name was swapped for another
  // (core/layout.h); a swapped source reads its new input from the start under a new origin.
  uint32_t generation = 0;
};

struct AtMostOnceStrategy {
  bool enabled = false;
  uint64_t total_queue_bytes_limit = 100 * 1024 * 1024;
  Micros suspend_destruction_duration_us = 60 * kSeconds;
};

struct SinkSpec {
  std::string name;
  SinkType type = SinkType::kAsyncQueue;
  std::string input_stream;
  int partitions = 1;  // writer jobs; a message goes to the one whose hash range holds its key
  AtMostOnceStrategy at_most_once_strategy;  // async sinks only
  // async queue sinks: what one append request to the target carries at most (the outbox
  // goes in batches; a row larger than the byte budget goes alone).
  int delivery_batch_messages = 256;
  int64_t delivery_batch_bytes = 1 << 20;
  // async queue sinks: the target queue's tablets, sink partition i writing tablet i (0: the
  // target is not sharded). The controller keeps the sink's partitions equal to the target's
  // tablets: when the target is resharded, it recreates the sink's partitions under fresh
  // producer ids (core/controller.h). In force, the count last seen (core/layout.h).
  int target_tablets = 0;
  // From the layout, never the YAML: how many times the sink's partitions were recreated for
  // a resharded target. Producer ids carry it (producer_id() in core/engine.h).
  uint32_t producer_generation = 0;
  // kafka sinks:
  std::string topic;  // the topic written (default: the sink's name)
  SinkDelivery delivery_guarantee = SinkDelivery::kExactlyOnce;
  int transaction_messages = 1000;  // exactly-once: messages per Kafka transaction at most
  // at_least_once only: write each epoch's messages and wait for the acks before the epoch
  // commits (no outbox); a failed or unfinished epoch writes them again.
  bool synchronous = false;
  // http sinks: POST each message with an Idempotency-Key header carrying its MessageId.
  bool idempotency_key = true;
  // http and clickhouse sinks under `onceflow real`: where they write (the receiver's URL; the
  // ClickHouse server's HTTP interface, http://host:8123). The simulator ignores it.
  std::string url;
  // static_table and clickhouse sinks: the table written (default: the sink's name).
  std::string table;
  // clickhouse sinks (delivery_guarantee: exactly_once is the batching sink; with shard_hosts
  // the sharded one; at_least_once and at_most_once are the others):
  std::vector<std::string> shard_hosts;
  int max_batch_messages = 1000;   // exactly-once: messages per batch (one INSERT) at most
  int max_insert_attempts = 10;    // at-least-once: attempts for unclassified errors
  Micros replay_horizon_us = 1 * 3600 * kSeconds;  // how late a replay may come
  // arkflow_kafka sinks (ArkFlow's Kafka output):
  bool exactly_once = false;
  std::string transactional_id;
  bool durability_enabled = true;          // the input WAL
  std::string durability_sync = "group_commit";
};

// A source whose messages are stamped with the time its job reads them (Kafka and other
// external sources, service logs), not with their write time into a queue or table.
inline bool stamps_on_read(const SourceSpec& s) { return s.type != "queue" && s.type != "static_table"; }
// A source that ends: a static table, or a service log read a bounded number of cycles.
inline bool finite(const SourceSpec& s) {
  return s.type == "static_table" || (s.type == "service_log" && s.max_cycles > 0);
}
// What a sink promises its target (docs/guarantees.md, "Connectors"): at most once with
// at_most_once_strategy or delivery_guarantee at_most_once (Kafka, ClickHouse); at least once
// for http sinks, at_least_once Kafka, ClickHouse and async queue sinks, ArkFlow outputs
// without exactly_once, and ClickHouse sinks whose target does not deduplicate blocks
// (`target_deduplicates`); else exactly once. pipeline_delivery adds what the pipeline
// upstream of it allows.
SinkDelivery promised_delivery(const SinkSpec& sink, bool target_deduplicates = true);
// What identifies a source's input (its type and the topic or table it reads), as a hash: a
// source whose identity changes reads a different input.
uint64_t source_identity(const SourceSpec& s);
// The name a source's offsets and message ids are kept under: its name, then "name#2" after
// its second swap.
std::string source_origin(const SourceSpec& s);
inline const std::string& kafka_topic(const SourceSpec& s) { return s.topic.empty() ? s.name : s.topic; }
inline const std::string& kafka_topic(const SinkSpec& s) { return s.topic.empty() ? s.name : s.topic; }
inline const std::string& table_of(const SourceSpec& s) { return s.table.empty() ? s.name : s.table; }
inline const std::string& table_of(const SinkSpec& s) { return s.table.empty() ? s.name : s.table; }
// Whether a sink writes each epoch's messages before the epoch commits (no outbox): such a
// write that is followed by a failed commit is repeated.
inline bool writes_before_commit(const SinkSpec& s) {
  return (s.type == SinkType::kKafka && s.synchronous) || s.type == SinkType::kArkflowKafka ||
         ((s.type == SinkType::kClickHouse || s.type == SinkType::kAsyncQueue) &&
          s.delivery_guarantee == SinkDelivery::kAtLeastOnce);
}

struct PipelineSpec {
  std::string name;
  std::vector<SourceSpec> sources;
  std::vector<ComputationSpec> computations;
  std::vector<SinkSpec> sinks;
  // Engine timing (not Flow names; Flow keeps these in its cluster config).
  Micros epoch_period_us = 50 * kMillis;
  Micros lease_ttl_us = 2 * kSeconds;
  Micros scheduling_period_us = 200 * kMillis;
  int epoch_batch_limit = 64;  // messages read per input per epoch
  // Backpressure: a queue or static-table source, or a computation (not along a cycle),
  // partition takes no input while one partition of its stream's consumer has about this
  // many of its messages not yet taken (0: no bound), so what a stop "now" drains between
  // stages stays about this per pair of partitions (docs/scenarios.md).
  int64_t max_in_flight = 0;
  // Not in the YAML: the version of the layout (core/layout.h) this spec is in force under.
  uint64_t layout_version = 0;
  // `kafka:` librdkafka settings for every Kafka client of `onceflow real` (TLS, SASL, ...).
  std::vector<std::pair<std::string, std::string>> kafka_settings;

  const ComputationSpec* computation(std::string_view name) const;
  const SourceSpec* source(std::string_view name) const;
  const SinkSpec* sink(std::string_view name) const;
  // Whether the producer of `stream` may emit one message (one MessageId) again in a later
  // committed epoch, stamped anew: an at-least-once-consistent computation does, and so does any
  // computation downstream of one, which takes a late repeat again and emits its outputs again
  // under the same MessageIds. A consumer's input dedup forgets what lies below its watermark,
  // so it may take such a repeat again.
  bool repeats_late(std::string_view stream) const;
  // The number of partitions of a stream's consumer side, where it is read.
  // Every stream has exactly one consumer (a computation or a sink).
};
// What the pipeline delivers to a sink's target: what the sink promises (promised_delivery),
// but at least once where that is exactly once and the stream it takes repeats late
// (repeats_late: downstream of an at_least_once_consistent computation, the same message may
// be emitted again after the sink's input dedup forgot it). The simulator's default and real
// --verify hold a sink to this.
SinkDelivery pipeline_delivery(const PipelineSpec& spec, const SinkSpec& sink, bool target_deduplicates = true);

// Parses "250us", "20ms", "1.5s", "2m" or a bare number of microseconds; nullopt otherwise.
std::optional<Micros> parse_duration(std::string_view text);
// The inverse, with the largest unit that is exact: "2m", "30s", "250ms", "7us".
std::string format_duration(Micros us);

// Parses and validates a pipeline spec from a YAML mapping. `where` prefixes error messages
// (e.g. "scenarios/x.yaml"); keys are reported as dotted paths (computations.Name.partitions).
Result<PipelineSpec> parse_pipeline_spec(const YAML::Node& node, const std::string& where);
// Loads a YAML file whose top level is a pipeline spec.
Result<PipelineSpec> load_pipeline_spec(const std::string& path);
// The same for YAML text (`where` names it in errors), and the text of a spec file.
Result<PipelineSpec> parse_pipeline_spec_text(const std::string& yaml, const std::string& where);
Result<std::string> read_pipeline_spec_file(const std::string& path);
// Checks the cross-references and rules; used by the parser and by code that builds specs.
Status validate_pipeline_spec(const PipelineSpec& spec);
// A canonical text of the parts of `spec` that shape its tables (which exist, how their rows
// are keyed), for telling whether stored data was made by this pipeline. Not the partition
// counts of computations and queue sinks: a repartition changes those (core/layout.h).
std::string table_shape(const PipelineSpec& spec);

}  // namespace onceflow
