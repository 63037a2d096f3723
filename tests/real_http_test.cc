// The pieces of onceflow real's HTTP sinks and metrics that need no real server: URLs,
// ClickHouse's TabSeparated rows both ways, the batches of the exactly-once ClickHouse sinks,
// the tokens a server with insert_deduplication_token gets (from a fake server: Debian's
// ClickHouse 18.16 has no such setting), and the Prometheus text format.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "core/connectors.h"
#include "real/clickhouse_sink.h"
#include "real/http.h"
#include "real/loop.h"
#include "real/metrics.h"

namespace onceflow::real {
namespace {

TEST(HttpUrlTest, SplitsOriginAndTarget) {
  auto u = parse_http_url("http://127.0.0.1:8088/counts?x=1");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->origin, "http://127.0.0.1:8088");
  EXPECT_EQ(u->target, "/counts?x=1");
  auto bare = parse_http_url("https://example.org");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->origin, "https://example.org");
  EXPECT_EQ(bare->target, "/");
  EXPECT_EQ(parse_http_url("http://h:1?q")->target, "/?q");
  for (const char* bad : {"127.0.0.1:8088/counts", "ftp://h/x", "http:///x", "http://@h/x", "http://u:p@/x"}) {
    EXPECT_TRUE(parse_http_url(bad).error().is_invalid_argument()) << bad;
  }
}

TEST(HttpUrlTest, CredentialsAreSentAndNeverShown) {
  auto u = parse_http_url("http://writer:s3cr:et@p@ch.example:8123/db/?database=flow&password=q");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->origin, "http://ch.example:8123");
  EXPECT_EQ(u->user, "writer");
  EXPECT_EQ(u->password, "s3cr:et@p");  // the host starts after the last '@'
  EXPECT_EQ(u->path(), "/db/");
  EXPECT_EQ(u->query(), "database=flow&password=q");
  EXPECT_EQ(u->shown, "http://writer:***@ch.example:8123/db/?database=flow&password=***");
  auto no_password = parse_http_url("http://reader@h:1");
  ASSERT_TRUE(no_password);
  EXPECT_EQ(no_password->user, "reader");
  EXPECT_EQ(no_password->password, "");
  EXPECT_EQ(no_password->shown, "http://reader@h:1");
  EXPECT_EQ(shown_url("http://h:1/x?a=1&password=pw&b=2"), "http://h:1/x?a=1&password=***&b=2");
  EXPECT_EQ(shown_url("not a url, user:pw@x"), "not a url, user:pw@x");
  // A URL refused for another reason does not echo its password either.
  auto bad = parse_http_url("ftp://u:hunter2@h/x");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message().find("hunter2"), std::string::npos) << bad.error().message();
}

TEST(HttpReplyTest, TellsTransientFromPermanent) {
  HttpReply r;
  r.outcome = HttpReply::Outcome::kAnswered;
  for (int status : {408, 425, 429, 500, 503}) {
    r.status = status;
    EXPECT_TRUE(r.transient()) << status;
  }
  for (int status : {400, 401, 404, 409, 422}) {
    r.status = status;
    EXPECT_FALSE(r.transient()) << status;
  }
  r.status = 400;
  r.body = "bad\npayload\n";
  EXPECT_EQ(r.describe(), "answered 400: bad payload");
  r.outcome = HttpReply::Outcome::kNoAnswer;
  EXPECT_TRUE(r.transient());
}

TEST(ClickHouseRowsTest, PayloadsSurviveTheRoundTripWhateverTheirBytes) {
  std::vector<Message> messages(3);
  messages[0].id = 0x3049f715789b0d82;
  messages[0].key = 13;
  messages[0].payload = "key=13 count=9";
  messages[1].id = 1;
  messages[1].key = UINT64_MAX;
  messages[1].payload = std::string("tab\there\nnewline\\back\rslash\0nul", 32);
  messages[2].id = 2;
  messages[2].payload = "";
  const std::string tsv = clickhouse_rows(messages);
  EXPECT_EQ(tsv.substr(0, tsv.find('\n')), "3049f715789b0d82\t13\tkey=13 count=9");
  auto back = parse_clickhouse_rows(tsv);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*back)[i].message_id, format_id(messages[i].id));
    EXPECT_EQ((*back)[i].key, messages[i].key);
    EXPECT_EQ((*back)[i].payload, messages[i].payload) << i;
  }
  EXPECT_TRUE(parse_clickhouse_rows("abc\t12\n").error().is_corruption());
  EXPECT_TRUE(parse_clickhouse_rows("abc\tx\tp\n").error().is_corruption());
}

Message message(MessageId id, uint64_t key) {
  Message m;
  m.id = id;
  m.key = key;
  return m;
}

TEST(ClickHouseBatchesTest, OnlyCompleteBatchesGoWithTheirLargestIdAsToken) {
  std::vector<OutboxRow> rows;
  std::vector<Message> first(3), second(2);
  for (size_t i = 0; i < first.size(); ++i) first[i] = message(10 + i, i);
  first[1].id = 99;
  for (size_t i = 0; i < second.size(); ++i) second[i] = message(20 + i, i);
  append_outbox_rows(1, first, true, &rows);
  append_outbox_rows(4, second, false, &rows);  // its epoch is not over
  auto batches = clickhouse_batches(rows, 0);
  ASSERT_TRUE(batches);
  ASSERT_EQ(batches->size(), 1u);
  EXPECT_EQ((*batches)[0].last_seqno, 3u);
  EXPECT_EQ((*batches)[0].token, format_id(99));
  ASSERT_EQ((*batches)[0].parts.size(), 1u);
  EXPECT_EQ((*batches)[0].parts[0].size(), 3u);
  auto sharded = clickhouse_batches(rows, 2);
  ASSERT_TRUE(sharded);
  ASSERT_EQ((*sharded)[0].parts.size(), 2u);
  EXPECT_EQ((*sharded)[0].parts[0].size(), 2u);  // keys 0 and 2
  EXPECT_EQ((*sharded)[0].parts[1].size(), 1u);
}

// A ClickHouse that knows insert_deduplication_token, as far as the sink asks: its table is a
// ReplicatedMergeTree with the right columns; every INSERT's token is kept.
class FakeClickHouse {
 public:
  FakeClickHouse() {
    server_.Get("/ping", [](const httplib::Request&, httplib::Response& res) { res.set_content("Ok.\n", "text/plain"); });
    server_.Post("/", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.has_param("query")) {  // an INSERT: its rows are the body
        std::lock_guard lock(mu_);
        inserts_.emplace_back(req.get_param_value("insert_deduplication_token"), req.body);
        return;
      }
      const std::string& sql = req.body;
      std::string answer;
      if (sql.find("system.tables") != std::string::npos) {
        answer = "ReplicatedMergeTree\tReplicatedMergeTree('/t', 'r') ORDER BY message_id\n";
      } else if (sql.find("system.merge_tree_settings") != std::string::npos) {
        answer = "604800\n";
      } else if (sql.find("system.columns") != std::string::npos) {
        answer = "message_id\tString\nkey\tUInt64\npayload\tString\n";
      } else if (sql.find("insert_deduplication_token") != std::string::npos) {
        answer = "1\n";
      } else {
        res.status = 400;
      }
      res.set_content(answer, "text/tab-separated-values");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeClickHouse() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  // (token, rows) of every INSERT, in order.
  std::vector<std::pair<std::string, std::string>> inserts() {
    std::lock_guard lock(mu_);
    return inserts_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::pair<std::string, std::string>> inserts_;
};

// Delivers `rows` through a clickhouse sink of `spec` from a fiber, as a sink job does.
Result<uint64_t> deliver(const SinkSpec& spec, const std::vector<OutboxRow>& rows) {
  RealLoop loop;
  loop.add_node("worker");
  auto sink = ClickHouseSink::open(loop, spec, 5 * kSeconds, nullptr);
  if (!sink) return sink.error();
  std::optional<Result<uint64_t>> delivered;
  loop.runtime("worker").spawn("sink", [&] { delivered = (*sink)->deliver("sink/counts/0", 7, rows); });
  loop.run([&] { return delivered.has_value(); });
  return *delivered;
}

TEST(ClickHouseTokenTest, AServerThatKnowsTheTokenGetsTheBatchsLargestIdAndEachShardItsOrigin) {
  std::vector<Message> batch(4);
  for (size_t i = 0; i < batch.size(); ++i) batch[i] = message(30 + i, i);
  batch[2].id = 77;
  std::vector<OutboxRow> rows;
  append_outbox_rows(1, batch, true, &rows);

  FakeClickHouse one;
  SinkSpec spec;
  spec.name = "counts";
  spec.type = SinkType::kClickHouse;
  spec.url = fmt::format("http://127.0.0.1:{}", one.port());
  auto delivered = deliver(spec, rows);
  ASSERT_TRUE(delivered) << delivered.error().message();
  EXPECT_EQ(*delivered, 4u);
  ASSERT_EQ(one.inserts().size(), 1u);
  EXPECT_EQ(one.inserts()[0].first, format_id(77));

  // Sharded: each shard's part carries the token with the shard's origin, never the URL's
  // user, password or parameters (a rotated password keeps the token).
  FakeClickHouse a, b;
  SinkSpec sharded = spec;
  sharded.url.clear();
  sharded.shard_hosts = {fmt::format("http://writer:secret@127.0.0.1:{}/?database=default", a.port()),
                         fmt::format("http://127.0.0.1:{}", b.port())};
  delivered = deliver(sharded, rows);
  ASSERT_TRUE(delivered) << delivered.error().message();
  ASSERT_EQ(a.inserts().size(), 1u);
  ASSERT_EQ(b.inserts().size(), 1u);
  EXPECT_EQ(a.inserts()[0].first, fmt::format("{}:http://127.0.0.1:{}", format_id(77), a.port()));
  EXPECT_EQ(b.inserts()[0].first, fmt::format("{}:http://127.0.0.1:{}", format_id(77), b.port()));
  EXPECT_EQ(a.inserts()[0].second, clickhouse_rows({batch[0], batch[2]}));  // keys 0 and 2
  EXPECT_EQ(b.inserts()[0].second, clickhouse_rows({batch[1], batch[3]}));
}

TEST(ClickHouseSqlTest, NamesAndLiteralsAreQuoted) {
  EXPECT_EQ(clickhouse_table_sql("flow", "counts-1"), "`flow`.`counts-1`");
  EXPECT_EQ(clickhouse_table_sql("d", "we`ird\\"), "`d`.`we\\`ird\\\\`");
  EXPECT_EQ(clickhouse_literal("it's"), "'it\\'s'");
}

TEST(ClickHouseTargetTest, ATablesOwnDedupWindowIsRead) {
  EXPECT_EQ(table_dedup_window_seconds("ReplicatedMergeTree(\\'/t/{shard}/w\\', \\'{replica}\\') ORDER BY message_id "
                                       "SETTINGS replicated_deduplication_window_seconds = 3600, index_granularity = 8192"),
            3600u);
  EXPECT_EQ(table_dedup_window_seconds("ReplicatedMergeTree(\\'/t\\', \\'r\\') ORDER BY id SETTINGS index_granularity = 8192, "
                                       "replicated_deduplication_window = 10, replicated_deduplication_window_seconds=60"),
            60u);
  // The block-count window is another setting; no SETTINGS, or none of this one: the server's default.
  EXPECT_EQ(table_dedup_window_seconds("ReplicatedMergeTree(\\'/t\\', \\'r\\') ORDER BY id SETTINGS "
                                       "replicated_deduplication_window = 10"),
            std::nullopt);
  EXPECT_EQ(table_dedup_window_seconds("MergeTree() ORDER BY id"), std::nullopt);
  EXPECT_EQ(table_dedup_window_seconds(""), std::nullopt);
}

TEST(ClickHouseTargetTest, TheSeedsRulesForTheTable) {
  SinkSpec spec;
  spec.name = "out";
  spec.type = SinkType::kClickHouse;
  EXPECT_TRUE(judge_clickhouse_target(spec, "db", "t", "Distributed", 0).error().is_invalid_argument());
  EXPECT_TRUE(judge_clickhouse_target(spec, "db", "t", "Log", 0).error().is_invalid_argument());
  auto plain = judge_clickhouse_target(spec, "db", "t", "MergeTree", 0);
  ASSERT_TRUE(plain);
  ASSERT_EQ(plain->size(), 1u);
  EXPECT_EQ((*plain)[0].name, "ClickHouseTargetDoesNotDeduplicate");
  auto short_window = judge_clickhouse_target(spec, "db", "t", "ReplicatedMergeTree", kSeconds);
  ASSERT_EQ(short_window->size(), 1u);
  EXPECT_EQ((*short_window)[0].name, "ClickHouseDedupWindowShorterThanReplayHorizon");
  EXPECT_TRUE(judge_clickhouse_target(spec, "db", "t", "ReplicatedReplacingMergeTree", 7 * 86400 * kSeconds)->empty());
  spec.delivery_guarantee = SinkDelivery::kAtLeastOnce;
  EXPECT_TRUE(judge_clickhouse_target(spec, "db", "t", "MergeTree", 0)->empty());
}

TEST(MetricsTest, RendersPrometheusTextFormat) {
  Metrics m;
  m.describe("x_total", Metrics::Type::kCounter, "Things.");
  m.describe("lag", Metrics::Type::kGauge, "Lag.");
  m.describe("t_seconds", Metrics::Type::kHistogram, "Time.");
  m.add("x_total", {{"sink", "a\"b\\c\nd"}}, 2);
  m.add("x_total", {{"sink", "a\"b\\c\nd"}});
  m.set("lag", {{"p", "0"}}, 5);
  m.clear("lag");
  m.set("lag", {{"p", "1"}}, 7);
  m.observe("t_seconds", {}, 0.003);
  m.observe("t_seconds", {}, 20);
  const std::string text = m.render();
  EXPECT_NE(text.find("# TYPE x_total counter\nx_total{sink=\"a\\\"b\\\\c\\nd\"} 3\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("lag{p=\"0\"}"), std::string::npos) << text;
  EXPECT_NE(text.find("lag{p=\"1\"} 7\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t_seconds_bucket{le=\"0.0025\"} 0\nt_seconds_bucket{le=\"0.005\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t_seconds_bucket{le=\"10\"} 1\nt_seconds_bucket{le=\"+Inf\"} 2\nt_seconds_sum 20.003\nt_seconds_count 2\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace onceflow::real
