#!/usr/bin/env bash
# Status polls/s through HTTP for a visitor far from the front of the queue,
# against a trivial net/http JSON handler (scripts/trivialjson), measured in
# the same run with wrk on this machine. Prints both rates and the ratio.
#
#   scripts/bench-http.sh [duration=10s] [connections=64] [store=memory]
#
# Both servers get the same request (the same Authorization header), so the
# difference is what usher does with it. Needs wrk (Debian package wrk) and
# curl. Runs A/B/A/B and reports the sums.
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-10s} conns=${2:-64} store=${3:-memory}
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT

go build -o "$tmp/usher" ./cmd/usher
go build -o "$tmp/trivialjson" ./scripts/trivialjson
"$tmp/usher" serve --addr 127.0.0.1:18089 --data-dir "$tmp/data" --store "$store" \
  --redis-prefix "bench-http-$$:" >"$tmp/usher.log" 2>&1 &
"$tmp/trivialjson" --addr 127.0.0.1:18090 &
for _ in $(seq 50); do curl -sf localhost:18089/healthz >/dev/null && curl -sf localhost:18090/status >/dev/null && break; sleep 0.2; done
admin=$(cat "$tmp/data/admin.key")

# A paused room with 2,000 waiting visitors; poll as the last one (far back).
curl -sf -XPUT -H "Authorization: Bearer $admin" localhost:18089/api/v1/rooms/sale \
  -d '{"state":"paused","admit_rate":50}' >/dev/null
seq 1 2000 | xargs -P 8 -I{} curl -sf -o /dev/null -XPOST -H "Authorization: Bearer $admin" \
  localhost:18089/api/v1/rooms/sale/entries -d '{"visitor_id":"bench-{}"}'
ticket=$(curl -sf -XPOST -H "Authorization: Bearer $admin" localhost:18089/api/v1/rooms/sale/entries \
  -d '{"visitor_id":"bench-last"}' | sed 's/.*"ticket":"\([^"]*\)".*/\1/')
curl -sf -H "Authorization: Bearer $ticket" localhost:18089/api/v1/rooms/sale/entries/me; echo

rate() { wrk -t2 -c"$conns" -d"$dur" "$@" | awk '/Requests\/sec/ {print $2}'; }
u1=$(rate -H "Authorization: Bearer $ticket" http://127.0.0.1:18089/api/v1/rooms/sale/entries/me)
t1=$(rate -H "Authorization: Bearer $ticket" http://127.0.0.1:18090/status)
u2=$(rate -H "Authorization: Bearer $ticket" http://127.0.0.1:18089/api/v1/rooms/sale/entries/me)
t2=$(rate -H "Authorization: Bearer $ticket" http://127.0.0.1:18090/status)
polls=$(curl -sf localhost:18089/metrics | awk '/^usher_status_polls_total/ {print}')
echo "usher status poll (req/s): $u1 $u2"
echo "trivial JSON handler (req/s): $t1 $t2"
echo "$polls"
awk -v a="$u1" -v b="$u2" -v c="$t1" -v d="$t2" 'BEGIN { printf "ratio usher/trivial = %.2f\n", (a+b)/(c+d) }'
