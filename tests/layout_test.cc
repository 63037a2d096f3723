// The layout row (core/layout.h): its encoding, and what a spec given to a stopped pipeline
// may change (respecified_layout): sources whose input changes get a new origin, names that
// come back never reuse an old one, partition counts are a repartition's business.
// And whether stored timers may still fire (core/job.h), which completion waits for.
#include "core/emitted.h"
#include "core/engine.h"
#include "core/job.h"
#include "core/layout.h"

#include <gtest/gtest.h>

namespace onceflow {
namespace {

std::string spec_yaml(const std::string& sources, int counter_partitions = 3) {
  return "name: swap\nsources:\n" + sources +
         "computations:\n"
         "  Counter: {type: process_function, processing_function: Counter, input_streams: [event], "
         "output_streams: [counts], partitions: " +
         std::to_string(counter_partitions) +
         "}\n"
         "sinks:\n"
         "  out: {type: async_queue, input_stream: counts, partitions: 2}\n";
}

const std::string kEvents = "  events: {type: queue, partitions: 2, output_stream: event}\n";
const std::string kEventsV2 = "  events: {type: queue, table: events_v2, partitions: 2, output_stream: event}\n";

PipelineSpec parsed(const std::string& yaml) {
  auto spec = parse_pipeline_spec_text(yaml, "test");
  EXPECT_TRUE(spec.has_value()) << spec.error().message();
  return *spec;
}

TEST(LayoutTest, EncodesPartitionsSpecAndSourceGenerations) {
  Layout layout;
  layout.version = 7;
  layout.partitions = {{"Counter", 8}};
  layout.spec_yaml = spec_yaml(kEventsV2);
  layout.source_generations = {{"events", 2}, {"gone", 0}};
  layout.target_tablets = {{"out", 3}};
  layout.producer_generations = {{"out", 2}};
  EXPECT_EQ(decode_layout(encode_layout(layout)), layout);
  layout.max_batch_messages = 5;  // a later trailing field
  EXPECT_EQ(decode_layout(encode_layout(layout)), layout);
  EXPECT_EQ(with_layout(parsed(spec_yaml(kEvents)), layout).sinks.front().max_batch_messages, 5);
  // Rows written before specs were stored (version and partitions only), before settings
  // changed live (no settings), and before sink targets were followed.
  Layout old;
  old.version = 3;
  old.partitions = {{"Counter", 2}};
  std::string bytes = encode_layout(old);
  bytes.resize(bytes.size() - 2);  // the two empty maps of sink targets
  EXPECT_EQ(decode_layout(bytes), old);
  bytes.resize(bytes.size() - 2);  // the settings, both zero
  EXPECT_EQ(decode_layout(bytes), old);
  bytes.resize(bytes.size() - 2);  // the empty spec and the empty generation map
  EXPECT_EQ(decode_layout(bytes), old);
  EXPECT_FALSE(decode_layout(bytes + "\x05").has_value());
}

TEST(LayoutTest, ASourceHasAnIdentityAndAnOriginPerGeneration) {
  const PipelineSpec a = parsed(spec_yaml(kEvents));
  const PipelineSpec b = parsed(spec_yaml(kEventsV2));
  EXPECT_NE(source_identity(a.sources[0]), source_identity(b.sources[0]));
  SourceSpec more = a.sources[0];
  more.partitions = 5;  // the partitions are the input's, not what identifies it
  EXPECT_EQ(source_identity(more), source_identity(a.sources[0]));
  EXPECT_EQ(source_origin(a.sources[0]), "events");
  more.generation = 2;
  EXPECT_EQ(source_origin(more), "events#2");
}

TEST(LayoutTest, ASwappedInputGetsANewOriginAndANameThatComesBackNeverReusesOne) {
  const PipelineSpec start = parsed(spec_yaml(kEvents));
  auto swapped = respecified_layout(start, Layout{}, spec_yaml(kEventsV2));
  ASSERT_TRUE(swapped.has_value()) << swapped.error().message();
  EXPECT_EQ(swapped->version, 1u);
  EXPECT_EQ(swapped->source_generations, (std::map<std::string, uint32_t>{{"events", 1}}));
  const PipelineSpec now = with_layout(start, *swapped);
  EXPECT_EQ(now.sources[0].table, "events_v2");
  EXPECT_EQ(source_origin(now.sources[0]), "events#1");

  // The same spec again changes no origin.
  auto same = respecified_layout(now, *swapped, spec_yaml(kEventsV2));
  ASSERT_TRUE(same.has_value());
  EXPECT_EQ(same->source_generations, swapped->source_generations);

  // Removed, then back with its first table: a third origin, not the first.
  const std::string other = "  clicks: {type: queue, partitions: 1, output_stream: event}\n";
  auto removed = respecified_layout(now, *swapped, spec_yaml(other));
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->source_generations.at("events"), 1u);
  const PipelineSpec without = with_layout(start, *removed);
  auto back = respecified_layout(without, *removed, spec_yaml(kEvents));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(source_origin(with_layout(start, *back).sources[0]), "events#2");
}

TEST(LayoutTest, ARespecKeepsPartitionCountsAndRefusesWhatIsNotAStaticChange) {
  PipelineSpec start = parsed(spec_yaml(kEvents));
  Layout repartitioned;
  repartitioned.version = 1;
  repartitioned.partitions = {{"Counter", 8}};
  const PipelineSpec now = with_layout(start, repartitioned);
  auto refused = respecified_layout(now, repartitioned, spec_yaml(kEvents, 3));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().message(),
            "computation Counter: 3 partitions in the new spec, 8 in force; repartition it separately");
  auto taken = respecified_layout(now, repartitioned, spec_yaml(kEvents, 8));
  ASSERT_TRUE(taken.has_value()) << taken.error().message();
  EXPECT_TRUE(taken->partitions.empty());  // the stored spec says 8 now

  const std::string wider = "  events: {type: queue, partitions: 4, output_stream: event}\n";
  auto source = respecified_layout(start, Layout{}, spec_yaml(wider));
  ASSERT_FALSE(source.has_value());
  EXPECT_NE(source.error().message().find("source events: 4 partitions in the new spec, 2 in force"), std::string::npos)
      << source.error().message();
  auto broken = respecified_layout(start, Layout{}, "name: [");
  ASSERT_FALSE(broken.has_value());
  EXPECT_NE(broken.error().message().find("malformed YAML"), std::string::npos) << broken.error().message();
}

TEST(LayoutTest, SettingsThatChangeLiveAreTheEpochPeriodAndTheBatchLimit) {
  Layout layout;
  layout.version = 2;
  layout.partitions = {{"Counter", 4}};
  auto next = reconfigured_layout(layout, "epoch_period=20ms  epoch_batch_limit=8");
  ASSERT_TRUE(next.has_value()) << next.error().message();
  EXPECT_EQ(next->version, 3u);
  EXPECT_EQ(next->partitions, layout.partitions);
  EXPECT_EQ(next->epoch_period_us, 20 * kMillis);
  EXPECT_EQ(next->epoch_batch_limit, 8);
  EXPECT_EQ(decode_layout(encode_layout(*next)), *next);
  const PipelineSpec spec = with_layout(parsed(spec_yaml(kEvents)), *next);
  EXPECT_EQ(spec.epoch_period_us, 20 * kMillis);
  EXPECT_EQ(spec.epoch_batch_limit, 8);
  EXPECT_EQ(spec.layout_version, 3u);
  EXPECT_EQ(spec.computation("Counter")->partitions, 4);
  for (const auto& [text, error] : std::vector<std::pair<std::string, std::string>>{
           {"", "expected at least one SETTING=VALUE"},
           {"epoch_period", "expected SETTING=VALUE, got 'epoch_period'"},
           {"epoch_period=0ms", "epoch_period: '0ms'; expected a duration from 1ms to 60s"},
           {"epoch_batch_limit=-1", "epoch_batch_limit: '-1'; expected 1 to 1000000"},
           {"Counter=4", "no setting 'Counter' changes live (epoch_period, epoch_batch_limit, max_batch_messages)"}}) {
    auto refused = reconfigured_layout(layout, text);
    ASSERT_FALSE(refused.has_value()) << text;
    EXPECT_EQ(refused.error().message(), error);
  }
}

TEST(LayoutTest, ASinkWithAShardedTargetIsNotRepartitionedByHand) {
  const PipelineSpec spec = parsed(
      "name: t\nsources:\n  q: {type: queue, output_stream: a}\nsinks:\n  out: {input_stream: a, target_tablets: 2}\n");
  const auto refused = parse_repartition(spec, "out=3");
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().message(),
            "sink out: it has one partition per tablet of its sharded target; reshard the target instead");
}

TEST(LayoutTest, APartitionIsAHashRangeAndANewCountSplitsAndMergesRanges) {
  constexpr uint64_t kKeys = 20000;
  for (const int n : {1, 2, 3, 8}) {
    std::vector<int> held(static_cast<size_t>(n));
    for (uint64_t key = 0; key < kKeys; ++key) ++held[static_cast<size_t>(key_partition(key, n))];
    for (const int count : held) {  // even within a few percent
      EXPECT_GT(count, static_cast<int>(kKeys) / n * 95 / 100) << n;
      EXPECT_LT(count, static_cast<int>(kKeys) / n * 105 / 100) << n;
    }
  }
  // Each new partition's keys come only from the old partitions whose ranges overlap its own:
  // new j of m covers [j/m, (j+1)/m) of the hash space, old i of n covers [i/n, (i+1)/n).
  for (const auto& [n, m] : std::vector<std::pair<int, int>>{{1, 8}, {8, 2}, {2, 8}, {8, 3}, {3, 5}}) {
    for (uint64_t key = 0; key < kKeys; ++key) {
      const int from = key_partition(key, n);
      const int to = key_partition(key, m);
      EXPECT_LT(static_cast<int64_t>(from) * m, static_cast<int64_t>(to + 1) * n) << key << " " << n << "->" << m;
      EXPECT_LT(static_cast<int64_t>(to) * n, static_cast<int64_t>(from + 1) * m) << key << " " << n << "->" << m;
    }
  }
}

}  // namespace
}  // namespace onceflow

namespace onceflow {
namespace {

// Whether a stored timer may still fire (completion and the drains wait for those): each
// partition's rows are in trigger order, so its first one decides, however many it holds (the
// controller looked at 65,536 rows at most, and beyond took some for due: a pipeline with
// more never completed).
TEST(TimersMayFireTest, EachPartitionsFirstRowDecidesWhateverItHolds) {
  ComputationSpec c;
  c.name = "Window";
  c.timer_streams = {{"gap", Watermark::kEventTime, true}, {"tick", Watermark::kSystemTime, true}};
  std::map<std::string, std::string> rows;
  const auto put = [&](int partition, Micros trigger, const char* stream) {
    rows[tables::partition_prefix(partition) + timer_row(Timer{7, trigger, trigger, stream}, true, 0)] =
        encode_timer_value(TimerValue{trigger, 1});
  };
  for (Micros t = 1000; t < 101000; ++t) put(0, t, "gap");  // none due: past partition 0's newest event
  put(2, 50, "gap");
  std::map<std::string, Micros> watermarks{{"computation/Window/0", 999}, {"computation/Window/2", 49}};
  size_t reads = 0;
  const auto first_from = [&](const std::string& key) -> std::optional<Row> {
    ++reads;
    const auto it = rows.lower_bound(key);
    return it == rows.end() ? std::nullopt : std::optional<Row>(Row{it->first, it->second});
  };
  const auto meta = [&](const std::string& job) -> std::optional<std::string> {
    const auto it = watermarks.find(job);
    return it == watermarks.end() ? std::nullopt : std::optional<std::string>(with_event_watermark_floor(std::nullopt, it->second));
  };
  EXPECT_FALSE(timers_may_fire(c, first_from, meta));
  EXPECT_EQ(reads, 3u);  // partition 0's first row, partition 2's, and nothing after
  watermarks["computation/Window/2"] = 50;
  EXPECT_TRUE(timers_may_fire(c, first_from, meta));
  watermarks.erase("computation/Window/2");  // a partition that never took an event
  EXPECT_FALSE(timers_may_fire(c, first_from, meta));
  // A system-time timer's time comes; a row this code did not write is taken for one that may fire.
  put(5, 1'000'000'000, "tick");
  EXPECT_TRUE(timers_may_fire(c, first_from, meta));
  rows.erase(std::prev(rows.end()));
  rows["zz"] = "";
  EXPECT_TRUE(timers_may_fire(c, first_from, meta));
  // Nor is a partition prefix it did not write (the reading would stay on the row for ever).
  rows.erase("zz");
  for (const char* prefix : {"3/", "00g3/"}) {
    const std::string odd = prefix + timer_row(Timer{7, 1'000'000'000, 0, "gap"}, true, 0);
    rows[odd] = encode_timer_value(TimerValue{0, 1});
    EXPECT_TRUE(timers_may_fire(c, first_from, meta)) << prefix;
    rows.erase(odd);
  }
}

}  // namespace
}  // namespace onceflow
