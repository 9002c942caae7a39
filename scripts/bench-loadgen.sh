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
. scripts/benchlib.sh
go build -o "$tmp/trivialjson" ./scripts/trivialjson
start trivialjson "$tmp/trivialjson" --addr 127.0.0.1:18090
wait_healthy localhost:18090/status
url=http://127.0.0.1:18090/status

# wrk_rate: requests/s; gen_rate: "requests/s successes requests p99_ms".
wrk_rate() {
  local out
  out=$(wrk -t2 -c"$conns" -d"$dur" --latency "$url" | awk -f scripts/wrkstats.awk)
  read -r rate _ bad _ <<<"$out"
  figures "wrk" "$rate" "$bad"
  if [ "$bad" != 0 ]; then echo "wrk: $bad answers not 2xx" >&2; exit 1; fi
  echo "$rate"
}
gen_rate() {
  "$usher" loadtest --scenario direct --target "$url" --users "$conns" --duration "$dur" \
    --origin-stats none --progress=false --json > "$tmp/gen.json"
  jq -er '.[0] | "\(.origin.requests / .elapsed_s) \(.origin.successes) \(.origin.requests) \(.origin.latency.p99_ms)"' "$tmp/gen.json"
}
out=$(gen_rate)
read -r g1 ok1 req1 p1 <<<"$out"
w1=$(wrk_rate)
out=$(gen_rate)
read -r g2 ok2 req2 p2 <<<"$out"
w2=$(wrk_rate)
figures "usher loadtest" "$g1" "$ok1" "$req1" "$p1" "$g2" "$ok2" "$req2" "$p2"
if [ "$ok1" != "$req1" ] || [ "$ok2" != "$req2" ]; then echo "usher loadtest: requests failed" >&2; exit 1; fi
printf 'usher loadtest (req/s): %.0f %.0f   (successes/requests: %s/%s, %s/%s; p99 %.1f ms, %.1f ms)\n' \
  "$g1" "$g2" "$ok1" "$req1" "$ok2" "$req2" "$p1" "$p2"
printf 'wrk -t2 -c%s (req/s): %.0f %.0f\n' "$conns" "$w1" "$w2"
awk -v a="$g1" -v b="$g2" -v c="$w1" -v d="$w2" 'BEGIN {
  printf "ratio usher loadtest / wrk = %.2f; usher loadtest mean %.0f req/s (target >= 20000)\n", (a+b)/(c+d), (a+b)/2 }'
