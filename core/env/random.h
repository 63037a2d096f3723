// Random: a seeded 64-bit generator and the project's own distribution helpers.
//
// The helpers are written here, not taken from std::*_distribution, whose output differs
// between standard libraries; the same seed gives the same numbers everywhere.
// Xoshiro256StarStar is xoshiro256** (Blackman and Vigna, 2018) with its state filled by
// splitmix64 from one 64-bit seed, as its authors recommend.
//
// Thread-safety: none; one generator per owner.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace onceflow {

class Random {
 public:
  virtual ~Random() = default;

  // The next 64 uniformly distributed bits.
  virtual uint64_t next_u64() = 0;

  // Uniform in [0, bound). REQUIRES: bound > 0. Unbiased (Lemire's method with rejection).
  uint64_t uniform(uint64_t bound);
  // Uniform in [lo, hi]. REQUIRES: lo <= hi.
  int64_t uniform_range(int64_t lo, int64_t hi);
  // Uniform in [0, 1) with 53 random bits.
  double unit();
  // True with probability p. p <= 0 never draws true, p >= 1 always does; either way one
  // number is drawn, so the sequence does not depend on p.
  bool bernoulli(double p);
  // Exponentially distributed with the given mean, cut at 20 means so it stays bounded.
  double exponential(double mean);
};

class Xoshiro256StarStar final : public Random {
 public:
  explicit Xoshiro256StarStar(uint64_t seed);
  uint64_t next_u64() override;

  // A generator for an independent purpose, seeded from this one's seed and `label`, so that
  // drawing more numbers for one purpose does not shift another's.
  Xoshiro256StarStar fork(std::string_view label) const;
  uint64_t seed() const { return seed_; }

 private:
  uint64_t seed_;
  std::array<uint64_t, 4> s_;
};

// splitmix64's output function: a strong 64-bit mixer, also used to combine hashes.
uint64_t mix64(uint64_t x);
// FNV-1a over bytes, then mixed; stable across runs and platforms.
uint64_t hash_bytes(std::string_view bytes);

}  // namespace onceflow
