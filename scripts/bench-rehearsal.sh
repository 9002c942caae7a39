#!/usr/bin/env bash
# Issue 31 §4: the sale day rehearsed on one machine. Three `usher auth`
# behind nginx (the configuration `usher auth --print nginx` writes, one
# --usher per instance) gate a simulated origin; one `usher serve` sells a
# schedule's seats on PostgreSQL through NATS; all of them share a Redis
# Sentinel topology. The sale room is sized by `usher plan` for an origin
# of POOL workers of 100 ms. For DURATION seconds honest visitors arrive (30 % of
# those who wait give up silently: ghosts), buyers arrive at the sale's
# booking API, and two flooders ask for places through nginx without ever
# solving anything (one cookie-less, one minting a fresh visitor cookie
# before each entry); a prober reads an open path. Mid-sale: one usher auth
# is killed (at 20 % of DURATION), the Redis primary is failed over (35 %),
# NATS is restarted (55 %). Then the line drains for DRAIN seconds and the
# script prints its report:
#
#   - honest admissions ÷ the planned rate: present visitors admitted per
#     second while more than 2 × admit_rate of them waited, ÷ admit_rate;
#   - places taken by flooders (entries answered 200 or 201);
#   - failed requests on the open path, and on honest visitors' calls;
#   - cap violations: samples (one a second) with active > max_active;
#   - oversold seats (a seat in two confirmed reservations, or sold to a
#     reservation that is not confirmed), lost entries (honest visitors
#     whose place vanished: a poll answered 4xx, or expired) and lost
#     reservations (accepted with 202, never decided).
#
#   scripts/bench-rehearsal.sh [duration=90] [arrivals/s=20] [origin pool=2] [seats=400] [drain=duration/2]
#
# FAULTS (default kill,failover,nats) names the faults to cause, in that
# order; FAULTS=none rehearses a calm sale, to tell what the faults cost.
#
# Own processes on their own ports (18400-18431, Redis 16480-16481,
# sentinels 26480-26482, NATS 14331): the Sentinel topology of
# scripts/sentinel.sh (USHER_SENTINEL_PORTS) and a NATS JetStream server,
# so that the failover and the restart disturb nothing else; PostgreSQL at
# $USHER_TEST_POSTGRES (default postgres://postgres@127.0.0.1:5432/test?sslmode=disable),
# in a schema of its own, dropped on exit. Admin calls (room PUT, stats
# GET) go to ADMIN_AUTH[i] / ADMIN_SERVE, each instance's admin listener
# (--admin-addr, on its port + 1000). Needs nginx, redis-server, redis-cli, psql, jq,
# curl. USHER_BIN=path uses a prebuilt usher. Loopback only; every loop is
# bounded in count and time.
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-90} arrive=${2:-20} pool=${3:-2} seats=${4:-400}
drain=${5:-$((dur / 2))}
faults_wanted=${FAULTS:-kill,failover,nats}
out=${RESULTS:-artifacts/rehearsal}
mkdir -p "$out"
pg=${USHER_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
. scripts/benchlib.sh
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
go build -o "$tmp/flood" ./scripts/flood
go build -o "$tmp/nats-server" github.com/nats-io/nats-server/v2

edge_port=18400 auth_ports=(18401 18402 18403) origin_port=18410 serve_port=18411
edge=http://127.0.0.1:$edge_port
serve=http://127.0.0.1:$serve_port
auth=()
for p in "${auth_ports[@]}"; do auth+=("http://127.0.0.1:$p"); done
# The admin base of each instance: its --admin-addr, on its port + 1000.
ADMIN_AUTH=()
for p in "${auth_ports[@]}"; do ADMIN_AUTH+=("http://127.0.0.1:$((p + 1000))"); done
ADMIN_SERVE=http://127.0.0.1:$((serve_port + 1000))
admin=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
prefix=rehearsal-$$:

# Redis Sentinel: a topology of our own (a failover would disturb the
# shared one), gone on exit with its keys (no persistence).
export USHER_SENTINEL_DIR=$tmp/sentinel USHER_SENTINEL_PORTS="16480 16481 26480 26481 26482"
at_exit 'scripts/sentinel.sh stop >/dev/null'
scripts/sentinel.sh start >/dev/null
store=$(scripts/sentinel.sh url)

# PostgreSQL: a schema of our own.
schema=rehearsal_$$
psql -q "$pg" -c "CREATE SCHEMA $schema"
at_exit 'PGOPTIONS="-c client_min_messages=warning" psql -q "$pg" -c "DROP SCHEMA $schema CASCADE"'
db="$pg&search_path=$schema"
[[ $pg == *\?* ]] || db="$pg?search_path=$schema"

# NATS JetStream, one node storing on disk, so that a restart keeps the stream.
nats=nats://127.0.0.1:14331
cat >"$tmp/nats.conf" <<EOF
listen: 127.0.0.1:14331
http: 127.0.0.1:18431
jetstream { store_dir: "$tmp/nats" }
EOF
start nats "$tmp/nats-server" -c "$tmp/nats.conf"
nats_pid=${pids[-1]}
wait_healthy 127.0.0.1:18431/healthz

# The sale's seats (schedule and room schedule-N on the shared store), and
# usher serve selling them: the first to write the signing keys.
schedule=$("$usher" seed --seats "$seats" --db "$db" --store "$store" --redis-prefix "$prefix" \
  --data-dir "$tmp/serve" --json | jq -e .schedule_id)
figures schedule "$schedule"
common=(--store "$store" --redis-prefix "$prefix" --keys-dir "$tmp/keys" --admin-key "$admin"
  --trusted-proxies 127.0.0.1/32 --insecure-cookies)
start serve "$usher" serve --addr 127.0.0.1:$serve_port --admin-addr "127.0.0.1:$((serve_port + 1000))" --data-dir "$tmp/serve" --db "$db" --nats "$nats" \
  --nats-name rehearsal "${common[@]}"
wait_healthy $serve/healthz
auth_pids=()
for i in 0 1 2; do
  start "auth$i" "$usher" auth --addr "127.0.0.1:${auth_ports[$i]}" --admin-addr "127.0.0.1:$((auth_ports[i] + 1000))" --data-dir "$tmp/auth$i" --room sale \
    --open /stats "${common[@]}"
  auth_pids+=("${pids[-1]}")
done
start origin "$usher" origin --addr 127.0.0.1:$origin_port --workers "$pool" --conns 50 --service lognormal:100ms:0.25
wait_healthy "${auth[@]/%//_usher/healthz}" 127.0.0.1:$origin_port/healthz

# nginx as `usher auth --print nginx` writes it, with one addition: it
# believes the X-Forwarded-For of 127.0.0.1 (a CDN in front of it), so that
# each honest visitor (usher loadtest --forwarded-for) is a client of its
# own; the flooders connect from 127.0.0.2 and 127.0.0.3.
mkdir -p "$tmp/edge"
usher_flags=()
for a in "${auth[@]}"; do usher_flags+=(--usher "$a"); done
"$usher" auth --print nginx --origin http://127.0.0.1:$origin_port "${usher_flags[@]}" --edge-dir "$tmp/edge" \
  --listen 127.0.0.1:$edge_port --open /stats --insecure-cookies >"$tmp/edge/nginx.conf"
sed -i 's/^http {$/http {\n\tset_real_ip_from 127.0.0.1;\n\treal_ip_header X-Forwarded-For;/' "$tmp/edge/nginx.conf"
grep -q real_ip_header "$tmp/edge/nginx.conf"
start nginx "$nginx_bin" -e stderr -p "$tmp/edge" -c "$tmp/edge/nginx.conf"
wait_healthy $edge/stats

# The rooms. sale: as `usher plan` sizes it for the origin (POOL workers
# of 100 ms, two calls per visitor, the crowd of the run), with 6 new
# places a minute per client (an honest visitor needs one; the default 600
# would let each flooder take 10 a second). The seats' room: half the rate.
plan=$("$usher" plan --pool "$pool" --service-time 100ms --requests-per-visitor 2 --ttl 30s \
  --visitors $((arrive * dur)) --arrive-over "${dur}s" --json | jq -ce '.plan.room + {client_enters_per_minute: 6}')
rate=$(jq -e .admit_rate <<<"$plan")
max_active=$(jq -e .max_active <<<"$plan")
figures plan "$rate" "$max_active"
put() { # put BASE ROOM SETTINGS
  curl -sf -X PUT -H "Authorization: Bearer $admin" "$1/api/v1/rooms/$2" -d "$3" >/dev/null
}
put "${ADMIN_AUTH[0]}" sale "$plan"
buy_rate=$(((rate + 1) / 2))
put "$ADMIN_SERVE" "schedule-$schedule" "{\"state\":\"open\",\"admit_rate\":$buy_rate,\"interval_ms\":1000,\"max_active\":$((buy_rate * 10)),\"client_enters_per_minute\":0}"

# The crowd, the buyers, the flooders and the prober, all at once.
run=$((dur + drain))
bg=()
"$usher" loadtest --scenario queued --room sale --usher $edge/_usher --target $edge/seats --calls 2 --think 1s \
  --give-up 0.3 --forwarded-for --users $((arrive * dur)) --spawn-rate "$arrive" --iterations 1 \
  --duration "${run}s" --max-error-rate 1 --progress=false --out "$out/honest.json" >"$out/honest.txt" &
bg+=($!)
"$usher" loadtest --scenario queued --buy "$schedule" --room "schedule-$schedule" --usher $serve \
  --users $((seats * 3 / 2)) --spawn-rate $((buy_rate * 2)) --iterations 1 --duration "${run}s" \
  --max-error-rate 1 --progress=false --out "$out/buyers.json" >"$out/buyers.txt" &
bg+=($!)
"$tmp/flood" -url $edge/_usher/api/v1/rooms/sale/entries -from 127.0.0.2 -conns 2 -duration "${dur}s" >"$out/flood-plain.json" &
bg+=($!)
"$tmp/flood" -url $edge/_usher/api/v1/rooms/sale/entries -mint $edge/_usher/api/v1/rooms/no-such-room/entries \
  -from 127.0.0.3 -conns 2 -duration "${dur}s" >"$out/flood-mint.json" &
bg+=($!)
"$usher" loadtest --scenario direct --target $edge/stats --origin-stats none --users 2 --think 200ms \
  --duration "${run}s" --max-error-rate 1 --progress=false --out "$out/open.json" >"$out/open.txt" &
bg+=($!)
pids+=("${bg[@]}")

# The sampler: the sale room's stats once a second from a live instance's
# admin base, for the cap (active against max_active).
(
  for _ in $(seq $((run + 5))); do
    for a in "${ADMIN_AUTH[@]}"; do
      s=$(curl -sf -m 2 -H "Authorization: Bearer $admin" "$a/api/v1/rooms/sale") || continue
      echo "$s" | jq -c '{t: now, active: .stats.active, waiting: .stats.waiting, max_active: .max_active}'
      break
    done
    sleep 1
  done
) >"$out/samples.jsonl" 2>/dev/null &
sampler=$!
pids+=("$sampler")

# The faults, on a clock from the start.
t0=$SECONDS
at() { # at PERCENT: sleep until that share of the arrival time
  local wait=$((t0 + dur * $1 / 100 - SECONDS))
  [ "$wait" -le 0 ] || sleep "$wait"
}
fault() { [[ ,$faults_wanted, == *,$1,* ]]; }
faults=(none)
if fault kill; then
  at 20
  kill "${auth_pids[2]}"
  faults=("usher auth ${auth[2]} killed at $((SECONDS - t0)) s")
fi
failover=
if fault failover; then
  at 35
  faults+=("Redis primary failover asked at $((SECONDS - t0)) s")
  scripts/sentinel.sh failover >"$tmp/failover.log" 2>&1 &
  failover=$!
fi
if fault nats; then
  at 55
  kill "$nats_pid"
  for _ in $(seq 50); do kill -0 "$nats_pid" 2>/dev/null || break; sleep 0.1; done
  faults+=("NATS stopped at $((SECONDS - t0)) s")
  sleep 2
  start nats2 "$tmp/nats-server" -c "$tmp/nats.conf"
  wait_healthy 127.0.0.1:18431/healthz
  faults+=("NATS back at $((SECONDS - t0)) s")
fi
if [ -n "$failover" ]; then
  wait "$failover" || { cat "$tmp/failover.log" >&2; exit 1; }
  faults+=("$(tail -n 1 "$tmp/failover.log")")
fi
[ "${faults[0]}" != none ] || [ ${#faults[@]} = 1 ] || faults=("${faults[@]:1}")
for p in "${bg[@]}"; do wait "$p"; done
kill "$sampler" 2>/dev/null || true

# Reservations accepted (202) are decided by serve's worker from NATS
# (one left unacknowledged across the restart comes back after the
# consumer's ack wait): wait, 60 s at most, until as many are decided.
bought=$(jq -e '.[0].visits.bought // 0' "$out/buyers.json")
sql() { PGOPTIONS="-c search_path=$schema" psql -qtA "$pg" -c "$1"; }
for _ in $(seq 60); do
  decided=$(sql "SELECT count(*) FROM reservation WHERE schedule_id = $schedule")
  [ "$decided" -lt "$bought" ] || break
  sleep 1
done
confirmed=$(sql "SELECT count(*) FROM reservation WHERE schedule_id = $schedule AND status = 'confirmed'")
oversold=$(sql "SELECT (SELECT count(*) FROM (SELECT s FROM reservation, unnest(seat_ids) s
    WHERE schedule_id = $schedule AND status = 'confirmed' GROUP BY s HAVING count(*) > 1) twice)
  + (SELECT count(*) FROM seat LEFT JOIN reservation r USING (reservation_id)
    WHERE seat.schedule_id = $schedule AND seat.status = 'SOLD' AND r.status IS DISTINCT FROM 'confirmed')")
sold=$(sql "SELECT count(*) FROM seat WHERE schedule_id = $schedule AND status = 'SOLD'")

got=$(jq -er --argjson planned "$((rate * 2))" '.[0] as $r |
  [$r.timeline[] | select(.t_s > 5 and .waiting > $planned) | .admitted_ps] as $a |
  "\(if ($a | length) > 0 then ($a | add) / ($a | length) else 0 end) \($a | length) \($r.visits.started) \($r.visits.admitted) \($r.visits.gave_up)
  \([$r.visits.failed // {} | to_entries[] | select((.key | startswith("poll ")) or .key == "expired") | .value] | add // 0)
  \([$r.visits.failed // {} | to_entries[] | select(.key | startswith("enter ")) | .value] | add // 0)
  \($r.origin.requests) \($r.origin.requests - $r.origin.successes)"' "$out/honest.json" | tr '\n' ' ')
read -r present ticks started admitted gave lost enter_failed calls call_errors <<<"$got"
buyers=$(jq -er '.[0] | "\(.visits.started) \(.visits.admitted) \([.visits.failed // {} | to_entries[] | select((.key | startswith("poll ")) or .key == "expired") | .value] | add // 0) \(.origin.requests) \(.origin.requests - .origin.successes)"' "$out/buyers.json")
read -r b_started b_admitted b_lost b_calls b_errors <<<"$buyers"
flood=$(jq -s -e '[.[] | (.statuses["201"] // 0) + (.statuses["200"] // 0)] | add' "$out/flood-plain.json" "$out/flood-mint.json")
flood_req=$(jq -s -e '[.[].requests] | add' "$out/flood-plain.json" "$out/flood-mint.json")
open=$(jq -er '.[0].origin | "\(.requests) \(.requests - .successes)"' "$out/open.json")
read -r open_req open_err <<<"$open"
caps=$(jq -s -e '[.[] | select(.max_active == null or .active > .max_active)] | length' "$out/samples.jsonl")
samples=$(jq -s -e 'length' "$out/samples.jsonl")
peak=$(jq -s -e '[.[].active] | max // 0' "$out/samples.jsonl")
figures report "$present" "$ticks" "$started" "$admitted" "$gave" "$lost" "$enter_failed" "$calls" "$call_errors" \
  "$b_started" "$b_admitted" "$b_lost" "$b_calls" "$b_errors" "$flood" "$flood_req" "$open_req" "$open_err" "$caps" "$samples" "$peak" "$bought" "$decided" "$confirmed" "$oversold" "$sold"
lost_res=$((bought > decided ? bought - decided : 0))

cat <<REPORT
Rehearsal: ${dur} s of arrivals (+${drain} s to drain), honest visitors $arrive/s into sale (admit_rate $rate/s, max_active $max_active), buyers into schedule-$schedule ($seats seats, admit_rate $buy_rate/s).
Faults: $(printf '%s; ' "${faults[@]}" | sed 's/; $//').

| measure | value |
|---|---|
| honest admissions ÷ planned rate | $(awk -v p="$present" -v r="$rate" 'BEGIN{printf "%.2f (%.2f/s of %d/s", p/r, p, r}') over $ticks s with more than $((rate * 2)) present visitors waiting) |
| honest visitors: arrived / admitted / gave up (ghosts) | $started / $admitted / $gave |
| places taken by flooders | $flood (of $flood_req entries asked) |
| failed requests on the open path | $open_err of $open_req |
| failed honest entries / origin calls | $enter_failed / $call_errors of $calls |
| cap violations (samples with active > max_active) | $caps of $samples (peak active $peak) |
| lost entries (honest places vanished): sale / seats room | $lost / $b_lost |
| buyers: arrived / admitted / failed booking calls | $b_started / $b_admitted / $b_errors of $b_calls |
| seats sold / reservations accepted / decided / confirmed | $sold / $bought / $decided / $confirmed |
| oversold seats | $oversold |
| lost reservations (accepted, never decided) | $lost_res |
REPORT
