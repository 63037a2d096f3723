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
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <utility>

#include "core/env/random.h"
#include "core/user_code.h"
#include "simulated/pipeline_run.h"

namespace onceflow::simulated {

bool interception_linked() { return true; }

namespace {

// Whether `caller` lies in a memory allocator's library (jemalloc, mimalloc, tcmalloc time
// their purges with the clock): its calls are the process's, not the user's. An allocator
// linked statically into the program is not told apart.
bool in_allocator(const void* caller) {
  Dl_info info{};
  if (dladdr(caller, &info) == 0 || info.dli_fname == nullptr) return false;
  const char* slash = std::strrchr(info.dli_fname, '/');
  const char* base = slash == nullptr ? info.dli_fname : slash + 1;
  for (const char* lib : {"libjemalloc", "libmimalloc", "libtcmalloc"}) {
    if (std::strncmp(base, lib, std::strlen(lib)) == 0) return true;
  }
  return false;
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
// The epoch's time as seconds and a non-negative remainder (a skewed clock may be negative).
std::pair<int64_t, int64_t> split_micros(int64_t us) {
  const int64_t seconds = us / 1'000'000 - (us % 1'000'000 < 0 ? 1 : 0);
  return {seconds, us - seconds * 1'000'000};
}

// The functions interposed, found once when the program loads (not at a first call, which an
// allocator might make from inside dlsym's own allocation). Null where the C library has no
// such function (or in a static program): then the system call answers.
struct RealFunctions {
  int (*clock_gettime)(clockid_t, struct timespec*) = nullptr;
  int (*gettimeofday)(struct timeval*, void*) = nullptr;
  time_t (*time)(time_t*) = nullptr;
  int (*rand)() = nullptr;
  long (*random)() = nullptr;
  ssize_t (*getrandom)(void*, size_t, unsigned int) = nullptr;
  int (*getentropy)(void*, size_t) = nullptr;
  uint32_t (*arc4random)() = nullptr;
  unsigned int (*random_device_getval)(void*) = nullptr;
};
RealFunctions g_real;

template <typename F>
void find(F& slot, const char* name) {
  slot = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}
__attribute__((constructor)) void find_real_functions() {
  find(g_real.clock_gettime, "clock_gettime");
  find(g_real.gettimeofday, "gettimeofday");
  find(g_real.time, "time");
  find(g_real.rand, "rand");
  find(g_real.random, "random");
  find(g_real.getrandom, "getrandom");
  find(g_real.getentropy, "getentropy");
  find(g_real.arc4random, "arc4random");
  find(g_real.random_device_getval, "_ZNSt13random_device9_M_getvalEv");
}

// The kernel's random bits, for a function the C library did not give.
uint64_t kernel_bits() {
  uint64_t bits = 0;
  (void)syscall(SYS_getrandom, &bits, sizeof bits, 0);
  return bits;
}

}  // namespace
}  // namespace onceflow::simulated

using onceflow::simulated::g_real;
using onceflow::simulated::intercepting;
using onceflow::simulated::kernel_bits;
using onceflow::simulated::simulated_bits;
using onceflow::simulated::simulated_fill;
using onceflow::simulated::split_micros;

extern "C" {

int clock_gettime(clockid_t clock, struct timespec* ts) noexcept {
  if (const onceflow::UserCall* call = intercepting("clock_gettime", __builtin_return_address(0))) {
    const auto [seconds, micros] = split_micros(call->now);  // ts: declared nonnull
    ts->tv_sec = seconds;
    ts->tv_nsec = micros * 1000;
    return 0;
  }
  if (g_real.clock_gettime != nullptr) return g_real.clock_gettime(clock, ts);
  return static_cast<int>(syscall(SYS_clock_gettime, clock, ts));
}

int gettimeofday(struct timeval* tv, void* tz) noexcept {
  if (const onceflow::UserCall* call = intercepting("gettimeofday", __builtin_return_address(0))) {
    const auto [seconds, micros] = split_micros(call->now);  // tv: declared nonnull
    tv->tv_sec = seconds;
    tv->tv_usec = micros;
    return 0;
  }
  if (g_real.gettimeofday != nullptr) return g_real.gettimeofday(tv, tz);
  return static_cast<int>(syscall(SYS_gettimeofday, tv, tz));
}

time_t time(time_t* out) noexcept {
  time_t t = 0;
  if (const onceflow::UserCall* call = intercepting("time", __builtin_return_address(0))) {
    t = split_micros(call->now).first;
  } else if (g_real.time != nullptr) {
    return g_real.time(out);
  } else {
    struct timespec ts {};
    (void)syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
    t = ts.tv_sec;
  }
  if (out != nullptr) *out = t;
  return t;
}

int rand() noexcept {
  if (const onceflow::UserCall* call = intercepting("rand", __builtin_return_address(0))) {
    return static_cast<int>(simulated_bits(*call) >> 33);
  }
  return g_real.rand != nullptr ? g_real.rand() : static_cast<int>(kernel_bits() >> 33);
}

long random() noexcept {
  if (const onceflow::UserCall* call = intercepting("random", __builtin_return_address(0))) {
    return static_cast<long>(simulated_bits(*call) >> 33);
  }
  return g_real.random != nullptr ? g_real.random() : static_cast<long>(kernel_bits() >> 33);
}

ssize_t getrandom(void* buffer, size_t length, unsigned int flags) {
  if (const onceflow::UserCall* call = intercepting("getrandom", __builtin_return_address(0))) {
    simulated_fill(*call, buffer, length);
    return static_cast<ssize_t>(length);
  }
  if (g_real.getrandom != nullptr) return g_real.getrandom(buffer, length, flags);
  return syscall(SYS_getrandom, buffer, length, flags);
}

int getentropy(void* buffer, size_t length) {
  if (const onceflow::UserCall* call = intercepting("getentropy", __builtin_return_address(0))) {
    simulated_fill(*call, buffer, length);
    return 0;
  }
  if (g_real.getentropy != nullptr) return g_real.getentropy(buffer, length);
  return syscall(SYS_getrandom, buffer, length, 0) == static_cast<long>(length) ? 0 : -1;
}

uint32_t arc4random() noexcept {
  if (const onceflow::UserCall* call = intercepting("arc4random", __builtin_return_address(0))) {
    return static_cast<uint32_t>(simulated_bits(*call));
  }
  return g_real.arc4random != nullptr ? g_real.arc4random() : static_cast<uint32_t>(kernel_bits());
}

// std::random_device::operator() (libstdc++): it may read the CPU's RDRAND, which no C
// library call sees.
unsigned int _ZNSt13random_device9_M_getvalEv(void* self) {
  if (const onceflow::UserCall* call = intercepting("std::random_device", __builtin_return_address(0))) {
    return static_cast<unsigned int>(simulated_bits(*call));
  }
  return g_real.random_device_getval != nullptr ? g_real.random_device_getval(self) : static_cast<unsigned int>(kernel_bits());
}

}  // extern "C"
