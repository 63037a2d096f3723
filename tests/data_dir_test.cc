// The data directory of `onceflow real`: what it was made for is recorded, and a directory of
// another format or pipeline, or one whose store was reset, is refused rather than misread.
#include "real/data_dir.h"

#include "real/commit_point.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>

#include "tests/manual_clock.h"
#include "tests/temp_dir.h"

namespace onceflow::real {
namespace {

using testing::TempDir;

class FixedClock final : public Clock {
 public:
  Micros now() const override { return 1'000'000; }
};


PipelineSpec spec(const std::string& name, int partitions) {
  auto parsed = parse_pipeline_spec(YAML::Load(fmt::format(R"(
name: {}
sources: {{events: {{type: queue, partitions: {}, output_stream: event}}}}
computations:
  Counter: {{type: process_function, processing_function: Counter, input_streams: [event], output_streams: [counts]}}
sinks: {{out: {{type: async_queue, input_stream: counts}}}}
)",
                                                            name, partitions)),
                                    "test");
  EXPECT_TRUE(parsed.has_value()) << parsed.error().message();
  return *parsed;
}

void write_a_row(LevelDbStore& store) {
  auto tx = store.begin();
  tx->put("state/Counter/count", "0000000000000001", "1");
  ASSERT_TRUE(store.commit(*tx, {}).has_value());
}

TEST(DataDirTest, ANewDirectoryRecordsItsPipelineAndOpensAgain) {
  TempDir dir;
  FixedClock clock;
  {
    auto store = open_data_dir(dir.str(), spec("counts", 2), clock);
    ASSERT_TRUE(store.has_value()) << store.error().message();
    write_a_row(**store);
  }
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(dir.str()) / "onceflow-data"));
  auto again = open_data_dir(dir.str(), spec("counts", 2), clock);
  EXPECT_TRUE(again.has_value()) << again.error().message();
}

TEST(DataDirTest, AnotherPipelineOrShapeIsRefusedNamingBoth) {
  TempDir dir;
  FixedClock clock;
  ASSERT_TRUE(open_data_dir(dir.str(), spec("counts", 2), clock).has_value());
  auto renamed = open_data_dir(dir.str(), spec("other", 2), clock);
  ASSERT_FALSE(renamed.has_value());
  EXPECT_NE(renamed.error().message().find("'counts'"), std::string::npos) << renamed.error().message();
  EXPECT_NE(renamed.error().message().find("'other'"), std::string::npos) << renamed.error().message();
  auto reshaped = open_data_dir(dir.str(), spec("counts", 3), clock);
  ASSERT_FALSE(reshaped.has_value()) << "a directory made with 2 partitions was opened for 3";
  EXPECT_TRUE(reshaped.error().is_invalid_argument());
}

TEST(DataDirTest, ADirectoryWithoutAFormatIsRefused) {
  TempDir dir;
  FixedClock clock;
  {  // what a build before the format was recorded left: rows, and no identity
    std::filesystem::create_directories(dir.str());
    auto store = LevelDbStore::open((std::filesystem::path(dir.str()) / "store").string(), clock);
    ASSERT_TRUE(store.has_value());
    write_a_row(**store);
  }
  auto opened = open_data_dir(dir.str(), spec("counts", 2), clock);
  ASSERT_FALSE(opened.has_value()) << "rows of an unknown layout were taken as this build's";
  EXPECT_NE(opened.error().message().find("format 0"), std::string::npos) << opened.error().message();
  EXPECT_NE(opened.error().message().find(fmt::format("format {}", kDataFormatVersion)), std::string::npos);
}

TEST(DataDirTest, AStoreDeletedOrResetUnderItsMarkerIsRefused) {
  TempDir dir;
  FixedClock clock;
  {
    auto store = open_data_dir(dir.str(), spec("counts", 2), clock);
    ASSERT_TRUE(store.has_value());
    write_a_row(**store);
  }
  std::filesystem::remove_all(std::filesystem::path(dir.str()) / "store");
  auto opened = open_data_dir(dir.str(), spec("counts", 2), clock);
  ASSERT_FALSE(opened.has_value()) << "a deleted store was started afresh";
  EXPECT_TRUE(opened.error().is_corruption());
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(dir.str()) / "store")) << "the refusal made a store";
}

namespace fs = std::filesystem;

// The newest LevelDB log of the store in `dir`, cut to half its length.
void cut_newest_log(const std::string& dir) {
  fs::path newest;
  for (const auto& entry : fs::directory_iterator(fs::path(dir) / "store")) {
    if (entry.path().extension() == ".log" && (newest.empty() || entry.path().filename() > newest.filename())) {
      newest = entry.path();
    }
  }
  ASSERT_FALSE(newest.empty());
  const auto size = fs::file_size(newest);
  ASSERT_GT(size, 100u);
  fs::resize_file(newest, size / 2);
}

TEST(DataDirTest, AStoreWhoseNewestLogWasCutIsRefusedBehindItsCommitPoint) {
  TempDir dir;
  FixedClock clock;
  {
    auto store = open_data_dir(dir.str(), spec("counts", 2), clock);
    ASSERT_TRUE(store.has_value());
    for (int i = 0; i < 200; ++i) write_a_row(**store);
  }
  cut_newest_log(dir.str());
  // What LevelDB alone makes of it: a store that opens, with the commits after the cut gone.
  {
    auto bare = LevelDbStore::open((fs::path(dir.str()) / "store").string(), clock);
    ASSERT_TRUE(bare.has_value()) << bare.error().message();
    EXPECT_LT((*bare)->last_version(), 200u) << "the cut lost nothing: the test does not test";
  }
  auto opened = open_data_dir(dir.str(), spec("counts", 2), clock);
  ASSERT_FALSE(opened.has_value()) << "a store that lost acknowledged commits was opened";
  EXPECT_TRUE(opened.error().is_corruption());
  EXPECT_NE(opened.error().message().find("behind its commit point"), std::string::npos) << opened.error().message();
  EXPECT_NE(opened.error().message().find(dir.str()), std::string::npos) << opened.error().message();
  // The operator's way out: removing the commit point accepts the loss.
  fs::remove(fs::path(dir.str()) / "commit-point");
  EXPECT_TRUE(open_data_dir(dir.str(), spec("counts", 2), clock).has_value());
}

TEST(DataDirTest, AStoreRolledBackToAnOlderCopyIsRefused) {
  TempDir dir;
  FixedClock clock;
  const fs::path store_dir = fs::path(dir.str()) / "store";
  const fs::path copy = fs::path(dir.str()) / "store-copy";
  {
    auto store = open_data_dir(dir.str(), spec("counts", 2), clock);
    ASSERT_TRUE(store.has_value());
    write_a_row(**store);
  }
  fs::copy(store_dir, copy, fs::copy_options::recursive);
  {
    auto store = open_data_dir(dir.str(), spec("counts", 2), clock);
    ASSERT_TRUE(store.has_value());
    write_a_row(**store);
  }
  fs::remove_all(store_dir);
  fs::rename(copy, store_dir);
  auto opened = open_data_dir(dir.str(), spec("counts", 2), clock);
  ASSERT_FALSE(opened.has_value()) << "a store put back to an older copy was opened";
  EXPECT_NE(opened.error().message().find("behind its commit point"), std::string::npos) << opened.error().message();
}

TEST(DataDirTest, TheCommitPointIsRecordedWhileCommitsGoOnAndADamagedOneIsRefused) {
  TempDir dir;
  testing::ManualClock clock;
  const std::string point_file = (fs::path(dir.str()) / "commit-point").string();
  auto store = open_data_dir(dir.str(), spec("counts", 2), clock);
  ASSERT_TRUE(store.has_value());
  auto recorded = read_commit_point(point_file);
  ASSERT_TRUE(recorded.has_value() && recorded->has_value()) << "the open records where it starts";
  const uint64_t opened_at = (**recorded).version;
  EXPECT_LE(opened_at, (*store)->last_version());
  EXPECT_EQ((**recorded).generation, (*store)->generation());
  write_a_row(**store);
  EXPECT_EQ((**read_commit_point(point_file)).version, opened_at) << "recorded sooner than its interval";
  clock.advance(2 * kSeconds);
  write_a_row(**store);
  EXPECT_EQ((**read_commit_point(point_file)).version, (*store)->last_version()) << "not recorded after its interval";
  store->reset();
  {
    std::ofstream damaged(point_file, std::ios::trunc);
    damaged << "onceflow commit point\nversion x\n";
  }
  auto opened = open_data_dir(dir.str(), spec("counts", 2), clock);
  ASSERT_FALSE(opened.has_value());
  EXPECT_NE(opened.error().message().find("does not hold a commit point"), std::string::npos)
      << opened.error().message();
}

}  // namespace
}  // namespace onceflow::real
