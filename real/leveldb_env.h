// The file system LevelDbStore hands LevelDB: its default one with two changes.
//
// - Table files are read with pread into the block cache instead of being mapped: mapped
//   pages count in the process's resident memory, which then grew with the store's size
//   while the heap stayed flat (with a 16 MB write buffer, 1,000,000 messages of the bench
//   pipeline at 1.9 times the peak RSS of 100,000 mapped, 1.2 times read so).
// - Table files (a memtable's flush, a compaction's output) are handed to the disk paced:
//   every kPaceBytes or more written (LevelDB hands them over a block at a time) start that
//   chunk's writeback and wait for the chunk before it.
//   Unpaced, a flush's few megabytes reached the disk at its closing sync, all at once, and
//   every commit's synced log write in the meantime queued behind them: the commits of one
//   flush's 30 ms took up to 21 ms instead of 1.5, and a message crossing four stages met
//   several of them (docs/BENCHMARKS.md, the latency at half the rate). Paced, about two
//   chunks of the file are ahead of a log write. The closing Sync() still syncs the whole
//   file: what LevelDB relies on is unchanged. A file system that cannot (or a sandbox that
//   will not) start a writeback gets its table files unpaced; a writeback that fails with an
//   I/O error fails the file, as the closing sync would.
#pragma once

#include <cstddef>
#include <cstdint>

namespace leveldb {
class Env;
}

namespace onceflow::real {

inline constexpr size_t kPaceBytes = size_t{64} << 10;

// Never destroyed (LevelDB's default Env is not either): a store may outlive statics.
leveldb::Env* store_env();

// Chunks paced so far in this process, in all table files (tests).
uint64_t paced_chunks();

}  // namespace onceflow::real
