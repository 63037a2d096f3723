// The seeded workload: WorkloadStream gives what make_workload gives, one input at a time.
#include "core/workload.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

namespace onceflow {
namespace {

bool same(const SourceInput& a, const SourceInput& b) {
  return a.source == b.source && a.partition == b.partition && a.key == b.key && a.payload == b.payload &&
         a.write_ts == b.write_ts && a.event_ts == b.event_ts;
}

// Event times lie within `event_disorder` before their writes, and a disorder of many intervals
// brings inputs out of event-time order.
RC_GTEST_PROP(WorkloadStreamTest, EventTimesAreUpToTheDisorderBeforeTheirWrites, ()) {
  PipelineSpec spec;
  SourceSpec source;
  source.name = "s";
  source.type = "queue";
  source.partitions = 2;
  spec.sources.push_back(source);
  PipelineWorkload w;
  w.messages = 400;
  w.interval_us = *rc::gen::inRange<Micros>(1, 5'000);
  w.event_disorder_us = *rc::gen::inRange<Micros>(0, 100'000);
  bool out_of_order = false;
  Micros newest = INT64_MIN;
  for (const SourceInput& in : make_workload(spec, w, *rc::gen::arbitrary<uint64_t>())) {
    RC_ASSERT(in.event_ts <= in.write_ts);
    RC_ASSERT(in.event_ts >= in.write_ts - w.event_disorder_us);
    out_of_order = out_of_order || in.event_ts < newest;
    newest = std::max(newest, in.event_ts);
  }
  if (w.event_disorder_us >= 10 * w.interval_us) RC_ASSERT(out_of_order);
}

// Any mix of source types, any length, any order of reading (forwards, backwards, jumps):
// the k-th input of the stream is the k-th input of make_workload among the kept sources.
RC_GTEST_PROP(WorkloadStreamTest, MatchesMakeWorkloadFiltered, ()) {
  PipelineSpec spec;
  const auto types = *rc::gen::container<std::vector<std::string>>(
      *rc::gen::inRange(1, 5), rc::gen::element<std::string>("queue", "kafka", "static_table"));
  for (size_t s = 0; s < types.size(); ++s) {
    SourceSpec source;
    source.name = "s" + std::to_string(s);
    source.type = types[s];
    source.partitions = *rc::gen::inRange(1, 4);
    spec.sources.push_back(source);
  }
  PipelineWorkload w;
  w.messages = *rc::gen::inRange(0, 200);
  w.keys = *rc::gen::inRange(1, 20);
  const auto seed = *rc::gen::arbitrary<uint64_t>();

  std::vector<SourceInput> expected = make_workload(spec, w, seed);
  RC_ASSERT(expected.size() == static_cast<size_t>(w.messages));
  std::erase_if(expected, [&](const SourceInput& in) { return spec.source(in.source)->type != "queue"; });

  WorkloadStream stream(spec, w, seed, [](const SourceSpec& s) { return s.type == "queue"; });
  RC_ASSERT(stream.size() == expected.size());
  if (expected.empty()) return;
  for (uint64_t k = 0; k < expected.size(); ++k) RC_ASSERT(same(stream.at(k), expected[k]));
  const auto reads = *rc::gen::container<std::vector<size_t>>(rc::gen::inRange<size_t>(0, expected.size()));
  for (const size_t k : reads) RC_ASSERT(same(stream.at(k), expected[k]));
}

TEST(WorkloadStreamTest, EverySourceKeptByDefault) {
  PipelineSpec spec;
  spec.sources.resize(3);
  spec.sources[0].name = "a";
  spec.sources[1].name = "b";
  spec.sources[1].type = "kafka";
  spec.sources[2].name = "c";
  PipelineWorkload w;
  w.messages = 7;
  WorkloadStream stream(spec, w, 42);
  EXPECT_EQ(stream.size(), 7u);
  EXPECT_EQ(stream.at(4).source, "b");
  EXPECT_EQ(stream.at(6).write_ts, 7 * w.interval_us);
  WorkloadStream queues(spec, w, 42, [](const SourceSpec& s) { return s.type == "queue"; });
  EXPECT_EQ(queues.size(), 5u);  // a, c, a, c, a of a b c a b c a
  EXPECT_EQ(queues.at(3).source, "c");
  EXPECT_EQ(queues.at(3).write_ts, 6 * w.interval_us);
}

}  // namespace
}  // namespace onceflow
