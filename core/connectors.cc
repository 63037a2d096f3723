#include "core/connectors.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "core/env/random.h"

namespace onceflow {

uint64_t kafka_key(std::string_view bytes) {
  uint64_t key = 0;
  const auto [end, ec] = std::from_chars(bytes.data(), bytes.data() + bytes.size(), key);
  if (ec == std::errc() && end == bytes.data() + bytes.size() && !bytes.empty()) return key;
  return hash_bytes(bytes);
}

Status check_progress_marker(const std::string& job, const std::optional<uint64_t>& marker,
                             const std::vector<OutboxRow>& rows, const std::string& topic,
                             const std::string& progress_topic) {
  if (marker || rows.empty() || rows.front().seqno <= 1) return Status::ok();
  return Status::invalid_argument(fmt::format(
      "{}: the progress marker in {} is lost while its messages may already be in {}: stopping rather than "
      "writing duplicates",
      job, progress_topic, topic));
}

bool clickhouse_engine_deduplicates(const std::string& engine) {
  return engine == "SharedMergeTree" || (engine.starts_with("Replicated") && engine.ends_with("MergeTree"));
}

bool clickhouse_engine_accepted(const std::string& engine) {
  return engine != "Distributed" && engine.ends_with("MergeTree");
}

Result<std::vector<SinkWarning>> judge_clickhouse_target(const SinkSpec& spec, const std::string& database,
                                                          const std::string& table, const std::string& engine,
                                                          Micros window_us) {
  const std::string where = fmt::format("{}.{}", database, table);
  if (engine == "Distributed") {
    return Status::invalid_argument(fmt::format(
        "clickhouse sink {}: {} is a Distributed table; write to its local Replicated*MergeTree tables", spec.name, where));
  }
  if (!clickhouse_engine_accepted(engine)) {
    return Status::invalid_argument(
        fmt::format("clickhouse sink {}: {} has engine {}, outside the MergeTree family", spec.name, where, engine));
  }
  std::vector<SinkWarning> out;
  if (spec.delivery_guarantee != SinkDelivery::kExactlyOnce) return out;
  if (!clickhouse_engine_deduplicates(engine)) {
    out.push_back({"ClickHouseTargetDoesNotDeduplicate",
                   {{"Database", database}, {"Table", table}, {"Engine", engine}, {"Guarantee", "at_least_once"}}});
  } else if (window_us < spec.replay_horizon_us) {
    out.push_back({"ClickHouseDedupWindowShorterThanReplayHorizon",
                   {{"Database", database},
                    {"Table", table},
                    {"DedupWindowSetting", "replicated_deduplication_window_seconds"},
                    {"ReplayHorizon", format_time(spec.replay_horizon_us)},
                    {"DedupWindow", format_time(window_us)}}});
  }
  return out;
}

Result<std::vector<ClickHouseBatch>> clickhouse_batches(const std::vector<OutboxRow>& rows, size_t shards) {
  std::vector<ClickHouseBatch> out;
  std::vector<Message> batch;
  for (const OutboxRow& row : rows) {
    auto m = decode_message(row.message);
    if (!m) return Status::corruption("an outbox row does not decode");
    batch.push_back(std::move(*m));
    if (!row.batch_end) continue;
    MessageId largest = 0;
    for (const Message& b : batch) largest = std::max(largest, b.id);
    ClickHouseBatch& b = out.emplace_back();
    b.last_seqno = row.seqno;
    b.token = format_id(largest);
    if (shards == 0) {
      b.parts.push_back(std::move(batch));
    } else {
      b.parts.resize(shards);
      for (Message& message : batch) b.parts[message.key % shards].push_back(std::move(message));
    }
    batch.clear();
  }
  return out;
}

}  // namespace onceflow
