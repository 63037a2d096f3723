#include "core/message.h"

#include "core/emitted.h"

#include <gtest/gtest.h>

#include <set>

namespace onceflow {
namespace {

TEST(MessageTest, IdsAreDeterministic) {
  EXPECT_EQ(source_message_id("events", 1, 42), source_message_id("events", 1, 42));
  EXPECT_EQ(derived_message_id(7, 0), derived_message_id(7, 0));
  EXPECT_EQ(timer_output_id("C", "t/3/s", 0), timer_output_id("C", "t/3/s", 0));
  EXPECT_NE(timer_output_id("C", "t/3/s", 0), timer_output_id("C", "t/3/s/1", 0));
}

TEST(MessageTest, IdsDoNotCollideAcrossOriginsParentsAndIndexes) {
  std::set<MessageId> ids;
  size_t made = 0;
  for (int p = 0; p < 4; ++p) {
    for (uint64_t offset = 0; offset < 500; ++offset) {
      const MessageId s = source_message_id("events", p, offset);
      ids.insert(s);
      ids.insert(source_message_id("other", p, offset));
      for (uint32_t i = 0; i < 3; ++i) ids.insert(derived_message_id(s, i));
      made += 5;
    }
  }
  EXPECT_EQ(ids.size(), made);
}

TEST(MessageTest, BatchedIdsDependOnTheParentSetNotItsOrder) {
  EXPECT_EQ(batched_message_id("s", 7, 0, {1, 2, 3}), batched_message_id("s", 7, 0, {3, 1, 2}));
  EXPECT_NE(batched_message_id("s", 7, 0, {1, 2, 3}), batched_message_id("s", 7, 0, {1, 2}));
  EXPECT_NE(batched_message_id("s", 7, 0, {1, 2}), batched_message_id("s", 7, 0, {1, 3}));
  EXPECT_NE(batched_message_id("s", 7, 0, {5}), 5u);
}

// One input's outputs in two groups, or in two batches of one group, share their parents.
TEST(MessageTest, BatchesOfOneParentSetInOtherGroupsOrPlacesDiffer) {
  const MessageId id = batched_message_id("s", 7, 0, {1, 2});
  EXPECT_NE(id, batched_message_id("t", 7, 0, {1, 2}));
  EXPECT_NE(id, batched_message_id("s", 8, 0, {1, 2}));
  EXPECT_NE(id, batched_message_id("s", 7, 1, {1, 2}));
}

// Batch size 2, one input with four outputs on one key and one on another: three batches,
// three ids.
TEST(MessageTest, OutputBatchesNameEachBatchApart) {
  Message parent;
  parent.id = 42;
  OutputBatches batches;
  for (uint64_t key : {1, 1, 1, 1, 2}) batches.add(parent, CollectingOutput::Out{key, "out", "p"});
  const std::vector<Message> out = batches.take(2);
  ASSERT_EQ(out.size(), 3u);
  std::set<MessageId> ids;
  for (const Message& m : out) ids.insert(m.id);
  EXPECT_EQ(ids.size(), 3u);
}

TEST(MessageTest, EncodingRoundTrips) {
  Message m;
  m.id = 1;
  m.key = 2;
  m.stream = "s";
  m.system_ts = -3;
  m.event_ts = 4;
  m.alignment_ts = 5;
  m.payload = std::string("a\0b", 3);
  m.parents = {9, 8};
  auto back = decode_message(encode_message(m));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, m);
  EXPECT_FALSE(decode_message("garbage").has_value());
}

}  // namespace
}  // namespace onceflow
