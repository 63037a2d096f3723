#include "sim/clickhouse.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/env/codec.h"

namespace onceflow::sim {

namespace {

constexpr size_t kIdsPerLine = 256;  // a block's MessageIds named in its trace line
constexpr const char* kDescribeService = "clickhouse.describe";
constexpr const char* kInsertService = "clickhouse.insert";
constexpr Micros kTransientRetryUs = 50 * kMillis;

}  // namespace

BootFn clickhouse_boot(TargetLog& table, ClickHouseData& data, TargetFaults& faults) {
  return [&table, &data, &faults](NodeContext& node) -> std::shared_ptr<void> {
    World& world = node.world;
    const NodeIndex self = node.index;
    Random& random = node.fault_random;
    node.network.serve(kDescribeService, [&data](const std::string&, std::string_view) -> Result<std::string> {
      const ClickHouseTargetConfig& c = data.config;
      Encoder out;
      out.bytes(c.database).bytes(c.engine).i64(c.window_us).u64(static_cast<uint64_t>(c.window_blocks));
      out.u64(c.same_table_on_all_hosts ? 1 : 0);
      return out.take();
    });
    node.network.serve(kInsertService, [&, self](const std::string&, std::string_view request) -> Result<std::string> {
      Decoder in(request);
      const std::string shard = in.string();
      const std::string token = in.string();
      const std::string job = in.string();
      const uint64_t lease = in.u64();
      const uint64_t count = in.u64();
      std::vector<Message> rows;
      for (uint64_t i = 0; i < count; ++i) {
        auto m = decode_message(in.bytes());
        if (!m) return Status::invalid_argument("Code: 27. CANNOT_PARSE_INPUT_ASSERTION_FAILED");
        rows.push_back(std::move(*m));
      }
      if (!in.done()) return Status::invalid_argument("Code: 62. SYNTAX_ERROR");
      if (auto failure = faults.injected_failure(random)) return *failure;
      if (!token.empty() && clickhouse_engine_deduplicates(data.config.engine)) {
        // The window: the last window_blocks tokens, none older than window_us before the
        // most recent one (ClickHouse measures from the newest block, not the clock).
        auto& window = data.tokens[shard];
        const bool seen = std::any_of(window.begin(), window.end(), [&](const auto& t) { return t.first == token; });
        if (seen) {
          ++data.deduplicated_blocks;
          if (world.trace().keeping()) {
            world.detail(self, fmt::format("block with token {} already inserted: deduplicated [{}]", token,
                                           format_ids(rows, kIdsPerLine)));
          }
          return std::string("deduplicated");
        }
        window.emplace_back(token, world.now());
        while (window.size() > static_cast<size_t>(data.config.window_blocks) ||
               window.back().second - window.front().second > data.config.window_us) {
          window.pop_front();
        }
      }
      ++data.inserted_blocks;
      if (world.trace().keeping()) {
        world.detail(self, fmt::format("inserts a block of {} rows into shard '{}' (token '{}'): [{}]", rows.size(), shard,
                                       token, format_ids(rows, kIdsPerLine)));
      }
      for (Message& m : rows) table.appended.push_back({std::move(m), job, lease, world.now()});
      return std::string("inserted");
    });
    return nullptr;
  };
}

std::string SimClickHouseSink::table_name() const { return table_of(spec_); }

// The writer session of a sink instance (a job under one Lease): opened at its first write,
// validated once, kept until the instance stops (a new Lease opens a new one).
Status SimClickHouseSink::open_session(const std::string& job, LeaseId lease) {
  if (auto it = sessions_.find(job); it != sessions_.end() && it->second == lease) return Status::ok();
  auto reply = call(kDescribeService, "");
  if (!reply) return reply.error();
  Decoder in(*reply);
  const std::string database = in.string();
  const std::string engine = in.string();
  const Micros window_us = in.i64();
  const uint64_t window_blocks = in.u64();
  const bool same_table = in.u64() != 0;
  auto warnings = judge_clickhouse_target(spec_, database, table_name(), engine, window_us);
  if (!warnings) return warnings.error();
  if (!same_table) {
    return Status::invalid_argument(fmt::format("clickhouse sink {}: the hosts of a shard of {}.{} cannot be shown to hold "
                                                "the same table", spec_.name, database, table_name()));
  }
  (void)window_blocks;
  if (observer_ != nullptr) {
    for (const SinkWarning& w : *warnings) observer_->warning(w.name, w.attributes);
  }
  sessions_[job] = lease;
  return Status::ok();
}

Status SimClickHouseSink::insert(const std::string& job, LeaseId lease, const std::string& shard,
                                 const std::string& token, const std::vector<Message>& messages) {
  Encoder req;
  req.bytes(shard).bytes(token).bytes(job).u64(lease).u64(messages.size());
  for (const Message& m : messages) req.bytes(encode_message(m));
  auto reply = call(kInsertService, req.take());
  return reply ? Status::ok() : reply.error();
}

// Batches as clickhouse_batches (core/connectors.h) cuts them. Returns the last seqNo of the
// last batch every shard took.
Result<uint64_t> SimClickHouseSink::deliver(const std::string& job, LeaseId lease, const std::vector<OutboxRow>& rows) {
  if (const Status s = open_session(job, lease); !s.is_ok()) return s;
  auto batches = clickhouse_batches(rows, spec_.shard_hosts.size());
  if (!batches) return batches.error();
  uint64_t delivered = 0;
  for (const ClickHouseBatch& batch : *batches) {
    Status status;
    if (spec_.shard_hosts.empty()) {
      status = insert(job, lease, "", batch.token, batch.parts[0]);
    } else {
      for (size_t i = 0; i < batch.parts.size() && status.is_ok(); ++i) {
        const std::string& shard = spec_.shard_hosts[i];
        if (!batch.parts[i].empty()) status = insert(job, lease, shard, batch.token + ":" + shard, batch.parts[i]);
      }
    }
    if (!status.is_ok()) {
      if (delivered > 0 && !status.is_invalid_argument()) return delivered;
      return status;
    }
    delivered = batch.last_seqno;
  }
  return delivered;
}

// One INSERT of the epoch's messages, no token. Transient errors (the server is unavailable
// or unreachable: nothing happened) are retried without limit; unclassified ones (no answer:
// it may have happened) up to max_insert_attempts attempts; permanent ones fail at once.
Status SimClickHouseSink::write_now(const std::string& job, LeaseId lease, const std::vector<Message>& messages) {
  if (const Status s = open_session(job, lease); !s.is_ok()) return s;
  int attempts = 0;
  for (;;) {
    const Status status = insert(job, lease, "", "", messages);
    if (status.is_ok() || status.is_invalid_argument()) return status;
    const bool transient = status.is_unavailable() || status.is_unreachable();
    if (!transient && ++attempts >= spec_.max_insert_attempts) return status;
    runtime_.sleep_for(kTransientRetryUs);
  }
}

ExternalSink::Once SimClickHouseSink::send_once(const std::string& job, LeaseId lease, const Message& m,
                                                const std::function<bool()>& starting) {
  if (const Status s = open_session(job, lease); !s.is_ok()) {
    return s.is_invalid_argument() ? Once::kRefused : Once::kNotStarted;  // either way nothing started
  }
  if (!starting()) return Once::kNotStarted;
  return insert(job, lease, "", "", {m}).is_ok() ? Once::kSent : Once::kFailedAfterStart;
}

}  // namespace onceflow::sim
