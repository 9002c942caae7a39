#!/usr/bin/env bash
# usher over HTTP on the memory store and on the Redis store, side by side,
# measured with wrk on this machine:
#
#  1. status polls/s for a visitor far from the front of a paused room with
#     2,000 waiting, next to a trivial net/http JSON handler
#     (scripts/trivialjson) answering the same request;
#  2. enters (browser enters: POST without a body, a new visitor each) into
#     a paused room "crowd" that keeps filling (hundreds of thousands waiting
#     by the last round): enters/s and wrk's p99 latency with 64 connections
#     (a closed loop: the faster store also serves more enters), then the
#     p99 at the same arrival rate on both (usher loadtest, open model,
#     [rate] enters/s). The enters run first, so that the polls run with
#     the crowd waiting.
#
#   scripts/bench-http.sh [duration=10s] [connections=64] [redis=redis://127.0.0.1:6379/0] [rounds=4] [rate=2000]
#
# redis "none" measures the memory store alone. The stores are measured in
# interleaved rounds (memory, Redis; Redis, memory; …) so that other load on
# the machine hits both alike; the script prints every round
# and the ratios of the sums: memory ÷ Redis for polls/s, Redis ÷ memory
# for the enter p99 (above 1.0: the memory store is the faster). Needs wrk
# (Debian package wrk), curl, jq and, with Redis, redis-cli (to delete the keys
# it made). USHER_BIN=path uses a prebuilt usher.
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-10s} conns=${2:-64} redis=${3:-redis://127.0.0.1:6379/0} rounds=${4:-4} rate=${5:-2000}
. scripts/benchlib.sh
prefix="bench-http-$$:"
if [ "$redis" != none ]; then
  at_exit 'redis-cli -u "$redis" --scan --pattern "$prefix*" 2>/dev/null | xargs -r -n 1000 redis-cli -u "$redis" del >/dev/null'
fi
go build -o "$tmp/trivialjson" ./scripts/trivialjson

# Servers: memory on :18089, Redis on :18091 (their admin listeners on
# :19089 and :19091), the trivial handler on :18090.
declare -A port=([memory]=18089 [redis]=18091)
stores=(memory)
start memory "$usher" serve --addr 127.0.0.1:18089 --admin-addr 127.0.0.1:19089 --data-dir "$tmp/memory" --store memory
if [ "$redis" != none ]; then
  stores+=(redis)
  start redis "$usher" serve --addr 127.0.0.1:18091 --admin-addr 127.0.0.1:19091 --data-dir "$tmp/redis" --store "$redis" --redis-prefix "$prefix"
fi
start trivialjson "$tmp/trivialjson" --addr 127.0.0.1:18090
for s in "${stores[@]}"; do wait_healthy "localhost:${port[$s]}/healthz"; done
wait_healthy localhost:18090/status

# Per store: a paused room "sale" with 2,000 waiting visitors, the last one's
# ticket (polled far back), and a paused room "crowd" for the enters. Every
# enter comes from 127.0.0.1: the per-client limit on new places
# (client_enters_per_minute, 600 by default) would refuse most of them.
declare -A ticket
for s in "${stores[@]}"; do
  base=localhost:${port[$s]}/api/v1/rooms adm=localhost:$((port[$s] + 1000))/api/v1/rooms
  admin=$(cat "$tmp/$s/admin.key")
  for room in sale crowd; do # a build older than the per-client limit refuses its setting
    curl -sf -XPUT -H "Authorization: Bearer $admin" "$adm/$room" \
      -d '{"state":"paused","admit_rate":50,"client_enters_per_minute":0}' >/dev/null ||
      curl -sf -XPUT -H "Authorization: Bearer $admin" "$adm/$room" -d '{"state":"paused","admit_rate":50}' >/dev/null
  done
  for i in $(seq 2000); do # one curl for all 2,000 (a process each is slow)
    [ "$i" = 1 ] || echo next
    printf 'url = "%s"\nrequest = "POST"\nheader = "Authorization: Bearer %s"\ndata = "{\\"visitor_id\\":\\"bench-%d\\"}"\noutput = "/dev/null"\n' \
      "$base/sale/entries" "$admin" "$i"
  done >"$tmp/fill.conf"
  curl -sf --no-progress-meter --parallel --parallel-max 8 -K "$tmp/fill.conf"
  ticket[$s]=$(curl -sf -XPOST -H "Authorization: Bearer $admin" "$base/sale/entries" \
    -d '{"visitor_id":"bench-last"}' | jq -er .ticket)
  waiting=$(curl -sf -H "Authorization: Bearer $admin" "$adm/sale" | jq -er .stats.waiting)
  if [ "$waiting" != 2001 ]; then echo "$s: $waiting waiting in sale, not 2001" >&2; exit 1; fi
done
printf 'wrk.method = "POST"\n' >"$tmp/enter.lua"

# Each runs wrk and prints "requests/s p99_ms non-2xx requests"
# (scripts/wrkstats.awk): poll_rate URL: a far-back poll as the memory
# store's last visitor; poll_store STORE: the same at the store's server;
# enter_run STORE: enters.
poll_rate() {
  wrk -t2 -c"$conns" -d"$dur" --latency -H "Authorization: Bearer ${ticket[memory]}" "$1" | awk -f scripts/wrkstats.awk
}
poll_store() {
  wrk -t2 -c"$conns" -d"$dur" --latency -H "Authorization: Bearer ${ticket[$1]}" \
    "http://127.0.0.1:${port[$1]}/api/v1/rooms/sale/entries/me" | awk -f scripts/wrkstats.awk
}
enter_run() {
  wrk -t2 -c"$conns" -d"$dur" --latency -s "$tmp/enter.lua" "http://127.0.0.1:${port[$1]}/api/v1/rooms/crowd/entries" |
    awk -f scripts/wrkstats.awk
}
# open_run STORE: "p50_ms p99_ms failed" of enters arriving at $rate/s.
open_run() {
  "$usher" loadtest --scenario direct --method POST --target "http://127.0.0.1:${port[$1]}/api/v1/rooms/crowd/entries" \
    --start-rate "$rate" --stages "$dur:$rate" --origin-stats none --progress=false --json |
    jq -er '.[0].origin | "\(.latency.p50_ms) \(.latency.p99_ms) \(.requests - .successes)"'
}
# measure WHAT COMMAND...: COMMAND's figures into got, each a number, the
# third (the requests that failed) 0.
measure() {
  local what=$1 out
  shift
  out=$("$@")
  read -r -a got <<<"$out"
  figures "$what" "${got[@]}"
  if [ "${#got[@]}" -lt 3 ] || [ "${got[2]}" != 0 ]; then echo "$what: ${got[2]:-?} requests failed" >&2; exit 1; fi
}

# Enters first, so that the polls run with the crowd room full (on the
# memory store, in the same heap). Each server gets a short warm-up of
# each kind first; the order of the stores alternates from round to round.
order() { if (($1 % 2)); then echo "${stores[@]}"; else printf '%s ' "${stores[@]}" | awk '{ for (i = NF; i > 0; i--) printf "%s ", $i }'; fi; }
declare -A polls enters p99s op50s op99s
for s in "${stores[@]}"; do
  dur=1s measure "$s: enters (warm-up)" enter_run "$s"
  dur=1s measure "$s: polls (warm-up)" poll_store "$s"
done
for r in $(seq "$rounds"); do
  for s in $(order "$r"); do
    measure "$s: enters" enter_run "$s"
    enters[$s]+="${got[0]} " p99s[$s]+="${got[1]} "
  done
  for s in $(order "$r"); do
    measure "$s: enters at $rate/s" open_run "$s"
    op50s[$s]+="${got[0]} " op99s[$s]+="${got[1]} "
  done
done
for r in $(seq "$rounds"); do
  for s in $(order "$r"); do
    measure "$s: polls" poll_store "$s"
    polls[$s]+="${got[0]} "
  done
  measure "trivial: polls" poll_rate http://127.0.0.1:18090/status
  polls[trivial]+="${got[0]} "
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
  waiting=$(curl -sf -H "Authorization: Bearer $(cat "$tmp/$s/admin.key")" "localhost:$((port[$s] + 1000))/api/v1/rooms/crowd" | jq -er .stats.waiting)
  printf '  %-8s %s;  p99 %s;  at %s/s: p50 %s p99 %s (%s waiting at the end)\n' \
    "$s" "${enters[$s]}" "${p99s[$s]}" "$rate" "${op50s[$s]}" "${op99s[$s]}" "$waiting"
done
curl -sf -H "Authorization: Bearer $(cat "$tmp/memory/admin.key")" localhost:19089/metrics | awk '/^usher_status_polls_total/ {print "  memory " $0}'
if [ "$redis" != none ]; then
  # ratios a/b of the sums, and per round (the median of the rounds too).
  ratios() {
    awk -v a="$2" -v b="$3" -v what="$1" 'BEGIN {
      n = split(a, x, " "); split(b, y, " ")
      for (i = 1; i <= n; i++) { sa += x[i]; sb += y[i]; r[i] = x[i] / y[i] }
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (r[j] < r[i]) { t = r[i]; r[i] = r[j]; r[j] = t }
      med = n % 2 ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
      printf "  %-34s %.2fx (sums), median of rounds %.2fx, rounds:", what, sa / sb, med
      split(a, x, " "); for (i = 1; i <= n; i++) printf " %.2f", x[i] / y[i]; printf "\n" }'
  }
  echo "memory vs Redis (>= 1.0: the memory store is not the slow one):"
  ratios "polls/s memory/Redis" "${polls[memory]}" "${polls[redis]}"
  ratios "enters/s memory/Redis" "${enters[memory]}" "${enters[redis]}"
  ratios "enter p99 Redis/memory (wrk)" "${p99s[redis]}" "${p99s[memory]}"
  ratios "enter p99 Redis/memory at $rate/s" "${op99s[redis]}" "${op99s[memory]}"
fi
