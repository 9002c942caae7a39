#!/usr/bin/env bash
# The event stream's tax on HTTP enters, and its count after a burst
# (issue 22 §2), on the Redis store, measured with wrk on this machine:
#
#  1. enters/s (browser enters: POST without a body, a new visitor each)
#     into a paused room with 64 connections, usher serve with the defaults
#     (events to the embedded NATS stream, the collector counting them into
#     SQLite) against --events=false --collect=false, in interleaved rounds
#     (on, off; off, on; …) so that other load on the machine hits both
#     alike; with USHER_BASE=path (a prebuilt usher, say main's), that one's
#     two configurations run in the same rounds;
#  2. the burst check: once the rounds are over (entries as fast as wrk
#     made them), every server with events waits for its collector, and
#     the room's analytics arrivals must equal the store's count of waiting
#     visitors.
#
#   scripts/bench-events.sh [duration=10s] [connections=64] [redis=redis://127.0.0.1:6379/0] [rounds=3]
#
# Prints every round, the ratio on ÷ off of the sums per binary, and per
# server with events the analytics' arrivals next to the store's count.
# Needs wrk, curl, jq, redis-cli. USHER_BIN=path uses a prebuilt usher.
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-10s} conns=${2:-64} redis=${3:-redis://127.0.0.1:6379/0} rounds=${4:-3}
. scripts/benchlib.sh
prefix="bench-events-$$-"
at_exit 'redis-cli -u "$redis" --scan --pattern "$prefix*" 2>/dev/null | xargs -r -n 1000 redis-cli -u "$redis" del >/dev/null'

declare -A bin=([new]=$usher) port=()
builds=(new)
if [ -n "${USHER_BASE:-}" ]; then
  bin[base]=$USHER_BASE
  builds=(base new)
fi
configs=()
p=18200
for b in "${builds[@]}"; do
  for ev in on off; do
    c=$b-$ev
    configs+=("$c")
    port[$c]=$p
    flags=()
    [ "$ev" = off ] && flags=(--events=false --collect=false)
    # Each server its own Redis prefix and embedded NATS (data directory).
    USHER_ADMIN_ADDR=127.0.0.1:$((p + 1000)) start "$c" "${bin[$b]}" serve --addr "127.0.0.1:$p" --data-dir "$tmp/$c" --store "$redis" \
      --redis-prefix "$prefix$c:" --nats-name "bench$p" "${flags[@]}"
    p=$((p + 1))
  done
done
for c in "${configs[@]}"; do wait_healthy "localhost:${port[$c]}/healthz"; done
for c in "${configs[@]}"; do
  curl -sf -XPUT -H "Authorization: Bearer $(cat "$tmp/$c/admin.key")" "localhost:$(admin_port "${port[$c]}")/api/v1/rooms/crowd" \
    -d '{"state":"paused","admit_rate":50,"client_enters_per_minute":0}' >/dev/null
done
printf 'wrk.method = "POST"\n' >"$tmp/enter.lua"

declare -A sum
for r in $(seq "$rounds"); do
  order=("${configs[@]}")
  if [ $((r % 2)) = 0 ]; then # reversed every other round
    order=()
    for ((i = ${#configs[@]} - 1; i >= 0; i--)); do order+=("${configs[$i]}"); done
  fi
  for c in "${order[@]}"; do
    out=$(wrk -t2 -c"$conns" -d"$dur" --latency -s "$tmp/enter.lua" "http://127.0.0.1:${port[$c]}/api/v1/rooms/crowd/entries" |
      awk -f scripts/wrkstats.awk)
    read -r rps p99 non2xx _ <<<"$out"
    figures "$c enters/s" "$rps"
    echo "round $r $c: $rps enters/s, p99 $p99 ms, non-2xx $non2xx"
    sum[$c]=$(awk -v a="${sum[$c]:-0}" -v b="$rps" 'BEGIN { print a + b }')
  done
done
for b in "${builds[@]}"; do
  awk -v b="$b" -v on="${sum[$b-on]}" -v off="${sum[$b-off]}" -v n="$rounds" \
    'BEGIN { printf "%s: on %.0f enters/s, off %.0f (means of %d rounds): on/off %.2f\n", b, on / n, off / n, n, on / off }'
done

# The burst check: the analytics' arrivals against the store's count.
for c in "${configs[@]}"; do
  [[ $c == *-on ]] || continue
  admin=$(cat "$tmp/$c/admin.key")
  base=localhost:$(admin_port "${port[$c]}")/api/v1/rooms/crowd
  waiting=$(curl -sf -H "Authorization: Bearer $admin" "$base" | jq -er .stats.waiting)
  got=0
  for _ in $(seq 150); do # up to 30 s for the collector to catch up
    got=$(curl -sf -H "Authorization: Bearer $admin" "$base/analytics" | jq -er '.totals.arrivals')
    [ "$got" -ge "$waiting" ] && break
    sleep 0.2
  done
  echo "$c burst: analytics arrivals $got, store waiting $waiting ($(awk -v a="$got" -v w="$waiting" 'BEGIN { printf "%.2f %%", 100 * a / w }'))"
done
