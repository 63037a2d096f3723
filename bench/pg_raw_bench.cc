// The database limit for bench/run.sh: raw PostgreSQL transactions, each upserting `entries`
// rows of `value_bytes` bytes into a table of its own in one statement (unnest of two
// arrays) and committing, one after another from one connection (as the PostgreSQL store
// commits, one at a time). Prints one JSON object.
//   pg_raw_bench CONNINFO TRANSACTIONS ENTRIES VALUE_BYTES
#include <fmt/format.h>
#include <libpq-fe.h>

#include <chrono>
#include <cstdlib>
#include <string>

namespace {

bool ok(PGresult* r) {
  const ExecStatusType st = PQresultStatus(r);
  PQclear(r);
  return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    fmt::print(stderr, "usage: pg_raw_bench CONNINFO TRANSACTIONS ENTRIES VALUE_BYTES\n");
    return 2;
  }
  const long transactions = std::atol(argv[2]);
  const long entries = std::max(1L, std::atol(argv[3]));
  const size_t value_bytes = static_cast<size_t>(std::max(0L, std::atol(argv[4])));
  PGconn* conn = PQconnectdb(argv[1]);
  if (PQstatus(conn) != CONNECTION_OK) {
    fmt::print(stderr, "pg_raw_bench: {}", PQerrorMessage(conn));
    return 2;
  }
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
  if (!ok(PQexec(conn, "DROP TABLE IF EXISTS pg_raw_bench; CREATE TABLE pg_raw_bench (k bytea PRIMARY KEY, v bytea)"))) {
    fmt::print(stderr, "pg_raw_bench: {}", PQerrorMessage(conn));
    return 2;
  }
  std::string value = "\\\\x";  // an array element: the backslash escaped
  for (size_t i = 0; i < value_bytes; ++i) value += "76";
  const auto start = std::chrono::steady_clock::now();
  for (long t = 0; t < transactions; ++t) {
    std::string keys = "{", values = "{";
    for (long e = 0; e < entries; ++e) {
      if (e > 0) keys += ',', values += ',';
      keys += fmt::format("\"\\\\x{:08x}{:04x}\"", t, e);
      values += '"' + value + '"';
    }
    keys += '}', values += '}';
    const char* params[] = {keys.c_str(), values.c_str()};
    if (!ok(PQexecParams(conn,
                         "INSERT INTO pg_raw_bench SELECT * FROM unnest($1::bytea[], $2::bytea[]) "
                         "ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
                         2, nullptr, params, nullptr, nullptr, 0))) {
      fmt::print(stderr, "pg_raw_bench: {}", PQerrorMessage(conn));
      return 1;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print("{{\"transactions\": {}, \"entries\": {}, \"value_bytes\": {}, \"seconds\": {:.3f}, "
             "\"transactions_per_s\": {:.1f}}}\n",
             transactions, entries, value_bytes, seconds, static_cast<double>(transactions) / seconds);
  PQclear(PQexec(conn, "DROP TABLE pg_raw_bench"));
  PQfinish(conn);
  return 0;
}
