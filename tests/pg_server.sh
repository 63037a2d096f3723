# Sourced by shell tests: a PostgreSQL server of the test's own, as tests/pg_server.h starts
# one for C++ tests (initdb into DIR/pg, a Unix socket there only; run as the postgres user
# when the test runs as root).
#   pg_start DIR    starts it; sets PG_CONNINFO
#   pg_stop DIR     stops it (immediately)
pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
pg_as() { if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pg_start() {
  local dir=$1/pg bin
  bin=$(pg_bin)
  [[ -n $bin ]] || { echo "FAIL: no PostgreSQL server under /usr/lib/postgresql (tools/dev.sh deps)"; exit 1; }
  mkdir -p "$dir"
  [[ $(id -u) -eq 0 ]] && chown postgres "$dir" && chmod 755 "$1"
  pg_as "$bin/initdb" -D "$dir/data" -A trust -U postgres --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 ||
    { echo "FAIL: initdb: $(tail -3 "$dir/initdb.log")"; exit 1; }
  pg_as "$bin/pg_ctl" -D "$dir/data" -w -t 60 -l "$dir/server.log" -o "-k $dir -c listen_addresses=''" start >/dev/null ||
    { echo "FAIL: the server did not start: $(tail -3 "$dir/server.log")"; exit 1; }
  PG_CONNINFO="host=$dir dbname=postgres user=postgres"
}
pg_stop() { pg_as "$(pg_bin)/pg_ctl" -D "$1/pg/data" -m immediate -w stop >/dev/null 2>&1 || true; }
# Restarts it at once, as a crash would (connections cut, commits under way lost or not).
pg_restart() {
  pg_as "$(pg_bin)/pg_ctl" -D "$1/pg/data" -m immediate -w -t 60 -l "$1/pg/server.log" restart >/dev/null ||
    { echo "FAIL: the server did not restart: $(tail -3 "$1/pg/server.log")"; exit 1; }
}
