#!/usr/bin/env bash
# The ETA's error (issue 10 §5), old against new in the same run: seed 000's
# queued scenario (2,000 users spawned at 100/s, 10 seat lookups per
# admitted visitor, the room usher plan makes from the origin's measured mean
# × 0.9, as scripts/bench-seed.sh), served by usher built from $OLD_REF
# (default main: ahead ÷ measured rate + 20 %) and by this tree (the
# calibrated ETA with a range), alternately, on the same origin. The second
# scenario halves the room's admit_rate from $CHANGE_AT (20) seconds into
# the run for $CHANGE_FOR (20) seconds, as an operator or an adaptive
# controller would when the origin slows down.
# The load generator is this tree's in every run. Prints a Markdown table;
# the reports stay in artifacts/eta/ (or $RESULTS).
#
#   [CHANGE_AT=20] [CHANGE_FOR=20] scripts/bench-eta.sh [duration=60s] [users=2000] [calls=10] [rounds=1]
#
# Needs git, jq and curl. USHER_BIN=path uses a prebuilt usher, OLD_BIN=path
# a prebuilt old one (instead of $OLD_REF).
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-60s} users=${2:-2000} calls=${3:-10} rounds=${4:-1}
change_at=${CHANGE_AT:-20} change_for=${CHANGE_FOR:-20}
out=${RESULTS:-artifacts/eta}
mkdir -p "$out"
. scripts/benchlib.sh
old_ref=${OLD_REF:-main} old=${OLD_BIN:-}
if [ -z "$old" ]; then
  mkdir "$tmp/old"
  git archive "$old_ref" | tar -x -C "$tmp/old"
  (cd "$tmp/old" && go build -o "$tmp/usher-old" ./cmd/usher)
  old=$tmp/usher-old
fi

start origin "$usher" origin --addr 127.0.0.1:18191 --workers 200 --conns 10 --service lognormal:50ms:0.25
wait_healthy localhost:18191/healthz
origin=http://127.0.0.1:18191
"$usher" plan --pool 10 --measure "$origin/seats" --measure-requests 300 --json >"$out/measure.json"
avg=$(jq -er '.measurement.latency.avg_ms' "$out/measure.json")
figures "usher plan --measure" "$avg"
"$usher" plan --pool 10 --requests-per-visitor "$calls" --ttl 10s --json --service-time "${avg}ms" \
  --margin 0.9 --round=false >"$out/plan.json"
# Every user enters from 127.0.0.1: the per-client limit on new places
# (client_enters_per_minute, 600 by default) would refuse most of them.
room=$(jq -c '.plan.room + {client_enters_per_minute: 0}' "$out/plan.json")
echo "room: $room"

run() { # run NAME BINARY SCENARIO(steady|change)
  local name=$1 bin=$2 scenario=$3 data="$tmp/data-$1" port=18189
  rm -rf "$data"
  USHER_ADMIN_ADDR=127.0.0.1:$((port + 1000)) "$bin" serve --addr 127.0.0.1:$port --data-dir "$data" >"$tmp/serve-$name.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  wait_healthy localhost:$port/healthz
  local admin changer=
  admin=$(cat "$data/admin.key")
  local ap
  ap=$(admin_port $port)
  if [ "$scenario" = change ]; then
    local half
    half=$(jq -c '.admit_rate /= 2' <<<"$room")
    (sleep "$change_at" && curl -sf -X PUT -H "Authorization: Bearer $admin" "localhost:$ap/api/v1/rooms/sale" -d "$half" >/dev/null &&
      sleep "$change_for" && curl -sf -X PUT -H "Authorization: Bearer $admin" "localhost:$ap/api/v1/rooms/sale" -d "$room" >/dev/null) &
    changer=$!
    pids+=("$changer")
  fi
  "$usher" loadtest --scenario queued --target "$origin/seats" --usher http://127.0.0.1:$port --admin-key "$admin" \
    --usher-admin http://127.0.0.1:$ap --room sale --setup-room "$room" --users "$users" --spawn-rate 100 --duration "$dur" --calls "$calls" \
    --max-error-rate 1 --progress=false --out "$out/$name.json" >"$out/$name.txt"
  if [ -n "$changer" ]; then wait "$changer"; fi
  no_refusals "$out/$name.json"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

rows=()
for r in $(seq "$rounds"); do
  for scenario in steady change; do
    for which in old new; do
      bin=$usher
      [ "$which" = old ] && bin=$old
      name="$scenario-$which-$r"
      echo "run $name" >&2
      run "$name" "$bin" "$scenario"
      rows+=("$(jq -r --arg s "$scenario" --arg w "$which" --arg r "$r" '.[0].eta_error as $e |
        "| \($s) | \($w) | \($r) | \($e.count) | \($e.mean_predicted_s * 10 | round / 10) / \($e.mean_actual_s * 10 | round / 10) s | \($e.p50_abs_s * 10 | round / 10) / \($e.p90_abs_s * 10 | round / 10) s | \($e.p50_rel * 1000 | round / 10) / \($e.p90_rel * 1000 | round / 10) % | \(if $e.range_coverage then "\($e.range_coverage * 1000 | round / 10) % (\($e.mean_range_s * 10 | round / 10) s wide)" else "-" end) |"' \
        "$out/$name.json")")
    done
  done
done
echo
echo "| Scenario | usher | Round | Visitors | Mean predicted / actual wait | abs error p50 / p90 | relative error p50 / p90 | inside the range (mean width) |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
