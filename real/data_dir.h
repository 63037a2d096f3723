// The data directory of `onceflow real`: DIR/store (the LevelDB store), DIR/onceflow-data and
// DIR/commit-point (how far the store had committed: real/commit_point.h).
//
// A directory records what its rows are: the format version of their layout (the engine's
// tables and real/'s own) and the pipeline it was made for, by name and by a hash of what
// shapes its tables (core/spec.h: table_shape). Both are kept in the store, and
// DIR/onceflow-data says the same in text for people and tells a store that went missing or
// was reset from a new directory. A directory of another format or another pipeline is
// refused, never misread; so is damage (real/leveldb_store.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/env/clock.h"
#include "core/spec.h"
#include "real/leveldb_store.h"
#include "real/pg_store.h"

namespace onceflow::real {

// The row layout this build reads and writes. Bump it with every change to a row's layout.
// 0: directories written before the layout was recorded (before 2026-12);
// 1: the first recorded layout;
// 2: a job's meta row ends with its input dedup cleanup cursor;
// 3: a timer row's value ends with the id of the timer's creation;
// 4: the controller's layout row holds every computation's and queue sink's partition count
//    (the shape no longer does), a source's offsets are kept under its origin;
// 5: rows keyed by partition (streams, timers, input dedup) are in the partition whose hash
//    range holds their key (key_partition), not key % partitions; the layout row may end
//    with sink targets' tablet counts and producer generations;
// 6: a sink's input dedup is compact (compact_input_messages/sink:<name>, a row per key);
// 7: a stream row holds what one producer epoch emitted for one partition (core/stream_rows.h);
//    a row of the test producer's input log holds a batch of inputs;
// 8: an outbox row holds an epoch's outputs (core/outbox.h); outbox_batches/ is gone;
// 9: a message's id and parents are eight bytes each and its times differences
//    (encode_message_fields): a stream row's system times from one message to the next; an
//    outbox row is encoded as a stream row; a queue target's row holds what one append added.
// 10: a computation's timers are in a table per timer stream (timers/<computation>/<stream>);
//     the times a process stamps and sets timers by are the calendar's (real/wall_clock.h),
//     not the monotonic clock's count from boot.
inline constexpr uint32_t kDataFormatVersion = 10;

struct DataIdentity {
  uint32_t format = kDataFormatVersion;
  std::string pipeline;  // the spec's name
  std::string shape;     // 16 hex digits: a hash of table_shape(spec)
  std::string describe() const;  // "format 1, pipeline 'x' (shape 0123...)"
  friend bool operator==(const DataIdentity&, const DataIdentity&) = default;
};
DataIdentity identity_of(const PipelineSpec& spec);

// Opens DIR/store for `spec`, creating DIR and a new store when DIR holds none. Refuses
// (kInvalidArgument or kCorruption, one line naming DIR): a damaged store, a store that was
// deleted or reset while DIR/onceflow-data remains, a store behind DIR/commit-point, and a
// store of another format or pipeline (naming both).
Result<std::unique_ptr<LevelDbStore>> open_data_dir(const std::string& dir, const PipelineSpec& spec,
                                                     const Clock& clock, LevelDbStore::Options options = {});

// Connects to the PostgreSQL store at `conninfo` for `spec`: a database without onceflow rows
// is made this pipeline's; one of another format or pipeline is refused (naming both).
// `existing_only` (a reader's: onceflow ctl): a database that holds no store of this pipeline
// is refused (kNotFound), and nothing is written to it.
Result<std::unique_ptr<PgStore>> open_pg_store(const std::string& conninfo, const PipelineSpec& spec,
                                               bool existing_only = false);

}  // namespace onceflow::real
