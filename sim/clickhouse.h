// A simulated ClickHouse target (one node per sink, "target-<sink>", holding every shard)
// and the engine side of Flow's ClickHouse sinks.
//
// The target models what the sinks' guarantees rest on: the table engine, and for the
// engines that deduplicate inserted blocks (Replicated*MergeTree, SharedMergeTree) a finite
// dedup window over insert_deduplication_token: the last `window_blocks` tokens, none more
// than `window_us` older than the newest (ClickHouse counts from the newest block, so a lone
// block is kept however old). A repeated token inside the window is acknowledged without inserting;
// once it is evicted, the repeat is inserted again. Other engines insert every block.
//
// The sinks:
//  - exactly_once (TClickHouseBatchingSink): committed outbox rows cut into batches at epoch
//    boundaries and every max_batch_messages seqNos, so a replay carries the same batches;
//    token = the batch's largest MessageId; with shard_hosts (the sharded sink) the batch is
//    split by key and each shard gets the token suffixed ":<shard>";
//  - at_least_once (TAtLeastOnceClickHouseSink): each epoch's messages in one INSERT before
//    the epoch commits, without a token; transient errors retried without limit,
//    unclassified ones (a timeout: the insert may have happened) up to max_insert_attempts
//    attempts in all, permanent ones fail at once;
//  - at_most_once (TAtMostOnceClickHouseSink): one INSERT per message, never repeated once
//    it started.
// Each sink job opens its writer session lazily at its first write and validates the target
// then: Distributed tables, engines outside the MergeTree family and shards whose hosts
// cannot be shown to hold the same table are refused; a non-replicated MergeTree is accepted
// with a warning (exactly-once degrades to at-least-once); a dedup window shorter than
// replay_horizon gives the structured warning the seed names.
#pragma once

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "core/connectors.h"
#include "core/engine.h"
#include "core/spec.h"
#include "sim/queue_target.h"
#include "sim/world.h"

namespace onceflow::sim {

// What a scenario says of a ClickHouse target (the same for every shard).
struct ClickHouseTargetConfig {
  std::string database = "default";
  std::string engine = "ReplicatedMergeTree";
  Micros window_us = 7 * 24 * 3600 * kSeconds;  // replicated_deduplication_window_seconds
  int window_blocks = 1000;                     // replicated_deduplication_window
  bool same_table_on_all_hosts = true;          // the replicas' table identity can be proven
};


struct ClickHouseData {
  ClickHouseTargetConfig config;
  std::map<std::string, std::deque<std::pair<std::string, Micros>>> tokens;  // shard -> window
  uint64_t inserted_blocks = 0;
  uint64_t deduplicated_blocks = 0;
  void forget_tokens() { tokens.clear(); }
};

BootFn clickhouse_boot(TargetLog& table, ClickHouseData& data, TargetFaults& faults);

class SimClickHouseSink final : public SimTargetSink {
 public:
  SimClickHouseSink(Runtime& runtime, Network& network, const SinkSpec& spec, Micros timeout_us, EngineObserver* observer)
      : SimTargetSink(network, spec, timeout_us), runtime_(runtime), observer_(observer) {}
  Result<uint64_t> deliver(const std::string& job, LeaseId lease, const std::vector<OutboxRow>& rows) override;
  Status write_now(const std::string& job, LeaseId lease, const std::vector<Message>& messages) override;
  Once send_once(const std::string& job, LeaseId lease, const Message& m, const std::function<bool()>& starting) override;

 private:
  Status open_session(const std::string& job, LeaseId lease);
  Status insert(const std::string& job, LeaseId lease, const std::string& shard, const std::string& token,
                const std::vector<Message>& messages);
  std::string table_name() const;

  Runtime& runtime_;
  EngineObserver* observer_;
  std::map<std::string, LeaseId> sessions_;  // by sink job: the incarnation whose session is open
};

}  // namespace onceflow::sim
