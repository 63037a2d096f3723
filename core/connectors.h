// Connectors: sources and sinks whose data lives outside the store (Kafka, ...).
//
// The engine keeps the exactly-once bookkeeping on its side of the line: a source's offsets
// are in the pipeline's state and advance only with the epoch that consumed the records; an
// async sink's outputs are committed to its outbox first and handed to its ExternalSink
// after the commit, in seqNo order, as often as needed. What the external system makes of a
// repeated hand-over is the sink's to say: a Kafka sink with transactions and a progress
// marker skips what the marker covers (exactly once); one with the idempotent producer alone
// may repeat messages after a restart (at least once).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env/clock.h"
#include "core/env/status.h"
#include "core/env/store.h"
#include "core/message.h"
#include "core/outbox.h"
#include "core/spec.h"

namespace onceflow {

class ExternalSource {
 public:
  struct Record {
    uint64_t offset = 0;  // the record's own offset in its partition (may have gaps)
    uint64_t key = 0;
    std::string payload;
    Micros timestamp = 0;
  };
  virtual ~ExternalSource() = default;
  // Up to `limit` records of `partition` from `offset` (the next offset to read) on, without
  // waiting long. `caught_up` tells that nothing more was available right now.
  virtual Result<std::vector<Record>> read(int partition, uint64_t offset, size_t limit, bool* caught_up) = 0;
};

class ExternalSink {
 public:
  virtual ~ExternalSink() = default;
  // Hands over the outbox rows of sink job `job` (its partition's rows in seqNo order, the
  // first ones perhaps handed over before by this or an earlier incarnation). Returns the
  // highest seqNo the external system now holds durably, or an error: kInvalidArgument when
  // the sink must stop for good (it could not go on without losing or repeating messages).
  virtual Result<uint64_t> deliver(const std::string& job, LeaseId lease, const std::vector<OutboxRow>& rows) = 0;
  // A synchronous sink: writes one epoch's messages and returns once the system acknowledged
  // them all, before the epoch commits. An error abandons the epoch (it is retried, and what
  // was written is written again: at least once).
  virtual Status write_now(const std::string& job, LeaseId lease, const std::vector<Message>& messages) {
    (void)job, (void)lease, (void)messages;
    return Status::invalid_argument("this sink does not write synchronously");
  }
  // At-most-once: sends one message in one request. A failure before the request starts
  // (no connection, no session) is kNotStarted and may be retried; `starting` is called just
  // before it starts (and may refuse: kNotStarted); once started, a failure is final.
  // kRefused: the target refuses for good (it fails validation): nothing started, and
  // nothing ever will.
  enum class Once : uint8_t { kNotStarted, kSent, kFailedAfterStart, kRefused };
  virtual Once send_once(const std::string& job, LeaseId lease, const Message& m, const std::function<bool()>& starting) {
    (void)job, (void)lease, (void)m, (void)starting;
    return Once::kNotStarted;
  }
};

// The key a Kafka record's key bytes stand for: decimal text is that number (onceflow's Kafka
// sinks write keys so), anything else its hash.
uint64_t kafka_key(std::string_view bytes);

// An exactly-once Kafka sink's rule when a new producer starts: rows below the first pending
// one were acknowledged, so a progress marker was committed with them. Finding none then means
// the marker is lost while its messages may already be in `topic`: kInvalidArgument, the sink
// stops rather than write them again.
Status check_progress_marker(const std::string& job, const std::optional<uint64_t>& marker,
                             const std::vector<OutboxRow>& rows, const std::string& topic,
                             const std::string& progress_topic);

// ClickHouse's table engines, as the seed's exactly-once sinks judge them: the engines that
// deduplicate inserted blocks (Replicated*MergeTree, SharedMergeTree), and those a sink writes
// at all (the MergeTree family, not Distributed).
bool clickhouse_engine_deduplicates(const std::string& engine);
bool clickhouse_engine_accepted(const std::string& engine);

// The seed's judgement of a ClickHouse sink's target table when a writer session starts, for
// the simulator's sink and the real one: kInvalidArgument (naming `database.table`) for a
// Distributed table or an engine outside the MergeTree family; else the structured warnings to
// give: an exactly-once sink on an engine that does not deduplicate blocks
// (ClickHouseTargetDoesNotDeduplicate: exactly-once degrades to at-least-once), or whose dedup
// window (replicated_deduplication_window_seconds: `window_us`) is shorter than its
// replay_horizon (ClickHouseDedupWindowShorterThanReplayHorizon).
struct SinkWarning {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attributes;
};
Result<std::vector<SinkWarning>> judge_clickhouse_target(const SinkSpec& spec, const std::string& database,
                                                          const std::string& table, const std::string& engine,
                                                          Micros window_us);

// The exactly-once ClickHouse sinks' batches (TClickHouseBatchingSink and the sharded one),
// for the simulator's and the real sink alike. A batch is an outbox row: the engine cuts them
// at each epoch's end and at every max_batch_messages-th seqNo (core/job_sink.cc), so a batch sent
// again after a restart, even with another limit, is the same batch. Only complete batches are
// returned (a later epoch never adds to one), in seqNo order. Its token is its largest
// MessageId (16 hex digits); with `shards` > 0 its messages are split by key (key % shards)
// and shard i gets the token suffixed ":<shard name>".
struct ClickHouseBatch {
  uint64_t last_seqno = 0;
  std::string token;
  // By shard (one part when unsharded); a shard's part may be empty (then nothing is sent).
  std::vector<std::vector<Message>> parts;
};
Result<std::vector<ClickHouseBatch>> clickhouse_batches(const std::vector<OutboxRow>& rows, size_t shards);

// By source or sink name. Sources of type "queue" and queue sinks need none.
struct Connectors {
  std::map<std::string, ExternalSource*> sources;
  std::map<std::string, ExternalSink*> sinks;
};

}  // namespace onceflow
