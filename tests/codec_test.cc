#include "core/env/codec.h"

#include <gtest/gtest.h>

#include <limits>

namespace onceflow {
namespace {

TEST(CodecTest, RoundTripsEveryFieldKind) {
  Encoder out;
  out.u64(0).u64(127).u64(128).u64(std::numeric_limits<uint64_t>::max());
  out.i64(-1).i64(std::numeric_limits<int64_t>::min()).i64(std::numeric_limits<int64_t>::max());
  out.boolean(true).bytes("").bytes(std::string("a\0b", 3));
  const std::string bytes = out.take();
  Decoder in(bytes);
  EXPECT_EQ(in.u64(), 0u);
  EXPECT_EQ(in.u64(), 127u);
  EXPECT_EQ(in.u64(), 128u);
  EXPECT_EQ(in.u64(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(in.i64(), -1);
  EXPECT_EQ(in.i64(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(in.i64(), std::numeric_limits<int64_t>::max());
  EXPECT_TRUE(in.boolean());
  EXPECT_EQ(in.bytes(), "");
  EXPECT_EQ(in.bytes(), std::string_view("a\0b", 3));
  EXPECT_TRUE(in.done());
}

TEST(CodecTest, TruncatedInputFailsAndStaysFailed) {
  Encoder out;
  out.bytes("hello").u64(300);
  std::string bytes = out.take();
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    Decoder in(std::string_view(bytes).substr(0, cut));
    (void)in.bytes();
    (void)in.u64();
    EXPECT_FALSE(in.ok()) << "cut at " << cut;
    EXPECT_EQ(in.u64(), 0u);
    EXPECT_FALSE(in.ok());
  }
}

TEST(CodecTest, OverlongVarintIsRejected) {
  const std::string bytes(11, '\xff');
  Decoder in(bytes);
  (void)in.u64();
  EXPECT_FALSE(in.ok());
}

}  // namespace
}  // namespace onceflow
