#!/usr/bin/env bash
# bench-cluster.sh reproduces docs/benchmarks.md#redis-cluster-throughput: the
# Redis queue store on the single Redis of USHER_TEST_REDIS against the
# cluster of scripts/cluster.sh, alternating the two ROUNDS times so that
# both see the same load on the machine:
#
#  1. BenchmarkEnterRooms: enters/s from 50 goroutines over 30 paused rooms
#     (on the cluster the rooms spread over the three primaries).
#  2. BenchmarkStore / BenchmarkStoreCluster: queuetest.Bench's Enter,
#     Status (10,000 waiting) and Admit (100 per step) in one room, which
#     is on one primary.
#
# Usage: scripts/bench-cluster.sh            (N=40000 enters per run, ROUNDS=3, BENCHTIME=2s for 2.)
#        N=10000 ROUNDS=1 scripts/bench-cluster.sh
#
# It fails if a benchmark fails or prints no result.
set -euo pipefail
cd "$(dirname "$0")/.."

n=${N:-40000}
rounds=${ROUNDS:-3}
benchtime=${BENCHTIME:-2s}
export USHER_TEST_REDIS=${USHER_TEST_REDIS:-redis://127.0.0.1:6379/0}
scripts/cluster.sh start >/dev/null
USHER_TEST_REDIS_CLUSTER=$(scripts/cluster.sh url)
export USHER_TEST_REDIS_CLUSTER

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "building the test binary (outside the timed runs)…"
go test -c -o "$tmp/redisqueue.test" ./internal/queue/redisqueue/
echo "host: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(redis-server --version | cut -d' ' -f3)"

bench() { # bench PATTERN BENCHTIME: the result lines; the whole output on failure
	local out
	if ! out=$("$tmp/redisqueue.test" -test.run '^$' -test.bench "$1" -test.benchtime "$2" 2>&1) ||
		! grep '^Benchmark.*/op' <<<"$out"; then
		echo "$out" >&2
		exit 1
	fi
}
for round in $(seq 1 "$rounds"); do
	echo "round $round"
	bench '^BenchmarkEnterRooms$/^single$' "${n}x"
	bench '^BenchmarkEnterRooms$/^cluster$' "${n}x"
	bench '^BenchmarkStore$/^(Enter|Status|Admit)$' "$benchtime"
	bench '^BenchmarkStoreCluster$/^(Enter|Status|Admit)$' "$benchtime"
done
