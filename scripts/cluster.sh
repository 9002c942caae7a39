#!/usr/bin/env bash
# A Redis Cluster on loopback for the tests: three primaries with one replica
# each, run by Debian's redis-server and joined by `redis-cli --cluster
# create`. No persistence; node configs (nodes-<port>.conf), logs and pid
# files live in $USHER_CLUSTER_DIR (default /tmp/usher-cluster): `start`
# removes the node configs there before it creates a new cluster.
#
#   scripts/cluster.sh start   start it, or reuse it if it already answers
#   scripts/cluster.sh stop    stop the processes this script started
#   scripts/cluster.sh url     print the store URL (USHER_TEST_REDIS_CLUSTER)
#
# Ports: nodes 17001-17006 (redis-cli makes 17001-17003 the primaries;
# after a failover the roles may be swapped: clients ask CLUSTER SLOTS),
# cluster bus 27001-27006. A dead primary is detected after two seconds
# (cluster-node-timeout 2000).
set -euo pipefail

dir=${USHER_CLUSTER_DIR:-/tmp/usher-cluster}
host=127.0.0.1
ports=(17001 17002 17003 17004 17005 17006)

url() {
  echo "redis://$host:${ports[0]}?addr=$host:${ports[1]}&addr=$host:${ports[2]}"
}

# healthy: every node answers cluster_state:ok, and the cluster has three
# primaries that each have a replica.
healthy() {
  local p nodes
  for p in "${ports[@]}"; do
    redis-cli -h $host -p "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' || return 1
  done
  nodes=$(redis-cli -h $host -p "${ports[0]}" cluster nodes 2>/dev/null) || return 1
  [ "$(grep -c 'master' <<<"$nodes")" = 3 ] || return 1
  [ "$(grep -c 'slave' <<<"$nodes")" = 3 ] || return 1
  # every node lists the same six nodes, all connected
  [ "$(grep -c ' connected' <<<"$nodes")" = 6 ] || return 1
}

start() {
  if healthy; then
    echo "cluster: reusing the cluster on ports ${ports[*]}"
    return 0
  fi
  stop >/dev/null 2>&1 || true
  mkdir -p "$dir"
  # a node keeps its cluster identity in nodes-<port>.conf: a new cluster
  # starts from none (only this script's files go, whatever $dir is)
  rm -f "$dir"/nodes-*.conf "$dir"/redis-*.log "$dir"/dump*.rdb "$dir"/create.log
  local p addrs=()
  for p in "${ports[@]}"; do
    redis-server --port "$p" --bind $host --save '' --appendonly no --dir "$dir" \
      --cluster-enabled yes --cluster-config-file "nodes-$p.conf" --cluster-node-timeout 2000 \
      --daemonize yes --pidfile "$dir/redis-$p.pid" --logfile "$dir/redis-$p.log"
    addrs+=("$host:$p")
  done
  for p in "${ports[@]}"; do
    for _ in $(seq 1 40); do
      redis-cli -h $host -p "$p" ping 2>/dev/null | grep -q PONG && break
      sleep 0.25
    done
  done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 ||
    { cat "$dir/create.log" >&2; return 1; }
  for _ in $(seq 1 120); do
    healthy && { echo "cluster: up: $(url)"; return 0; }
    sleep 0.25
  done
  echo "cluster: the cluster did not come up; logs in $dir" >&2
  return 1
}

stop() {
  local f pid
  for f in "$dir"/redis-*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f")
    # only a redis-server this script started (the pid file may be stale)
    if [ -n "$pid" ] && grep -q redis-server "/proc/$pid/cmdline" 2>/dev/null; then
      kill "$pid"
      for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$f"
  done
  echo "cluster: stopped"
}

case ${1:-} in
start) start ;;
stop) stop ;;
url) url ;;
*) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
