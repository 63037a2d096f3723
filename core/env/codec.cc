#include "core/env/codec.h"

namespace onceflow {

Encoder& Encoder::u64_long(uint64_t v) {
  char buffer[10];  // a varint of 64 bits takes at most 10 bytes; one append instead of ten
  size_t n = 0;
  while (v >= 0x80) {
    buffer[n++] = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  buffer[n++] = static_cast<char>(v);
  out_.append(buffer, n);
  return *this;
}

Encoder& Encoder::fixed64(uint64_t v) {
  char buffer[8];
  for (char& b : buffer) {
    b = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  out_.append(buffer, sizeof buffer);
  return *this;
}

Encoder& Encoder::bytes(std::string_view v) {
  u64(v.size());
  out_.append(v);
  return *this;
}

uint64_t Decoder::u64_long() {
  uint64_t result = 0;
  for (int shift = 0; ok_ && shift <= 63; shift += 7) {
    if (pos_ >= in_.size()) break;
    const auto byte = static_cast<uint8_t>(in_[pos_++]);
    result |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return result;
  }
  ok_ = false;
  return 0;
}

uint64_t Decoder::fixed64() {
  if (!ok_ || in_.size() - pos_ < 8) {
    ok_ = false;
    return 0;
  }
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(in_[pos_ + static_cast<size_t>(i)]);
  pos_ += 8;
  return v;
}

std::string_view Decoder::bytes() {
  const uint64_t size = u64();
  if (!ok_ || size > in_.size() - pos_) {
    ok_ = false;
    return {};
  }
  std::string_view out = in_.substr(pos_, size);
  pos_ += size;
  return out;
}

}  // namespace onceflow
