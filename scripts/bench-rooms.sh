#!/usr/bin/env bash
# What idle rooms cost (issue 22 §1): one `usher serve` on Redis holding N
# open rooms that nobody enters, measured over a few seconds once the rooms
# are made: Redis commands a second (INFO total_commands_processed, which
# counts the commands inside scripts) and the share of a core usher's
# process used (/proc utime + stime), for N in COUNTS, with usher built
# from $OLD_REF (the reference) and from this tree, in the same run.
#
#   [OLD_REF=3b19884] scripts/bench-rooms.sh [counts="10 100 1000 10000"] [secs=30] [redis=redis://127.0.0.1:6379/0]
#
# Needs curl, git and redis-cli. USHER_BIN=path uses a prebuilt usher,
# OLD_BIN=path a prebuilt reference. Nothing else should use the Redis
# meanwhile: its command count is the figure.
set -euo pipefail
cd "$(dirname "$0")/.."
counts=${1:-10 100 1000 10000} secs=${2:-30} redis=${3:-redis://127.0.0.1:6379/0}
. scripts/benchlib.sh
old=${OLD_BIN:-}
if [ -z "$old" ]; then
  mkdir "$tmp/old"
  git archive "${OLD_REF:-3b19884}" | tar -x -C "$tmp/old"
  (cd "$tmp/old" && go build -o "$tmp/usher-old" ./cmd/usher)
  old=$tmp/usher-old
fi
prefix="bench-rooms-$$:"
at_exit "redis-cli -u '$redis' --scan --pattern '$prefix*' | xargs -r -n 500 redis-cli -u '$redis' del >/dev/null"
tick=$(getconf CLK_TCK)

commands() { redis-cli -u "$redis" info stats | awk -F: '/^total_commands_processed/ { print $2 + 0 }'; }
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # utime + stime, in ticks

measure() { # measure NAME BINARY N: sets rc (commands/s) and ru (% of a core)
  local name=$1 bin=$2 n=$3 port=18195 data="$tmp/data-$1-$3"
  "$bin" serve --addr 127.0.0.1:$port --data-dir "$data" --store "$redis" --redis-prefix "$prefix$name-$n:" \
    --admin-key bench-rooms-admin-key-0123456789 --collect=false >"$tmp/serve-$name-$n.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  wait_healthy localhost:$port/healthz
  seq 1 "$n" | xargs -P 8 -I{} curl -sf --retry 10 --retry-all-errors --retry-delay 1 -o /dev/null -X PUT -H "Authorization: Bearer bench-rooms-admin-key-0123456789" \
    "localhost:$port/api/v1/rooms/idle-{}" -d '{"state":"open"}'
  local got
  got=$(curl -sf -H "Authorization: Bearer bench-rooms-admin-key-0123456789" localhost:$port/api/v1/rooms | grep -o '"room":"idle-' | wc -l)
  [ "$got" = "$n" ] || { echo "bench-rooms: $name made $got rooms of $n" >&2; exit 1; }
  sleep 6 # past the reads every room gets when it is made, and one idle refresh
  local c0 u0 c1 u1
  c0=$(commands) u0=$(cpu "$pid")
  sleep "$secs"
  c1=$(commands) u1=$(cpu "$pid")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  figures "$name at $n rooms" "$c0" "$c1" "$u0" "$u1"
  rc=$(((c1 - c0) / secs))
  ru=$(awk -v u=$((u1 - u0)) -v s="$secs" -v t="$tick" 'BEGIN { printf "%.1f", 100 * u / t / s }')
}

echo "| idle rooms | Redis commands/s, reference | this tree | ratio | usher CPU, reference | this tree |"
echo "| --- | --- | --- | --- | --- | --- |"
for n in $counts; do
  measure old "$old" "$n"
  oc=$rc ou=$ru
  measure new "$usher" "$n"
  nc=$rc nu=$ru
  awk -v n="$n" -v oc="$oc" -v ou="$ou" -v nc="$nc" -v nu="$nu" \
    'BEGIN { printf "| %d | %d | %d | %.3f | %s %% | %s %% |\n", n, oc, nc, (oc > 0 ? nc / oc : 0), ou, nu }'
done
