// Codec: a compact binary encoding for requests and stored rows.
//
// Unsigned integers are LEB128 varints, signed ones zig-zag varints, strings are a varint
// length and the bytes; fixed64 (hashes, which a varint would stretch to 9 or 10 bytes) is
// eight bytes, little-endian. Decoding never reads past the input: a short or malformed input
// makes the Decoder fail, and every later read fails too, so a caller checks ok() once.
// Written here rather than taken from a serialization library because the store and
// engine encode millions of small rows and this costs a few instructions per field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace onceflow {

class Encoder {
 public:
  Encoder& u64(uint64_t v) {
    if (v < 0x80) {  // most lengths and flags: one byte
      out_.push_back(static_cast<char>(v));
      return *this;
    }
    return u64_long(v);
  }
  Encoder& i64(int64_t v) { return u64((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
  Encoder& boolean(bool v) { return u64(v ? 1 : 0); }
  Encoder& fixed64(uint64_t v);
  Encoder& bytes(std::string_view v);

  std::string& buffer() { return out_; }
  std::string take() { return std::move(out_); }

 private:
  Encoder& u64_long(uint64_t v);
  std::string out_;
};

class Decoder {
 public:
  explicit Decoder(std::string_view in) : in_(in) {}

  uint64_t u64() {
    if (ok_ && pos_ < in_.size() && static_cast<uint8_t>(in_[pos_]) < 0x80) return static_cast<uint8_t>(in_[pos_++]);
    return u64_long();
  }
  int64_t i64() {
    const uint64_t v = u64();
    return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
  }
  bool boolean() { return u64() != 0; }
  uint64_t fixed64();
  std::string_view bytes();
  std::string string() { return std::string(bytes()); }

  // True while every read so far succeeded.
  bool ok() const { return ok_; }
  // True when every read succeeded and all input was consumed.
  bool done() const { return ok_ && pos_ == in_.size(); }

 private:
  uint64_t u64_long();
  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace onceflow
