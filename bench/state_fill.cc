// Fills a data directory of `onceflow real` with state, for bench/run.sh's recovery figure:
// rows of 1 KiB in the Counter computation's state table ("state/Counter/count"), written
// through the store as the engine writes, under keys the workload never uses (the run's own
// state is untouched; --verify would see the extra rows). Prints one JSON object.
//   state_fill DATA_DIR PIPELINE.yaml MEGABYTES
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/spec.h"
#include "real/data_dir.h"
#include "real/wall_clock.h"

using namespace onceflow;

int main(int argc, char** argv) {
  if (argc != 4) {
    fmt::print(stderr, "usage: state_fill DATA_DIR PIPELINE.yaml MEGABYTES\n");
    return 2;
  }
  auto spec = load_pipeline_spec(argv[2]);
  if (!spec) {
    fmt::print(stderr, "state_fill: {}\n", spec.error().message());
    return 2;
  }
  real::WallClock clock;
  auto store = real::open_data_dir(argv[1], *spec, clock);
  if (!store) {
    fmt::print(stderr, "state_fill: {}\n", store.error().message());
    return 2;
  }
  const std::string table = "state/Counter/count";
  const uint64_t rows = std::strtoull(argv[3], nullptr, 10) * 1024;  // 1 KiB each
  constexpr uint64_t kPerCommit = 4096;
  std::string value(1024, '\0');
  uint64_t x = 0x9E3779B97F4A7C15;  // values that do not compress, as real state rarely does
  const Micros started = clock.now();
  for (uint64_t done = 0; done < rows;) {
    auto tx = (*store)->begin();
    if (!tx) {
      fmt::print(stderr, "state_fill: {}\n", tx.error().message());
      return 1;
    }
    for (uint64_t end = std::min(rows, done + kPerCommit); done < end; ++done) {
      for (size_t i = 0; i < value.size(); i += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        std::memcpy(&value[i], &x, 8);
      }
      tx->put(table, fmt::format("~fill/{:012}", done), value);
    }
    if (auto committed = (*store)->commit(*tx, {}); !committed) {
      fmt::print(stderr, "state_fill: {}\n", committed.error().message());
      return 1;
    }
  }
  fmt::print("{{\"table\": \"{}\", \"rows\": {}, \"bytes\": {}, \"seconds\": {:.1f}}}\n", table, rows, rows * 1024,
             static_cast<double>(clock.now() - started) / 1e6);
  return 0;
}
