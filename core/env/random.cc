#include "core/env/random.h"

#include <cassert>
#include <cmath>

namespace onceflow {

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t hash_bytes(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return mix64(h);
}

uint64_t Random::uniform(uint64_t bound) {
  assert(bound > 0);
  // Lemire, "Fast Random Integer Generation in an Interval" (2019).
  unsigned __int128 m = static_cast<unsigned __int128>(next_u64()) * bound;
  auto low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t threshold = (0 - bound) % bound;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(next_u64()) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

int64_t Random::uniform_range(int64_t lo, int64_t hi) {
  assert(lo <= hi);
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  if (span == UINT64_MAX) return static_cast<int64_t>(next_u64());
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + uniform(span + 1));
}

double Random::unit() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

bool Random::bernoulli(double p) {
  const double u = unit();
  return u < p;
}

double Random::exponential(double mean) {
  assert(mean >= 0);
  const double u = unit();
  const double x = -std::log1p(-u) * mean;  // log1p(-u) is finite: u < 1
  return x > 20 * mean ? 20 * mean : x;
}

namespace {
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Xoshiro256StarStar::Xoshiro256StarStar(uint64_t seed) : seed_(seed) {
  // mix64(seed + k * golden) is splitmix64's (k+1)-th output.
  uint64_t z = seed;
  for (uint64_t& word : s_) {
    word = mix64(z);
    z += 0x9e3779b97f4a7c15ULL;
  }
}

uint64_t Xoshiro256StarStar::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

Xoshiro256StarStar Xoshiro256StarStar::fork(std::string_view label) const {
  return Xoshiro256StarStar(mix64(seed_ ^ hash_bytes(label)));
}

}  // namespace onceflow
