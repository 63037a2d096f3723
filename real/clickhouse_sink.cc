#include "real/clickhouse_sink.h"

#include <charconv>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "real/wall_clock.h"

namespace onceflow::real {

namespace {

constexpr Micros kTransientRetryUs = 50 * kMillis;

// ClickHouse's error code in an answer's body ("Code: 60, e.displayText() = ..."), or -1.
int error_code(const HttpReply& reply) {
  const size_t at = reply.body.find("Code: ");
  if (at == std::string::npos) return -1;
  int code = -1;
  std::from_chars(reply.body.data() + at + 6, reply.body.data() + reply.body.size(), code);
  return code;
}

enum class Failure : uint8_t { kTransient, kUnclassified, kPermanent };

// What an INSERT's failure means. No connection: nothing happened (transient). Codes that
// say the server is busy, read-only for now or lost ZooKeeper: transient. A 4xx (no such
// table or column, a syntax error, bad data): permanent. No answer, or another error: the
// INSERT may have happened (unclassified).
Failure classify(const HttpReply& reply) {
  if (reply.outcome == HttpReply::Outcome::kNotSent) return Failure::kTransient;
  if (reply.outcome == HttpReply::Outcome::kNoAnswer) return Failure::kUnclassified;
  switch (error_code(reply)) {
    case 202:  // TOO_MANY_SIMULTANEOUS_QUERIES
    case 242:  // TABLE_IS_READ_ONLY (lost its ZooKeeper session)
    case 252:  // TOO_MANY_PARTS
    case 999:  // KEEPER_EXCEPTION
      return Failure::kTransient;
    // The rows do not fit the table (18.16 answers these with 500): sending them again cannot help.
    case 6:    // CANNOT_PARSE_TEXT
    case 26:   // CANNOT_PARSE_QUOTED_STRING
    case 27:   // CANNOT_PARSE_INPUT_ASSERTION_FAILED
    case 53:   // TYPE_MISMATCH
    case 69:   // ARGUMENT_OUT_OF_BOUND
    case 70:   // CANNOT_CONVERT_TYPE
    case 72:   // CANNOT_PARSE_NUMBER
    case 117:  // INCORRECT_DATA
    case 131:  // TOO_LARGE_STRING_SIZE
      return Failure::kPermanent;
    default: break;
  }
  if (reply.status >= 400 && reply.status < 500 && reply.status != 408 && reply.status != 429) return Failure::kPermanent;
  return Failure::kUnclassified;
}

void append_escaped(std::string& out, std::string_view text) {
  for (const char c : text) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\0': out += "\\0"; break;
      default: out += c;
    }
  }
}

// A TabSeparated field as ClickHouse escapes it, read back.
std::string unescaped(std::string_view field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '\\' || i + 1 == field.size()) {
      out += field[i];
      continue;
    }
    switch (const char c = field[++i]) {
      case 't': out += '\t'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case '0': out += '\0'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      default: out += c;  // \\, \', and anything else as itself
    }
  }
  return out;
}

// `text` between `quote`s, each quote and backslash in it escaped with a backslash.
std::string quoted(const std::string& text, char quote = '\'') {
  std::string out(1, quote);
  for (const char c : text) {
    if (c == quote || c == '\\') out += '\\';
    out += c;
  }
  return out + quote;
}

}  // namespace

std::string clickhouse_literal(const std::string& text) { return quoted(text); }

std::optional<uint64_t> table_dedup_window_seconds(std::string_view engine_full) {
  const size_t settings = engine_full.rfind(" SETTINGS ");
  if (settings == std::string_view::npos) return std::nullopt;
  constexpr std::string_view kName = "replicated_deduplication_window_seconds";
  for (size_t at = engine_full.find(kName, settings); at != std::string_view::npos; at = engine_full.find(kName, at + 1)) {
    const char before = engine_full[at - 1];
    if (before != ' ' && before != ',') continue;
    std::string_view rest = engine_full.substr(at + kName.size());
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (rest.empty() || rest.front() != '=') continue;
    rest.remove_prefix(1);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    uint64_t seconds = 0;
    if (std::from_chars(rest.data(), rest.data() + rest.size(), seconds).ec == std::errc()) return seconds;
  }
  return std::nullopt;
}

std::string clickhouse_table_sql(const std::string& database, const std::string& table) {
  return quoted(database, '`') + "." + quoted(table, '`');
}

ClickHouseServer::ClickHouseServer(const std::string& url, Micros timeout)
    : parsed_(parse_http_url(url).value()),
      client_(parsed_, timeout),
      // The URL's path and parameters (a proxy's prefix, ?database=, ?user=) go with every request.
      base_(parsed_.path() + "?" + (parsed_.query().empty() ? "" : parsed_.query() + "&")) {}

Result<std::string> ClickHouseServer::query(const std::string& sql) {
  HttpReply reply = client_.post(base_ + "wait_end_of_query=1", {}, sql, "text/plain");
  if (reply.ok()) return std::move(reply.body);
  const std::string what = fmt::format("ClickHouse at {}: {}", url(), reply.describe());
  if (classify(reply) == Failure::kPermanent) return Status::invalid_argument(what);
  return Status::unavailable(what);
}

bool ClickHouseServer::ping() { return client_.get("/ping").ok(); }

HttpReply ClickHouseServer::insert(const std::string& table, const std::string& rows, const std::string& settings) {
  const std::string sql = fmt::format("INSERT INTO {} (message_id, key, payload) FORMAT TabSeparated", table);
  return client_.post(base_ + "query=" + query_param(sql) + settings, {}, rows, "text/tab-separated-values");
}

std::string clickhouse_rows(const std::vector<Message>& messages) {
  std::string out;
  for (const Message& m : messages) {
    append_id(out, m.id);
    out += '\t';
    out += std::to_string(m.key);
    out += '\t';
    append_escaped(out, m.payload);
    out += '\n';
  }
  return out;
}

Result<std::vector<ClickHouseRow>> parse_clickhouse_rows(std::string_view tsv) {
  std::vector<ClickHouseRow> out;
  size_t line_no = 0;
  while (!tsv.empty()) {
    ++line_no;
    const size_t end = tsv.find('\n');
    const std::string_view line = tsv.substr(0, end);
    tsv = end == std::string_view::npos ? std::string_view() : tsv.substr(end + 1);
    const size_t a = line.find('\t');
    const size_t b = a == std::string_view::npos ? a : line.find('\t', a + 1);
    ClickHouseRow row;
    if (b == std::string_view::npos ||
        std::from_chars(line.data() + a + 1, line.data() + b, row.key).ptr != line.data() + b) {
      return Status::corruption(fmt::format("line {} of the table is not message_id, key, payload", line_no));
    }
    row.message_id = unescaped(line.substr(0, a));
    row.payload = unescaped(line.substr(b + 1));
    out.push_back(std::move(row));
  }
  return out;
}

std::pair<std::string, std::string> clickhouse_table(const SinkSpec& spec) {
  const std::string& name = table_of(spec);
  const size_t dot = name.find('.');
  if (dot == std::string::npos) return {"default", name};
  return {name.substr(0, dot), name.substr(dot + 1)};
}

Result<std::unique_ptr<ClickHouseSink>> ClickHouseSink::open(RealLoop& loop, const SinkSpec& spec, Micros timeout,
                                                             EngineObserver* observer) {
  std::unique_ptr<ClickHouseSink> sink(new ClickHouseSink(loop, spec, timeout, observer));
  if (spec.shard_hosts.empty()) {
    if (spec.url.empty()) {
      return Status::invalid_argument(fmt::format(
          "sinks.{}.url: a clickhouse sink needs its server's HTTP interface (http://host:8123), or shard_hosts",
          spec.name));
    }
    sink->urls_.push_back(spec.url);
  } else {
    if (!spec.url.empty()) {
      return Status::invalid_argument(fmt::format(
          "sinks.{}.url: a sharded clickhouse sink writes to its shard_hosts (each a server's URL), not to url", spec.name));
    }
    sink->urls_ = spec.shard_hosts;
  }
  for (const std::string& url : sink->urls_) {
    auto parsed = parse_http_url(url);
    if (!parsed) {
      return Status::invalid_argument(fmt::format("sinks.{}.{}: {}", spec.name, spec.shard_hosts.empty() ? "url" : "shard_hosts",
                                                  parsed.error().message()));
    }
  }
  return sink;
}

ClickHouseSink::ClickHouseSink(RealLoop& loop, const SinkSpec& spec, Micros timeout, EngineObserver* observer)
    : loop_(loop), spec_(spec), observer_(observer), timeout_(timeout) {
  std::tie(database_, table_) = clickhouse_table(spec);
}

ClickHouseSink::~ClickHouseSink() = default;

ClickHouseSink::Servers& ClickHouseSink::servers(const std::string& job) {
  Servers& s = servers_[job];
  if (s.empty()) {
    for (const std::string& url : urls_) s.push_back(std::make_shared<ClickHouseServer>(url, timeout_));
  }
  return s;
}

Status ClickHouseSink::stop_for_good(Status why) {
  if (failed_.is_ok()) failed_ = why;
  return failed_;
}

// The target as the seed's rules judge it (sim/clickhouse.cc's open_session does the same
// with the simulated server's answers).
Status ClickHouseSink::validate(ClickHouseServer& server, size_t index) {
  const std::string where = fmt::format("{}.{}", database_, table_);
  auto engine = server.query(fmt::format("SELECT engine, engine_full FROM system.tables WHERE database = {} AND name = {}",
                                         quoted(database_), quoted(table_)));
  if (!engine) return engine.error();
  const std::string_view row = std::string_view(*engine).substr(0, engine->find('\n'));
  const std::string name(row.substr(0, row.find('\t')));
  const std::string_view engine_full = row.find('\t') == std::string_view::npos ? "" : row.substr(row.find('\t') + 1);
  if (name.empty()) {
    return Status::invalid_argument(fmt::format("clickhouse sink {}: {} has no table {}", spec_.name, server.url(), where));
  }
  // The dedup window matters only where blocks are deduplicated: the table's own setting,
  // else the server's default for MergeTree tables.
  Micros window_us = INT64_MAX;
  if (clickhouse_engine_deduplicates(name)) {
    std::optional<uint64_t> seconds = table_dedup_window_seconds(engine_full);
    if (!seconds) {
      auto window = server.query(
          "SELECT value FROM system.merge_tree_settings WHERE name = 'replicated_deduplication_window_seconds'");
      if (!window) return window.error();
      uint64_t value = 0;
      if (std::from_chars(window->data(), window->data() + window->size(), value).ec == std::errc()) seconds = value;
    }
    if (seconds) window_us = static_cast<Micros>(std::min<uint64_t>(*seconds, INT64_MAX / kSeconds)) * kSeconds;
  }
  auto warnings = judge_clickhouse_target(spec_, database_, table_, name, window_us);
  if (!warnings) return warnings.error();
  auto columns = server.query(fmt::format("SELECT name, type FROM system.columns WHERE database = {} AND table = {}",
                                          quoted(database_), quoted(table_)));
  if (!columns) return columns.error();
  for (const auto& [column, type] : {std::pair{"message_id", "String"}, std::pair{"key", "UInt64"}, std::pair{"payload", "String"}}) {
    const size_t at = ("\n" + *columns).find(fmt::format("\n{}\t", column));
    if (at == std::string::npos) {
      return Status::invalid_argument(fmt::format(
          "clickhouse sink {}: {} has no column {} (a row is message_id String, key UInt64, payload String)",
          spec_.name, where, column));
    }
    const size_t begin = at + std::string_view(column).size() + 1;
    const std::string found = columns->substr(begin, columns->find('\n', begin) - begin);
    if (found != type) {
      return Status::invalid_argument(fmt::format(
          "clickhouse sink {}: {} has column {} of type {}, not {} (a row is message_id String, key UInt64, payload String)",
          spec_.name, where, column, found, type));
    }
  }
  auto token = server.query("SELECT count() FROM system.settings WHERE name = 'insert_deduplication_token'");
  if (!token) return token.error();
  if (token->starts_with("1")) knows_token_.insert(index);
  if (observer_ != nullptr) {
    for (const SinkWarning& w : *warnings) observer_->warning(w.name, w.attributes);
  }
  return Status::ok();
}

Status ClickHouseSink::open_session(const std::string& job, LeaseId lease) {
  if (!failed_.is_ok()) return failed_;
  if (auto it = sessions_.find(job); it != sessions_.end() && it->second == lease) return Status::ok();
  Servers& s = servers(job);
  Status status;
  loop_.run_blocking([&] {
    for (size_t i = 0; i < s.size() && status.is_ok(); ++i) status = validate(*s[i], i);
  });
  if (status.is_invalid_argument()) return stop_for_good(status);
  if (!status.is_ok()) {
    health_.failed(loop_.clock().now(), status.message());
    return status;
  }
  health_.answered();
  sessions_[job] = lease;
  return Status::ok();
}

HttpReply ClickHouseSink::insert(ClickHouseServer& server, const std::vector<Message>& messages, const std::string& token) {
  const std::string rows = clickhouse_rows(messages);
  std::string settings = "&wait_end_of_query=1";
  if (!token.empty()) settings += "&insert_deduplication_token=" + query_param(token);
  HttpReply reply;
  loop_.run_blocking([&] { reply = server.insert(clickhouse_table_sql(database_, table_), rows, settings); });
  heard(reply);
  return reply;
}

void ClickHouseSink::heard(const HttpReply& reply) {
  if (reply.outcome == HttpReply::Outcome::kAnswered) {
    health_.answered();
  } else {
    health_.failed(loop_.clock().now(), reply.describe());
  }
}

void ClickHouseSink::visible(const std::vector<Message>& messages) {
  if (latency_ == nullptr) return;
  const Micros now = calendar_now();
  for (const Message& m : messages) latency_->add(now - m.event_ts);
}

Result<uint64_t> ClickHouseSink::deliver(const std::string& job, LeaseId lease, const std::vector<OutboxRow>& rows) {
  if (const Micros pause = backoff_.pause(); pause > 0 && failed_.is_ok()) loop_.pause_fiber(pause);
  auto delivered = deliver_batches(job, lease, rows);
  if (delivered && *delivered > 0) {
    backoff_.succeeded();
  } else if (!delivered) {
    backoff_.failed();
  }
  return delivered;
}

Result<uint64_t> ClickHouseSink::deliver_batches(const std::string& job, LeaseId lease, const std::vector<OutboxRow>& rows) {
  if (const Status s = open_session(job, lease); !s.is_ok()) return s;
  auto batches = clickhouse_batches(rows, spec_.shard_hosts.size());
  if (!batches) return batches.error();
  Servers& s = servers(job);
  uint64_t delivered = 0;
  for (const ClickHouseBatch& batch : *batches) {
    for (size_t i = 0; i < batch.parts.size(); ++i) {
      if (batch.parts[i].empty()) continue;
      std::string token;
      if (knows_token_.contains(i)) token = spec_.shard_hosts.empty() ? batch.token : batch.token + ":" + s[i]->origin();
      const HttpReply reply = insert(*s[i], batch.parts[i], token);
      if (reply.ok()) continue;
      const Status why = Status::unavailable(fmt::format("ClickHouse at {}: {}", s[i]->url(), reply.describe()));
      if (classify(reply) == Failure::kPermanent) {
        return stop_for_good(Status::invalid_argument(fmt::format(
            "clickhouse sink {}: {} refuses a batch of {} messages ({}); the sink stops rather than skip it", spec_.name,
            s[i]->url(), batch.parts[i].size(), reply.describe())));
      }
      // The batch goes again whole, to every shard: a shard that took its part drops the repeat.
      if (delivered > 0) return delivered;
      return why;
    }
    for (const auto& part : batch.parts) visible(part);
    delivered = batch.last_seqno;
  }
  return delivered;
}

Status ClickHouseSink::write_now(const std::string& job, LeaseId lease, const std::vector<Message>& messages) {
  if (const Status s = open_session(job, lease); !s.is_ok()) return s;
  if (messages.empty()) return Status::ok();
  ClickHouseServer& server = *servers(job).front();
  int attempts = 0;
  for (;;) {
    const HttpReply reply = insert(server, messages, "");
    if (reply.ok()) {
      visible(messages);
      return Status::ok();
    }
    const Failure failure = classify(reply);
    const std::string what = fmt::format("ClickHouse at {}: {}", server.url(), reply.describe());
    if (failure == Failure::kPermanent) {
      return stop_for_good(Status::invalid_argument(fmt::format(
          "clickhouse sink {}: {} refuses an epoch's {} messages ({}); the sink stops", spec_.name, server.url(),
          messages.size(), reply.describe())));
    }
    if (failure == Failure::kUnclassified && ++attempts >= spec_.max_insert_attempts) {
      return Status::unavailable(fmt::format("{} ({} attempts)", what, attempts));  // the epoch goes again
    }
    if (loop_.stop_requested()) return Status::unavailable(what);
    loop_.run_blocking([] { std::this_thread::sleep_for(std::chrono::microseconds(kTransientRetryUs)); });
  }
}

ExternalSink::Once ClickHouseSink::send_once(const std::string& job, LeaseId lease, const Message& m,
                                             const std::function<bool()>& starting) {
  if (const Status s = open_session(job, lease); !s.is_ok()) {
    return s.is_invalid_argument() ? Once::kRefused : Once::kNotStarted;  // either way nothing started
  }
  // The connection first: a server that cannot be reached now leaves the message unsent,
  // to be tried again; once starting() has acknowledged it, it is never sent again.
  ClickHouseServer& server = *servers(job).front();
  if (const Micros pause = backoff_.pause(); pause > 0) loop_.pause_fiber(pause);
  bool up = false;
  loop_.run_blocking([&] { up = server.ping(); });
  if (up) {
    health_.answered();
    backoff_.succeeded();
  } else {
    health_.failed(loop_.clock().now(), "/ping got no answer");
    backoff_.failed();
  }
  if (!up || !starting()) return Once::kNotStarted;
  const HttpReply reply = insert(server, {m}, "");
  if (!reply.ok()) return Once::kFailedAfterStart;
  visible({m});
  return Once::kSent;
}

}  // namespace onceflow::real
