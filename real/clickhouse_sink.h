// The ClickHouse sinks of `onceflow real`, over ClickHouse's HTTP interface (real/http.h):
// the seed's four classes, as sim/clickhouse.h models them.
//
// A row of the target table is one message: columns `message_id` (String, 16 hex digits),
// `key` (UInt64) and `payload` (String), which the table must have (it may have others, with
// defaults). Rows go as TabSeparated.
//  - exactly_once (TClickHouseBatchingSink): committed outbox rows in the batches
//    clickhouse_batches (core/connectors.h) cuts, one INSERT each, so a batch sent again after
//    a restart is the same block: a Replicated*MergeTree table drops it by its block hash
//    (ClickHouse 18.16 here), and a server that knows insert_deduplication_token also gets the
//    batch's token. With shard_hosts (each the URL of one shard's server) the batch is split
//    by key and each shard gets its part (token suffixed ":<shard URL>").
//  - at_least_once (TAtLeastOnceClickHouseSink): each epoch's messages in one INSERT before
//    the epoch commits; transient errors (no connection; 5xx codes that say the server is
//    busy or lost ZooKeeper) are retried without limit, unclassified ones (no answer: the
//    INSERT may have happened; another 5xx) up to max_insert_attempts attempts in all,
//    permanent ones (4xx: no such table or column, a syntax error) fail at once.
//  - at_most_once (TAtMostOnceClickHouseSink): one INSERT per message, never repeated once it
//    started.
// Each sink job opens its writer session at its first write under a Lease and validates the
// target then: a missing table, a Distributed table, an engine outside the MergeTree family
// or a table without the three columns is refused (the sink stops, the run ends with exit 2
// naming it); a non-replicated MergeTree under exactly_once is accepted with the warning
// ClickHouseTargetDoesNotDeduplicate (exactly-once degrades to at-least-once); a dedup window
// (replicated_deduplication_window_seconds) shorter than replay_horizon gives the warning
// ClickHouseDedupWindowShorterThanReplayHorizon with the seed's attributes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/connectors.h"
#include "core/engine.h"
#include "core/spec.h"
#include "real/http.h"
#include "real/latency.h"
#include "real/loop.h"

namespace onceflow::real {

// A ClickHouse server's HTTP interface: queries and inserts.
class ClickHouseServer {
 public:
  ClickHouseServer(const std::string& url, Micros timeout);
  // A query's answer (TabSeparated unless the SQL says otherwise), or the server's error:
  // kInvalidArgument for a 4xx (permanent), kUnavailable otherwise.
  Result<std::string> query(const std::string& sql);
  // Inserts TabSeparated `rows` into `table` (columns message_id, key, payload) with the
  // settings given (URL parameters).
  HttpReply insert(const std::string& table, const std::string& rows, const std::string& settings = "");
  const std::string& url() const { return parsed_.shown; }  // its password, if any, as "***"
  // "http://host:port": the shard's name in a batch's token, the same whatever user,
  // password, path or parameters the URL carries (a rotated password must not change it).
  const std::string& origin() const { return parsed_.origin; }
  bool ping();  // the server answers /ping

 private:
  HttpUrl parsed_;
  HttpClient client_;
  std::string base_;  // "<path>?<the URL's parameters>&"
};

// Messages as the rows of the target table (TabSeparated, escaped as ClickHouse reads them),
// and back: kCorruption for a line that is not three fields.
std::string clickhouse_rows(const std::vector<Message>& messages);
struct ClickHouseRow {
  std::string message_id;
  uint64_t key = 0;
  std::string payload;
};
Result<std::vector<ClickHouseRow>> parse_clickhouse_rows(std::string_view tsv);

// "db.table" or "table" (then in `default`) as the sink's table names it.
std::pair<std::string, std::string> clickhouse_table(const SinkSpec& spec);
// The replicated_deduplication_window_seconds a table's own SETTINGS give it, from its
// system.tables engine_full ("ReplicatedMergeTree(...) ORDER BY id SETTINGS
// replicated_deduplication_window_seconds = 3600, index_granularity = 8192"); nullopt when
// they do not (the server's default holds).
std::optional<uint64_t> table_dedup_window_seconds(std::string_view engine_full);
// `text` as an SQL string literal.
std::string clickhouse_literal(const std::string& text);
// `database`.`table` as SQL names them (back-quoted, so that any name is one).
std::string clickhouse_table_sql(const std::string& database, const std::string& table);

class ClickHouseSink final : public ExternalSink {
 public:
  // kInvalidArgument for a missing or bad url (or shard URL).
  static Result<std::unique_ptr<ClickHouseSink>> open(RealLoop& loop, const SinkSpec& spec, Micros timeout,
                                                      EngineObserver* observer);
  ~ClickHouseSink() override;
  Result<uint64_t> deliver(const std::string& job, LeaseId lease, const std::vector<OutboxRow>& rows) override;
  Status write_now(const std::string& job, LeaseId lease, const std::vector<Message>& messages) override;
  Once send_once(const std::string& job, LeaseId lease, const Message& m, const std::function<bool()>& starting) override;
  // OK, or why the sink stopped for good (the target refused): the deployment stops.
  const Status& failed() const { return failed_; }
  const ServerHealth& health() const { return health_; }
  void set_latency(LatencyHistogram* latency) { latency_ = latency; }

 private:
  ClickHouseSink(RealLoop& loop, const SinkSpec& spec, Micros timeout, EngineObserver* observer);
  // The writer session of a sink job under `lease`: validates every server's table once.
  Status open_session(const std::string& job, LeaseId lease);
  Status validate(ClickHouseServer& server, size_t index);
  // deliver() without the backoff around it.
  Result<uint64_t> deliver_batches(const std::string& job, LeaseId lease, const std::vector<OutboxRow>& rows);
  // One INSERT on the loop's helper thread.
  HttpReply insert(ClickHouseServer& server, const std::vector<Message>& messages, const std::string& token);
  Status stop_for_good(Status why);
  void visible(const std::vector<Message>& messages);

  RealLoop& loop_;
  SinkSpec spec_;
  EngineObserver* observer_;
  std::string database_, table_;
  // The server's URL, or each shard's.
  std::vector<std::string> urls_;
  Micros timeout_;
  // By job: its own connections (a job's requests go one at a time; jobs' go side by side).
  using Servers = std::vector<std::shared_ptr<ClickHouseServer>>;
  std::map<std::string, Servers> servers_;
  Servers& servers(const std::string& job);
  std::set<size_t> knows_token_;  // servers (by index) that take insert_deduplication_token
  std::map<std::string, LeaseId> sessions_;  // by job
  Status failed_;
  Backoff backoff_;  // between exactly-once and at-most-once sends while a server fails
  ServerHealth health_;
  void heard(const HttpReply& reply);  // health_ after a request
  LatencyHistogram* latency_ = nullptr;
};

}  // namespace onceflow::real
