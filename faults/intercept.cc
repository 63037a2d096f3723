// The machine's clock and randomness, intercepted for user code in a simulation (madsim's
// way): this file defines the C library's entry points (and std::random_device's), so that
// every call in the program reaches them first. Outside a simulated run, or outside the
// user's process_message and process_timer, each passes the call on to the real one
// unchanged. Inside, it answers from the simulation (the epoch's system time; numbers drawn
// from the epoch's seed and the call's place) and tells the run's hooks, which fail the run's
// `determinism` check naming the call and the computation: a function that reads the
// machine's clock gives other results on another attempt, which only the epoch's
// current_timestamp() and random() do not.
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "core/env/random.h"
#include "core/user_code.h"
#include "faults/pipeline_run.h"

namespace onceflow::faults {

bool interception_linked() { return true; }

namespace {

// Whether `caller` lies in a memory allocator (jemalloc, mimalloc, tcmalloc time their
// purges with the clock): its calls are the process's, not the user's.
bool in_allocator(const void* caller) {
  Dl_info info{};
  if (dladdr(caller, &info) == 0 || info.dli_fname == nullptr) return false;
  return std::strstr(info.dli_fname, "malloc") != nullptr;
}

// The call being intercepted, or null when the real function answers. `caller`: the
// intercepted function's return address.
const UserCall* intercepting(const char* what, const void* caller) {
  UserCodeHooks* hooks = user_code::hooks();
  const UserCall* call = user_code::call();
  if (hooks == nullptr || call == nullptr || !hooks->simulated() || in_allocator(caller)) return nullptr;
  hooks->nondeterministic(what, *call);
  return call;
}

// The simulation's answer to a request for random bits: drawn from the epoch's seed, the
// message and the request's place in the call.
uint64_t simulated_bits(const UserCall& call) {
  return mix64(call.random_seed ^ mix64(call.message ^ call.key ^ (uint64_t{++call.intercepted} << 32)));
}
void simulated_fill(const UserCall& call, void* buffer, size_t length) {
  auto* out = static_cast<unsigned char*>(buffer);
  for (size_t i = 0; i < length; i += 8) {
    const uint64_t bits = simulated_bits(call);
    std::memcpy(out + i, &bits, length - i < 8 ? length - i : 8);
  }
}

template <typename F>
F real(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace
}  // namespace onceflow::faults

using onceflow::faults::intercepting;
using onceflow::faults::real;
using onceflow::faults::simulated_bits;
using onceflow::faults::simulated_fill;

extern "C" {

int clock_gettime(clockid_t clock, struct timespec* ts) noexcept {
  if (const onceflow::UserCall* call = intercepting("clock_gettime", __builtin_return_address(0))) {
    ts->tv_sec = call->now / 1'000'000;  // declared nonnull
    ts->tv_nsec = (call->now % 1'000'000) * 1000;
    return 0;
  }
  static const auto f = real<int (*)(clockid_t, struct timespec*)>("clock_gettime");
  return f(clock, ts);
}

int gettimeofday(struct timeval* tv, void* tz) noexcept {
  if (const onceflow::UserCall* call = intercepting("gettimeofday", __builtin_return_address(0))) {
    tv->tv_sec = call->now / 1'000'000;  // declared nonnull
    tv->tv_usec = call->now % 1'000'000;
    return 0;
  }
  static const auto f = real<int (*)(struct timeval*, void*)>("gettimeofday");
  return f(tv, tz);
}

time_t time(time_t* out) noexcept {
  if (const onceflow::UserCall* call = intercepting("time", __builtin_return_address(0))) {
    const time_t t = call->now / 1'000'000;
    if (out != nullptr) *out = t;
    return t;
  }
  static const auto f = real<time_t (*)(time_t*)>("time");
  return f(out);
}

int rand() noexcept {
  if (const onceflow::UserCall* call = intercepting("rand", __builtin_return_address(0))) return static_cast<int>(simulated_bits(*call) >> 33);
  static const auto f = real<int (*)()>("rand");
  return f();
}

long random() noexcept {
  if (const onceflow::UserCall* call = intercepting("random", __builtin_return_address(0))) return static_cast<long>(simulated_bits(*call) >> 33);
  static const auto f = real<long (*)()>("random");
  return f();
}

ssize_t getrandom(void* buffer, size_t length, unsigned int flags) {
  if (const onceflow::UserCall* call = intercepting("getrandom", __builtin_return_address(0))) {
    simulated_fill(*call, buffer, length);
    return static_cast<ssize_t>(length);
  }
  static const auto f = real<ssize_t (*)(void*, size_t, unsigned int)>("getrandom");
  return f(buffer, length, flags);
}

int getentropy(void* buffer, size_t length) {
  if (const onceflow::UserCall* call = intercepting("getentropy", __builtin_return_address(0))) {
    simulated_fill(*call, buffer, length);
    return 0;
  }
  static const auto f = real<int (*)(void*, size_t)>("getentropy");
  return f(buffer, length);
}

uint32_t arc4random() noexcept {
  if (const onceflow::UserCall* call = intercepting("arc4random", __builtin_return_address(0))) return static_cast<uint32_t>(simulated_bits(*call));
  static const auto f = real<uint32_t (*)()>("arc4random");
  return f();
}

// std::random_device::operator() (libstdc++): it may read the CPU's RDRAND, which no C
// library call sees.
unsigned int _ZNSt13random_device9_M_getvalEv(void* self) {
  if (const onceflow::UserCall* call = intercepting("std::random_device", __builtin_return_address(0))) return static_cast<unsigned int>(simulated_bits(*call));
  static const auto f = real<unsigned int (*)(void*)>("_ZNSt13random_device9_M_getvalEv");
  return f(self);
}

}  // extern "C"
