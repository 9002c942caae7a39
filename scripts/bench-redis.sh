#!/usr/bin/env bash
# bench-redis.sh reproduces docs/benchmarks-redis.md:
#
#  1. Enters/s through redisqueue.Store (50 goroutines, one rueidis client)
#     against redis-benchmark running the same EVALSHA of lua/enter.lua on the
#     same key shape at -c 50, alternating ROUNDS times; prints each pair, the
#     ratio and the median ratio.
#  2. Redis memory per waiting visitor at 1,000,000 waiting (skip with
#     MEMORY=0).
#
# Needs redis-cli, redis-benchmark and go, and a Redis at REDIS_HOST:REDIS_PORT
# (default 127.0.0.1:6379) that nothing else is loading: both numbers share
# the server and the CPU, and used_memory is server-wide. Keys are written
# under usher-test:<random>: and removed afterwards.
#
# Usage: scripts/bench-redis.sh            (N=800000 enters per run, ROUNDS=3)
#        N=200000 ROUNDS=1 MEMORY=0 scripts/bench-redis.sh
set -euo pipefail
cd "$(dirname "$0")/.."

host=${REDIS_HOST:-127.0.0.1}
port=${REDIS_PORT:-6379}
n=${N:-800000}
rounds=${ROUNDS:-3}
export USHER_TEST_REDIS="redis://$host:$port"
lua=internal/queue/redisqueue/lua

cli() { redis-cli -h "$host" -p "$port" "$@"; }
cli ping >/dev/null

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "building the test binary (outside the timed runs)…"
go test -c -o "$tmp/redisqueue.test" ./internal/queue/redisqueue/

sha=$(cat "$lua/bucket.lua" "$lua/enter.lua" | cli -x SCRIPT LOAD) # as redisqueue loads it
echo "enter.lua sha1 $sha; $n enters per run, concurrency 50, $rounds rounds"
echo "host: $(nproc) cores, $(cli INFO server | tr -d '\r' | grep '^redis_version:')"

ratios=()
for round in $(seq 1 "$rounds"); do
	# redis-benchmark: a paused room made by put_room.lua, as Store.PutRoom
	# makes it, so that every enter waits; the same key shape as the Go
	# benchmark (usher-test:<16 hex>:{enter50}:…).
	prefix="usher-test:$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n'):"
	meta="$prefix{enter50}:meta" wait="$prefix{enter50}:wait" active="$prefix{enter50}:active"
	cli EVAL "$(cat "$lua/put_room.lua")" 1 "$meta" \
		paused 1000 50 1000000000 300000000000 30000000000 50 >/dev/null
	rb=$(redis-benchmark -h "$host" -p "$port" -c 50 -n "$n" -r 1000000000 --csv \
		EVALSHA "$sha" 3 "$meta" "$wait" "$active" v__rand_int__ "$(date +%s%3N)" |
		tail -1 | cut -d, -f2 | tr -d '"')
	cli UNLINK "$meta" "$wait" "$active" >/dev/null

	# The store: the same number of enters through Store.Enter.
	out=$("$tmp/redisqueue.test" -test.run '^$' -test.bench '^BenchmarkEnterConcurrency50$' \
		-test.benchtime="${n}x")
	gos=$(awk '{for (i = 2; i <= NF; i++) if ($i == "enters/s") print $(i-1)}' <<<"$out" | tail -1)
	if [[ -z $gos ]]; then
		echo "$out" >&2
		exit 1
	fi
	ratio=$(awk -v a="$gos" -v b="$rb" 'BEGIN { printf "%.2f", a / b }')
	ratios+=("$ratio")
	printf 'round %d: redis-benchmark %.0f EVALSHA/s, redisqueue %.0f enters/s, ratio %s\n' \
		"$round" "$rb" "$gos" "$ratio"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
echo "median ratio redisqueue / redis-benchmark: $median (target ≥ 1.0)"

if [[ ${MEMORY:-1} != 0 ]]; then
	echo "memory: 1,000,000 waiting visitors with 22-character ids…"
	USHER_BENCH_MEMORY=1 "$tmp/redisqueue.test" -test.run '^$' \
		-test.bench '^BenchmarkMemoryPerWaitingVisitor$' -test.benchtime=1x |
		grep -E 'bytes/visitor|FAIL|Error' || true
fi
