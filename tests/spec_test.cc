#include "core/spec.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>

namespace onceflow {
namespace {

// Flow's Retryable Request pipeline: StateKeeper -> request -> RequestProcessor -> response
// -> StateKeeper is a cycle, and a valid one.
constexpr const char* kRetryableRequest = R"(name: retryable-request
epoch_period: 20ms
lease_ttl: 1.5s
scheduling_period: 250us
epoch_batch_limit: 32
sources:
  events: {type: queue, partitions: 2, output_stream: event}
computations:
  StateKeeper:
    type: process_function
    processing_function: StateKeeper
    input_streams: [event, response]
    output_streams: [request, outcome]
    partitions: 4
    processing_mode: at_least_once_consistent
    parameters:
      use_compact_input_messages: false
      batch_size: 16
    timer_streams:
      retry: {watermark: system_time, deduplicate_equal_timestamps: false}
      expire: {}
  RequestProcessor:
    type: swift_map
    processing_function: RequestProcessor
    input_streams: [request]
    output_streams: [response]
    parameters: {allow_batching_with_relaxed_guarantees: true}
sinks:
  out:
    type: async_queue
    input_stream: outcome
    partitions: 3
    at_most_once_strategy:
      enabled: true
      total_queue_bytes_limit: 1048576
      suspend_destruction_duration: 1500
)";

// A small valid spec; the tests below edit one line of it. Lines:
//  1 name, 3 sources.events, 5 computations.Worker, 6 type, 7 processing_function,
//  8 input_streams, 9 output_streams, 11 sinks.out.
constexpr const char* kBase = R"(name: p
sources:
  events: {type: queue, partitions: 2, output_stream: event}
computations:
  Worker:
    type: transform
    processing_function: Work
    input_streams: [event]
    output_streams: [result]
sinks:
  out: {type: async_queue, input_stream: result}
)";

// `text` with `from` replaced by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "not in the spec: " << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

std::string edited(const std::string& from, const std::string& to) {
  return replaced(kBase, from, to);
}

// `base` (kBase by default) with `line` added to the Worker computation, as line 10.
std::string with_worker_line(const std::string& line, const std::string& base = kBase) {
  return replaced(base, "    output_streams: [result]\n",
                  "    output_streams: [result]\n    " + line + "\n");
}

std::string with_worker_type(const std::string& type) {
  return edited("type: transform", "type: " + type);
}

Result<PipelineSpec> parse(const std::string& yaml) {
  return parse_pipeline_spec(YAML::Load(yaml), "spec.yaml");
}

std::string error_of(const std::string& yaml) {
  const auto spec = parse(yaml);
  EXPECT_FALSE(spec.has_value()) << "parsed:\n" << yaml;
  if (spec.has_value()) return "";
  EXPECT_TRUE(spec.error().is_invalid_argument());
  return spec.error().message();
}

// Passes when `yaml` is refused with a message containing `expected` (which names the file,
// line and dotted key).
void expect_error(const std::string& yaml, const std::string& expected) {
  const std::string message = error_of(yaml);
  EXPECT_NE(message.find(expected), std::string::npos)
      << "message: " << message << "\nexpected: " << expected;
}

void expect_valid(const std::string& yaml) {
  const auto spec = parse(yaml);
  EXPECT_TRUE(spec.has_value()) << spec.error().message() << "\n" << yaml;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(SpecTest, ParsesFullSpec) {
  const auto spec = parse(kRetryableRequest);
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_EQ(spec->name, "retryable-request");
  EXPECT_EQ(spec->epoch_period_us, 20 * kMillis);
  EXPECT_EQ(spec->lease_ttl_us, 1'500 * kMillis);
  EXPECT_EQ(spec->scheduling_period_us, 250);
  EXPECT_EQ(spec->epoch_batch_limit, 32);

  const SourceSpec* events = spec->source("events");
  ASSERT_NE(events, nullptr);
  EXPECT_EQ(events->type, "queue");
  EXPECT_EQ(events->partitions, 2);
  EXPECT_EQ(events->output_stream, "event");

  const ComputationSpec* keeper = spec->computation("StateKeeper");
  ASSERT_NE(keeper, nullptr);
  EXPECT_EQ(keeper->type, ComputationType::kProcessFunction);
  EXPECT_EQ(keeper->processing_function, "StateKeeper");
  EXPECT_EQ(keeper->input_streams, (std::vector<std::string>{"event", "response"}));
  EXPECT_EQ(keeper->output_streams, (std::vector<std::string>{"request", "outcome"}));
  EXPECT_EQ(keeper->partitions, 4);
  EXPECT_EQ(keeper->processing_mode, ProcessingMode::kAtLeastOnceConsistent);
  EXPECT_EQ(keeper->batch_size, 16);
  EXPECT_FALSE(keeper->compact_input_messages());
  ASSERT_EQ(keeper->timer_streams.size(), 2u);
  EXPECT_EQ(keeper->timer_streams[0].name, "retry");
  EXPECT_EQ(keeper->timer_streams[0].watermark, Watermark::kSystemTime);
  EXPECT_FALSE(keeper->timer_streams[0].deduplicate_equal_timestamps);
  EXPECT_EQ(keeper->timer_streams[1].name, "expire");
  EXPECT_EQ(keeper->timer_streams[1].watermark, Watermark::kEventTime);
  EXPECT_TRUE(keeper->timer_streams[1].deduplicate_equal_timestamps);

  const ComputationSpec* processor = spec->computation("RequestProcessor");
  ASSERT_NE(processor, nullptr);
  EXPECT_EQ(processor->type, ComputationType::kSwiftMap);
  EXPECT_EQ(processor->processing_mode, ProcessingMode::kExactlyOnce);
  EXPECT_TRUE(processor->allow_batching_with_relaxed_guarantees);
  EXPECT_EQ(processor->partitions, 1);

  const SinkSpec* out = spec->sink("out");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->type, SinkType::kAsyncQueue);
  EXPECT_EQ(out->input_stream, "outcome");
  EXPECT_EQ(out->partitions, 3);
  EXPECT_TRUE(out->at_most_once_strategy.enabled);
  EXPECT_EQ(out->at_most_once_strategy.total_queue_bytes_limit, 1'048'576u);
  EXPECT_EQ(out->at_most_once_strategy.suspend_destruction_duration_us, 1'500 * kMillis);

  EXPECT_EQ(spec->computation("Nobody"), nullptr);
  EXPECT_EQ(spec->source("out"), nullptr);
  EXPECT_EQ(spec->sink("events"), nullptr);
}

TEST(SpecTest, NamesEnumValuesAsFlowDoes) {
  EXPECT_EQ(processing_mode_name(ProcessingMode::kAtLeastOnceConsistent),
            "at_least_once_consistent");
  EXPECT_EQ(computation_type_name(ComputationType::kSwiftMap), "swift_map");
  EXPECT_EQ(watermark_name(Watermark::kRealTime), "real_time");
  EXPECT_EQ(sink_type_name(SinkType::kSyncQueue), "sync_queue");
}

TEST(SpecTest, LateRepeatsFlowDownstreamOfAnAtLeastOnceConsistentComputation) {
  // An exactly-once stage takes an at-least-once-consistent stage's late repeat again and
  // emits its outputs again under the same ids: its own stream repeats late too.
  PipelineSpec spec;
  const auto stage = [](std::string name, std::string in, std::string out, ProcessingMode mode) {
    ComputationSpec c;
    c.name = std::move(name);
    c.input_streams = {std::move(in)};
    c.output_streams = {std::move(out)};
    c.processing_mode = mode;
    return c;
  };
  spec.computations = {stage("A", "s0", "s1", ProcessingMode::kExactlyOnce),
                       stage("B", "s1", "s2", ProcessingMode::kAtLeastOnceConsistent),
                       stage("C", "s2", "s3", ProcessingMode::kExactlyOnce),
                       stage("D", "s3", "s3b", ProcessingMode::kExactlyOnce)};
  EXPECT_FALSE(spec.repeats_late("s1"));
  EXPECT_TRUE(spec.repeats_late("s2"));
  EXPECT_TRUE(spec.repeats_late("s3"));
  EXPECT_TRUE(spec.repeats_late("s3b"));
  // So a sink downstream of B delivers at least once, whatever it promises; one upstream of it,
  // what it promises.
  SinkSpec sink;
  sink.type = SinkType::kAsyncQueue;
  sink.input_stream = "s3b";
  EXPECT_EQ(promised_delivery(sink), SinkDelivery::kExactlyOnce);
  EXPECT_EQ(pipeline_delivery(spec, sink), SinkDelivery::kAtLeastOnce);
  sink.input_stream = "s1";
  EXPECT_EQ(pipeline_delivery(spec, sink), SinkDelivery::kExactlyOnce);
  sink.at_most_once_strategy.enabled = true;
  sink.input_stream = "s3";
  EXPECT_EQ(pipeline_delivery(spec, sink), SinkDelivery::kAtMostOnce);
  // A cycle with no such stage ends the walk.
  spec.computations = {stage("E", "x", "y", ProcessingMode::kExactlyOnce), stage("F", "y", "x", ProcessingMode::kExactlyOnce)};
  EXPECT_FALSE(spec.repeats_late("x"));
}

TEST(SpecTest, AppliesDefaults) {
  const auto spec = parse(kBase);
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_EQ(spec->epoch_period_us, 50 * kMillis);
  EXPECT_EQ(spec->lease_ttl_us, 2 * kSeconds);
  EXPECT_EQ(spec->scheduling_period_us, 200 * kMillis);
  EXPECT_EQ(spec->epoch_batch_limit, 64);
  EXPECT_EQ(spec->max_in_flight, 0);  // no backpressure
  const ComputationSpec& worker = spec->computations.at(0);
  EXPECT_EQ(worker.name, "Worker");
  EXPECT_EQ(worker.partitions, 1);
  EXPECT_EQ(worker.processing_mode, ProcessingMode::kExactlyOnce);
  EXPECT_FALSE(worker.allow_batching_with_relaxed_guarantees);
  EXPECT_EQ(worker.batch_size, 8);
  EXPECT_TRUE(worker.timer_streams.empty());
  const SinkSpec& out = spec->sinks.at(0);
  EXPECT_FALSE(out.at_most_once_strategy.enabled);
  EXPECT_EQ(out.at_most_once_strategy.total_queue_bytes_limit, 100u * 1024 * 1024);
  EXPECT_EQ(out.at_most_once_strategy.suspend_destruction_duration_us, 60 * kSeconds);
}

TEST(SpecTest, DurationsTakeUnitsOrMicroseconds) {
  const auto spec =
      parse(std::string("epoch_period: 1.5s\nlease_ttl: 3000\nscheduling_period: 2min\n") + kBase);
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_EQ(spec->epoch_period_us, 1'500'000);
  EXPECT_EQ(spec->lease_ttl_us, 3'000);
  EXPECT_EQ(spec->scheduling_period_us, 120 * kSeconds);
}

TEST(SpecTest, CompactInputMessagesFollowsTheSeedRuleUnlessSet) {
  const auto compact = [](const std::string& parameters) {
    const auto spec = parse(with_worker_line("parameters: " + parameters));
    EXPECT_TRUE(spec.has_value()) << spec.error().message();
    return spec.has_value() && spec->computations.at(0).compact_input_messages();
  };
  EXPECT_TRUE(compact("{experimental_enable_non_uint_key: false}"));
  EXPECT_FALSE(compact("{use_compact_input_messages: false}"));
  EXPECT_FALSE(compact("{experimental_enable_non_uint_key: true}"));
  EXPECT_TRUE(
      compact("{experimental_enable_non_uint_key: true, use_compact_input_messages: true}"));
}

TEST(SpecTest, AcceptsTheRetryableRequestCycle) {
  const auto spec = parse(kRetryableRequest);
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_TRUE(validate_pipeline_spec(*spec).is_ok());
}

TEST(SpecTest, ValidatesBuiltSpecsWithoutFileOrLine) {
  auto spec = parse(kBase);
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_TRUE(validate_pipeline_spec(*spec).is_ok());
  spec->computations.at(0).partitions = 0;
  const Status status = validate_pipeline_spec(*spec);
  EXPECT_TRUE(status.is_invalid_argument());
  EXPECT_EQ(status.message(), "computations.Worker.partitions: must be in [1, 4096], got 0");
}

TEST(SpecTest, LoadsAFile) {
  const auto spec = load_pipeline_spec(write_temp("spec_test_ok.yaml", kRetryableRequest));
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_EQ(spec->computations.size(), 2u);
}

TEST(SpecTest, LoadReportsFileAndLineOfErrors) {
  const std::string path = write_temp("spec_test_bad.yaml", with_worker_line("partitions: lots"));
  const auto spec = load_pipeline_spec(path);
  ASSERT_FALSE(spec.has_value());
  EXPECT_EQ(spec.error().message(),
            path + ":10: computations.Worker.partitions: expected an integer, got 'lots'");
}

TEST(SpecTest, LoadReportsMissingFile) {
  const auto spec = load_pipeline_spec("/nonexistent/spec.yaml");
  ASSERT_FALSE(spec.has_value());
  EXPECT_EQ(spec.error().message(), "/nonexistent/spec.yaml: no such file");
}

// An alias inside the node it names, an alias bomb and deep nesting: one line naming the
// file and line, quickly (the duplicate-key walk once recursed forever on the first and
// never ended on the second).
TEST(SpecTest, LoadRefusesAliasCyclesAndBombsAndDeepNesting) {
  const auto error = [](const std::string& name, const std::string& text) {
    const auto spec = load_pipeline_spec(write_temp(name, text));
    return spec.has_value() ? std::string("accepted") : spec.error().message();
  };
  EXPECT_NE(error("spec_test_cycle.yaml", "name: p\nsources: &s {events: {more: *s}}\n")
                .find(":2: an alias refers to a node that contains it"),
            std::string::npos);
  std::string bomb = "name: p\nx0: &x0 [a, a, a, a, a, a, a, a, a, a]\n";
  for (int i = 1; i <= 10; ++i) {
    bomb += fmt::format("x{}: &x{} [", i, i);
    for (int j = 0; j < 10; ++j) bomb += fmt::format("{}*x{}", j == 0 ? "" : ", ", i - 1);
    bomb += "]\n";
  }
  EXPECT_NE(error("spec_test_bomb.yaml", bomb).find("unknown key"), std::string::npos);  // walked once, then read
  EXPECT_NE(error("spec_test_deep.yaml", "name: p\nsources: " + std::string(100, '[') + std::string(100, ']') + "\n")
                .find(":2: nested deeper than 64 levels"),
            std::string::npos);
}

TEST(SpecTest, LoadRefusesAKeyTwiceAndAPathTheSystemRefuses) {
  const std::string path = write_temp("spec_test_dup.yaml",
                                      "name: p\nsources:\n  events: {type: queue, output_stream: e}\n"
                                      "sinks:\n  out: {input_stream: e, partitions: 1, partitions: 2}\n");
  const auto spec = load_pipeline_spec(path);
  ASSERT_FALSE(spec.has_value());
  EXPECT_NE(spec.error().message().find(":5: key 'partitions' appears twice"), std::string::npos)
      << spec.error().message();
  const auto too_long = load_pipeline_spec("/tmp/" + std::string(300, 'x') + ".yaml");  // no exception
  ASSERT_FALSE(too_long.has_value());
  EXPECT_NE(too_long.error().message().find("File name too long"), std::string::npos) << too_long.error().message();
  EXPECT_LT(too_long.error().message().size(), 120u);
}

TEST(SpecTest, LoadReportsMalformedYaml) {
  const std::string path =
      write_temp("spec_test_malformed.yaml", "name: p\nsources:\n  events: {type: queue\n");
  const auto spec = load_pipeline_spec(path);
  ASSERT_FALSE(spec.has_value());
  EXPECT_EQ(spec.error().message().rfind(path + ":", 0), 0u) << spec.error().message();
  EXPECT_NE(spec.error().message().find(": malformed YAML: "), std::string::npos)
      << spec.error().message();
}

// ---- Validation rules --------------------------------------------------------------------

TEST(SpecTest, NameMustNotBeEmpty) {
  expect_error(edited("name: p", "name: ''"), "spec.yaml:1: name: must not be empty");
  expect_error(edited("name: p\n", ""), "spec.yaml:1: name: must not be empty");
}

TEST(SpecTest, NeedsAtLeastOneSource) {
  expect_error(edited("  events: {type: queue, partitions: 2, output_stream: event}\n", ""),
               "spec.yaml:2: sources: needs at least one source");
}

TEST(SpecTest, PartitionsMustBeInRange) {
  expect_error(with_worker_line("partitions: 0"),
               "spec.yaml:10: computations.Worker.partitions: must be in [1, 4096], got 0");
  expect_error(with_worker_line("partitions: 4097"),
               "spec.yaml:10: computations.Worker.partitions: must be in");
  expect_error(edited("partitions: 2", "partitions: 5000"),
               "spec.yaml:3: sources.events.partitions: must be in");
  expect_error(edited("input_stream: result}", "input_stream: result, partitions: 0}"),
               "spec.yaml:11: sinks.out.partitions: must be in");
  expect_valid(with_worker_line("partitions: 4096"));
}

TEST(SpecTest, MaxInFlightIsACountOfMessages) {
  const auto spec = parse(edited("name: p\n", "name: p\nmax_in_flight: 20000\n"));
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_EQ(spec->max_in_flight, 20000);
  expect_error(edited("name: p\n", "name: p\nmax_in_flight: -1\n"), "spec.yaml:2: max_in_flight: must be in [0, 1000000000], got -1");
  expect_error(edited("name: p\n", "name: p\nmax_in_flight: lots\n"), "spec.yaml:2: max_in_flight:");
}

TEST(SpecTest, ComputationNeedsProcessingFunction) {
  expect_error(edited("    processing_function: Work\n", ""),
               "spec.yaml:5: computations.Worker.processing_function: missing");
}

TEST(SpecTest, ComputationNeedsAnInputStream) {
  expect_error(edited("input_streams: [event]", "input_streams: []"),
               "spec.yaml:8: computations.Worker.input_streams: needs at least one stream");
}

TEST(SpecTest, InputStreamsMustBeProduced) {
  expect_error(edited("input_streams: [event]", "input_streams: [event, missing]"),
               "spec.yaml:8: computations.Worker.input_streams: unknown stream 'missing'");
  expect_error(edited("input_stream: result}", "input_stream: nowhere}"),
               "spec.yaml:11: sinks.out.input_stream: unknown stream 'nowhere'");
}

TEST(SpecTest, StreamIsProducedOnce) {
  expect_error(edited("output_streams: [result]", "output_streams: [result, event]"),
               "spec.yaml:9: computations.Worker.output_streams: stream 'event' is produced twice "
               "(also by sources.events)");
}

TEST(SpecTest, StreamIsConsumedOnce) {
  expect_error(std::string(kBase) + "  audit: {type: sync_queue, input_stream: result}\n",
               "spec.yaml:12: sinks.audit.input_stream: stream 'result' is consumed twice (also by "
               "sinks.out)");
  expect_valid(edited("output_streams: [result]", "output_streams: [result, unread]"));
}

TEST(SpecTest, TimerStreamsNeedProcessFunction) {
  const std::string timers = "timer_streams: {retry: {watermark: system_time}}";
  expect_error(
      with_worker_line(timers),
      "spec.yaml:10: computations.Worker.timer_streams: timer_streams need type process_function");
  expect_valid(with_worker_line(timers, with_worker_type("process_function")));
}

TEST(SpecTest, SwiftMapHasNoTimerStreams) {
  expect_error(
      with_worker_line("timer_streams: {retry: {}}", with_worker_type("swift_map")),
      "spec.yaml:10: computations.Worker.timer_streams: timer_streams need type process_function");
}

TEST(SpecTest, BatchingWithRelaxedGuaranteesOnlyOnSwiftMap) {
  const std::string line = "parameters: {allow_batching_with_relaxed_guarantees: true}";
  expect_error(with_worker_line(line),
               "spec.yaml:10: computations.Worker.parameters."
               "allow_batching_with_relaxed_guarantees: allowed only on swift_map");
  expect_error(with_worker_line(line, with_worker_type("process_function")),
               "computations.Worker.parameters.allow_batching_with_relaxed_guarantees");
  expect_valid(with_worker_line(line, with_worker_type("swift_map")));
}

TEST(SpecTest, AtLeastOnceConsistentNotOnSwiftMap) {
  const std::string line = "processing_mode: at_least_once_consistent";
  expect_error(with_worker_line(line, with_worker_type("swift_map")),
               "spec.yaml:10: computations.Worker.processing_mode: at_least_once_consistent is "
               "allowed only on");
  expect_valid(with_worker_line(line));
  expect_valid(with_worker_line(line, with_worker_type("process_function")));
}

TEST(SpecTest, BatchSizeMustBePositive) {
  expect_error(
      with_worker_line("parameters: {batch_size: 0}"),
      "spec.yaml:10: computations.Worker.parameters.batch_size: must be in [1, 100000], got 0");
}

TEST(SpecTest, SinkNeedsInputStream) {
  expect_error(edited("out: {type: async_queue, input_stream: result}", "out: {type: async_queue}"),
               "spec.yaml:11: sinks.out.input_stream: missing");
}

TEST(SpecTest, AtMostOnceOnlyOnAsyncSinks) {
  const std::string strategy = "at_most_once_strategy: {enabled: true}}";
  expect_error(edited("type: async_queue, input_stream: result}",
                      "type: sync_queue, input_stream: result, " + strategy),
               "spec.yaml:11: sinks.out.at_most_once_strategy.enabled: at_most_once_strategy is "
               "supported only by async queue sinks and clickhouse sinks with delivery_guarantee: at_most_once");
  expect_valid(edited("input_stream: result}", "input_stream: result, " + strategy));
  expect_valid(
      edited("type: async_queue, input_stream: result}",
             "type: sync_queue, input_stream: result, at_most_once_strategy: {enabled: false}}"));
}

TEST(SpecTest, AsyncQueueSinksAreExactlyOnceOrAtLeastOnce) {
  expect_error(edited("input_stream: result}", "input_stream: result, delivery_guarantee: at_most_once}"),
               "spec.yaml:11: sinks.out.delivery_guarantee: async queue sinks are exactly_once or at_least_once (at "
               "most once is at_most_once_strategy)");
  expect_error(edited("input_stream: result}",
                      "input_stream: result, delivery_guarantee: at_least_once, at_most_once_strategy: {enabled: true}}"),
               "sinks.out.at_most_once_strategy.enabled: an at_least_once sink cannot have an at_most_once_strategy");
  const auto ok = parse_pipeline_spec(
      YAML::Load(edited("input_stream: result}", "input_stream: result, delivery_guarantee: at_least_once}")), "spec.yaml");
  ASSERT_TRUE(ok.has_value()) << ok.error().message();
  EXPECT_TRUE(writes_before_commit(ok->sinks[0]));  // appended before the epoch commits, no outbox
}

TEST(SpecTest, TotalQueueBytesLimitAtLeastOne) {
  expect_error(
      edited("input_stream: result}",
             "input_stream: result, at_most_once_strategy: {total_queue_bytes_limit: 0}}"),
      "spec.yaml:11: sinks.out.at_most_once_strategy.total_queue_bytes_limit: must be at least 1");
}

TEST(SpecTest, SourceTypeMustBeKnown) {
  expect_error(edited("type: queue", "type: kinesis"),
               "spec.yaml:3: sources.events.type: unknown source type 'kinesis' (types: queue, kafka, static_table, service_log)");
}

TEST(SpecTest, HttpSinksRefuseTheAtMostOnceStrategy) {
  expect_error(edited("type: async_queue, input_stream: result}",
                      "type: http, input_stream: result, at_most_once_strategy: {enabled: true}}"),
               "sinks.out.at_most_once_strategy.enabled: http sinks are at-least-once");
  expect_error(edited("input_stream: result}", "input_stream: result, idempotency_key: false}"),
               "sinks.out.idempotency_key: only http sinks send an Idempotency-Key");
  expect_error(edited("type: async_queue, input_stream: result}", "type: http, input_stream: result, delivery_guarantee: exactly_once}"),
               "sinks.out.delivery_guarantee: http sinks are at_least_once");
  expect_error(edited("type: async_queue, input_stream: result}", "type: http, input_stream: result, shard_hosts: [a]}"),
               "sinks.out.shard_hosts: only clickhouse sinks are sharded over hosts");
  expect_error(edited("input_stream: result}", "input_stream: result, url: \"http://h:1/x\"}"),
               "sinks.out.url: only http and clickhouse sinks write to a URL");
  const auto ok = parse_pipeline_spec(
      YAML::Load(edited("type: async_queue, input_stream: result}", "type: http, input_stream: result, url: \"http://h:1/x\"}")),
      "spec.yaml");
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_EQ(ok->sinks[0].url, "http://h:1/x");
}

TEST(SpecTest, OnlyAtLeastOnceKafkaSinksWriteSynchronously) {
  expect_error(edited("input_stream: result}", "input_stream: result, synchronous: true}"),
               "sinks.out.synchronous: only kafka sinks with delivery_guarantee: at_least_once write synchronously");
  const auto ok = parse_pipeline_spec(
      YAML::Load(edited("type: async_queue, input_stream: result}",
                        "type: kafka, input_stream: result, delivery_guarantee: at_least_once, synchronous: true}")),
      "spec.yaml");
  ASSERT_TRUE(ok.has_value()) << ok.error().message();
  EXPECT_TRUE(ok->sinks[0].synchronous);
}

TEST(SpecTest, OnlyKafkaSourcesAndSinksNameATopic) {
  expect_error(edited("type: queue,", "type: queue, topic: t,"),
               "spec.yaml:3: sources.events.topic: only kafka sources read a topic");
  const auto kafka = parse_pipeline_spec(YAML::Load(edited("type: queue,", "type: kafka, topic: t,")), "spec.yaml");
  ASSERT_TRUE(kafka.has_value()) << kafka.error().message();
  EXPECT_EQ(kafka_topic(kafka->sources[0]), "t");
}

TEST(SpecTest, SourceNeedsOutputStream) {
  expect_error(edited(", output_stream: event}", "}"),
               "spec.yaml:3: sources.events.output_stream: missing");
}

TEST(SpecTest, NamesAreUniqueAcrossSourcesComputationsAndSinks) {
  expect_error(edited("  out: {", "  Worker: {"),
               "spec.yaml:11: sinks.Worker: name 'Worker' is already used by computations.Worker");
  expect_error(std::string(kBase) + "  out: {type: sync_queue, input_stream: result}\n",
               "spec.yaml:12: sinks.out: defined twice");
  expect_error(edited("  Worker:", "  events:"),
               "spec.yaml:5: computations.events: name 'events' is already used by sources.events");
}

// Names become parts of table names ("timers/<computation>/<timer stream>") and of the
// "<table>:<key>" strings reports read: '/' or ':' in one would make two names one table.
TEST(SpecTest, NamesHoldNeitherSlashesNorColons) {
  expect_error(edited("  Worker:", "  Work/er:"),
               "spec.yaml:5: computations.Work/er: 'Work/er': a name must not contain '/', ':' or control characters");
  expect_error(edited("output_stream: event}", "output_stream: 'ev:ent'}"),
               "spec.yaml:3: sources.events.output_stream: 'ev:ent': a name must not contain");
  expect_error(with_worker_line("timer_streams: {'a/b': {}}", with_worker_type("process_function")),
               "computations.Worker.timer_streams.a/b: 'a/b': a name must not contain");
  expect_error(edited("  out: {", "  'o:ut': {"), "sinks.o:ut: 'o:ut': a name must not contain");
}

TEST(SpecTest, TimingMustBeSensible) {
  expect_error(std::string("epoch_batch_limit: 0\n") + kBase,
               "spec.yaml:1: epoch_batch_limit: must be in [1, 100000]");
  expect_error(std::string("lease_ttl: 0ms\n") + kBase, "spec.yaml:1: lease_ttl: must be positive");
}

// ---- Type errors -------------------------------------------------------------------------

TEST(SpecTest, ASinkWithAShardedTargetHasOnePartitionPerTablet) {
  const std::string head =
      "name: t\nsources:\n  q: {type: queue, output_stream: a}\nsinks:\n  out: {input_stream: a, ";
  const auto spec = parse(head + "target_tablets: 3}\n");
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  EXPECT_EQ(spec->sinks[0].target_tablets, 3);
  EXPECT_EQ(spec->sinks[0].partitions, 3);
  expect_valid(head + "target_tablets: 3, partitions: 3}\n");
  expect_error(head + "target_tablets: 3, partitions: 2}\n", "sinks.out.partitions: a sink with target_tablets");
  expect_error(head + "type: sync_queue, target_tablets: 3}\n", "sinks.out.target_tablets: only async_queue sinks");
  expect_error(head + "target_tablets: 0}\n", "sinks.out");
}

TEST(SpecTest, RejectsNonIntegers) {
  expect_error(with_worker_line("partitions: abc"),
               "spec.yaml:10: computations.Worker.partitions: expected an integer, got 'abc'");
  expect_error(edited("partitions: 2", "partitions: 2.5"),
               "spec.yaml:3: sources.events.partitions: expected an integer");
  expect_error(edited("input_stream: result}",
                      "input_stream: result, at_most_once_strategy: "
                      "{suspend_destruction_duration: 1s}}"),
               "spec.yaml:11: sinks.out.at_most_once_strategy.suspend_destruction_duration: "
               "expected an integer, got '1s'");
}

TEST(SpecTest, RejectsNonBooleans) {
  expect_error(with_worker_line("parameters: {use_compact_input_messages: maybe}"),
               "spec.yaml:10: computations.Worker.parameters.use_compact_input_messages: expected "
               "true or false");
  expect_error(
      edited("input_stream: result}", "input_stream: result, at_most_once_strategy: {enabled: 1}}"),
      "spec.yaml:11: sinks.out.at_most_once_strategy.enabled: expected true or false");
}

TEST(SpecTest, RejectsBadDurations) {
  expect_error(
      std::string("name: p\nlease_ttl: soon\n") + replaced(kBase, "name: p\n", ""),
      "spec.yaml:2: lease_ttl: expected a duration such as 250ms, 2s or 500us, got 'soon'");
  expect_error(std::string("epoch_period: 5h\n") + kBase,
               "spec.yaml:1: epoch_period: expected a duration");
}

TEST(SpecTest, RejectsUnknownEnumValues) {
  expect_error(with_worker_type("map_reduce"),
               "spec.yaml:6: computations.Worker.type: unknown value 'map_reduce' "
               "(allowed: transform, swift_map, process_function)");
  expect_error(with_worker_line("processing_mode: at_most_once"),
               "spec.yaml:10: computations.Worker.processing_mode: unknown value 'at_most_once' "
               "(allowed: exactly_once, at_least_once_consistent)");
  expect_error(
      with_worker_line("timer_streams: {retry: {watermark: wall_time}}",
                       with_worker_type("process_function")),
      "spec.yaml:10: computations.Worker.timer_streams.retry.watermark: unknown value 'wall_time' "
      "(allowed: event_time, system_time, real_time)");
  expect_error(edited("type: async_queue", "type: kafka_queue"),
               "spec.yaml:11: sinks.out.type: unknown value 'kafka_queue' (allowed: sync_queue, "
               "async_queue, kafka, http, static_table, clickhouse, arkflow_kafka)");
}

TEST(SpecTest, RejectsUnknownKeys) {
  expect_error(std::string("nmae: x\n") + kBase,
               "spec.yaml:1: nmae: unknown key (known: computations, ");
  expect_error(with_worker_line("partition: 2"),
               "spec.yaml:10: computations.Worker.partition: unknown key (known: ");
  expect_error(with_worker_line("parameters: {batch: 2}"),
               "spec.yaml:10: computations.Worker.parameters.batch: unknown key");
  expect_error(edited("output_stream: event", "output_streams: event"),
               "spec.yaml:3: sources.events.output_streams: unknown key (known: max_cycles, "
               "output_stream, partitions, table, topic, type)");
  expect_error(
      edited("input_stream: result}", "input_stream: result, at_most_once_strategy: {limit: 1}}"),
      "spec.yaml:11: sinks.out.at_most_once_strategy.limit: unknown key");
}

TEST(SpecTest, RejectsWrongShapes) {
  expect_error(edited("input_streams: [event]", "input_streams: event"),
               "spec.yaml:8: computations.Worker.input_streams: expected a list of stream names");
  expect_error(replaced(kBase, "sinks:\n  out: {type: async_queue, input_stream: result}\n",
                        "sinks: [out]\n"),
               "spec.yaml:10: sinks: expected a mapping");
  expect_error(edited("  out: {type: async_queue, input_stream: result}", "  out: result"),
               "spec.yaml:11: sinks.out: expected a mapping");
  expect_error("[a, b]", "spec.yaml:1: expected a mapping at the top level");
}

}  // namespace
}  // namespace onceflow
