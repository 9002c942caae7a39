#!/usr/bin/env bash
# Issue 9 §3's flood experiment on one machine: one client on 8 connections
# asks for new queue places as fast as it can, cookie-less, from 127.0.0.2,
# while 200 honest visitors (usher loadtest, each visit from an address of its
# own through X-Forwarded-For, usher trusting 127.0.0.1 as its proxy) enter,
# poll, make one origin call and leave, in a room admitting 50/s. One run per
# setting of client_enters_per_minute: 0 (defences off), the default 600, and
# 60. Prints a Markdown table; artifacts in artifacts/flood (or $RESULTS).
# Then issue 30 §1's attack alone: the client mints a visitor cookie (a
# refused entry into a room that does not exist) before each entry into a
# room with pow_bits 16 and client_enters_per_minute 5, and never solves.
#
#   scripts/bench-flood.sh [duration=60s] [honest users=200] [flood conns=8]
#
# Needs jq and curl. USHER_BIN=path uses a prebuilt usher. All traffic stays
# on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-60s} users=${2:-200} conns=${3:-8}
out=${RESULTS:-artifacts/flood}
mkdir -p "$out"
. scripts/benchlib.sh
go build -o "$tmp/flood" ./scripts/flood
base=http://127.0.0.1:18189 adm=http://127.0.0.1:19189
start usher "$usher" serve --addr 127.0.0.1:18189 --admin-addr 127.0.0.1:19189 --data-dir "$tmp/data" --trusted-proxies 127.0.0.1/32
start origin "$usher" origin --addr 127.0.0.1:18191 --workers 400 --conns 100 --service lognormal:10ms:0.25
wait_healthy $base/healthz 127.0.0.1:18191/healthz
admin=$(cat "$tmp/data/admin.key")

rows=""
for limit in 0 600 60; do
  room=flood-$limit
  settings="{\"admit_rate\":50,\"interval_ms\":1000,\"max_active\":10000,\"claim_window_seconds\":30,\"client_enters_per_minute\":$limit}"
  "$tmp/flood" -url "$base/api/v1/rooms/$room/entries" -from 127.0.0.2 -conns "$conns" -duration "$dur" >"$out/flood-$limit.json" &
  fpid=$!
  pids+=($fpid)
  # The room is created by the loadtest's --setup-room before its users start;
  # the flood's first requests may find no room yet (404), which costs it
  # nothing and makes no place.
  "$usher" loadtest --scenario queued --room "$room" --setup-room "$settings" --admin-key "$admin" \
    --usher $base --usher-admin $adm --target http://127.0.0.1:18191/seats --users "$users" --duration "$dur" --calls 1 \
    --forwarded-for --max-error-rate 1 --progress=false --out "$out/honest-$limit.json" >/dev/null
  wait "$fpid"
  stats=$(curl -sf -H "Authorization: Bearer $admin" "$adm/api/v1/rooms/$room")
  admitted_total=$(echo "$stats" | jq -e .stats.admitted_total)
  waiting=$(echo "$stats" | jq -e .stats.waiting)
  flood_places=$(jq -e '(.statuses["201"] // 0) + (.statuses["200"] // 0)' "$out/flood-$limit.json")
  flood_req=$(jq -e .requests "$out/flood-$limit.json")
  flood_429=$(jq -e '.statuses["429"] // 0' "$out/flood-$limit.json")
  honest=$(jq -er '.[0] | "\(.visits.admitted) \(.elapsed_s) \(.visits.started) \(.time_in_queue.p50_ms // 0) \(.time_in_queue.p90_ms // 0)"' "$out/honest-$limit.json")
  read -r h_adm h_el h_started h_p50 h_p90 <<<"$honest"
  figures "limit $limit" "$admitted_total" "$waiting" "$flood_places" "$flood_req" "$flood_429" \
    "$h_adm" "$h_el" "$h_started" "$h_p50" "$h_p90"
  rate=$(awk -v a="$h_adm" -v e="$h_el" 'BEGIN{printf "%.1f", a/e}')
  share=$(awk -v a="$h_adm" -v e="$h_el" 'BEGIN{printf "%.0f", 100*a/e/50}')
  rows+="| $limit | $flood_req | $flood_places | $flood_429 | $h_started | $h_adm | $rate/s ($share %) | $(awk -v p="$h_p50" 'BEGIN{printf "%.1f", p/1000}') / $(awk -v p="$h_p90" 'BEGIN{printf "%.1f", p/1000}') s | $admitted_total | $waiting |"$'\n'
done
cat <<TABLE
| client_enters_per_minute | flood requests | flood places | flood 429s | honest visits | honest admitted | honest admissions (of 50/s) | honest time in queue p50 / p90 | room admitted | left waiting |
|---|---|---|---|---|---|---|---|---|---|
$rows
TABLE

room=flood-mint
curl -sf -X PUT -H "Authorization: Bearer $admin" "$adm/api/v1/rooms/$room" \
  -d '{"max_active":10,"admit_rate":1,"pow_bits":16,"client_enters_per_minute":5}' >/dev/null
"$tmp/flood" -url "$base/api/v1/rooms/$room/entries" -mint "$base/api/v1/rooms/no-such-room/entries" \
  -from 127.0.0.2 -conns "$conns" -duration "$dur" >"$out/flood-mint.json"
stats=$(curl -sf -H "Authorization: Bearer $admin" "$adm/api/v1/rooms/$room")
places=$(echo "$stats" | jq -e '.stats.waiting + .stats.active')
read -r req secs <<<"$(jq -er '"\(.requests) \(.seconds)"' "$out/flood-mint.json")"
figures "mint" "$req" "$places" "$secs"
echo
echo "Minted cookies (pow_bits 16, client_enters_per_minute 5, no solutions): $req entries in $secs s, $places places ($(awk -v p="$places" -v s="$secs" 'BEGIN{printf "%.0f", p*60/s}') a minute)."
