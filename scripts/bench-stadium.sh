#!/usr/bin/env bash
# A crowd at the seat map (issue 35 §4): BUYERS admitted buyers on a
# schedule of SEATS seats, on Redis + PostgreSQL, one usher, one schedule
# per way of choosing a seat (usher loadtest --buy-mode), run in turn:
#
#   - random: an available seat chosen at random from the whole status
#   - stage:  one of the 100 front-most available seats (everyone wants the
#             stage: the opening before best available)
#   - mixed:  half as stage, half asking for best available (POST holds
#             with a count: the server picks)
#
# Prints per mode: seats sold, holds tried per seat sold, holds taken
# first, buyers who found nothing, a hold's answer and admission to
# confirmed (p50, p95, ms), bytes of answers per buyer and seats sold twice
# (goal 0). Buyers enter the schedule's room at admit_rate RATE/s (130:
# the holds/s of issue 35's goal, a hold's p95 within twice its p50).
#
#   scripts/bench-stadium.sh [buyers=10000] [seats=50000] [rate=500] [modes="random stage mixed"] [redis=redis://127.0.0.1:6379/0]
#
# PostgreSQL at $USHER_TEST_POSTGRES (default postgres://postgres@127.0.0.1:5432/test?sslmode=disable),
# in a schema of its own, dropped at the end. Needs jq, psql, redis-cli.
# USHER_BIN=path uses a prebuilt usher. NATS=nats://… uses that broker (a
# stream of its own, deleted at the end) instead of usher's embedded one;
# SEAT_MAP_EVERY sets usher's --seat-map-every (1h: no rebuild after the
# first, the reference a hold's tail is compared with); USHER_CPUS and
# LOAD_CPUS pin usher and the generator to CPUs (taskset -c LIST).
set -euo pipefail
cd "$(dirname "$0")/.."
buyers=${1:-10000} seats=${2:-50000} rate=${3:-500} modes=${4:-random stage mixed} redis=${5:-redis://127.0.0.1:6379/0}
. scripts/benchlib.sh
real_stores stadium "$redis"
declare -A schedule
for mode in $modes; do
  schedule[$mode]=$("$usher" seed --seats "$seats" --json "${stores[@]}" | jq -er .schedule_id)
done
pin() { if [ -n "$1" ]; then echo taskset -c "$1"; fi; }
# delete_streams URL STREAM...: JetStream's API in NATS's text protocol
# (no nats CLI needed); waits for one answer per stream, 5 s at most.
delete_streams() {
  local hp=${1#nats://} s
  shift
  exec 9<>"/dev/tcp/${hp%:*}/${hp##*:}" || return 0
  printf 'CONNECT {"verbose":false}\r\nSUB _INBOX.benchdel 1\r\n' >&9
  for s in "$@"; do printf 'PUB $JS.API.STREAM.DELETE.%s _INBOX.benchdel 0\r\n\r\n' "$s" >&9; done
  timeout 5 grep -m $# -c stream_delete_response <&9 >/dev/null || true
  exec 9>&-
}
flags=()
[ -z "${SEAT_MAP_EVERY:-}" ] || flags+=(--seat-map-every "$SEAT_MAP_EVERY")
if [ -n "${NATS:-}" ]; then
  nats_name=benchstadium$$
  flags+=(--nats "$NATS" --nats-name "$nats_name")
  at_exit 'delete_streams "$NATS" "${nats_name^^}_RESERVATIONS" "${nats_name^^}_EVENTS" "KV_${nats_name}_reservations"'
fi
start usher $(pin "${USHER_CPUS:-}") "$usher" serve --addr 127.0.0.1:18091 --admin-addr 127.0.0.1:19091 "${stores[@]}" "${flags[@]}"
wait_healthy localhost:18091/healthz
admin=$(cat "$tmp/data/admin.key")

printf '| mode | bought | holds tried per seat sold | taken first | found nothing | hold p50 / p95 ms | to confirmed p50 / p95 ms | bytes per buyer | oversold |\n'
printf '| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n'
for mode in $modes; do
  id=${schedule[$mode]}
  $(pin "${LOAD_CPUS:-}") "$usher" loadtest --scenario queued --buy "$id" --buy-mode "$mode" --room "schedule-$id" \
    --usher http://127.0.0.1:18091 --usher-admin http://127.0.0.1:19091 --admin-key "$admin" \
    --setup-room "{\"state\":\"open\",\"admit_rate\":$rate,\"interval_ms\":200,\"max_active\":$((rate * 20)),\"client_enters_per_minute\":0,\"visitors_per_unit\":0}" \
    --users "$buyers" --spawn-rate $((rate * 2)) --iterations 1 --duration 600s --max-error-rate 1 \
    --progress=false --json >"$tmp/$mode.json"
  row=$(jq -er '.[0] | .visits as $v | [$v.bought, (($v.holds_tried // 0) / ([$v.bought, 1] | max) * 100 | round / 100),
    ($v.holds_failed // 0), ($v.found_nothing // 0), (.hold_latency.p50_ms * 10 | round / 10), (.hold_latency.p95_ms * 10 | round / 10),
    (.to_confirmed.p50_ms | round), (.to_confirmed.p95_ms | round),
    ($v.bytes_per_buyer // 0 | round), ($v.oversold // 0)] | map(tostring) | join(" ")' "$tmp/$mode.json")
  read -r bought per failed nothing h50 h95 p50 p95 bytes over <<<"$row"
  figures "$mode" "$bought" "$per" "$failed" "$nothing" "$h50" "$h95" "$p50" "$p95" "$bytes" "$over"
  printf '| %s | %s | %s | %s | %s | %s / %s | %s / %s | %s | %s |\n' "$mode" "$bought" "$per" "$failed" "$nothing" "$h50" "$h95" "$p50" "$p95" "$bytes" "$over"
  jq -c '.[0] | {mode: .buy_mode, visits: .visits | {admitted, completed, failed, cut_off}, origin_errors: .origin.errors}' "$tmp/$mode.json" >&2
  [ "$over" = 0 ] || { echo "bench-stadium: $over seats sold twice ($mode)" >&2; exit 1; }
done
