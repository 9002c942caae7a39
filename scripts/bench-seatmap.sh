#!/usr/bin/env bash
# The seat map at stadium size (issue 35 §1), on Redis + PostgreSQL, one
# usher, one run: its bytes (the whole map, the layout gzipped, the status)
# and, with wrk, requests/s and p99 of each form of the seat map next to
# the reference, a visitor's queue status poll on the same instance:
#
#   - poll:          GET /api/v1/rooms/sale/entries/me (the reference)
#   - map:           GET …/seats, the whole map, plain (before issue 35)
#   - map gzip:      the same, gzipped per request
#   - status:        GET …/seats/status, gzip accepted (a browser)
#   - status 304:    the same with If-None-Match its current ETag
#   - layout:        GET …/seats/layout?version=…, gzip accepted (first load)
#   - status, admin: the status with the admin key on the admin listener:
#                    no pass check nor slot renewal (the gate's share)
#   - poll, again:   the reference at the end, for drift
#
# Seat-map reads carry an admitted visitor's pass on the visitors' listener,
# as a browser's do: each renews the visitor's slot in the store.
#
#   scripts/bench-seatmap.sh [duration=10s] [connections=64] [seats=50000] [redis=redis://127.0.0.1:6379/0]
#
# PostgreSQL at $USHER_TEST_POSTGRES (default postgres://postgres@127.0.0.1:5432/test?sslmode=disable),
# in a schema of its own, dropped at the end. Needs wrk, curl, jq, psql,
# redis-cli. USHER_BIN=path uses a prebuilt usher.
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-10s} conns=${2:-64} seats=${3:-50000} redis=${4:-redis://127.0.0.1:6379/0}
. scripts/benchlib.sh
real_stores seatmap "$redis"
id=$("$usher" seed --seats "$seats" --json "${stores[@]}" | jq -er .schedule_id)
start usher "$usher" serve --addr 127.0.0.1:18089 --admin-addr 127.0.0.1:19089 "${stores[@]}"
wait_healthy localhost:18089/healthz
admin=$(cat "$tmp/data/admin.key")
api=http://127.0.0.1:18089/api/v1 adm=http://127.0.0.1:19089/api/v1
put() { curl -sf -XPUT -H "Authorization: Bearer $admin" "$adm/rooms/$1" -d "$2" >/dev/null; }

# The reference: a visitor waiting in a paused room. The buyer: a visitor
# admitted to the schedule's room, with a pass.
put sale '{"state":"paused","client_enters_per_minute":0}'
ticket=$(curl -sf -XPOST -H "Authorization: Bearer $admin" "$api/rooms/sale/entries" -d '{"visitor_id":"waiting"}' | jq -er .ticket)
put "schedule-$id" '{"max_active":1000,"admit_rate":1000,"client_enters_per_minute":0}'
pass=
for _ in $(seq 50); do
  pass=$(curl -sf -XPOST -H "Authorization: Bearer $admin" "$api/rooms/schedule-$id/entries" -d '{"visitor_id":"buyer"}' | jq -r '.pass // empty')
  [ -n "$pass" ] && break
  sleep 0.2
done
[ -n "$pass" ] || { echo "bench-seatmap: the buyer was not admitted" >&2; exit 1; }
seats_url="$api/schedules/$id/seats"

size() { curl -sf -o /dev/null -w '%{size_download}' -H "Authorization: Bearer $pass" "$@"; }
version=$(curl -sf -H "Authorization: Bearer $pass" "$seats_url/status" | jq -er .layout)
etag=$(curl -sf -D - -o /dev/null -H "Authorization: Bearer $pass" -H 'Accept-Encoding: gzip' "$seats_url/status" | tr -d '\r' | awk -F': ' 'tolower($1) == "etag" { print $2 }')
b_map=$(size "$seats_url")
b_map_gz=$(size -H 'Accept-Encoding: gzip' "$seats_url")
b_layout=$(size "$seats_url/layout?version=$version")
b_layout_gz=$(size -H 'Accept-Encoding: gzip' "$seats_url/layout?version=$version")
b_status=$(size "$seats_url/status")
b_status_gz=$(size -H 'Accept-Encoding: gzip' "$seats_url/status")
figures "sizes" "$b_map" "$b_map_gz" "$b_layout" "$b_layout_gz" "$b_status" "$b_status_gz"

# run NAME URL [HEADER...]: wrk's "requests/s p99_ms non-2xx requests".
# The whole map may starve the instance (its store calls time out: 503):
# its failures are counted and shown; any other run's fail the script
# after the table.
declare -A rate p99 bad
failed=()
run() {
  local name=$1 url=$2 h=() out
  shift 2
  for x in "$@"; do h+=(-H "$x"); done
  out=$(wrk -t2 -c"$conns" -d"$dur" --latency "${h[@]}" "$url" | awk -f scripts/wrkstats.awk)
  read -r -a got <<<"$out"
  figures "$name" "${got[@]}"
  if [ "${got[2]}" != 0 ] && [[ $name != map* ]]; then failed+=("$name: ${got[2]} answers of 400 or more"); fi
  rate[$name]=${got[0]} p99[$name]=${got[1]} bad[$name]=${got[2]}
}
auth="Authorization: Bearer $pass"
run poll "$api/rooms/sale/entries/me" "Authorization: Bearer $ticket"
run map "$seats_url" "$auth"
run "map gzip" "$seats_url" "$auth" "Accept-Encoding: gzip"
run status "$seats_url/status" "$auth" "Accept-Encoding: gzip"
run "status 304" "$seats_url/status" "$auth" "Accept-Encoding: gzip" "If-None-Match: $etag"
run layout "$seats_url/layout?version=$version" "$auth" "Accept-Encoding: gzip"
run "status, admin" "$adm/schedules/$id/seats/status" "Authorization: Bearer $admin" "Accept-Encoding: gzip"
run "poll, again" "$api/rooms/sale/entries/me" "Authorization: Bearer $ticket"

echo "$seats seats; wrk -t2 -c$conns -d$dur; $(nproc) CPUs; Redis + PostgreSQL"
echo "bytes: map $b_map (gzip $b_map_gz); layout $b_layout (gzip $b_layout_gz); status $b_status (gzip $b_status_gz)"
echo "| Request | req/s | p99 (ms) | ÷ status polls/s | answers ≥ 400 |"
echo "|---|---|---|---|---|"
for n in poll map "map gzip" status "status 304" layout "status, admin" "poll, again"; do
  awk -v n="$n" -v r="${rate[$n]}" -v p="${p99[$n]}" -v ref="${rate[poll]}" -v b="${bad[$n]}" 'BEGIN { printf "| %s | %.0f | %.1f | %.3f | %d |\n", n, r, p, r / ref, b }'
done
if [ "${#failed[@]}" != 0 ]; then
  printf 'bench-seatmap: %s\n' "${failed[@]}" >&2
  exit 1
fi
