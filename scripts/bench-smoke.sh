#!/usr/bin/env bash
# Every scripts/bench-*.sh once, in seconds: the arguments below shrink each
# run (1–3 s measurements, one round, tens of visitors), so that a change
# that breaks a benchmark (a server that does not start, a default that
# refuses its requests, an answer of the wrong kind, a report jq cannot
# read) fails here instead of in the next measurement. Figures are printed,
# never asserted: a loaded 2-core machine makes them meaningless at this
# size. Stops at the first failure, naming the script; a script without a
# line below fails too. .ci/run runs it after the tests; two to three
# minutes on 2 cores.
#
#   scripts/bench-smoke.sh [NAME...]   # NAME: http for scripts/bench-http.sh; default all
#
# Needs what the scripts need (wrk, jq, curl, bc, nginx, redis-cli,
# redis-benchmark, psql, pgbench, mariadb, mysqlslap; .ci/run installs them), Redis at
# $USHER_TEST_REDIS (default redis://127.0.0.1:6379/0), PostgreSQL at $USHER_TEST_POSTGRES (bench-pg.sh's
# default otherwise), and the Redis Cluster of scripts/cluster.sh
# (started or reused). Each script stops what it started and deletes the
# keys and schemas it made, on failure too. Artifacts go to a temporary
# directory, not artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
redis=${USHER_TEST_REDIS:-redis://127.0.0.1:6379/0}

# smoke NAME: scripts/bench-NAME.sh, small.
smoke() {
  case $1 in
  adaptive) scripts/bench-adaptive.sh 2s:conns=10,2s:conns=5 50 ;;
  compare) ROUNDS=1 BENCHTIME=10x scripts/bench-compare.sh HEAD ./internal/queue BenchmarkValidRoomID ;;
  cluster) N=2000 ROUNDS=1 BENCHTIME=100x scripts/bench-cluster.sh ;;
  edge) scripts/bench-edge.sh 1s 8 1 ;;
  events) USHER_BASE=${USHER_BIN:-} scripts/bench-events.sh 1s 8 "$redis" 1 ;;
  eta) OLD_BIN=$USHER_BIN CHANGE_AT=1 CHANGE_FOR=1 scripts/bench-eta.sh 3s 50 2 1 ;;
  flood) scripts/bench-flood.sh 1s 20 2 ;;
  headers) OLD_BIN=$USHER_BIN scripts/bench-headers.sh 2 65536 4 ;;
  http) scripts/bench-http.sh 1s 8 "$redis" 1 200 ;;
  inventory) scripts/bench-inventory.sh 20 100 100 5 ;;
  loadgen) scripts/bench-loadgen.sh 1s 8 ;;
  mysql) ROUNDS=1 SEATS=10000 SLAP_N=1000 scripts/bench-mysql.sh ;;
  pg) ROUNDS=1 SECS=1 SEATS=10000 scripts/bench-pg.sh ;;
  opening) scripts/bench-opening.sh 1 ;;
  presence) scripts/bench-presence.sh 2 3 "0 10" ;;
  rehearsal) scripts/bench-rehearsal.sh 20 10 2 60 10 ;;
  redis) USHER_TEST_REDIS=$redis N=2000 ROUNDS=1 MEMORY=0 scripts/bench-redis.sh ;;
  rooms) OLD_BIN=$USHER_BIN scripts/bench-rooms.sh "10" 1 "$redis" && MODE=busy BUSY_WARM=1 BUSY_USERS=20 scripts/bench-rooms.sh "0 10" 1 "$redis" ;;
  seatmap) scripts/bench-seatmap.sh 1s 8 1000 "$redis" ;;
  seed) scripts/bench-seed.sh 2s 50 2 ;;
  shard) N=300 ROUNDS=1 scripts/bench-shard.sh ;;
  stadium) scripts/bench-stadium.sh 30 200 50 "random stage mixed" "$redis" ;;
  visitor) OLD_BIN=$USHER_BIN scripts/bench-visitor.sh 4 40 "$redis" ;;
  *)
    echo "bench-smoke: scripts/bench-$1.sh has no smoke line in scripts/bench-smoke.sh; add one" >&2
    return 1
    ;;
  esac
}

names=("$@")
if [ ${#names[@]} = 0 ]; then
  for f in scripts/bench-*.sh; do
    n=${f#scripts/bench-}
    n=${n%.sh}
    [ "$n" = smoke ] || names+=("$n")
  done
fi

missing=()
for c in wrk jq curl bc redis-cli redis-benchmark psql pgbench mariadb mysqlslap sha1sum; do
  command -v "$c" >/dev/null || missing+=("$c")
done
command -v nginx >/dev/null || test -x /usr/sbin/nginx || missing+=(nginx)
if [ ${#missing[@]} != 0 ]; then
  echo "bench-smoke: missing ${missing[*]} (.ci/run installs them)" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/usher" ./cmd/usher
export USHER_BIN=$tmp/usher
export -f smoke
export redis

start=$SECONDS
times=()
for n in "${names[@]}"; do
  echo "=== bench-smoke: scripts/bench-$n.sh"
  t=$SECONDS
  status=0
  # 300 s: a hung script fails here, its cleanup run by its EXIT trap.
  RESULTS=$tmp/results/$n timeout -k 10 300 bash -c 'smoke "$1"' _ "$n" </dev/null || status=$?
  if [ $status != 0 ]; then
    echo "bench-smoke: FAIL scripts/bench-$n.sh (exit $status$([ $status != 124 ] || echo ', timed out')) after $((SECONDS - t)) s" >&2
    exit 1
  fi
  times+=("$n $((SECONDS - t)) s")
done
echo "=== bench-smoke: ${#names[@]} scripts passed in $((SECONDS - start)) s: $(printf '%s, ' "${times[@]}" | sed 's/, $//')"
