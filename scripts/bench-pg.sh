#!/usr/bin/env bash
# bench-pg.sh reproduces
# docs/benchmarks.md#confirmations-per-second-into-postgresql-against-pgbench:
# confirmations per second into PostgreSQL through pgbooking.Store.Decide
# (BenchmarkConfirmThroughput: CONNS connections, CONNS callers, 100
# one-seat reservations per call)
# against pgbench running the contract's bare conditional UPDATE, one per
# transaction, on as many connections, alternating ROUNDS times; prints each
# pair, the ratio and the median ratio.
#
# pgbench side: a fresh schema with the pgbooking migrations and one schedule
# of SEATS seats (ids 1…SEATS); each transaction picks a random seat and runs
#   UPDATE seat SET status = 'SOLD', reservation_id = 'pgbench-' || :id
#    WHERE schedule_id = :sched AND seat_id = :id AND status IN ('AVAILABLE','HELD')
# for SECS seconds (-M prepared, -j 2). An UPDATE that finds its seat already
# sold commits nothing, so the script reports pgbench's tps (every
# transaction) and its confirmations/s (seats it actually sold); the ratio is
# taken against tps, the larger. SEATS is large enough that few random picks
# collide.
#
# Go side: GO_N confirmations (default SEATS: both tables have the same
# size) from a fresh schedule of GO_N seats, all sold, in random seat order.
# Seat creation is not timed. BENCH=BenchmarkConfirmThroughputPipeline
# measures Decide with its set path off (one statement per reservation, the
# path for batches whose reservations compete for seats).
#
# Needs psql, pgbench and go, and a PostgreSQL at USHER_TEST_POSTGRES
# (default postgres://postgres@127.0.0.1:5432/test?sslmode=disable) that
# nothing else is loading. Schemas usher_bench_<random> are dropped
# afterwards.
#
# Usage: scripts/bench-pg.sh          (ROUNDS=3 SECS=10 CONNS=10 SEATS=1000000)
#        ROUNDS=1 SECS=5 SEATS=200000 scripts/bench-pg.sh
#        BENCH=BenchmarkConfirmThroughputPipeline GO_N=200000 scripts/bench-pg.sh
set -euo pipefail
cd "$(dirname "$0")/.."

url=${USHER_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
rounds=${ROUNDS:-3}
secs=${SECS:-10}
conns=${CONNS:-10}
seats=${SEATS:-1000000}
gon=${GO_N:-$seats}
bench=${BENCH:-BenchmarkConfirmThroughput}
export USHER_TEST_POSTGRES=$url

tmp=$(mktemp -d)
schema=
cleanup() {
	if [[ -n $schema ]]; then
		psql "$url" -qc "SET client_min_messages = warning; DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
# Both measured runs start right after a checkpoint (needs a superuser or
# pg_checkpoint; skipped otherwise), so both pay the same full-page writes.
checkpoint() { psql "$url" -qc CHECKPOINT >/dev/null 2>&1 || true; }

if [[ $conns != 10 ]]; then
	echo "CONNS=$conns: BenchmarkConfirmThroughput uses 10 connections (benchConns); change both" >&2
	exit 1
fi
echo "building the test binary (outside the timed runs)…"
go test -c -o "$tmp/pgbooking.test" ./internal/booking/pgbooking/
cat >"$tmp/sell.sql" <<'SQL'
\set id random(1, :seats)
UPDATE seat SET status = 'SOLD', reservation_id = 'pgbench-' || :id WHERE schedule_id = :sched AND seat_id = :id AND status IN ('AVAILABLE', 'HELD');
SQL
echo "host: $(nproc) cores, PostgreSQL $(psql "$url" -Atc "SHOW server_version")," \
	"synchronous_commit=$(psql "$url" -Atc 'SHOW synchronous_commit'), fsync=$(psql "$url" -Atc 'SHOW fsync')"
echo "$conns connections; pgbench ${secs}s on $seats seats; $bench: $gon confirmations; $rounds rounds"

ratios=()
for round in $(seq 1 "$rounds"); do
	schema="usher_bench_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
	{
		echo "CREATE SCHEMA $schema; SET search_path = $schema;"
		for f in internal/booking/pgbooking/migrations/*.sql; do echo "\\i $f"; done
		echo "INSERT INTO concert (title, created_at) VALUES ('pgbench', now());"
		echo "INSERT INTO schedule (concert_id, starts_at, room) VALUES (1, now(), 'schedule-1');"
		echo "INSERT INTO seat (schedule_id, section, seat_row, seat_number, price)
		      SELECT 1, 'S', ((g - 1) / 100 + 1)::text, (g - 1) % 100 + 1, 50000 FROM generate_series(1, $seats) g;"
	} | psql "$url" -v ON_ERROR_STOP=1 -q >/dev/null
	checkpoint
	status=0
	out=$(PGOPTIONS="-c search_path=$schema" pgbench -n -M prepared -c "$conns" -j 2 -T "$secs" \
		-D sched=1 -D seats="$seats" -f "$tmp/sell.sql" "$url" 2>&1) || status=$?
	tps=$(awk '/^tps = / { print $3 }' <<<"$out")
	txns=$(awk -F': ' '/number of transactions actually processed/ { print $2 }' <<<"$out" | cut -d/ -f1)
	sold=$(psql "$url" -Atc "SELECT count(*) FROM $schema.seat WHERE status = 'SOLD'")
	psql "$url" -qc "SET client_min_messages = warning; DROP SCHEMA $schema CASCADE" >/dev/null
	schema=
	if [[ $status != 0 || -z $tps || -z $txns ]]; then
		echo "$out" >&2
		exit 1
	fi
	if [[ $sold == 0 ]]; then # the UPDATE matched no seat: the schema changed under it
		echo "bench-pg: pgbench's $txns transactions sold no seat; $tmp/sell.sql needs the current schema" >&2
		exit 1
	fi
	pgconf=$(awk -v t="$tps" -v n="$txns" -v s="$sold" 'BEGIN { printf "%.0f", t * s / n }')
	checkpoint

	status=0
	out=$("$tmp/pgbooking.test" -test.run '^$' -test.bench "^$bench\$" -test.benchtime="${gon}x" 2>&1) || status=$?
	gos=$(awk '{ for (i = 2; i <= NF; i++) if ($i == "confirmations/s") print $(i-1) }' <<<"$out" | tail -1)
	if [[ $status != 0 || -z $gos ]]; then
		echo "$out" >&2
		exit 1
	fi
	ratio=$(awk -v a="$gos" -v b="$tps" 'BEGIN { printf "%.2f", a / b }')
	ratios+=("$ratio")
	printf 'round %d: pgbench %.0f tps (%s confirmations/s, %d of %d sold); pgbooking.Decide %.0f confirmations/s; ratio %s\n' \
		"$round" "$tps" "$pgconf" "$sold" "$txns" "$gos" "$ratio"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
echo "median ratio pgbooking.Decide confirmations/s / pgbench tps: $median (target ≥ 0.8)"
