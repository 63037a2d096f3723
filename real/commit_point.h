// A store's commit point: how far it had committed, recorded outside the store's own files.
//
// LevelDB cannot see some damage: a log file cut short reads as a crash in the middle of a
// write, and the commits after the cut are dropped without a word (inputs and outputs roll
// back together, so a check of the rows alone finds nothing wrong). The store records its
// last written version and its generation (real/leveldb_store.h) in a small file beside it,
// written whole and synced (a temporary file renamed over the old one), at a bounded
// interval and at every clean close; a store that opens behind its commit point lost
// commits it had acknowledged, and is refused.
//
// The file is text: "onceflow commit point\nversion N\ngeneration G\n".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/env/status.h"

namespace onceflow::real {

struct CommitPoint {
  uint64_t version = 0;     // the last commit written and synced
  uint64_t generation = 0;  // the store's life (incremented at every open) that wrote it
  friend bool operator==(const CommitPoint&, const CommitPoint&) = default;
};

// What `file` holds; nullopt when there is no such file. A file that cannot be read or does
// not hold a commit point is kCorruption naming it.
Result<std::optional<CommitPoint>> read_commit_point(const std::string& file);

// Replaces `file` with `point`, durably: written to FILE.new, synced, renamed over FILE, and
// the directory synced. kUnavailable naming the file and the cause on any failure (FILE then
// holds the previous point, or this one if only the directory's sync failed: never a point
// ahead of what was committed).
Status write_commit_point(const std::string& file, const CommitPoint& point);

// Refuses (kCorruption, one line naming `store_dir` and `file`) a store at `held` that is
// behind the commit point `recorded`.
Status check_commit_point(const std::string& store_dir, const std::string& file, const CommitPoint& held,
                          const CommitPoint& recorded);

}  // namespace onceflow::real
