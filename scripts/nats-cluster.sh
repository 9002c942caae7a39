#!/usr/bin/env bash
# A three-node NATS JetStream cluster on loopback for the tests (issue 11
# §4): nodes n1-n3 of cluster "usher", each with a store directory of its
# own under $USHER_NATS_CLUSTER_DIR (default /tmp/usher-nats-cluster), with
# its config file, log and pid file.
#
#   scripts/nats-cluster.sh start   start it, or reuse it if it already answers
#   scripts/nats-cluster.sh stop    stop the processes this script started
#   scripts/nats-cluster.sh url     print the client URLs (USHER_TEST_NATS_CLUSTER)
#
# Ports: clients 14231-14233, routes 16231-16233, monitoring 18231-18233.
#
# The server is the nats-server of the module version go.mod pins (the one
# usher embeds), built into the directory by `go build`: Debian's
# /usr/sbin/nats-server is v2.9.10 (2023), older than every JetStream
# clustering fix since. NATS_SERVER=/path/to/nats-server runs another one.
set -euo pipefail

dir=${USHER_NATS_CLUSTER_DIR:-/tmp/usher-nats-cluster}
host=127.0.0.1
client_ports=(14231 14232 14233)
route_ports=(16231 16232 16233)
http_ports=(18231 18232 18233)
cluster=usher

url() {
  local p out=()
  for p in "${client_ports[@]}"; do out+=("nats://$host:$p"); done
  (IFS=,; echo "${out[*]}")
}

# get PORT PATH: an HTTP GET on the monitoring port (bash alone, no curl).
get() {
  local out
  exec 3<>"/dev/tcp/$host/$1" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$2" "$host" >&3
  out=$(timeout 2 cat <&3) || { exec 3>&-; return 1; }
  exec 3>&-
  grep -q '^HTTP/1\.[01] 200' <<<"$out" || return 1
  echo "$out"
}

# healthy: every node answers /healthz (its JetStream is current) and sees
# a meta group of three with a leader.
healthy() {
  local p jsz
  for p in "${http_ports[@]}"; do
    get "$p" /healthz >/dev/null 2>&1 || return 1
    jsz=$(get "$p" /jsz 2>/dev/null) || return 1
    grep -q '"cluster_size": 3' <<<"$jsz" || return 1
    grep -q '"leader": "n[123]"' <<<"$jsz" || return 1
  done
}

start() {
  if healthy; then
    echo "nats-cluster: reusing the cluster on ports ${client_ports[*]}"
    return 0
  fi
  stop >/dev/null 2>&1 || true
  mkdir -p "$dir"
  local bin=${NATS_SERVER:-}
  if [ -z "$bin" ]; then
    bin=$dir/nats-server
    (cd "$(dirname "$0")/.." && go build -o "$bin" github.com/nats-io/nats-server/v2)
  fi
  local i routes=""
  for p in "${route_ports[@]}"; do routes+="nats-route://$host:$p, "; done
  for i in 0 1 2; do
    local name=n$((i + 1))
    mkdir -p "$dir/$name"
    cat >"$dir/$name.conf" <<EOF
server_name: $name
listen: $host:${client_ports[$i]}
http: $host:${http_ports[$i]}
pid_file: "$dir/$name.pid"
jetstream {
  store_dir: "$dir/$name"
  max_memory_store: 256MB
  max_file_store: 4GB
}
cluster {
  name: $cluster
  listen: $host:${route_ports[$i]}
  routes: [${routes%, }]
}
EOF
    setsid nohup "$bin" -c "$dir/$name.conf" >>"$dir/$name.log" 2>&1 </dev/null &
  done
  for _ in $(seq 1 240); do
    healthy && { echo "nats-cluster: up ($("$bin" --version)): $(url)"; return 0; }
    sleep 0.25
  done
  echo "nats-cluster: the cluster did not come up; logs in $dir" >&2
  return 1
}

stop() {
  local f pid
  for f in "$dir"/n*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f")
    # only a nats-server this script started (the pid file may be stale)
    if [ -n "$pid" ] && grep -q nats-server "/proc/$pid/cmdline" 2>/dev/null; then
      kill "$pid"
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    fi
    rm -f "$f"
  done
  echo "nats-cluster: stopped"
}

case ${1:-} in
start) start ;;
stop) stop ;;
url) url ;;
*) echo "usage: $0 start|stop|url" >&2; exit 2 ;;
esac
