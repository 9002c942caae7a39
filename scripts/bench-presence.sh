#!/usr/bin/env bash
# Issue 10 §2's presence experiment: visitors arrive at 30/s for 2 minutes
# into a room admitting 10/s, 30 % of those who wait give up silently (they
# stop polling and never leave: usher loadtest --give-up 0.3), and the run
# goes on until the line has drained. One run with presence_timeout_seconds
# 0 (off) and one per timeout given (default: 10, the default, 15 and 30). Prints a Markdown table: the present
# visitors' admissions per second while present visitors waited, against
# admit_rate, and what the admission steps did with the absent.
#
#   scripts/bench-presence.sh [arrival seconds=120] [drain seconds=240] [timeouts="0 10 15 30"]
#
# Needs jq and curl. USHER_BIN=path uses a prebuilt usher. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
arrive=${1:-120} drain=${2:-240} timeouts=${3:-0 10 15 30}
out=${RESULTS:-artifacts/presence}
mkdir -p "$out"
. scripts/benchlib.sh
base=http://127.0.0.1:18289 adm=http://127.0.0.1:19289
start usher "$usher" serve --addr 127.0.0.1:18289 --admin-addr 127.0.0.1:19289 --data-dir "$tmp/data"
start origin "$usher" origin --addr 127.0.0.1:18291 --workers 400 --conns 100 --service lognormal:10ms:0.25
wait_healthy $base/healthz 127.0.0.1:18291/healthz
admin=$(cat "$tmp/data/admin.key")
rate=10

metric() { # metric NAME ROOM ACTION: a counter of /metrics, 0 when absent
  curl -sf -H "Authorization: Bearer $admin" $adm/metrics |
    awk -v n="$1" -v r="room=\"$2\"" -v a="action=\"$3\"" '$1 ~ "^"n"{" && index($1, r) && index($1, a) {print $2; f=1} END {if (!f) print 0}'
}

rows=""
for presence in $timeouts; do
  room=presence-$presence
  settings="{\"admit_rate\":$rate,\"interval_ms\":1000,\"max_active\":100000,\"claim_window_seconds\":30,\"client_enters_per_minute\":0,\"presence_timeout_seconds\":$presence}"
  "$usher" loadtest --scenario queued --room "$room" --setup-room "$settings" --admin-key "$admin" \
    --usher $base --usher-admin $adm --target http://127.0.0.1:18291/seats --calls 1 --give-up 0.3 \
    --users $((arrive * 30)) --spawn-rate 30 --iterations 1 --duration "$((arrive + drain))s" --max-error-rate 1 --progress=false \
    --out "$out/run-$presence.json" >/dev/null
  no_refusals "$out/run-$presence.json"
  # Present admissions per second over the ticks after the first 20 s in
  # which more than 100 present visitors waited (the generator's own count:
  # those who gave up are not in it); 0 over 0 ticks in a run too short for any.
  got=$(jq -er '.[0] as $r |
    [$r.timeline[] | select(.t_s > 20 and .waiting > 100) | .admitted_ps] as $a |
    "\(if ($a | length) > 0 then ($a | add) / ($a | length) else 0 end) \($a | length) \($r.visits.gave_up) \($r.visits.started) \($r.visits.admitted)"' "$out/run-$presence.json")
  read -r present ticks gave started admitted <<<"$got"
  skipped=$(metric usher_absent_total "$room" skipped)
  removed=$(metric usher_absent_total "$room" removed)
  total=$(curl -sf -H "Authorization: Bearer $admin" "$adm/api/v1/rooms/$room" | jq -e .stats.admitted_total)
  figures "presence $presence" "$present" "$ticks" "$gave" "$started" "$admitted" "$skipped" "$removed" "$total"
  rows+="| $presence | $started | $gave | $admitted | $total | $(awk -v p="$present" 'BEGIN{printf "%.2f", p}')/s ($(awk -v p="$present" -v r=$rate 'BEGIN{printf "%.0f", 100*p/r}') %, $ticks s) | $skipped | $removed |"$'\n'
done
cat <<TABLE
| presence_timeout_seconds | visitors | gave up | present admitted | room admitted (ghosts included) | present admissions while present visitors waited (of $rate/s) | absent passed over | absent removed |
|---|---|---|---|---|---|---|---|
$rows
TABLE
