#!/usr/bin/env bash
# Issue 10 §1: static against adaptive admission, in the same run, on an
# origin whose capacity changes: usher origin --phases (default 10, 5, then
# 10 connections of ~52 ms, 30 s each) behind usher proxy (memory store),
# loaded by usher loadtest's queued scenario (2,000 users spawned at 100/s,
# 10 calls per admitted visitor, back to back). The static room is what
# usher plan sizes for the first phase (mean service time, × 0.9); the
# adaptive room is the same with "admission":"adaptive" and the learned
# target (1.5 × the unloaded p95). Each configuration gets a fresh origin
# and proxy. Writes artifacts/adaptive/{static,adaptive}.json and their
# charts (or $RESULTS), prints a Markdown table per phase, and with
# --write-docs copies the charts to docs/adaptive-{static,adaptive}.svg.
#
#   scripts/bench-adaptive.sh [--write-docs] [phases=30s:conns=10,30s:conns=5,30s:conns=10] [users=2000]
#
# Needs jq and curl. USHER_BIN=path uses a prebuilt usher;
# ADAPTIVE_SETTINGS='{"target_p95_ms":120}' adds settings to the adaptive room.
set -euo pipefail
cd "$(dirname "$0")/.."
docs=0
if [ "${1:-}" = --write-docs ]; then docs=1; shift; fi
phases=${1:-30s:conns=10,30s:conns=5,30s:conns=10} users=${2:-2000} calls=10
out=${RESULTS:-artifacts/adaptive}
mkdir -p "$out"
. scripts/benchlib.sh

# The run lasts as long as the phases.
secs=0
IFS=, read -ra parts <<<"$phases"
for p in "${parts[@]}"; do
  d=${p%%:*}
  secs=$((secs + $(awk -v d="$d" 'BEGIN{ if (d ~ /ms$/) {sub(/ms$/,"",d); print int(d/1000)} else if (d ~ /m$/) {sub(/m$/,"",d); print d*60} else {sub(/s$/,"",d); print int(d)} }')))
done

# Room settings: usher plan for the first phase's pool (10 connections),
# with the service time's mean (lognormal:50ms:0.25: 51.6 ms).
"$usher" plan --pool 10 --service-time 51.6ms --margin 0.9 --round=false --requests-per-visitor "$calls" --ttl 10s --json >"$out/plan.json"
static=$(jq -c '.plan.room + {client_enters_per_minute: 0}' "$out/plan.json")
adaptive=$(jq -c --argjson extra "${ADAPTIVE_SETTINGS:-"{}"}" '.plan.room + {client_enters_per_minute: 0, admission: "adaptive", min_admit_rate: 1, max_admit_rate: 60, control_period_ms: 3000} + $extra' "$out/plan.json")
echo "static room:   $static"
echo "adaptive room: $adaptive"

port=18300
for mode in static adaptive; do
  port=$((port + 10))
  o=$((port + 1))
  mkdir -p "$tmp/$mode"
  start "origin-$mode" "$usher" origin --addr "127.0.0.1:$o" --workers 200 --conns 10 --service lognormal:50ms:0.25 --phases "$phases"
  USHER_PROXY_ADMIN_ADDR=127.0.0.1:$((port + 1000)) start "proxy-$mode" "$usher" proxy --addr "127.0.0.1:$port" --origin "http://127.0.0.1:$o" --room sale \
    --data-dir "$tmp/$mode" --insecure-cookies
  wait_healthy "localhost:$o/healthz" "localhost:$port/_usher/healthz"
  admin=$(cat "$tmp/$mode/admin.key")
  room=$static
  [ "$mode" = adaptive ] && room=$adaptive
  "$usher" loadtest --scenario queued --target "http://127.0.0.1:$port/seats" --usher "http://127.0.0.1:$port/_usher" \
    --usher-admin "http://127.0.0.1:$((port + 1000))" --room sale --setup-room "$room" --admin-key "$admin" --origin-stats "http://127.0.0.1:$o/stats" \
    --users "$users" --spawn-rate 100 --duration "${secs}s" --calls "$calls" --max-error-rate 1 \
    --out "$out/$mode.json" --progress=false >"$out/$mode.txt"
  no_refusals "$out/$mode.json"
  kill "${pids[-1]}" "${pids[-2]}" 2>/dev/null || true
  wait "${pids[-1]}" "${pids[-2]}" 2>/dev/null || true
  sleep 1
done

echo
echo "| Phase | Origin | Admission | p95 ÷ unloaded p95 | Utilisation | Admitted/s | Settled (from 10 s into the phase): p95 ÷ unloaded, utilisation, admitted/s |"
echo "|---|---|---|---|---|---|---|"
n=$(jq '.[0].phases | length' "$out/static.json")
for i in $(seq 0 $((n - 1))); do
  for mode in static adaptive; do
    jq -r --arg mode "$mode" --argjson i "$i" '.[0].phases[$i] as $p |
      "| \($p.phase) | \($p.settings) | \($mode) | \($p.p95_ratio * 100 | round / 100) (\($p.origin_p95_ms | round) ms) | \($p.utilization * 100 | round) % | \($p.admitted_ps * 10 | round / 10) | \((($p.settled_p95_ratio // 0) * 100 | round) / 100), \(($p.settled_utilization // 0) * 100 | round) %, \(($p.settled_admitted_ps // 0) * 10 | round / 10) |"' "$out/$mode.json"
  done
done
for mode in static adaptive; do
  jq -r --arg mode "$mode" '.[0] as $r | "\($mode): origin p95 \($r.origin.latency.p95_ms | round) ms, \($r.origin.throughput | round) calls/s, \($r.visits.admitted) admitted, time in queue p50 \($r.time_in_queue.p50_ms / 1000 | round) s"' "$out/$mode.json"
done
if [ $docs = 1 ]; then
  cp "$out/static.svg" docs/adaptive-static.svg
  cp "$out/adaptive.svg" docs/adaptive-adaptive.svg
fi
