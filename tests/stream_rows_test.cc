// Stream rows (core/stream_rows.h): one row per producer epoch and consumer partition, what
// a consumer's epoch leaves of the rows it took from, and how a repartition splits them.
#include "core/stream_rows.h"

#include <gtest/gtest.h>

#include "core/engine.h"
#include "core/layout.h"
#include "real/leveldb_store.h"
#include "tests/manual_clock.h"
#include "tests/temp_dir.h"

namespace onceflow {
namespace {

using testing::ManualClock;
using testing::TempDir;

Message message(MessageId id, uint64_t key, Micros ts) {
  Message m;
  m.id = id;
  m.key = key;
  m.stream = "event";
  m.system_ts = m.alignment_ts = ts;
  m.event_ts = ts - 5;
  m.payload = "p" + std::to_string(id);
  return m;
}

class StreamRowsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = real::LevelDbStore::open(dir_.str(), clock_);
    ASSERT_TRUE(opened.has_value()) << opened.status().message();
    store_ = std::move(*opened);
  }
  void commit(const Transaction& tx) { ASSERT_TRUE(store_->commit(tx, {}).has_value()); }
  std::vector<Row> rows(const std::string& table) {
    auto tx = store_->begin();
    auto r = store_->scan(*tx, table, "", "", SIZE_MAX);
    EXPECT_TRUE(r.has_value());
    return r.has_value() ? *r : std::vector<Row>{};
  }

  TempDir dir_{"stream-rows"};
  ManualClock clock_;
  std::unique_ptr<real::LevelDbStore> store_;
};

TEST(StreamRowKeys, AKeySaysTheLeastTimeAndSortsByIt) {
  const std::string a = stream_rows::row_key(3, -7, "computation/Tag/1", 12);
  const std::string b = stream_rows::row_key(3, 5, "computation/Tag/0", 9);
  EXPECT_EQ(a.substr(0, 5), "0003/");
  EXPECT_EQ(stream_rows::least_ts(a), -7);
  EXPECT_EQ(stream_rows::least_ts(b), 5);
  EXPECT_LT(a, b) << "a negative time sorts first";
  EXPECT_NE(stream_rows::row_key(3, 5, "computation/Tag/0", 10), b) << "another epoch, another row";
}

TEST(StreamRowKeys, RowsRoundTripAndDamageIsRefused) {
  Message batched = message(3, 9, 100);
  batched.parents = {1, 2};
  const std::vector<Message> messages = {message(1, 7, 50), message(2, 8, 40), batched};
  const std::string bytes = stream_rows::encode(messages);
  auto back = stream_rows::decode(bytes);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, messages);
  EXPECT_FALSE(stream_rows::decode(bytes.substr(0, bytes.size() - 1)).has_value());
  EXPECT_FALSE(stream_rows::decode(bytes + "x").has_value());
  EXPECT_FALSE(stream_rows::decode("\x7f").has_value());
}

// Backpressure's ledger: a row the consumer took whole is forgotten wherever it sits, so a
// row put out of time order (a swift job re-processing replayed inputs) is not counted as
// waiting behind a newer one the consumer has not taken.
TEST(UntakenRowsTest, ForgetsEveryRowTakenWholeEvenBehindOneNotTaken) {
  UntakenRows ledger;
  const auto put = [&](Micros newest, uint64_t messages) {
    ledger.put(StreamWrites::Written{{"stream/tagged", 0}, newest, messages});
  };
  put(100, 3);  // its newest message is as new as the consumer's bound: not taken whole
  put(50, 9);   // replayed inputs, re-processed: older than the row before it
  put(120, 4);
  EXPECT_EQ(ledger.messages(), 16u);
  EXPECT_EQ(ledger.older_than(101), 12u);
  ledger.taken_below(100);
  EXPECT_EQ(ledger.rows(), 2u);
  EXPECT_EQ(ledger.messages(), 7u);
  EXPECT_EQ(ledger.older_than(101), 3u);
  EXPECT_EQ(ledger.older_than(100), 0u);
  ledger.taken_below(121);
  EXPECT_EQ(ledger.rows(), 0u);
  EXPECT_EQ(ledger.messages(), 0u);
}

TEST_F(StreamRowsTest, AnEpochWritesARowPerPartitionKeyedByItsOldestMessage) {
  StreamWrites out;
  out.add("stream/event", 0, message(1, 1, 30));
  out.add("stream/event", 0, message(2, 2, 20));
  out.add("stream/event", 1, message(3, 3, 25));
  auto tx = store_->begin();
  const auto put = out.write(*tx, "source/events/0", 4);
  EXPECT_TRUE(out.empty());
  ASSERT_EQ(put.size(), 2u);  // what a source under backpressure counts as in flight
  EXPECT_EQ(put[0].where, std::make_pair(std::string("stream/event"), 0));
  EXPECT_EQ(put[0].newest_ts, 30);
  EXPECT_EQ(put[0].messages, 2u);
  EXPECT_EQ(put[1].where, std::make_pair(std::string("stream/event"), 1));
  EXPECT_EQ(put[1].newest_ts, 25);
  EXPECT_EQ(put[1].messages, 1u);
  commit(*tx);
  const auto written = rows("stream/event");
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(written[0].key, stream_rows::row_key(0, 20, "source/events/0", 4));
  EXPECT_EQ(written[1].key, stream_rows::row_key(1, 25, "source/events/0", 4));
  EXPECT_EQ(stream_rows::decode(written[0].value)->size(), 2u);
}

TEST_F(StreamRowsTest, TakingErasesWholeRowsRewritesTheRestAndReadsRowsItDidNotRead) {
  const std::string table = "stream/event";
  const std::string k1 = stream_rows::row_key(0, 10, "p", 1);
  const std::string k2 = stream_rows::row_key(0, 20, "p", 2);
  const std::string k3 = stream_rows::row_key(0, 30, "p", 3);
  auto tx = store_->begin();
  tx->put(table, k1, stream_rows::encode({message(1, 1, 10), message(2, 1, 11)}));
  tx->put(table, k2, stream_rows::encode({message(3, 1, 20), message(4, 1, 21)}));
  tx->put(table, k3, stream_rows::encode({message(5, 1, 30)}));
  commit(*tx);

  auto epoch = store_->begin();
  InputTakes takes;
  const auto read = store_->scan(*epoch, table, "", stream_rows::row_key(0, 25, "", 0), SIZE_MAX);
  ASSERT_TRUE(read.has_value());
  for (const Row& row : *read) takes.read(table + "\x1f" + row.key, row.value);
  takes.take({table + "\x1f" + k1, 1});
  takes.take({table + "\x1f" + k1, 2});
  takes.take({table + "\x1f" + k2, 3});
  takes.take({table + "\x1f" + k2, 3});  // taken twice: as many takes as the row has messages, not all of them
  takes.take({table + "\x1f" + k3, 5});  // not read by this epoch: looked up
  std::vector<std::string> looked_up;
  Status failed;
  ASSERT_TRUE(takes.settle(
      *epoch,
      [&](const std::string& t, const std::string& key) {
        looked_up.push_back(key);
        return *store_->get(*epoch, t, key);
      },
      &failed));
  EXPECT_EQ(looked_up, std::vector<std::string>{k3});
  commit(*epoch);
  const auto left = rows(table);
  ASSERT_EQ(left.size(), 1u) << "rows taken whole are gone";
  EXPECT_EQ(left[0].key, k2) << "a row taken in part keeps its key: its time stays a lower bound";
  EXPECT_EQ(*stream_rows::decode(left[0].value), std::vector<Message>{message(4, 1, 21)});
}

TEST_F(StreamRowsTest, ADamagedRowFailsTheEpoch) {
  const std::string table = "stream/event";
  const std::string key = stream_rows::row_key(0, 10, "p", 1);
  auto epoch = store_->begin();
  InputTakes takes;
  takes.read(table + "\x1f" + key, "not a row");
  takes.take({table + "\x1f" + key, 1});
  Status failed;
  EXPECT_FALSE(takes.settle(*epoch, [](const std::string&, const std::string&) { return std::nullopt; }, &failed));
  EXPECT_TRUE(failed.is_corruption()) << failed.message();
}

TEST_F(StreamRowsTest, ARepartitionSplitsRowsByKeyAndMergesRowsThatMeet) {
  auto spec = parse_pipeline_spec_text(
      "name: split\nsources:\n  events: {type: queue, partitions: 2, output_stream: event}\n"
      "computations:\n  Counter: {type: process_function, processing_function: Counter, input_streams: [event], "
      "output_streams: [counts], partitions: 2}\n"
      "sinks:\n  out: {type: sync_queue, input_stream: counts, partitions: 1}\n",
      "test");
  ASSERT_TRUE(spec.has_value()) << spec.error().message();
  const std::string table = tables::stream("event");
  // Keys spread over eight partitions; one producer epoch's rows of both old partitions.
  std::map<int, std::vector<Message>> old_rows;
  for (uint64_t key = 1; key <= 40; ++key) {
    old_rows[key_partition(key * 0x9e3779b97f4a7c15ULL, 2)].push_back(message(key, key * 0x9e3779b97f4a7c15ULL, 100));
  }
  ASSERT_EQ(old_rows.size(), 2u);
  auto tx = store_->begin();
  for (const auto& [p, messages] : old_rows) tx->put(table, stream_rows::row_key(p, 100, "source/events/0", 7), stream_rows::encode(messages));
  commit(*tx);

  auto move = store_->begin();
  auto moved = move_partition_rows(*store_, *move, *spec, "Counter", 8, 1000);
  ASSERT_TRUE(moved.has_value()) << moved.error().message();
  EXPECT_EQ(*moved, 2u);
  commit(*move);
  std::set<MessageId> ids;
  for (const Row& row : rows(table)) {
    EXPECT_EQ(row.key.substr(5), stream_rows::row_key(0, 100, "source/events/0", 7).substr(5));
    const auto messages = stream_rows::decode(row.value);
    ASSERT_TRUE(messages.has_value());
    for (const Message& m : *messages) {
      EXPECT_EQ(row.key.substr(0, 5), tables::partition_prefix(key_partition(m.key, 8))) << m.id;
      EXPECT_TRUE(ids.insert(m.id).second) << "twice: " << m.id;
    }
  }
  EXPECT_EQ(ids.size(), 40u) << "every message is kept, once";
  auto again = store_->begin();
  EXPECT_EQ(*move_partition_rows(*store_, *again, *spec, "Counter", 8, 1000), 0u) << "everything is in place";
  // Back to two partitions: the parts of one old row meet again under one key and merge.
  auto back = store_->begin();
  ASSERT_TRUE(move_partition_rows(*store_, *back, *spec, "Counter", 2, 1000).has_value());
  commit(*back);
  ids.clear();
  const auto merged = rows(table);
  EXPECT_EQ(merged.size(), 2u);
  for (const Row& row : merged) {
    const auto messages = stream_rows::decode(row.value);
    ASSERT_TRUE(messages.has_value());
    for (const Message& m : *messages) EXPECT_TRUE(ids.insert(m.id).second) << m.id;
  }
  EXPECT_EQ(ids.size(), 40u);
}

}  // namespace
}  // namespace onceflow
