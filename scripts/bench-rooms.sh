#!/usr/bin/env bash
# What idle rooms cost (issue 22 §1): one `usher serve` on Redis holding N
# open rooms that nobody enters, measured over a few seconds once the rooms
# are made: Redis commands a second (INFO total_commands_processed, which
# counts the commands inside scripts) and the share of a core usher's
# process used (/proc utime + stime), for N in COUNTS, with usher built
# from $OLD_REF (the reference) and from this tree, in the same run.
#
#   [OLD_REF=3b19884] scripts/bench-rooms.sh [counts="10 100 1000 10000"] [secs=30] [redis=redis://127.0.0.1:6379/0]
#
# MODE=busy measures instead one busy room among N idle ones, with this
# tree's usher only, for N in COUNTS in that order (alternate them: "0 10000
# 0 10000"): `usher loadtest --scenario queued` keeps $BUSY_USERS (400)
# visitors waiting in room busy (admit_rate $BUSY_RATE = 20/s in steps of
# 100 ms, max_active 100,000: the rate limits, not the cap; one 1 ms origin
# call each, then leave and enter again). After $BUSY_WARM (15) s it reads
# the store's admitted_total, again SECS later: admitted/s; the status
# polls' p50 and p99 are the loadtest's (poll_latency, from when each poll
# was due, whole run). The idle rooms are made once per N and kept across
# rounds; the busy room is deleted after each.
#
#   MODE=busy [BUSY_USERS=400] [BUSY_RATE=20] [BUSY_WARM=15] scripts/bench-rooms.sh ["0 10000 0 10000"] [secs=60] [redis]
#
# Needs curl, git, jq and redis-cli. USHER_BIN=path uses a prebuilt usher,
# OLD_BIN=path a prebuilt reference. Nothing else should use the Redis
# meanwhile: its command count is the figure.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${MODE:-idle}
if [ "$mode" = busy ]; then
  counts=${1:-0 10000 0 10000} secs=${2:-60}
else
  counts=${1:-10 100 1000 10000} secs=${2:-30}
fi
redis=${3:-redis://127.0.0.1:6379/0}
. scripts/benchlib.sh
old=${OLD_BIN:-}
if [ -z "$old" ] && [ "$mode" != busy ]; then
  mkdir "$tmp/old"
  git archive "${OLD_REF:-3b19884}" | tar -x -C "$tmp/old"
  (cd "$tmp/old" && go build -o "$tmp/usher-old" ./cmd/usher)
  old=$tmp/usher-old
fi
prefix="bench-rooms-$$:"
at_exit "redis-cli -u '$redis' --scan --pattern '$prefix*' | xargs -r -n 500 redis-cli -u '$redis' del >/dev/null"
tick=$(getconf CLK_TCK)

commands() { redis-cli -u "$redis" info stats | awk -F: '/^total_commands_processed/ { print $2 + 0 }'; }
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # utime + stime, in ticks

key=bench-rooms-admin-key-0123456789 port=18195 ap=18195
idle_rooms() { curl -sf -H "Authorization: Bearer $key" localhost:$ap/api/v1/rooms | { grep -o '"room":"idle-' || true; } | wc -l; }
serve() { # serve NAME BINARY N: starts usher on its own prefix with N idle rooms; sets pid
  local name=$1 bin=$2 n=$3 data="$tmp/data-$1-$3"
  USHER_ADMIN_ADDR=127.0.0.1:$((port + 1000)) "$bin" serve --addr 127.0.0.1:$port --data-dir "$data" --store "$redis" --redis-prefix "$prefix$name-$n:" \
    --admin-key $key --collect=false >"$tmp/serve-$name-$n.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_healthy localhost:$port/healthz
  ap=$(admin_port $port)
  local got
  got=$(idle_rooms)
  if [ "$got" != "$n" ]; then # not made yet (busy mode keeps them)
    seq 1 "$n" | xargs -P 8 -I{} curl -sf --retry 10 --retry-all-errors --retry-delay 1 -o /dev/null -X PUT -H "Authorization: Bearer $key" \
      "localhost:$ap/api/v1/rooms/idle-{}" -d '{"state":"open"}'
    got=$(idle_rooms)
  fi
  [ "$got" = "$n" ] || { echo "bench-rooms: $name made $got rooms of $n" >&2; exit 1; }
  sleep 6 # past the reads every room gets when it is made, and one idle refresh
}

measure() { # measure NAME BINARY N: sets rc (commands/s) and ru (% of a core)
  local name=$1 bin=$2 n=$3
  serve "$name" "$bin" "$n"
  local c0 u0 c1 u1
  c0=$(commands) u0=$(cpu "$pid")
  sleep "$secs"
  c1=$(commands) u1=$(cpu "$pid")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  figures "$name at $n rooms" "$c0" "$c1" "$u0" "$u1"
  rc=$(((c1 - c0) / secs))
  ru=$(awk -v u=$((u1 - u0)) -v s="$secs" -v t="$tick" 'BEGIN { printf "%.1f", 100 * u / t / s }')
}

busy() { # busy N ROUND: prints a table row; adds to the sums by N
  local n=$1 r=$2 users=${BUSY_USERS:-400} rate=${BUSY_RATE:-20} warm=${BUSY_WARM:-15}
  local room="{\"state\":\"open\",\"admit_rate\":$rate,\"interval_ms\":100,\"max_active\":100000,\"client_enters_per_minute\":0}"
  serve busy "$usher" "$n"
  "$usher" loadtest --scenario queued --target http://127.0.0.1:18196/seats --usher http://127.0.0.1:$port --admin-key $key \
    --usher-admin http://127.0.0.1:$ap --room busy --setup-room "$room" --users "$users" --spawn-rate 100 --calls 1 --duration "$((warm + secs + 2))s" \
    --max-error-rate 1 --progress=false --json >"$tmp/busy-$n-$r.json" 2>"$tmp/loadtest-$n-$r.log" &
  local lt=$!
  pids+=("$lt")
  sleep "$warm"
  local a0 t0 u0 a1 t1 u1
  a0=$(admitted) t0=$(date +%s.%N) u0=$(cpu "$pid")
  sleep "$secs"
  a1=$(admitted) t1=$(date +%s.%N) u1=$(cpu "$pid")
  wait "$lt"
  curl -sf -o /dev/null -X DELETE -H "Authorization: Bearer $key" "localhost:$ap/api/v1/rooms/busy?force=true"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  local p50 p99
  p50=$(jq -r '.[0].poll_latency.p50_ms' "$tmp/busy-$n-$r.json") p99=$(jq -r '.[0].poll_latency.p99_ms' "$tmp/busy-$n-$r.json")
  figures "busy room among $n" "$a0" "$a1" "$p50" "$p99"
  awk -v n="$n" -v r="$r" -v a="$((a1 - a0))" -v t0="$t0" -v t1="$t1" -v u="$((u1 - u0))" -v tick="$tick" -v p50="$p50" -v p99="$p99" \
    'BEGIN { s = t1 - t0; printf "| %d | %d | %.2f | %.1f / %.1f ms | %.1f %% |\n", n, r, a / s, p50, p99, 100 * u / tick / s }' | tee -a "$tmp/rows"
}
admitted() { curl -sf -H "Authorization: Bearer $key" localhost:$ap/api/v1/rooms/busy | jq -e '.stats.admitted_total'; }

if [ "$mode" = busy ]; then
  start origin "$usher" origin --addr 127.0.0.1:18196 --service constant:1ms
  wait_healthy localhost:18196/healthz
  echo "| idle rooms | round | admitted/s (store) | status polls p50 / p99 | usher CPU |"
  echo "| --- | --- | --- | --- | --- |"
  r=0
  for n in $counts; do
    r=$((r + 1))
    busy "$n" "$r"
  done
  # Each N's means against those of 0 idle rooms.
  awk -F' *\\| *' '{ split($5, p, " "); k[$2]++; a[$2] += $4; q[$2] += p[3] }
    END { if (!k[0]) exit; for (n in k) if (n != 0) printf "%s idle rooms against 0: admitted/s %.4f×, poll p99 %.2f×\n", n, a[n] / k[n] / (a[0] / k[0]), q[n] / k[n] / (q[0] / k[0]) }' "$tmp/rows"
  exit 0
fi

echo "| idle rooms | Redis commands/s, reference | this tree | ratio | usher CPU, reference | this tree |"
echo "| --- | --- | --- | --- | --- | --- |"
for n in $counts; do
  measure old "$old" "$n"
  oc=$rc ou=$ru
  measure new "$usher" "$n"
  nc=$rc nu=$ru
  awk -v n="$n" -v oc="$oc" -v ou="$ou" -v nc="$nc" -v nu="$nu" \
    'BEGIN { printf "| %d | %d | %d | %.3f | %s %% | %s %% |\n", n, oc, nc, (oc > 0 ? nc / oc : 0), ou, nu }'
done
