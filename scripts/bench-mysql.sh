#!/usr/bin/env bash
# bench-mysql.sh measures confirmations per second into MySQL/MariaDB
# through mysqlbooking.Store.Decide (BenchmarkConfirmThroughput: CONNS
# connections, CONNS callers, 100 one-seat reservations per call) against
# mysqlslap running the contract's bare conditional UPDATE, one per
# transaction (autocommit), on as many connections, alternating ROUNDS
# times; prints each pair, the ratio and the median ratio.
#
# mysqlslap side: a fresh database with the mysqlbooking migrations and one
# schedule of SEATS seats (ids 1…SEATS); each client runs SLAP_N/CONNS times
#   SET @id = FLOOR(1 + RAND() * SEATS);
#   UPDATE seat SET status = 'SOLD', reservation_id = CONCAT('slap-', @id)
#    WHERE schedule_id = 1 AND seat_id = @id AND status IN ('AVAILABLE','HELD')
# An UPDATE that finds its seat already sold commits nothing, so the script
# reports mysqlslap's UPDATEs/s (every transaction) and its confirmations/s
# (seats it actually sold); the ratio is taken against UPDATEs/s, the
# larger. SEATS is large enough that few random picks collide.
#
# Go side: GO_N confirmations (default SLAP_N) from a fresh schedule of GO_N
# seats, all sold, in random seat order. Seat creation is not timed.
#
# Needs the mariadb client, mysqlslap and go, and a MariaDB (the seat rows
# are made with its SEQUENCE engine) at USHER_TEST_MYSQL (default
# mysql://root@127.0.0.1:3306/test; root without a password on 127.0.0.1)
# that nothing else is loading. Databases usher_bench_<random> are dropped
# afterwards.
#
# Usage: scripts/bench-mysql.sh        (ROUNDS=3 CONNS=10 SEATS=1000000 SLAP_N=50000)
#        ROUNDS=1 SEATS=100000 SLAP_N=5000 scripts/bench-mysql.sh
set -euo pipefail
cd "$(dirname "$0")/.."

url=${USHER_TEST_MYSQL:-mysql://root@127.0.0.1:3306/test}
rounds=${ROUNDS:-3}
conns=${CONNS:-10}
seats=${SEATS:-1000000}
slapn=${SLAP_N:-50000}
gon=${GO_N:-$slapn}
export USHER_TEST_MYSQL=$url
hostport=${url#mysql://}
hostport=${hostport#*@}
hostport=${hostport%%/*}
host=${hostport%:*}
port=${hostport##*:}
[[ $port == "$host" ]] && port=3306
my=(mariadb -h "$host" -P "$port" -u root)

tmp=$(mktemp -d)
db=
cleanup() {
	if [[ -n $db ]]; then
		"${my[@]}" -e "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

if [[ $conns != 10 ]]; then
	echo "CONNS=$conns: BenchmarkConfirmThroughput uses 10 connections (benchConns); change both" >&2
	exit 1
fi
echo "building the test binary (outside the timed runs)…"
go test -c -o "$tmp/mysqlbooking.test" ./internal/booking/mysqlbooking/
vars=$("${my[@]}" -N -e "SELECT CONCAT(VERSION(), ', innodb_flush_log_at_trx_commit=', @@innodb_flush_log_at_trx_commit, ', log_bin=', @@log_bin, ', sync_binlog=', @@sync_binlog)")
echo "host: $(nproc) cores, $vars"
echo "$conns connections; mysqlslap $((slapn)) UPDATEs on $seats seats; BenchmarkConfirmThroughput: $gon confirmations; $rounds rounds"

ratios=()
for round in $(seq 1 "$rounds"); do
	db="usher_bench_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
	"${my[@]}" -e "CREATE DATABASE $db CHARACTER SET utf8mb4"
	{
		cat internal/booking/mysqlbooking/migrations/*.sql
		echo "INSERT INTO concert (title, created_at) VALUES ('mysqlslap', UTC_TIMESTAMP(6));"
		echo "INSERT INTO schedule (concert_id, starts_at, room) VALUES (1, UTC_TIMESTAMP(6), 'schedule-1');"
		echo "INSERT INTO seat (seat_id, schedule_id, section, seat_row, seat_number, price)
		      SELECT seq, 1, 'S', (seq - 1) DIV 100 + 1, (seq - 1) MOD 100 + 1, 50000 FROM seq_1_to_$seats;"
	} | "${my[@]}" "$db"
	status=0
	# --number-of-queries counts statements across all clients: two per UPDATE.
	out=$(mysqlslap -h "$host" -P "$port" -u root --create-schema="$db" --concurrency="$conns" --iterations=1 \
		--number-of-queries=$((2 * slapn)) --delimiter=';' \
		--query="SET @id = FLOOR(1 + RAND() * $seats); UPDATE seat SET status = 'SOLD', reservation_id = CONCAT('slap-', @id) WHERE schedule_id = 1 AND seat_id = @id AND status IN ('AVAILABLE', 'HELD')" 2>&1) || status=$?
	secs=$(awk '/Average number of seconds to run all queries/ { print $(NF-1) }' <<<"$out")
	sold=$("${my[@]}" -N -e "SELECT COUNT(*) FROM $db.seat WHERE status = 'SOLD'")
	"${my[@]}" -e "DROP DATABASE $db"
	db=
	if [[ $status != 0 || -z $secs ]]; then
		echo "$out" >&2
		exit 1
	fi
	if [[ $sold == 0 ]]; then # the UPDATE matched no seat: the schema changed under it
		echo "bench-mysql: mysqlslap's $slapn UPDATEs sold no seat; the query needs the current schema" >&2
		exit 1
	fi
	tps=$(awk -v n="$slapn" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')
	slapconf=$(awk -v n="$sold" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')

	status=0
	out=$("$tmp/mysqlbooking.test" -test.run '^$' -test.bench '^BenchmarkConfirmThroughput$' -test.benchtime="${gon}x" 2>&1) || status=$?
	gos=$(awk '{ for (i = 2; i <= NF; i++) if ($i == "confirmations/s") print $(i-1) }' <<<"$out" | tail -1)
	if [[ $status != 0 || -z $gos ]]; then
		echo "$out" >&2
		exit 1
	fi
	ratio=$(awk -v a="$gos" -v b="$tps" 'BEGIN { printf "%.2f", a / b }')
	ratios+=("$ratio")
	printf 'round %d: mysqlslap %s UPDATEs/s (%s confirmations/s, %d of %d sold); mysqlbooking.Decide %.0f confirmations/s; ratio %s\n' \
		"$round" "$tps" "$slapconf" "$sold" "$slapn" "$gos" "$ratio"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
echo "median ratio mysqlbooking.Decide confirmations/s / mysqlslap UPDATEs/s: $median"
