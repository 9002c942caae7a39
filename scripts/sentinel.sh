#!/usr/bin/env bash
# A Redis Sentinel topology on loopback for the tests: a primary, one replica
# and three sentinels watching the master set "usher", run by Debian's
# redis-server (a sentinel is `redis-server <conf> --sentinel`). No
# persistence; config files, logs and pid files live in $USHER_SENTINEL_DIR
# (default /tmp/usher-sentinel).
#
#   scripts/sentinel.sh start   start it, or reuse it if it already answers
#   scripts/sentinel.sh stop    stop the processes this script started
#   scripts/sentinel.sh url     print the store URL (USHER_TEST_REDIS_SENTINEL)
#   scripts/sentinel.sh failover  promote the replica, and wait until the old
#                                 primary follows it (the roles swap)
#
# Ports: primary 16380, replica 16381, sentinels 26380-26382 (after a
# failover the roles may be swapped; clients ask the sentinels), or the
# five of USHER_SENTINEL_PORTS ("DATA DATA SENTINEL SENTINEL SENTINEL"), for
# a topology of one's own that a failover may disturb. Failure
# detection is fast, for tests: down-after-milliseconds 1000,
# failover-timeout 5000.
set -euo pipefail

dir=${USHER_SENTINEL_DIR:-/tmp/usher-sentinel}
host=127.0.0.1
ports=(${USHER_SENTINEL_PORTS:-16380 16381 26380 26381 26382})
if [ ${#ports[@]} != 5 ]; then
  echo "sentinel: USHER_SENTINEL_PORTS wants five ports, two data then three sentinels" >&2
  exit 2
fi
data_ports=("${ports[@]:0:2}")
sentinel_ports=("${ports[@]:2:3}")
master_set=usher

url() {
  echo "redis://$host:${sentinel_ports[0]}/0?addr=$host:${sentinel_ports[1]}&addr=$host:${sentinel_ports[2]}&master_set=$master_set"
}

# healthy: every sentinel names a master that answers, and that master has a
# replica whose link is up.
healthy() {
  local p master port
  for p in "${sentinel_ports[@]}"; do
    master=$(redis-cli -h $host -p "$p" sentinel get-master-addr-by-name $master_set 2>/dev/null | tail -n 1) || return 1
    [ -n "$master" ] || return 1
    port=$master
  done
  redis-cli -h $host -p "$port" info replication 2>/dev/null | grep -q '^role:master' || return 1
  redis-cli -h $host -p "$port" info replication 2>/dev/null | grep -q '^slave0:.*state=online' || return 1
  # every sentinel knows the two others
  for p in "${sentinel_ports[@]}"; do
    redis-cli -h $host -p "$p" sentinel master $master_set 2>/dev/null |
      grep -A1 '^num-other-sentinels$' | tail -n 1 | grep -q '^2$' || return 1
  done
}

start() {
  if healthy; then
    echo "sentinel: reusing the topology on ports ${data_ports[*]} ${sentinel_ports[*]}"
    return 0
  fi
  stop >/dev/null 2>&1 || true
  mkdir -p "$dir"
  local primary=${data_ports[0]} p
  for p in "${data_ports[@]}"; do
    local args=(--port "$p" --bind $host --save '' --appendonly no --dir "$dir"
      --daemonize yes --pidfile "$dir/redis-$p.pid" --logfile "$dir/redis-$p.log")
    [ "$p" = "$primary" ] || args+=(--replicaof $host "$primary")
    redis-server "${args[@]}"
  done
  for p in "${sentinel_ports[@]}"; do
    # A sentinel rewrites its config file, so each run writes a fresh one.
    cat >"$dir/sentinel-$p.conf" <<EOF
port $p
bind $host
daemonize yes
pidfile $dir/sentinel-$p.pid
logfile $dir/sentinel-$p.log
dir $dir
sentinel monitor $master_set $host $primary 2
sentinel down-after-milliseconds $master_set 1000
sentinel failover-timeout $master_set 5000
sentinel parallel-syncs $master_set 1
EOF
    redis-server "$dir/sentinel-$p.conf" --sentinel
  done
  for _ in $(seq 1 120); do
    healthy && { echo "sentinel: up: $(url)"; return 0; }
    sleep 0.25
  done
  echo "sentinel: the topology did not come up; logs in $dir" >&2
  return 1
}

stop() {
  local f pid
  for f in "$dir"/sentinel-*.pid "$dir"/redis-*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f")
    # only a redis-server this script started (the pid file may be stale)
    if [ -n "$pid" ] && grep -q redis-server "/proc/$pid/cmdline" 2>/dev/null; then
      kill "$pid"
      for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$f"
  done
  echo "sentinel: stopped"
}

master_port() {
  redis-cli -h $host -p "${sentinel_ports[0]}" sentinel get-master-addr-by-name $master_set | tail -n 1
}

# failover: a manual failover (SENTINEL FAILOVER), done when every
# sentinel names the other data node and the topology is healthy again.
failover() {
  local old new
  old=$(master_port)
  redis-cli -h $host -p "${sentinel_ports[0]}" sentinel failover $master_set >/dev/null
  for _ in $(seq 1 120); do
    new=$(master_port)
    if [ -n "$new" ] && [ "$new" != "$old" ] && healthy; then
      echo "sentinel: failed over from $old to $new"
      return 0
    fi
    sleep 0.25
  done
  echo "sentinel: no failover from $old within 30 s; logs in $dir" >&2
  return 1
}

case ${1:-} in
start) start ;;
stop) stop ;;
url) url ;;
failover) failover ;;
*) echo "usage: $0 start|stop|url|failover" >&2; exit 2 ;;
esac
