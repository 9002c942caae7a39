#!/usr/bin/env bash
# usher over HTTP on the memory store and on the Redis store, side by side,
# measured with wrk on this machine:
#
#  1. status polls/s for a visitor far from the front of a paused room with
#     2,000 waiting, next to a trivial net/http JSON handler
#     (scripts/trivialjson) answering the same request;
#  2. enters (browser enters: POST without a body, a new visitor each) into
#     a paused room that keeps filling (hundreds of thousands waiting by the
#     last round): enters/s and wrk's p99 latency.
#
#   scripts/bench-http.sh [duration=10s] [connections=64] [redis=redis://127.0.0.1:6379/0] [rounds=2]
#
# redis "none" measures the memory store alone. The stores are measured in
# interleaved rounds (memory, Redis, trivial; memory, Redis, …) so that
# other load on the machine hits both alike; the script prints every round
# and the ratios of the sums: memory ÷ Redis for polls/s, Redis ÷ memory
# for the enter p99 (above 1.0: the memory store is the faster). Needs wrk
# (Debian package wrk), curl and, with Redis, redis-cli (to delete the keys
# it made). USHER_BIN=path uses a prebuilt usher.
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-10s} conns=${2:-64} redis=${3:-redis://127.0.0.1:6379/0} rounds=${4:-2}
tmp=$(mktemp -d)
prefix="bench-http-$$:"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ "$redis" != none ]; then
    redis-cli -u "$redis" --scan --pattern "$prefix*" | xargs -r -n 1000 redis-cli -u "$redis" del >/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

usher=${USHER_BIN:-}
if [ -z "$usher" ]; then
  go build -o "$tmp/usher" ./cmd/usher
  usher=$tmp/usher
fi
go build -o "$tmp/trivialjson" ./scripts/trivialjson

# Servers: memory on :18089, Redis on :18091, the trivial handler on :18090.
declare -A port=([memory]=18089 [redis]=18091)
stores=(memory)
"$usher" serve --addr 127.0.0.1:18089 --data-dir "$tmp/memory" --store memory >"$tmp/memory.log" 2>&1 &
pids+=($!)
if [ "$redis" != none ]; then
  stores+=(redis)
  "$usher" serve --addr 127.0.0.1:18091 --data-dir "$tmp/redis" --store "$redis" \
    --redis-prefix "$prefix" >"$tmp/redis.log" 2>&1 &
  pids+=($!)
fi
"$tmp/trivialjson" --addr 127.0.0.1:18090 &
pids+=($!)
for s in "${stores[@]}"; do
  for _ in $(seq 100); do curl -sf "localhost:${port[$s]}/healthz" >/dev/null && break; sleep 0.1; done
done
for _ in $(seq 50); do curl -sf localhost:18090/status >/dev/null && break; sleep 0.1; done

# Per store: a paused room "sale" with 2,000 waiting visitors, the last one's
# ticket (polled far back), and a paused room "crowd" for the enters.
declare -A ticket
for s in "${stores[@]}"; do
  base=localhost:${port[$s]}/api/v1/rooms
  admin=$(cat "$tmp/$s/admin.key")
  for room in sale crowd; do
    curl -sf -XPUT -H "Authorization: Bearer $admin" "$base/$room" -d '{"state":"paused","admit_rate":50}' >/dev/null
  done
  for i in $(seq 2000); do # one curl for all 2,000 (a process each is slow)
    printf 'url = "%s"\nrequest = "POST"\nheader = "Authorization: Bearer %s"\ndata = "{\\"visitor_id\\":\\"bench-%d\\"}"\noutput = "/dev/null"\nnext\n' \
      "$base/sale/entries" "$admin" "$i"
  done >"$tmp/fill.conf"
  curl -sf --parallel --parallel-max 8 -K "$tmp/fill.conf"
  ticket[$s]=$(curl -sf -XPOST -H "Authorization: Bearer $admin" "$base/sale/entries" \
    -d '{"visitor_id":"bench-last"}' | sed 's/.*"ticket":"\([^"]*\)".*/\1/')
done
printf 'wrk.method = "POST"\n' >"$tmp/enter.lua"

# poll_rate URL: requests/s; enter_run URL: "requests/s p99_ms".
poll_rate() {
  wrk -t2 -c"$conns" -d"$dur" -H "Authorization: Bearer ${ticket[memory]}" "$1" | awk '/Requests\/sec/ {print $2}'
}
poll_store() {
  wrk -t2 -c"$conns" -d"$dur" -H "Authorization: Bearer ${ticket[$1]}" \
    "http://127.0.0.1:${port[$1]}/api/v1/rooms/sale/entries/me" | awk '/Requests\/sec/ {print $2}'
}
enter_run() {
  wrk -t2 -c"$conns" -d"$dur" --latency -s "$tmp/enter.lua" "http://127.0.0.1:${port[$1]}/api/v1/rooms/crowd/entries" |
    awk '/^ +99%/ { v = $2; u = 1
                    if (v ~ /us$/) u = 0.001; else if (v ~ /ms$/) u = 1; else if (v ~ /s$/) u = 1000
                    sub(/[a-z]+$/, "", v); p99 = v * u }
         /Non-2xx/ { bad = $NF }
         /Requests\/sec/ { rate = $2 }
         END { printf "%s %.2f %d\n", rate, p99, bad }'
}

declare -A polls enters p99s
for r in $(seq "$rounds"); do
  for s in "${stores[@]}"; do polls[$s]+="$(poll_store "$s") "; done
  polls[trivial]+="$(poll_rate http://127.0.0.1:18090/status) "
done
for r in $(seq "$rounds"); do
  for s in "${stores[@]}"; do
    read -r rate p99 bad < <(enter_run "$s")
    if [ "$bad" != 0 ]; then echo "$s: $bad enters failed" >&2; exit 1; fi
    enters[$s]+="$rate " p99s[$s]+="$p99 "
  done
done

sum() { awk '{ s = 0; for (i = 1; i <= NF; i++) s += $i; print s }' <<<"$1"; }
echo "status poll, far back (req/s per round):"
for s in "${stores[@]}" trivial; do printf '  %-8s %s\n' "$s" "${polls[$s]}"; done
for s in "${stores[@]}"; do
  awk -v a="$(sum "${polls[$s]}")" -v b="$(sum "${polls[trivial]}")" -v s="$s" \
    'BEGIN { printf "  ratio usher(%s)/trivial = %.2f\n", s, a / b }'
done
echo "enter, paused room (req/s; p99 ms) per round:"
for s in "${stores[@]}"; do
  waiting=$(curl -sf -H "Authorization: Bearer $(cat "$tmp/$s/admin.key")" "localhost:${port[$s]}/api/v1/rooms/crowd" | sed 's/.*"waiting":\([0-9]*\).*/\1/')
  printf '  %-8s %s;  p99 %s (%s waiting at the end)\n' "$s" "${enters[$s]}" "${p99s[$s]}" "$waiting"
done
curl -sf localhost:18089/metrics | awk '/^usher_status_polls_total/ {print "  memory " $0}'
if [ "$redis" != none ]; then
  awk -v pm="$(sum "${polls[memory]}")" -v pr="$(sum "${polls[redis]}")" \
    -v em="$(sum "${enters[memory]}")" -v er="$(sum "${enters[redis]}")" \
    -v qm="$(sum "${p99s[memory]}")" -v qr="$(sum "${p99s[redis]}")" 'BEGIN {
    printf "memory vs Redis: polls/s %.2fx, enters/s %.2fx, enter p99 Redis/memory %.2fx (>= 1.0: memory is not the slow one)\n",
      pm / pr, em / er, qr / qm }'
fi
