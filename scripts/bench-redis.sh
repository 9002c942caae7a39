#!/usr/bin/env bash
# bench-redis.sh reproduces
# docs/benchmarks.md#enters-on-redis-against-redis-benchmark and
# docs/benchmarks.md#memory-per-waiting-visitor-on-redis:
#
#  1. Enters/s through redisqueue.Store (50 goroutines, one rueidis client)
#     against redis-benchmark running the same EVALSHA of the Store's enter
#     script on the same key shape at -c 50, alternating ROUNDS times;
#     prints each pair, the ratio and the median ratio. The room
#     redis-benchmark enters is made by usher serve (PUT {"state":"paused"},
#     the Go benchmark's settings), which also runs the enter script once:
#     the script fails if the text it loads (redisscript's refill.lua, then
#     lua/limits, draw, presence and enter.lua, as redisqueue.New
#     builds it) is not the one usher ran, or if redis-benchmark's calls
#     placed fewer than 99 % of its visitors (an error reply is a call too).
#  2. Redis memory per waiting visitor at 1,000,000 waiting (skip with
#     MEMORY=0).
#
# Needs redis-cli, redis-benchmark, sha1sum, curl and go, and a Redis at
# $USHER_TEST_REDIS (default redis://127.0.0.1:6379/0; any database) that
# nothing else is loading: both numbers share the server and the CPU, and
# used_memory is server-wide. Keys are written under usher-test:<random>:
# and removed afterwards, on failure too. USHER_BIN=path uses a prebuilt
# usher.
#
# Usage: scripts/bench-redis.sh            (N=800000 enters per run, ROUNDS=3)
#        N=200000 ROUNDS=1 MEMORY=0 scripts/bench-redis.sh
set -euo pipefail
cd "$(dirname "$0")/.."

url=${USHER_TEST_REDIS:-redis://127.0.0.1:6379/0}
export USHER_TEST_REDIS=$url
n=${N:-800000}
rounds=${ROUNDS:-3}
lua=internal/queue/redisqueue/lua

# redis-cli and redis-benchmark take the URL, its database included.
cli() { redis-cli -u "$url" "$@"; }
cli ping >/dev/null

# The enter script's keys, in the order redisqueue passes them (its
# keyNames: the room's keys, then the guard key as KEYS[9]).
read -ra keynames <<<"$(sed -n 's/^var keyNames = \[\.\.\.\]string{\(.*\)}$/\1/p' internal/queue/redisqueue/redisqueue.go | tr -d '"' | tr ',' ' ')"
if [ "${#keynames[@]}" != 9 ]; then
	echo "bench-redis: found ${#keynames[@]} keys in redisqueue's keyNames (${keynames[*]}), want enter.lua's 9" >&2
	exit 1
fi

. scripts/benchlib.sh
prefixes=()
at_exit 'for p in "${prefixes[@]}"; do cli --scan --pattern "$p*" | xargs -r -n 1000 redis-cli -u "$url" UNLINK >/dev/null 2>&1; done'
echo "building the test binary (outside the timed runs)…"
go test -c -o "$tmp/redisqueue.test" ./internal/queue/redisqueue/

# The enter script as redisqueue.New builds it; its sha1 is what EVALSHA names.
cat internal/redisscript/refill.lua "$lua/limits.lua" "$lua/draw.lua" \
	"$lua/presence.lua" "$lua/enter.lua" >"$tmp/enter.lua"
sha=$(sha1sum "$tmp/enter.lua" | cut -d' ' -f1)
echo "enter script sha1 $sha; $n enters per run, concurrency 50, $rounds rounds"
echo "host: $(nproc) cores, $(cli INFO server | tr -d '\r' | grep '^redis_version:')"

# room PREFIX: usher serve makes the paused room enter50 under PREFIX and
# enters one visitor (so Redis runs usher's own enter script), then stops.
room() {
	local api=http://127.0.0.1:18489/api/v1/rooms/enter50 admin
	start room "$usher" serve --addr 127.0.0.1:18489 --admin-addr 127.0.0.1:19489 --data-dir "$tmp/room" --store "$url" --redis-prefix "$1"
	wait_healthy 127.0.0.1:18489/healthz
	admin=$(cat "$tmp/room/admin.key")
	curl -sf -XPUT -H "Authorization: Bearer $admin" "${api/18489/19489}" -d '{"state":"paused"}' >/dev/null
	curl -sf -XPOST -H "Authorization: Bearer $admin" "$api/entries" -d '{"visitor_id":"first"}' >/dev/null
	kill "${pids[-1]}"
	wait "${pids[-1]}" 2>/dev/null || true
	unset 'pids[-1]'
	rm -rf "$tmp/room"
}

ratios=()
for round in $(seq 1 "$rounds"); do
	# redis-benchmark: a paused room made by usher, so that every enter
	# waits; the same key shape as the Go benchmark
	# (usher-test:<16 hex>:{enter50}:…), the Store's keys and arguments
	# (keynames: redisqueue's keys, then its guard key; visitor, now, no
	# draw).
	prefix="usher-test:$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n'):"
	prefixes+=("$prefix")
	room "$prefix"
	if [ "$(cli SCRIPT EXISTS "$sha")" != 1 ]; then
		echo "bench-redis: usher did not run the script $tmp/enter.lua makes (sha1 $sha):" \
			"redisqueue.New builds its enter script from other files; change this script to match" >&2
		exit 1
	fi
	keys=()
	for k in "${keynames[@]}"; do keys+=("$prefix{enter50}:$k"); done
	rb=$(redis-benchmark -u "$url" -c 50 -n "$n" -r 1000000000 --csv \
		EVALSHA "$sha" "${#keys[@]}" "${keys[@]}" v__rand_int__ "$(date +%s%3N)" "" "" |
		tail -1 | cut -d, -f2 | tr -d '"')
	figures "redis-benchmark" "$rb"
	waiting=$(cli ZCARD "$prefix{enter50}:wait")
	if [ "$waiting" -lt $((n * 99 / 100)) ]; then
		echo "bench-redis: redis-benchmark's $n calls left $waiting waiting: the calls failed" \
			"($(cli EVALSHA "$sha" "${#keys[@]}" "${keys[@]}" vcheck "$(date +%s%3N)" "" "" 2>&1 | head -3 | tr '\n' ' '))" >&2
		exit 1
	fi
	cli --scan --pattern "$prefix*" | xargs -r -n 1000 redis-cli -u "$url" UNLINK >/dev/null 2>&1

	# The store: the same number of enters through Store.Enter.
	status=0
	out=$("$tmp/redisqueue.test" -test.run '^$' -test.bench '^BenchmarkEnterConcurrency50$' \
		-test.benchtime="${n}x" 2>&1) || status=$?
	gos=$(awk '{for (i = 2; i <= NF; i++) if ($i == "enters/s") print $(i-1)}' <<<"$out" | tail -1)
	if [[ $status != 0 || -z $gos ]]; then
		echo "$out" >&2
		exit 1
	fi
	ratio=$(awk -v a="$gos" -v b="$rb" 'BEGIN { printf "%.2f", a / b }')
	ratios+=("$ratio")
	printf 'round %d: redis-benchmark %.0f EVALSHA/s (%d placed), redisqueue %.0f enters/s, ratio %s\n' \
		"$round" "$rb" "$waiting" "$gos" "$ratio"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
echo "median ratio redisqueue / redis-benchmark: $median (target ≥ 1.0)"

if [[ ${MEMORY:-1} != 0 ]]; then
	echo "memory: 1,000,000 waiting visitors with 22-character ids…"
	if ! out=$(USHER_BENCH_MEMORY=1 "$tmp/redisqueue.test" -test.run '^$' \
		-test.bench '^BenchmarkMemoryPerWaitingVisitor$' -test.benchtime=1x 2>&1); then
		echo "$out" >&2
		exit 1
	fi
	grep 'bytes/visitor' <<<"$out"
fi
