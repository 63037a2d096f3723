// An LD_PRELOAD shim for tests: a disk that stalls now and then. Every Nth fdatasync or fsync
// of the process (ONCEFLOW_SLOW_SYNC_EVERY, default 200) first sleeps
// ONCEFLOW_SLOW_SYNC_MS milliseconds (default 300), as a cloud disk does under writeback or
// when its burst credit runs out. The sync itself is the real one.
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <ctime>

namespace {

std::atomic<unsigned long> g_syncs{0};

long setting(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtol(v, nullptr, 10) : fallback;
}

void maybe_stall() {
  static const long every = setting("ONCEFLOW_SLOW_SYNC_EVERY", 200);
  static const long ms = setting("ONCEFLOW_SLOW_SYNC_MS", 300);
  if (every <= 0 || (g_syncs.fetch_add(1) + 1) % static_cast<unsigned long>(every) != 0) return;
  timespec t{ms / 1000, (ms % 1000) * 1'000'000};
  while (nanosleep(&t, &t) != 0) {
  }
}

template <typename Fn>
Fn next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" int fdatasync(int fd) {
  static const auto real = next<int (*)(int)>("fdatasync");
  maybe_stall();
  return real(fd);
}

extern "C" int fsync(int fd) {
  static const auto real = next<int (*)(int)>("fsync");
  maybe_stall();
  return real(fd);
}
