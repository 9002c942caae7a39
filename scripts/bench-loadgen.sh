#!/usr/bin/env bash
# Requests/s of usher's load generator (usher loadtest, direct scenario, closed
# model) against a trivial net/http JSON handler (scripts/trivialjson), next to
# wrk against the same handler in the same run on this machine. Prints both
# rates and the ratio. The generator must never be the bottleneck: issue 5
# asks for at least 20,000 req/s on the 2-core machine.
#
#   scripts/bench-loadgen.sh [duration=10s] [connections=64]
#
# Needs wrk (Debian package wrk) and jq. Runs A/B/A/B and reports the sums.
# USHER_BIN=path uses a prebuilt usher instead of building ./cmd/usher.
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-10s} conns=${2:-64}
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT

usher=${USHER_BIN:-}
if [ -z "$usher" ]; then
  go build -o "$tmp/usher" ./cmd/usher
  usher=$tmp/usher
fi
go build -o "$tmp/trivialjson" ./scripts/trivialjson
"$tmp/trivialjson" --addr 127.0.0.1:18090 &
pids+=($!)
for _ in $(seq 50); do curl -sf localhost:18090/status >/dev/null && break; sleep 0.1; done
url=http://127.0.0.1:18090/status

wrk_rate() { wrk -t2 -c"$conns" -d"$dur" "$url" | awk '/Requests\/sec/ {print $2}'; }
gen_rate() {
  "$usher" loadtest --scenario direct --target "$url" --users "$conns" --duration "$dur" \
    --origin-stats none --progress=false --json > "$tmp/gen.json"
  jq -r '.[0] | "\(.origin.requests / .elapsed_s) \(.origin.successes) \(.origin.requests) \(.origin.latency.p99_ms)"' "$tmp/gen.json"
}
read -r g1 ok1 req1 p1 < <(gen_rate)
w1=$(wrk_rate)
read -r g2 ok2 req2 p2 < <(gen_rate)
w2=$(wrk_rate)
printf 'usher loadtest (req/s): %.0f %.0f   (successes/requests: %s/%s, %s/%s; p99 %.1f ms, %.1f ms)\n' \
  "$g1" "$g2" "$ok1" "$req1" "$ok2" "$req2" "$p1" "$p2"
printf 'wrk -t2 -c%s (req/s): %.0f %.0f\n' "$conns" "$w1" "$w2"
awk -v a="$g1" -v b="$g2" -v c="$w1" -v d="$w2" 'BEGIN {
  printf "ratio usher loadtest / wrk = %.2f; usher loadtest mean %.0f req/s (target >= 20000)\n", (a+b)/(c+d), (a+b)/2 }'
