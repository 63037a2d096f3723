// The data directory of `onceflow real`: what it was made for is recorded, and a directory of
// another format or pipeline, or one whose store was reset, is refused rather than misread.
#include "real/data_dir.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>

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

}  // namespace
}  // namespace onceflow::real
