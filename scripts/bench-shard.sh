#!/usr/bin/env bash
# bench-shard.sh reproduces docs/benchmarks.md#one-hot-room-over-several-shards:
# internal/queue/redisshard's BenchmarkLine (one hot room per strategy,
# unsharded and over SHARDS line shards) on two cluster shapes, ROUNDS
# interleaved rounds:
#
#   1p  a one-primary cluster (no replica) that this script starts on
#       127.0.0.1:17101 (bus 27101) in $USHER_SHARD_CLUSTER_DIR
#       (default /tmp/usher-shard-cluster1) and stops on exit;
#   3p  the three-primary cluster of scripts/cluster.sh (one replica
#       each), started or reused, and left running (other tests use it).
#
# It prints every run, then per shape and sub-benchmark the median of the
# rounds, and the ratio of each sharded run to the unsharded run of the
# same strategy in the same round (median of the rounds): on a shared
# 2-core machine only those ratios mean much.
#
# Then, once per shape, the timestamp strategy again with every other entering
# goroutine's clock SKEW ms ahead (instances whose clocks disagree).
#
# Usage: scripts/bench-shard.sh                  (N=30000 visitors, SHARDS=3, ROUNDS=3, SKEW=5)
#        N=10000 ROUNDS=1 scripts/bench-shard.sh
set -euo pipefail
cd "$(dirname "$0")/.."

n=${N:-30000}
shards=${SHARDS:-3}
rounds=${ROUNDS:-3}
skew=${SKEW:-5}
dir=${USHER_SHARD_CLUSTER_DIR:-/tmp/usher-shard-cluster1}
host=127.0.0.1
port=17101

one_up() {
  redis-cli -h $host -p $port cluster info 2>/dev/null | grep -q '^cluster_state:ok'
}

start_one() {
  mkdir -p "$dir"
  rm -f "$dir"/nodes-$port.conf "$dir"/redis-$port.log
  redis-server --port $port --bind $host --save '' --appendonly no --dir "$dir" \
    --cluster-enabled yes --cluster-config-file nodes-$port.conf --cluster-port 27101 \
    --daemonize yes --pidfile "$dir/redis-$port.pid" --logfile "$dir/redis-$port.log"
  for _ in $(seq 1 40); do
    redis-cli -h $host -p $port ping 2>/dev/null | grep -q PONG && break
    sleep 0.25
  done
  # redis-cli --cluster create wants three primaries: give the one all slots.
  redis-cli -h $host -p $port cluster addslotsrange 0 16383 >/dev/null
  for _ in $(seq 1 80); do
    one_up && return 0
    sleep 0.25
  done
  echo "bench-shard: the one-primary cluster did not come up; log in $dir" >&2
  return 1
}

# stop_one stops only the redis-server this script started (by its pid file).
stop_one() {
  local f=$dir/redis-$port.pid pid
  [ -e "$f" ] || return 0
  pid=$(cat "$f")
  if [ -n "$pid" ] && grep -q redis-server "/proc/$pid/cmdline" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$f"
}

if one_up; then
  echo "bench-shard: something already serves a cluster on port $port; stop it first" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'stop_one; rm -rf "$tmp"' EXIT
start_one
scripts/cluster.sh start >/dev/null
url_1p="redis://$host:$port"
url_3p=$(scripts/cluster.sh url)

echo "building the test binary (outside the timed runs)…"
go test -c -o "$tmp/redisshard.test" ./internal/queue/redisshard/
echo "host: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(redis-server --version | cut -d' ' -f3); N=$n SHARDS=$shards ROUNDS=$rounds SKEW=$skew"

for round in $(seq 1 "$rounds"); do
  for shape in 1p 3p; do
    url=url_$shape
    USHER_BENCH_SHARD_URL=${!url} USHER_BENCH_SHARD_N=$n USHER_BENCH_SHARDS=$shards \
      "$tmp/redisshard.test" -test.run '^$' -test.bench '^BenchmarkLine$' -test.benchtime 1x >"$tmp/out" 2>&1 ||
      { cat "$tmp/out" >&2; exit 1; }
    grep '^Benchmark' "$tmp/out" | sed "s/^/$round $shape /" | tee -a "$tmp/runs"
  done
done

echo "timestamp with clocks ${skew} ms apart:"
for shape in 1p 3p; do
  url=url_$shape
  USHER_BENCH_SHARD_URL=${!url} USHER_BENCH_SHARD_N=$n USHER_BENCH_SHARDS=$shards USHER_BENCH_SHARD_SKEW_MS=$skew \
    "$tmp/redisshard.test" -test.run '^$' -test.bench '^BenchmarkLine$/^timestamp-' -test.benchtime 1x >"$tmp/out" 2>&1 ||
    { cat "$tmp/out" >&2; exit 1; }
  grep '^Benchmark' "$tmp/out" | sed "s/^/skew $shape /"
done

# Each run: round shape BenchmarkLine/<strategy>-<shards>-<procs> 1 <ns> ns/op <value> <unit> …
awk '
function median(list,   a, k, i, j, t) {
  k = split(list, a, " ")
  for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j-1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
  return (k % 2) ? a[(k+1)/2] : (a[k/2] + a[k/2+1]) / 2
}
{
  round = $1; shape = $2; name = $3
  sub(/^BenchmarkLine\//, "", name); sub(/-[0-9]+$/, "", name)
  strategy = name; sub(/-[0-9]+$/, "", strategy)
  k = name; sub(/^.*-/, "", k)
  key = shape " " name
  if (!(key in seen)) { seen[key] = 1; keys[++nkeys] = key }
  for (i = 7; i + 1 <= NF; i += 2) {
    unit = $(i + 1); v[round, shape, name, unit] = $i
    if (!(unit in seenunit)) { seenunit[unit] = 1; units[++nunits] = unit }
    all[key, unit] = all[key, unit] " " $i
  }
  rounds[round] = 1; kof[key] = k; stof[key] = strategy; shof[key] = shape
}
END {
  printf "\nmedian of %d rounds (ratio: sharded ÷ unsharded of the same strategy, same round, median)\n", length(rounds)
  printf "%-4s %-16s", "", "run"
  for (u = 1; u <= nunits; u++) printf " %14s", units[u]
  printf "\n"
  for (i = 1; i <= nkeys; i++) {
    key = keys[i]; split(key, p, " ")
    printf "%-4s %-16s", p[1], p[2]
    for (u = 1; u <= nunits; u++) printf " %14.4g", median(all[key, units[u]])
    printf "\n"
    if (kof[key] == 1) continue
    printf "%-4s %-16s", "", "  ratio"
    for (u = 1; u <= nunits; u++) {
      r = ""
      for (rd in rounds) {
        base = v[rd, shof[key], stof[key] "-1", units[u]]
        if (base + 0 >= 1) r = r " " v[rd, shof[key], p[2], units[u]] / base # not of a memory near 0
      }
      if (r == "") printf " %14s", "-"; else printf " %14.2f", median(r)
    }
    printf "\n"
  }
}' "$tmp/runs"
