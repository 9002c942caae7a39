#!/usr/bin/env bash
# Issue 31 §1's opening, as the README walks it: in each round a new paused
# room (max_active 100, admit_rate 10), alice enters and never polls, bob
# enters and polls once, the room opens, and bob polls every 0.5 s until
# he is admitted. Prints how long after the opening bob was admitted, per
# round, and how many rounds took longer than 5 s (a wait on alice's
# presence_timeout of 10 s).
#
#   scripts/bench-opening.sh [rounds=10]
#
# Needs curl. USHER_BIN=path uses a prebuilt usher (an older build
# for the side-by-side). All traffic stays on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-10}
. scripts/benchlib.sh
base=http://127.0.0.1:18193
USHER_ADMIN_ADDR=127.0.0.1:19193 start usher "$usher" serve --addr 127.0.0.1:18193 --data-dir "$tmp/data"
wait_healthy $base/healthz
adminbase=http://127.0.0.1:$(admin_port 18193)
admin=$(cat "$tmp/data/admin.key")
api() { curl -sf -H "Authorization: Bearer $admin" "$@"; }

slow=0 all=""
for r in $(seq 1 "$rounds"); do
  room=opening-$r
  api -X PUT "$adminbase/api/v1/rooms/$room" -d '{"state":"paused","max_active":100,"admit_rate":10}' >/dev/null
  api -X POST "$base/api/v1/rooms/$room/entries" -d '{"visitor_id":"alice"}' >/dev/null
  ticket=$(api -X POST "$base/api/v1/rooms/$room/entries" -d '{"visitor_id":"bob"}' | grep -o '"ticket":"[^"]*"' | cut -d'"' -f4)
  curl -sf "$base/api/v1/rooms/$room/entries/me" -H "Authorization: Bearer $ticket" >/dev/null
  api -X PUT "$adminbase/api/v1/rooms/$room" -d '{"state":"open"}' >/dev/null
  opened=$(date +%s.%N)
  for _ in $(seq 1 60); do
    sleep 0.5
    curl -sf "$base/api/v1/rooms/$room/entries/me" -H "Authorization: Bearer $ticket" | grep -q '"state":"admitted"' && break
  done
  took=$(awk -v a="$(date +%s.%N)" -v b="$opened" 'BEGIN{printf "%.3f", a - b}')
  figures "round $r" "$took"
  all+=" $(printf '%.1f' "$took")"
  if awk -v t="$took" 'BEGIN{exit !(t > 5)}'; then slow=$((slow + 1)); fi
done
echo "bob admitted after (s):$all"
echo "rounds over 5 s: $slow of $rounds"
