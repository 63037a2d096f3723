// The baseline for eos_over_handwritten in bench/run.sh: the two-stage pipeline of
// bench/pipelines/two_stage_exactly_once.yaml (Annotate, then a Counter per key) written by hand
// on LevelDB, exactly once the simplest way: a producer thread appends the inputs in synced
// WriteBatches of 500 rows (as `onceflow real`'s producer does); the processing thread reads up
// to BATCH input rows from its position, annotates and counts them (counters held in memory,
// loaded once), and writes the outputs, the changed counters and the new position in one synced
// WriteBatch per batch, erasing the inputs it consumed. Nothing else: no Leases, no dedup, no
// outbox, no second stage's stream, no watermarks. Prints one JSON object.
//   handwritten_bench DIR MESSAGES KEYS BATCH
#include <fmt/format.h>
#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>

namespace {

constexpr long kProducerBatch = 500;

std::string input_key(long i) { return fmt::format("in/{:012}", i); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    fmt::print(stderr, "usage: handwritten_bench DIR MESSAGES KEYS BATCH\n");
    return 2;
  }
  const std::string dir = argv[1];
  const long messages = std::atol(argv[2]);
  const long keys = std::max(1L, std::atol(argv[3]));
  const long batch_size = std::max(1L, std::atol(argv[4]));
  std::filesystem::remove_all(dir);
  leveldb::Options options;
  options.create_if_missing = true;
  leveldb::DB* raw = nullptr;
  if (!leveldb::DB::Open(options, dir, &raw).ok()) {
    fmt::print(stderr, "handwritten_bench: cannot open {}\n", dir);
    return 2;
  }
  std::unique_ptr<leveldb::DB> db(raw);
  leveldb::WriteOptions sync;
  sync.sync = true;
  std::atomic<long> produced{0};
  std::atomic<bool> failed{false};
  const auto start = std::chrono::steady_clock::now();

  std::thread producer([&] {
    for (long i = 0; i < messages;) {
      leveldb::WriteBatch batch;
      const long end = std::min(messages, i + kProducerBatch);
      for (; i < end; ++i) batch.Put(input_key(i), fmt::format("{}:w{}", i % keys, i));
      if (!db->Write(sync, &batch).ok()) {
        failed = true;
        return;
      }
      produced = end;
    }
  });

  std::map<long, long> counts;  // by key, loaded once (a fresh store holds none)
  long position = 0;
  long batches = 0;
  uint64_t bytes = 0;
  while (position < messages && !failed) {
    const long available = produced.load();
    if (available == position) {
      std::this_thread::yield();
      continue;
    }
    leveldb::WriteBatch batch;
    std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
    long taken = 0;
    for (it->Seek(input_key(position)); it->Valid() && taken < batch_size && position + taken < available; it->Next()) {
      const std::string value = it->value().ToString();
      const size_t colon = value.find(':');
      const long key = std::atol(value.c_str());
      const std::string word = value.substr(colon + 1);
      const std::string annotated = fmt::format("{}:{}", word, word.size());  // Annotate
      const long n = ++counts[key];                                         // Counter
      batch.Put(fmt::format("out/{:012}", position + taken), fmt::format("key={} count={} ({})", key, n, annotated));
      batch.Put(fmt::format("count/{}", key), std::to_string(n));
      batch.Delete(it->key());
      ++taken;
    }
    position += taken;
    batch.Put("position", std::to_string(position));
    bytes += batch.ApproximateSize();
    if (!db->Write(sync, &batch).ok()) failed = true;
    ++batches;
  }
  producer.join();
  if (failed) {
    fmt::print(stderr, "handwritten_bench: a LevelDB write failed\n");
    return 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("{{\"messages\": {}, \"batch\": {}, \"wall_s\": {:.3f}, \"msgs_per_s\": {:.0f}, \"batches\": {}, "
             "\"bytes_per_message\": {:.0f}}}\n",
             messages, batch_size, seconds, static_cast<double>(messages) / seconds, batches,
             static_cast<double>(bytes) / static_cast<double>(std::max(1L, messages)));
  return 0;
}
