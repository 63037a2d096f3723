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

TEST(CodecTest, Fixed64IsEightLittleEndianBytes) {
  Encoder out;
  out.fixed64(0x0102030405060708ULL).fixed64(std::numeric_limits<uint64_t>::max());
  const std::string bytes = out.take();
  ASSERT_EQ(bytes.size(), 16u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8));
  Decoder in(bytes);
  EXPECT_EQ(in.fixed64(), 0x0102030405060708ULL);
  EXPECT_EQ(in.fixed64(), std::numeric_limits<uint64_t>::max());
  EXPECT_TRUE(in.done());
  for (size_t cut = 0; cut < 8; ++cut) {
    Decoder short_input(std::string_view(bytes).substr(0, cut));
    EXPECT_EQ(short_input.fixed64(), 0u);
    EXPECT_FALSE(short_input.ok()) << "cut at " << cut;
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
