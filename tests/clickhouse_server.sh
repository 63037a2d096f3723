# Sourced by shell tests: a ClickHouse server of the test's own (the Debian clickhouse-server
# 18.16) with a ZooKeeper of its own (standalone), so that the test can create ReplicatedMergeTree
# and MergeTree tables and talk to it over HTTP. Everything lives under DIR: ZooKeeper's data and
# log in DIR/zk, the server's config.xml, users.xml, data and server.log in DIR/ch. Both listen on
# 127.0.0.1 only, on free ports picked at random; each runs in a session of its own, which ch_stop
# kills whole. The macros {shard} and {replica} are 01 and r1; the cluster onceflow_test is this
# server alone (for Distributed tables). Users: default (no password) and writer (password
# "s3cr:et@p").
#   ch_start DIR       starts both and waits (60 s at most) until the server answers and reaches
#                      ZooKeeper; sets CH_HTTP (http://127.0.0.1:PORT), CH_TCP_PORT and ZK_PORT
#   ch_stop DIR        kills both (-9) and waits until no process of theirs is left
#   ch_query SQL [DATA]
#                      runs SQL over HTTP and prints the answer (TabSeparated unless SQL says
#                      FORMAT); with DATA, SQL goes in the URL and DATA is the body (an INSERT's
#                      rows). CH_PARAMS, if set, is added to the URL (e.g. insert_deduplicate=0).
#                      On an HTTP error it prints the status and the server's message on
#                      stderr and returns 1 (18.16: 404 for an unknown table, column or
#                      setting, 400 for a syntax error, 500 for others).
# curl, java (the zookeeper package's jars under /usr/share/java) and /usr/sbin/clickhouse-server.
ch_fail() { echo "FAIL: $*"; exit 1; }
# A TCP port nobody uses on this machine (in no state in /proc/net/tcp*), below the ephemeral
# range, and not one of the ports given.
ch_free_port() {
  local p
  while :; do
    p=$((10000 + RANDOM % 22000))
    [[ " $* " == *" $p "* ]] && continue
    awk -v p="$(printf '%04X' "$p")" 'FNR > 1 { split($2, a, ":"); if (a[2] == p) f = 1 } END { exit !f }' \
      /proc/net/tcp /proc/net/tcp6 2>/dev/null && continue
    echo "$p"
    return
  done
}
ch_urlencode() {
  local LC_ALL=C s=$1 i c out=
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    case $c in
      [a-zA-Z0-9._~-]) out+=$c ;;
      *) printf -v c '%%%02X' "'$c" && out+=$c ;;
    esac
  done
  printf '%s' "$out"
}
# The last lines of the logs given that are no stack frames (ClickHouse's "12. /lib/..." and
# Java's "at ...") nor ClickHouse's "Logging ... to", for a FAIL line.
ch_tail() {
  cat "$@" 2>/dev/null | grep -Ev '^([[:space:]]*([0-9]+\. |at |$)|Logging [a-z]+ to )' | tail -3
}
# Fails the start, killing what it started first.
ch_start_fail() { ch_stop "$1"; ch_fail "$2"; }
ch_alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }
ch_start() {
  local dir=$1 zk=$1/zk ch=$1/ch http inter i ok=
  command -v curl >/dev/null || ch_fail "curl is not installed (tools/dev.sh deps)"
  [[ -x /usr/sbin/clickhouse-server && -f /usr/share/java/zookeeper.jar && -n $(command -v java) ]] ||
    ch_fail "no clickhouse-server, zookeeper or java (tools/dev.sh deps)"
  mkdir -p "$zk/data" "$ch"
  ZK_PORT=$(ch_free_port)
  http=$(ch_free_port "$ZK_PORT")
  CH_TCP_PORT=$(ch_free_port "$ZK_PORT" "$http")
  inter=$(ch_free_port "$ZK_PORT" "$http" "$CH_TCP_PORT")
  CH_HTTP=http://127.0.0.1:$http

  cat >"$zk/zoo.cfg" <<EOF
tickTime=2000
dataDir=$zk/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,conf
EOF
  cat >"$zk/log4j.properties" <<EOF
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=$zk/zookeeper.log
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] %m%n
EOF
  # setsid: a session of its own (the shell's & child is no group leader, so setsid execs in place
  # and $! is the session's id).
  setsid java -Xmx256m -Xms32m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dlog4j.configuration="file:$zk/log4j.properties" -Dzookeeper.jmx.log4j.disable=true \
    -cp "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar" \
    org.apache.zookeeper.server.ZooKeeperServerMain "$zk/zoo.cfg" </dev/null >"$zk/stdout.log" 2>&1 &
  echo $! >"$zk/pid"
  disown $!

  cat >"$ch/config.xml" <<EOF
<?xml version="1.0"?>
<yandex>
  <logger>
    <level>information</level>
    <log>$ch/server.log</log>
    <errorlog>$ch/server.err.log</errorlog>
    <size>100M</size>
    <count>2</count>
  </logger>
  <display_name>$ch</display_name>
  <listen_host>127.0.0.1</listen_host>
  <http_port>$http</http_port>
  <tcp_port>$CH_TCP_PORT</tcp_port>
  <interserver_http_port>$inter</interserver_http_port>
  <interserver_http_host>127.0.0.1</interserver_http_host>
  <max_connections>256</max_connections>
  <keep_alive_timeout>3</keep_alive_timeout>
  <max_concurrent_queries>64</max_concurrent_queries>
  <uncompressed_cache_size>16777216</uncompressed_cache_size>
  <mark_cache_size>16777216</mark_cache_size>
  <path>$ch/data/</path>
  <tmp_path>$ch/tmp/</tmp_path>
  <user_files_path>$ch/user_files/</user_files_path>
  <format_schema_path>$ch/format_schemas/</format_schema_path>
  <users_config>$ch/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mlock_executable>false</mlock_executable>
  <zookeeper>
    <node><host>127.0.0.1</host><port>$ZK_PORT</port></node>
    <session_timeout_ms>10000</session_timeout_ms>
  </zookeeper>
  <macros>
    <shard>01</shard>
    <replica>r1</replica>
  </macros>
  <remote_servers>
    <onceflow_test><shard><replica><host>127.0.0.1</host><port>$CH_TCP_PORT</port></replica></shard></onceflow_test>
  </remote_servers>
</yandex>
EOF
  cat >"$ch/users.xml" <<EOF
<?xml version="1.0"?>
<yandex>
  <profiles>
    <default>
      <max_memory_usage>2000000000</max_memory_usage>
      <use_uncompressed_cache>0</use_uncompressed_cache>
    </default>
  </profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
    <writer>
      <password>s3cr:et@p</password>
      <networks><ip>127.0.0.1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </writer>
  </users>
  <quotas>
    <default>
      <interval>
        <duration>3600</duration>
        <queries>0</queries>
        <errors>0</errors>
        <result_rows>0</result_rows>
        <read_rows>0</read_rows>
        <execution_time>0</execution_time>
      </interval>
    </default>
  </quotas>
</yandex>
EOF
  setsid /usr/sbin/clickhouse-server --config-file="$ch/config.xml" </dev/null >"$ch/stdout.log" 2>&1 &
  echo $! >"$ch/pid"
  disown $!

  # ZooKeeper first (conf over bash's /dev/tcp, which says our dataDir once it serves; ruok says
  # imok before), then the server's answer to SELECT 1 bearing our display name in
  # X-ClickHouse-Server-Display-Name (not another's server on a port taken meanwhile; /ping sends
  # no such header), then ZooKeeper from the server.
  for ((i = 0; i < 600; i++)); do
    ch_alive "$zk/pid" || ch_start_fail "$dir" "ZooKeeper exited: $(ch_tail "$zk/stdout.log" "$zk/zookeeper.log")"
    [[ $(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$ZK_PORT && echo conf >&3 && cat <&3" 2>/dev/null) == *"dataDir=$zk/data/"* ]] &&
      ok=1 && break
    sleep 0.1
  done
  [[ -n $ok ]] || ch_start_fail "$dir" "ZooKeeper did not start in 60 s: $(ch_tail "$zk/zookeeper.log")"
  ok=
  for ((; i < 600; i++)); do
    ch_alive "$ch/pid" || ch_start_fail "$dir" "clickhouse-server exited: $(ch_tail "$ch/stdout.log" "$ch/server.err.log")"
    [[ $(curl -s --max-time 2 -D - "$CH_HTTP/?query=SELECT%201" | tr -d '\r') == *"X-ClickHouse-Server-Display-Name: $ch"$'\n'*$'\n'1 ]] &&
      ok=1 && break
    sleep 0.1
  done
  [[ -n $ok ]] || ch_start_fail "$dir" "clickhouse-server did not start in 60 s: $(ch_tail "$ch/server.log")"
  ok=
  for ((; i < 600; i++)); do
    ch_query "SELECT count() FROM system.zookeeper WHERE path = '/'" >/dev/null 2>"$ch/zk_check.err" && ok=1 && break
    sleep 0.1
  done
  [[ -n $ok ]] || ch_start_fail "$dir" "clickhouse-server does not reach ZooKeeper: $(ch_tail "$ch/server.log" "$ch/zk_check.err")"
}
# The live processes of session $1, from /proc (no procps needed): fields 3 and 6 of
# /proc/PID/stat, after the command's name in parentheses, are the state and the session.
ch_session_pids() {
  local f line st sess
  for f in /proc/[0-9]*/stat; do
    read -r line 2>/dev/null <"$f" || continue
    read -r st _ _ sess _ <<<"${line##*) }"
    [[ $sess == "$1" && $st != Z ]] && f=${f#/proc/} && echo "${f%/stat}"
  done
  return 0
}
ch_stop() {
  local f sid i
  local -a pids
  for f in "$1/ch/pid" "$1/zk/pid"; do
    [[ -f $f ]] || continue
    sid=$(cat "$f")
    for ((i = 0; i < 100; i++)); do
      read -ra pids <<<"$(ch_session_pids "$sid")" || true
      [[ ${#pids[@]} -eq 0 ]] && break
      kill -9 -- "-$sid" "${pids[@]}" 2>/dev/null || true
      sleep 0.1
    done
    [[ ${#pids[@]} -eq 0 ]] || echo "WARNING: processes ${pids[*]} of $f did not die" >&2
    rm -f "$f"
  done
}
ch_query() {
  # wait_end_of_query: the server buffers the answer, so that an error met while sending it
  # gives an HTTP error too (else: 200, rows, then the exception's text).
  local url="$CH_HTTP/?wait_end_of_query=1&${CH_PARAMS:+$CH_PARAMS&}" out code
  if [[ $# -ge 2 ]]; then
    out=$(curl -sS --data-binary "$2" -w '\n%{http_code}' "${url}query=$(ch_urlencode "$1")") || return 1
  else
    out=$(curl -sS --data-binary "$1" -w '\n%{http_code}' "$url") || return 1
  fi
  code=${out##*$'\n'}
  out=${out%$'\n'*}
  [[ $code == 200 ]] || { printf 'HTTP %s: %s' "$code" "$out" >&2; return 1; }
  printf '%s' "$out"
}
