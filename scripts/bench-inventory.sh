#!/usr/bin/env bash
# Issue 10 §4's inventory experiment: a sale of SEATS seats to VISITORS
# visitors (arriving SPAWN a second), each of whom, once admitted, reads the
# seat map, holds one AVAILABLE seat at random (three tries) and reserves
# it (usher loadtest --buy). Two runs made the same way on a fresh usher
# each (memory store, SQLite, embedded NATS): inventory counting off
# (serve --inventory-every 0: the room admits at admit_rate until the run
# ends, as before issue 10) and on (the default: sold out by itself,
# visitors_per_unit 2). Prints a Markdown table: admitted visitors, seats
# bought, admitted visitors who found nothing to buy, visitors told the
# room sold out.
#
#   scripts/bench-inventory.sh [seats=1000] [visitors=20000] [spawn=400] [duration=150]
#
# Needs jq and curl. USHER_BIN=path uses a prebuilt usher. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
seats=${1:-1000} visitors=${2:-20000} spawn=${3:-400} duration=${4:-150}
out=${RESULTS:-artifacts/inventory}
mkdir -p "$out"
. scripts/benchlib.sh
settings='{"client_enters_per_minute":0,"admit_rate":200,"interval_ms":100,"max_active":1000,"visitors_per_unit":2}'

rows=""
port=18301
for every in 0 1s; do
  data=$tmp/data-$every
  "$usher" seed --seats "$seats" --data-dir "$data" >/dev/null
  start "usher-$every" "$usher" serve --addr 127.0.0.1:$port --admin-addr 127.0.0.1:$((port + 1000)) --data-dir "$data" --inventory-every "$every"
  base=http://127.0.0.1:$port adm=http://127.0.0.1:$((port + 1000))
  wait_healthy $base/healthz
  admin=$(cat "$data/admin.key")
  for i in $(seq 100); do # the room of schedule 1, provisioned at start
    [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $admin" $adm/api/v1/rooms/schedule-1)" = 200 ] && break
    [ "$i" != 100 ] || { echo "bench: no room schedule-1 after 20 s" >&2; exit 1; }
    sleep 0.2
  done
  "$usher" loadtest --scenario queued --buy 1 --room schedule-1 --setup-room "$settings" --admin-key "$admin" \
    --usher $base --usher-admin $adm --users "$visitors" --spawn-rate "$spawn" --iterations 1 --duration "${duration}s" \
    --max-error-rate 1 --progress=false --out "$out/run-$every.json" >"$out/run-$every.txt"
  no_refusals "$out/run-$every.json"
  room=$(curl -sf -H "Authorization: Bearer $admin" $adm/api/v1/rooms/schedule-1)
  kill "${pids[-1]}"
  wait "${pids[-1]}" 2>/dev/null || true
  port=$((port + 1))
  rows+=$(jq -r --arg every "$every" --argjson room "$room" '.[0] as $r | $r.visits as $v |
    "| \(if $every == "0" then "off (--inventory-every 0)" else "on (every \($every), visitors_per_unit 2)" end) | \($v.started) | \($v.admitted) | \($v.bought // 0) | \($v.found_nothing // 0) | \(($v.failed.sold_out // 0) + ($v.failed["entry refused: room closed or sold out"] // 0)) | \($v.abandoned) | \($r.origin.requests) | \($room.stats.effective_state) |"' "$out/run-$every.json")$'\n'
done
cat <<TABLE
| inventory counting | visitors | admitted | bought a seat | admitted, found nothing to buy | told sold out (waiting or at entry) | still waiting at the end | booking calls | room at the end |
|---|---|---|---|---|---|---|---|---|
$rows
TABLE
