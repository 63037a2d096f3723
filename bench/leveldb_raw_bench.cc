// The storage limit for bench/run.sh: raw LevelDB WriteBatch writes with sync=true, each of
// `entries` rows of `value_bytes` bytes, one after another from one thread (as the store
// commits). Prints one JSON object.
//   leveldb_raw_bench DIR BATCHES ENTRIES VALUE_BYTES
#include <fmt/format.h>
#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

int main(int argc, char** argv) {
  if (argc != 5) {
    fmt::print(stderr, "usage: leveldb_raw_bench DIR BATCHES ENTRIES VALUE_BYTES\n");
    return 2;
  }
  const std::string dir = argv[1];
  const long batches = std::atol(argv[2]);
  const long entries = std::max(1L, std::atol(argv[3]));
  const size_t value_bytes = static_cast<size_t>(std::max(0L, std::atol(argv[4])));
  std::filesystem::remove_all(dir);
  leveldb::Options options;
  options.create_if_missing = true;
  leveldb::DB* db = nullptr;
  if (!leveldb::DB::Open(options, dir, &db).ok()) {
    fmt::print(stderr, "leveldb_raw_bench: cannot open {}\n", dir);
    return 2;
  }
  leveldb::WriteOptions sync;
  sync.sync = true;
  const std::string value(value_bytes, 'v');
  const auto start = std::chrono::steady_clock::now();
  for (long b = 0; b < batches; ++b) {
    leveldb::WriteBatch batch;
    for (long e = 0; e < entries; ++e) batch.Put(fmt::format("k/{:08}/{:04}", b, e), value);
    if (!db->Write(sync, &batch).ok()) return 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("{{\"batches\": {}, \"entries\": {}, \"value_bytes\": {}, \"seconds\": {:.3f}, \"batches_per_s\": {:.1f}}}\n",
             batches, entries, value_bytes, seconds, static_cast<double>(batches) / seconds);
  delete db;
  std::filesystem::remove_all(dir);
  return 0;
}
