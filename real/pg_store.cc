#include "real/pg_store.h"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <set>
#include <string_view>
#include <thread>

#include "real/loop.h"
#include "real/wall_clock.h"

namespace onceflow::real {
namespace {

// Errors onceflow_commit3() raises, and what they mean to the Store contract.
constexpr std::string_view kLeaseNotActive = "OF001";
constexpr std::string_view kTooOld = "OF002";
constexpr std::string_view kWrittenSinceSnapshot = "OF003";
constexpr std::string_view kUniqueViolation = "23505";  // the commit token: resolve() fenced it

// Bump with every change to kSchema: a database of an older schema is upgraded on open.
constexpr int kSchemaVersion = 3;

// Run only when the database has no schema of this version: its DDL takes locks that a commit
// of a process killed a moment ago, still running in its backend, may hold.
// Runs in a transaction begun under kSchemaLock, after a look under that lock found it needed.
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS onceflow_schema (id int PRIMARY KEY, version int NOT NULL);
CREATE TABLE IF NOT EXISTS onceflow_rows (
  tbl bytea NOT NULL, key bytea NOT NULL, value bytea, version bigint NOT NULL, erased_at timestamptz,
  PRIMARY KEY (tbl, key));
CREATE INDEX IF NOT EXISTS onceflow_rows_tombstones ON onceflow_rows (erased_at) WHERE value IS NULL;
-- Version 2: "is any row left in these tables" (a drain's check) skips the tombstones.
CREATE INDEX IF NOT EXISTS onceflow_rows_live ON onceflow_rows (tbl, key) WHERE value IS NOT NULL;
CREATE TABLE IF NOT EXISTS onceflow_commits (tx bigint PRIMARY KEY, version bigint);
CREATE SEQUENCE IF NOT EXISTS onceflow_tx_ids;
CREATE SEQUENCE IF NOT EXISTS onceflow_lease_ids;
CREATE TABLE IF NOT EXISTS onceflow_leases (
  id bigint PRIMARY KEY, ttl_us bigint NOT NULL, expires_at timestamptz NOT NULL, aborted boolean NOT NULL DEFAULT false);
-- Version 3: commits run side by side. A row names the transaction that wrote it; a commit
-- writes a row only if that writer is visible in the committing transaction's snapshot.
-- Versions number commits (increasing, not necessarily in the order they become visible).
CREATE SEQUENCE IF NOT EXISTS onceflow_versions;
ALTER TABLE onceflow_rows ADD COLUMN IF NOT EXISTS writer xid8;
DROP FUNCTION IF EXISTS onceflow_commit(bigint, bigint, timestamptz, bigint, bigint[], bytea[], bytea[], bytea[]);
DROP TABLE IF EXISTS onceflow_clock;
CREATE OR REPLACE FUNCTION onceflow_commit3(p_tx bigint, p_snapshot text, p_begun timestamptz, p_timeout_us bigint,
    p_leases bigint[], p_tables bytea[], p_keys bytea[], p_values bytea[]) RETURNS bigint LANGUAGE plpgsql AS $f$
DECLARE
  v bigint := nextval('onceflow_versions');
  snapshot pg_snapshot := p_snapshot::pg_snapshot;
  live int;
  written bigint;
BEGIN
  IF clock_timestamp() - p_begun > p_timeout_us * interval '1 microsecond' THEN
    RAISE EXCEPTION 'the transaction was open longer than % us', p_timeout_us USING ERRCODE = 'OF002';
  END IF;
  -- Locked until this commit ends: an abort_lease waits for it.
  PERFORM 1 FROM onceflow_leases WHERE id = ANY(p_leases) FOR SHARE;
  SELECT count(*) INTO live FROM onceflow_leases
    WHERE id = ANY(p_leases) AND NOT aborted AND expires_at > clock_timestamp();
  IF live < (SELECT count(DISTINCT l) FROM unnest(p_leases) AS l) THEN
    RAISE EXCEPTION 'a prerequisite lease is not active' USING ERRCODE = 'OF001';
  END IF;
  INSERT INTO onceflow_commits (tx, version) VALUES (p_tx, v);
  -- Each row is locked as it is written (in key order, so two commits wait rather than
  -- deadlock), after its last writer has ended; a row whose last writer the snapshot does
  -- not see is not written, and the commit fails as a conflict.
  INSERT INTO onceflow_rows AS r (tbl, key, value, version, erased_at, writer)
    SELECT t, k, val, v, CASE WHEN val IS NULL THEN clock_timestamp() END, pg_current_xact_id()
    FROM unnest(p_tables, p_keys, p_values) AS w(t, k, val) ORDER BY t, k
  ON CONFLICT (tbl, key) DO UPDATE
    SET value = EXCLUDED.value, version = EXCLUDED.version, erased_at = EXCLUDED.erased_at, writer = EXCLUDED.writer
    WHERE r.writer IS NULL OR pg_visible_in_snapshot(r.writer, snapshot);
  GET DIAGNOSTICS written = ROW_COUNT;
  IF written < cardinality(p_keys) THEN
    RAISE EXCEPTION 'a key was written after the snapshot' USING ERRCODE = 'OF003';
  END IF;
  RETURN v;
END $f$;
INSERT INTO onceflow_schema VALUES (1, $SCHEMA_VERSION) ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version;
)sql";
// A session lock, taken before the transactions that look and create: a transaction begun
// before it was granted could answer the look from a stale catalog cache.
constexpr const char* kSchemaLock = "SELECT pg_advisory_lock(7155172026)";
constexpr const char* kSchemaUnlock = "SELECT pg_advisory_unlock(7155172026)";
constexpr const char* kSchemaExists = "SELECT to_regclass('onceflow_schema') IS NOT NULL";
constexpr const char* kSchemaVersionQuery = "SELECT version FROM onceflow_schema WHERE id = 1";

using Param = std::optional<std::string>;  // text format; nullopt is NULL

// libpq's message on one line: its lines joined by "; ", no trailing newline.
std::string one_line(std::string_view message) {
  std::string out;
  bool pending = false;  // a line break (and its indentation) to turn into "; "
  for (const char c : message) {
    if (c == '\n') {
      pending = true;
    } else if (pending && (c == '\t' || c == ' ')) {
      continue;
    } else {
      if (pending && !out.empty()) out += "; ";
      pending = false;
      out.push_back(c);
    }
  }
  return out;
}

std::string hex_bytea(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\\x";
  out.reserve(2 + bytes.size() * 2);
  for (const unsigned char c : bytes) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

// A bytea[] literal of text-format elements; nullopt elements are NULL.
std::string bytea_array(const std::vector<const std::string*>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out.push_back(',');
    if (items[i] == nullptr) {
      out += "NULL";
    } else {
      out += "\"\\";  // the element's own backslash, escaped inside the array literal
      out += hex_bytea(*items[i]);
      out += '"';
    }
  }
  out.push_back('}');
  return out;
}

std::string unescape_bytea(const char* text) {
  size_t length = 0;
  unsigned char* raw = PQunescapeBytea(reinterpret_cast<const unsigned char*>(text), &length);
  std::string out(reinterpret_cast<const char*>(raw), length);
  PQfreemem(raw);
  return out;
}

// A statement's result, or why it failed. `broken` is set when the connection is gone:
// whether the statement ran is then unknown.
struct Reply {
  std::unique_ptr<PGresult, decltype(&PQclear)> result{nullptr, &PQclear};
  Status status;
  std::string sqlstate;
  bool broken = false;
  bool ok() const { return status.is_ok(); }
  int rows() const { return PQntuples(result.get()); }
  bool null(int row, int col) const { return PQgetisnull(result.get(), row, col) != 0; }
  const char* text(int row, int col) const { return PQgetvalue(result.get(), row, col); }
  std::string bytes(int row, int col) const {  // of a binary result
    return std::string(PQgetvalue(result.get(), row, col), static_cast<size_t>(PQgetlength(result.get(), row, col)));
  }
  uint64_t int8(int row, int col) const {  // a bigint of a binary result
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(PQgetvalue(result.get(), row, col)[i]);
    return v;
  }
};

// A connection and the statements prepared on it (a statement is parsed and planned once
// per connection, not once per call).
struct Session {
  PGconn* conn = nullptr;
  std::set<std::string_view> prepared;  // Statement::name
};

// A statement run often: prepared on first use on each connection. `binary` results come
// back as bytes (bytea as is, bigint as 8 big-endian bytes) rather than escaped text.
struct Statement {
  const char* name;
  const char* sql;
  bool binary = false;
};

Reply finish(PGconn* conn, Reply reply) {
  const ExecStatusType st = reply.result ? PQresultStatus(reply.result.get()) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return reply;
  if (const char* code = reply.result ? PQresultErrorField(reply.result.get(), PG_DIAG_SQLSTATE) : nullptr) {
    reply.sqlstate = code;
  }
  reply.broken = PQstatus(conn) == CONNECTION_BAD;
  reply.status = Status::unavailable("postgresql: " + one_line(PQerrorMessage(conn)));
  return reply;
}

std::vector<const char*> param_values(const std::vector<Param>& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const Param& p : params) values.push_back(p ? p->c_str() : nullptr);
  return values;
}

Reply exec(PGconn* conn, const char* sql, const std::vector<Param>& params) {
  Reply reply;
  const std::vector<const char*> values = param_values(params);
  reply.result.reset(params.empty() ? PQexec(conn, sql)
                                    : PQexecParams(conn, sql, static_cast<int>(params.size()), nullptr,
                                                   values.data(), nullptr, nullptr, 0));
  return finish(conn, std::move(reply));
}

Reply exec(Session& session, const Statement& statement, const std::vector<Param>& params) {
  const int n = static_cast<int>(params.size());
  if (!session.prepared.contains(statement.name)) {
    Reply prepared;
    prepared.result.reset(PQprepare(session.conn, statement.name, statement.sql, n, nullptr));
    prepared = finish(session.conn, std::move(prepared));
    if (!prepared.ok()) return prepared;
    session.prepared.insert(statement.name);
  }
  Reply reply;
  const std::vector<const char*> values = param_values(params);
  reply.result.reset(
      PQexecPrepared(session.conn, statement.name, n, values.data(), nullptr, nullptr, statement.binary ? 1 : 0));
  return finish(session.conn, std::move(reply));
}

// Rows of the tables whose names start with $1: the range [$1, $2) of the primary key, $2 the
// first name past the prefix (NULL: none).
constexpr const char* kTablesWithPrefix = "tbl >= $1 AND ($2::bytea IS NULL OR tbl < $2) AND value IS NOT NULL";
std::vector<Param> prefix_range(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) return {hex_bytea(prefix), Param()};
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return {hex_bytea(prefix), hex_bytea(end)};
}

// From a fiber of `loop`, round trips wait on a helper thread: the loop goes on, and the
// transactions of several jobs wait for the database at once.
void off_loop(RealLoop* loop, const std::function<void()>& fn) {
  if (loop != nullptr && loop->scheduler().in_fiber()) {
    loop->run_blocking(fn);
  } else {
    fn();
  }
}

Reply query(RealLoop* loop, PGconn* conn, const char* sql, const std::vector<Param>& params = {}) {
  Reply reply;
  off_loop(loop, [&] { reply = exec(conn, sql, params); });
  return reply;
}

Reply query(RealLoop* loop, Session& session, const Statement& statement, const std::vector<Param>& params) {
  Reply reply;
  off_loop(loop, [&] { reply = exec(session, statement, params); });
  return reply;
}

// The statements run most, prepared on each connection.
constexpr Statement kRead{"onceflow_read",
                          "SELECT value FROM onceflow_rows WHERE tbl = $1 AND key = $2 AND value IS NOT NULL", true};
constexpr Statement kReadMany{"onceflow_read_many",
                              "SELECT w.i, r.value FROM unnest($2::bytea[]) WITH ORDINALITY AS w(k, i) "
                              "JOIN onceflow_rows r ON r.tbl = $1 AND r.key = w.k AND r.value IS NOT NULL",
                              true};
// Two statements, so that each plan (prepared, possibly generic) bounds the index scan.
constexpr Statement kReadRange{"onceflow_read_range",
                               "SELECT key, value FROM onceflow_rows WHERE tbl = $1 AND key >= $2 AND key < $3 "
                               "AND value IS NOT NULL ORDER BY key LIMIT $4",
                               true};
constexpr Statement kReadRangeToEnd{"onceflow_read_range_to_end",
                                    "SELECT key, value FROM onceflow_rows WHERE tbl = $1 AND key >= $2 "
                                    "AND value IS NOT NULL ORDER BY key LIMIT $3",
                                    true};
constexpr Statement kCommit{"onceflow_commit", "SELECT onceflow_commit3($1, $2, $3, $4, $5, $6, $7, $8)"};
}  // namespace

struct PgStore::Connection : Session {
  explicit Connection(std::atomic<size_t>& live) : live(live) { ++live; }
  ~Connection() {
    if (conn != nullptr) PQfinish(conn);
    --live;
  }
  std::atomic<size_t>& live;  // the store's count of its connections
};

PgStore::PgStore(std::string conninfo, Options options) : conninfo_(std::move(conninfo)), options_(options) {
  std::string database = "postgres", host = "localhost";
  if (PQconninfoOption* parsed = PQconninfoParse(conninfo_.c_str(), nullptr)) {
    for (const PQconninfoOption* o = parsed; o->keyword != nullptr; ++o) {
      if (o->val == nullptr || *o->val == '\0') continue;
      if (std::string_view(o->keyword) == "dbname") database = o->val;
      if (std::string_view(o->keyword) == "host") host = o->val;
    }
    PQconninfoFree(parsed);
  }
  where_ = fmt::format("postgresql database {} on {}", database, host);
}

PgStore::~PgStore() = default;

// A database that answered and then went away while a process opened the store (a restart)
// is waited for, as a running process waits for it, up to this long; one that never answered
// is an error at once (a wrong address should not keep its user waiting).
constexpr auto kOpenRetryFor = std::chrono::seconds(30);

Result<std::unique_ptr<PgStore>> PgStore::open(const std::string& conninfo, Options options) {
  const auto give_up = std::chrono::steady_clock::now() + kOpenRetryFor;
  bool answered = false;  // a connection was made in some attempt
  for (;;) {
    bool lost = false;  // this attempt's connection broke
    auto store = open_once(conninfo, options, &answered, &lost);
    if (store || !answered || !lost || std::chrono::steady_clock::now() >= give_up) {
      return store;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

Result<std::unique_ptr<PgStore>> PgStore::open_once(const std::string& conninfo, Options options, bool* answered,
                                                    bool* lost) {
  std::unique_ptr<PgStore> store(new PgStore(conninfo, options));
  auto c = store->acquire();
  if (!c) {
    *lost = true;  // no connection now (a retry only once one was made before)
    return c.error();
  }
  *answered = true;
  Status unreadable;  // why the schema could not be read (then nothing is created)
  const auto current = [&] {
    Reply exists = query(nullptr, (*c)->conn, kSchemaExists);
    Reply have;
    if (exists.ok() && exists.rows() == 1 && std::string_view(exists.text(0, 0)) == "t") {
      have = query(nullptr, (*c)->conn, kSchemaVersionQuery);
      if (have.ok()) return have.rows() == 1 && std::stoi(have.text(0, 0)) == kSchemaVersion;
    }
    const Reply& failed = exists.ok() ? have : exists;
    if (!failed.ok()) {
      *lost = PQstatus((*c)->conn) != CONNECTION_OK;
      unreadable = Status::unavailable("postgresql store: reading the schema: " + failed.status.message());
    }
    return false;
  };
  // Processes starting together on a new database: the first makes the schema, under a lock,
  // and the others find it made once they have the lock. A process that found it made before
  // takes no lock at all: the DDL's locks would wait for commits under way.
  const bool made = current();
  if (!unreadable.is_ok()) return unreadable;
  if (!made && options.existing_only) {
    return Status::not_found(fmt::format("{} holds no onceflow store (onceflow real makes one)", store->where()));
  }
  if (!made) {
    std::string schema = kSchema;
    schema.replace(schema.find("$SCHEMA_VERSION"), std::string_view("$SCHEMA_VERSION").size(), std::to_string(kSchemaVersion));
    Reply r = query(nullptr, (*c)->conn, kSchemaLock);
    const bool made_meanwhile = r.ok() && current();
    if (!unreadable.is_ok()) return unreadable;
    if (r.ok() && !made_meanwhile) {
      r = query(nullptr, (*c)->conn, "BEGIN");
      if (r.ok()) r = query(nullptr, (*c)->conn, schema.c_str());
      if (r.ok()) r = query(nullptr, (*c)->conn, "COMMIT");
    }
    if (r.ok()) r = query(nullptr, (*c)->conn, kSchemaUnlock);
    // On failure the connection closes with the store, and the lock with it.
    if (!r.ok()) {
      *lost = PQstatus((*c)->conn) != CONNECTION_OK;
      return Status::unavailable("postgresql store: creating the schema: " + r.status.message());
    }
  }
  store->release(std::move(*c));
  auto fsync = store->setting("fsync");
  if (!fsync) return fsync.error();
  if (*fsync != "on") {
    return Status::invalid_argument(fmt::format(
        "{} runs with fsync {}: a crash of the server can lose commits it acknowledged, without a word; turn fsync on",
        store->where(), *fsync));
  }
  if (auto server_max = store->setting("max_connections")) {
    const size_t share = std::strtoul(server_max->c_str(), nullptr, 10) / 8;
    store->options_.max_connections = std::clamp<size_t>(share, 2, options.max_connections);
  }
  return store;
}

Result<std::string> PgStore::setting(const std::string& name) {
  auto rows = query_once("SELECT current_setting($1)", {name});
  if (!rows) return rows.error();
  if (rows->size() != 1 || rows->front().size() != 1 || !rows->front()[0]) {
    return Status::unavailable("postgresql store: no setting " + name);
  }
  return *rows->front()[0];
}

Status PgStore::erase_old_tombstones() {
  auto erased = query_once(
      "DELETE FROM onceflow_rows WHERE value IS NULL AND erased_at < clock_timestamp() - $1::bigint * interval '1 microsecond'",
      {std::to_string(2 * options_.tx_timeout_us)});
  return erased ? Status::ok() : erased.error();
}

Result<std::unique_ptr<PgStore::Connection>> PgStore::acquire() {
  {
    std::lock_guard lock(mu_);
    while (!idle_.empty()) {
      std::unique_ptr<Connection> c = std::move(idle_.back());
      idle_.pop_back();
      if (PQstatus(c->conn) == CONNECTION_OK) return c;
    }
    // Every connection counts (a transaction's, and a lease's or a resolve's query on a helper
    // thread): a worker of many jobs pinging their Leases at once opened one each.
    if (live_connections_.load() >= options_.max_connections) {
      return Status::unavailable(fmt::format("postgresql store: {} connections busy ({} transactions open)",
                                             live_connections_.load(), open_.size()));
    }
  }
  auto c = std::make_unique<Connection>(live_connections_);
  c->conn = PQconnectdb(conninfo_.c_str());
  if (PQstatus(c->conn) != CONNECTION_OK) {
    return Status::unavailable("postgresql store: cannot connect: " + one_line(PQerrorMessage(c->conn)));
  }
  // Quiet: NOTICEs of CREATE ... IF NOT EXISTS would go to stderr.
  PQsetNoticeProcessor(c->conn, [](void*, const char*) {}, nullptr);
  // A commit is acknowledged once it is durable, whatever the server's or database's default.
  if (Reply r = exec(c->conn, "SET synchronous_commit TO on", {}); !r.ok()) {
    return Status::unavailable("postgresql store: " + r.status.message());
  }
  return c;
}

void PgStore::release(std::unique_ptr<Connection> c) {
  if (PQstatus(c->conn) != CONNECTION_OK || PQtransactionStatus(c->conn) != PQTRANS_IDLE) return;  // dropped
  std::lock_guard lock(mu_);
  idle_.push_back(std::move(c));
}

Result<PgStore::TextRows> PgStore::query_once(const char* sql, const Params& params) {
  auto c = acquire();
  if (!c) return c.error();
  Reply r = query(loop_, (*c)->conn, sql, params);
  release(std::move(*c));
  if (!r.ok()) return r.status;
  TextRows rows(static_cast<size_t>(r.rows()));
  for (int row = 0; row < r.rows(); ++row) {
    for (int col = 0; col < PQnfields(r.result.get()); ++col) {
      rows[static_cast<size_t>(row)].push_back(r.null(row, col) ? std::nullopt : std::optional<std::string>(r.text(row, col)));
    }
  }
  return rows;
}

size_t PgStore::open_transactions() const {
  std::lock_guard lock(mu_);
  return open_.size();
}

void PgStore::break_connection_of(TxId tx) {
  std::lock_guard lock(mu_);
  auto it = open_.find(tx);
  if (it != open_.end()) shutdown(PQsocket(it->second.connection->conn), SHUT_RDWR);
}

// --- Leases ---------------------------------------------------------------------------------

Result<LeaseId> PgStore::start_lease(Micros ttl_us) {
  auto rows = query_once("INSERT INTO onceflow_leases (id, ttl_us, expires_at) VALUES (nextval('onceflow_lease_ids'), $1, "
                         "clock_timestamp() + $1::bigint * interval '1 microsecond') RETURNING id",
                         {std::to_string(ttl_us)});
  if (!rows) return rows.error();
  return std::stoull(*(*rows)[0][0]);
}

Status PgStore::ping_lease(LeaseId lease) {
  auto rows = query_once("UPDATE onceflow_leases SET expires_at = clock_timestamp() + ttl_us * interval '1 microsecond' "
                         "WHERE id = $1 AND NOT aborted AND expires_at > clock_timestamp() RETURNING id",
                         {std::to_string(lease)});
  if (!rows) return rows.error();
  if (rows->empty()) return Status::prerequisite_failed(fmt::format("lease {} has ended", lease));
  std::lock_guard lock(mu_);
  ++stats_.lease_renewals;
  return Status::ok();
}

Status PgStore::abort_lease(LeaseId lease) {
  // Only an active Lease becomes aborted; an expired one stays expired. Waits for commits
  // that hold the Lease's row FOR SHARE.
  auto rows = query_once(
      "UPDATE onceflow_leases SET aborted = true WHERE id = $1 AND NOT aborted AND expires_at > clock_timestamp()",
      {std::to_string(lease)});
  return rows ? Status::ok() : rows.error();
}

Result<LeaseState> PgStore::lease_state(LeaseId lease) {
  auto rows = query_once("SELECT aborted, expires_at > clock_timestamp() FROM onceflow_leases WHERE id = $1",
                         {std::to_string(lease)});
  if (!rows) return rows.error();
  if (rows->empty()) return LeaseState::kUnknown;
  if ((*rows)[0][0] == "t") return LeaseState::kAborted;
  return (*rows)[0][1] == "t" ? LeaseState::kActive : LeaseState::kExpired;
}

// --- Transactions ---------------------------------------------------------------------------

void PgStore::expire_old_transactions() {
  const Micros now =
      WallClock().now();
  std::vector<std::unique_ptr<Connection>> ended;
  {
    std::lock_guard lock(mu_);
    for (auto it = open_.begin(); it != open_.end();) {
      if (now - it->second.begun_local <= options_.tx_timeout_us) {
        ++it;
        continue;
      }
      ended.push_back(std::move(it->second.connection));
      it = open_.erase(it);
    }
  }
  for (auto& c : ended) {
    query(loop_, c->conn, "ROLLBACK");
    release(std::move(c));
  }
}

Result<Transaction> PgStore::begin() {
  expire_old_transactions();
  auto c = acquire();
  if (!c) return c.error();
  Reply r = query(loop_, (*c)->conn,
                 "BEGIN ISOLATION LEVEL REPEATABLE READ; "
                 "SELECT pg_current_snapshot()::text, clock_timestamp(), nextval('onceflow_tx_ids'), "
                 "(SELECT last_value FROM onceflow_versions)");
  if (!r.ok()) return r.status;
  const Version snapshot = std::stoull(r.text(0, 3));
  const TxId id = std::stoull(r.text(0, 2));
  Open open;
  open.connection = std::move(*c);
  open.begun_local =
      WallClock().now();
  open.begun_db = r.text(0, 1);
  open.snapshot = r.text(0, 0);
  std::lock_guard lock(mu_);
  open_.emplace(id, std::move(open));
  return Transaction(id, snapshot);
}

Result<PgStore::Connection*> PgStore::connection_of(const Transaction& tx, bool reading) {
  std::lock_guard lock(mu_);
  if (reading) ++stats_.reads;
  auto it = open_.find(tx.id());
  if (it == open_.end()) return Status::aborted(fmt::format("transaction {} is over", tx.id()));
  return it->second.connection.get();
}

Result<std::optional<std::string>> PgStore::read(const Transaction& tx, const std::string& table,
                                                 const std::string& key) {
  auto c = connection_of(tx, /*reading=*/true);
  if (!c) return c.error();
  Reply r = query(loop_, **c, kRead, {hex_bytea(table), hex_bytea(key)});
  if (!r.ok()) return r.status;
  if (r.rows() == 0) return std::optional<std::string>();
  return std::optional<std::string>(r.bytes(0, 0));
}

Result<std::vector<std::optional<std::string>>> PgStore::read_many(const Transaction& tx, const std::string& table,
                                                                   const std::vector<std::string>& keys) {
  auto c = connection_of(tx, /*reading=*/true);
  if (!c) return c.error();
  std::vector<const std::string*> items;
  for (const std::string& k : keys) items.push_back(&k);
  Reply r = query(loop_, **c, kReadMany, {hex_bytea(table), bytea_array(items)});
  if (!r.ok()) return r.status;
  std::vector<std::optional<std::string>> out(keys.size());
  for (int row = 0; row < r.rows(); ++row) out[r.int8(row, 0) - 1] = r.bytes(row, 1);
  return out;
}

Result<std::vector<Row>> PgStore::read_range(const Transaction& tx, const std::string& table,
                                             const std::string& from, const std::string& to, size_t limit) {
  auto c = connection_of(tx, /*reading=*/true);
  if (!c) return c.error();
  Reply r = to.empty()
                ? query(loop_, **c, kReadRangeToEnd, {hex_bytea(table), hex_bytea(from), std::to_string(limit)})
                : query(loop_, **c, kReadRange, {hex_bytea(table), hex_bytea(from), hex_bytea(to), std::to_string(limit)});
  if (!r.ok()) return r.status;
  std::vector<Row> rows;
  rows.reserve(static_cast<size_t>(r.rows()));
  for (int row = 0; row < r.rows(); ++row) rows.push_back({r.bytes(row, 0), r.bytes(row, 1)});
  return rows;
}

void PgStore::abort(const Transaction& tx) {
  std::unique_ptr<Connection> c;
  {
    std::lock_guard lock(mu_);
    auto it = open_.find(tx.id());
    if (it == open_.end()) return;
    c = std::move(it->second.connection);
    open_.erase(it);
  }
  query(loop_, c->conn, "ROLLBACK");
  release(std::move(c));
}

Result<Version> PgStore::commit(const Transaction& tx, const std::vector<LeaseId>& prerequisites) {
  Open open;
  {
    std::lock_guard lock(mu_);
    auto it = open_.find(tx.id());
    if (it == open_.end()) return Status::aborted(fmt::format("transaction {} is over", tx.id()));
    open = std::move(it->second);
    open_.erase(it);
  }
  std::vector<const std::string*> tables, keys, values;
  for (const auto& [where, value] : tx.writes()) {
    tables.push_back(&where.first);
    keys.push_back(&where.second);
    values.push_back(value ? &*value : nullptr);
  }
  std::string leases = "{";
  for (size_t i = 0; i < prerequisites.size(); ++i) {
    if (i > 0) leases.push_back(',');
    leases.append(std::to_string(prerequisites[i]));
  }
  leases += "}";
  const std::vector<Param> params{std::to_string(tx.id()),      open.snapshot,
                                  open.begun_db,                std::to_string(options_.tx_timeout_us),
                                  leases,                       bytea_array(tables),
                                  bytea_array(keys),            bytea_array(values)};
  Reply ended, r;
  const auto run = [&] {
    ended = exec(open.connection->conn, "ROLLBACK", {});  // the snapshot is over; the commit is its own statement
    if (ended.ok()) {
      r = exec(*open.connection, kCommit, params);
    }
  };
  off_loop(loop_, run);
  release(std::move(open.connection));
  if (!ended.ok()) return ended.status;  // the commit was never sent
  if (r.broken) return Status::ambiguous("postgresql store: the connection broke during the commit: " + r.status.message());
  if (!r.ok()) {
    if (r.sqlstate == kLeaseNotActive) return Status::prerequisite_failed(r.status.message());
    if (r.sqlstate == kWrittenSinceSnapshot || r.sqlstate == "40001" || r.sqlstate == "40P01") {
      std::lock_guard lock(mu_);
      ++stats_.conflicts;
      return Status::conflict(r.status.message());
    }
    if (r.sqlstate == kUniqueViolation) return Status::conflict(fmt::format("transaction {} was resolved as not committed", tx.id()));
    if (r.sqlstate == kTooOld) return Status::aborted(r.status.message());
    return r.status;
  }
  const Version version = std::stoull(r.text(0, 0));
  {
    std::lock_guard lock(mu_);
    ++stats_.commits;
    ++stats_.synced_writes;
    stats_.writes += tx.write_count();
    for (const auto& [where, value] : tx.writes()) stats_.bytes += where.second.size() + (value ? value->size() : 0);
  }
  if (commits_since_cleanup_.fetch_add(1) % 1000 == 999) (void)erase_old_tombstones();
  return version;
}

PgStore::Stats PgStore::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

// Outside any transaction: the latest committed rows.
Result<std::vector<Row>> PgStore::dump(const std::string& table) {
  auto rows = query_once("SELECT key, value FROM onceflow_rows WHERE tbl = $1 AND value IS NOT NULL ORDER BY key",
                         {hex_bytea(table)});
  if (!rows) return rows.error();
  std::vector<Row> out;
  out.reserve(rows->size());
  for (const auto& row : *rows) out.push_back({unescape_bytea(row[0]->c_str()), unescape_bytea(row[1]->c_str())});
  return out;
}

Result<bool> PgStore::any_rows(const std::string& table_prefix) {
  // In key order: else, with no such row, the planner may scan the whole table for one.
  auto rows = query_once(fmt::format("SELECT 1 FROM onceflow_rows WHERE {} ORDER BY tbl, key LIMIT 1", kTablesWithPrefix).c_str(),
                         prefix_range(table_prefix));
  if (!rows) return rows.error();
  return !rows->empty();
}

Result<std::vector<std::string>> PgStore::table_names(const std::string& table_prefix) {
  auto rows = query_once(fmt::format("SELECT DISTINCT tbl FROM onceflow_rows WHERE {} ORDER BY tbl", kTablesWithPrefix).c_str(),
                         prefix_range(table_prefix));
  if (!rows) return rows.error();
  std::vector<std::string> names;
  for (const auto& row : *rows) names.push_back(unescape_bytea(row[0]->c_str()));
  return names;
}

Result<TxOutcome> PgStore::resolve(TxId tx, Version* version) {
  // The fence goes in unless the commit's token is there; a commit still under way holds its
  // token's index entry, and the insert waits for it to end. Then a fresh statement reads the
  // token (one snapshot for both would miss a commit that ended during the wait).
  auto fence = query_once("INSERT INTO onceflow_commits (tx, version) VALUES ($1, NULL) ON CONFLICT (tx) DO NOTHING RETURNING tx",
                          {std::to_string(tx)});
  if (!fence) return fence.error();
  if (!fence->empty()) return TxOutcome::kNotCommitted;
  auto token = query_once("SELECT version FROM onceflow_commits WHERE tx = $1", {std::to_string(tx)});
  if (!token) return token.error();
  if (token->empty() || !(*token)[0][0]) return TxOutcome::kNotCommitted;
  if (version != nullptr) *version = std::stoull(*(*token)[0][0]);
  return TxOutcome::kCommitted;
}

}  // namespace onceflow::real
