#!/usr/bin/env bash
# The edge's cost, side by side in one run (issue 19 §6): the same requests
# through nginx alone to the origin (the reference), through nginx in front
# of usher auth (configured by `usher auth --print nginx`), and through
# usher proxy. The origin is scripts/trivialjson; every request is a GET
# with Accept: application/json.
#
#  - enters: a new visitor each (no cookie) into a paused room, so usher
#    places it and answers 429 with its place; nginx alone hands the same
#    request to the origin;
#  - polls: the last of those visitors polls with its ticket cookie (far
#    back in the paused room: 429 with its place); nginx alone, the origin;
#  - passed: an admitted visitor's requests with its pass cookie, in the open
#    room "fast" (/in/): usher checks the pass and the origin answers.
#
#   scripts/bench-edge.sh [duration=10s] [connections=64] [rounds=3]
#
# The three edges run in rotated order each round so that other load on the
# machine hits them alike; the script prints every round and each edge's
# sums ÷ nginx alone's. Needs nginx, wrk, curl and bc. USHER_BIN=path uses a
# prebuilt usher.
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-10s} conns=${2:-64} rounds=${3:-3}
. scripts/benchlib.sh
nginx=$(command -v nginx || echo /usr/sbin/nginx)
go build -o "$tmp/trivialjson" ./scripts/trivialjson

# origin :18190, usher auth :18192 behind nginx :18193, usher proxy :18191,
# nginx alone :18194. Both ushers on the memory store, with the same key.
key=bench-edge-admin-key-0123456789abcdef
start origin "$tmp/trivialjson" --addr 127.0.0.1:18190
start auth "$usher" auth --addr 127.0.0.1:18192 --admin-addr 127.0.0.1:19192 --data-dir "$tmp/auth" --admin-key "$key" --insecure-cookies \
  --route /in/=fast
start proxy "$usher" proxy --addr 127.0.0.1:18191 --admin-addr 127.0.0.1:19191 --origin http://127.0.0.1:18190 --data-dir "$tmp/proxy" \
  --admin-key "$key" --insecure-cookies --route /in/=fast
mkdir -p "$tmp/edge" "$tmp/alone"
"$usher" auth --print nginx --origin http://127.0.0.1:18190 --listen 127.0.0.1:18193 \
  --usher http://127.0.0.1:18192 --edge-dir "$tmp/edge" --insecure-cookies >"$tmp/edge/nginx.conf"
# nginx alone: the printed file's process and logging settings, one plain
# proxy_pass to the same origin with the same keepalive pool.
cat >"$tmp/alone/nginx.conf" <<EOF
daemon off;
worker_processes auto;
pid $tmp/alone/nginx.pid;
error_log stderr warn;
events { worker_connections 1024; }
http {
	access_log $tmp/alone/access.log combined;
	client_body_temp_path $tmp/alone/client_body;
	proxy_temp_path $tmp/alone/proxy;
	fastcgi_temp_path $tmp/alone/fastcgi;
	uwsgi_temp_path $tmp/alone/uwsgi;
	scgi_temp_path $tmp/alone/scgi;
	upstream origin { server 127.0.0.1:18190; keepalive 16; }
	server {
		listen 127.0.0.1:18194;
		location / {
			proxy_pass http://origin;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header X-Forwarded-For \$remote_addr;
		}
	}
}
EOF
for e in edge alone; do start "nginx-$e" "$nginx" -p "$tmp/$e" -c "$tmp/$e/nginx.conf"; done
wait_healthy localhost:18190/status localhost:18192/_usher/healthz localhost:18191/_usher/healthz \
  localhost:18193/_usher/healthz localhost:18194/status

declare -A port=([alone]=18194 [auth]=18193 [proxy]=18191) admin=([auth]=19192 [proxy]=19191)
edges=(alone auth proxy)
for e in auth proxy; do
  curl -sf -XPUT -H "Authorization: Bearer $key" "localhost:${admin[$e]}/api/v1/rooms/sale" \
    -d '{"state":"paused","client_enters_per_minute":0}' >/dev/null
  curl -sf -XPUT -H "Authorization: Bearer $key" "localhost:${admin[$e]}/api/v1/rooms/fast" \
    -d '{"max_active":1000}' >/dev/null
done

# run EDGE COOKIE [PATH]: "requests/s p99_ms non-2xx requests" of wrk against the edge.
run() {
  local h=()
  [ -z "$2" ] || h=(-H "Cookie: $2")
  wrk -t2 -c"$conns" -d"$dur" --latency -H "Accept: application/json" "${h[@]}" "http://127.0.0.1:${port[$1]}${3:-/status}" |
    awk -f scripts/wrkstats.awk
}
# cookie EDGE [PATH]: the Cookie header of a new visitor's place (or pass) at the edge.
cookie() {
  curl -s -o /dev/null -c - -H "Accept: application/json" "http://127.0.0.1:${port[$1]}${2:-/status}" |
    awk '{ sub(/^#HttpOnly_/, "") } !/^#/ && NF >= 7 { printf "%s%s=%s", sep, $6, $7; sep = "; " }'
}

# Each gated edge must place a new visitor and answer its poll with its
# place: a figure of refusals or errors would measure nothing.
for e in auth proxy; do
  c=$(cookie "$e")
  got=$(curl -s -w ' %{http_code}' -H "Accept: application/json" -H "Cookie: $c" "http://127.0.0.1:${port[$e]}/status")
  case $got in
  *'"state":"waiting"'*' 429') ;;
  *) echo "bench: $e answered a poll with $got" >&2; exit 1 ;;
  esac
  c=$(cookie "$e" /in/status)
  got=$(curl -s -o /dev/null -D - -w '%{http_code}' -H "Accept: application/json" -H "Cookie: $c" "http://127.0.0.1:${port[$e]}/in/status")
  case $got in
  *[Uu]sher-[Pp]ass:*) echo "bench: $e renewed a fresh pass: $got" >&2; exit 1 ;;
  *200) ;;
  *) echo "bench: $e answered an admitted visitor with $got" >&2; exit 1 ;;
  esac
done

order() { local n=${#edges[@]} i; for i in $(seq 0 $((n - 1))); do printf '%s ' "${edges[$(((i + $1) % n))]}"; done; }
for e in "${edges[@]}"; do out=$(dur=1s run "$e" ""); done # warm-up
declare -A sum
kinds=(enters polls passed)
for kind in "${kinds[@]}"; do
  for r in $(seq "$rounds"); do
    for e in $(order "$r"); do
      c="" path=/status
      [ "$kind" != passed ] || path=/in/status
      if [ "$kind" != enters ] && [ "$e" != alone ]; then c=$(cookie "$e" "$path"); fi
      out=$(run "$e" "$c" "$path")
      read -r rate p99 bad total <<<"$out"
      figures "$kind at $e" "$rate" "$p99" "$bad" "$total"
      # Every answer of the kind expected: a gated edge's enters and polls
      # are all 429 (a place), everything else 200.
      want=0
      [ "$kind" = passed ] || [ "$e" = alone ] || want=$total
      if [ "$bad" != "$want" ]; then
        echo "bench: $kind at $e: $bad of $total answers were 400 or more, not $want" >&2
        exit 1
      fi
      printf '%-6s round %d  %-5s %10s req/s  p99 %7s ms  non-2xx %s\n' "$kind" "$r" "$e" "$rate" "$p99" "$bad"
      sum[$kind.$e]=$(echo "${sum[$kind.$e]:-0} + $rate" | bc)
    done
  done
done
echo
for e in "${edges[@]}"; do
  printf '%-5s' "$e"
  for kind in "${kinds[@]}"; do
    printf '  %s/s %7.0f (%.2f×)' "$kind" "$(echo "${sum[$kind.$e]} / $rounds" | bc -l)" \
      "$(echo "${sum[$kind.$e]} / ${sum[$kind.alone]}" | bc -l)"
  done
  echo
done
echo "(×: ÷ nginx alone to the origin in the same rounds)"
echo "waiting in sale: auth $(curl -sf -H "Authorization: Bearer $key" localhost:19192/api/v1/rooms/sale | grep -o '"waiting":[0-9]*')," \
  "proxy $(curl -sf -H "Authorization: Bearer $key" localhost:19191/api/v1/rooms/sale | grep -o '"waiting":[0-9]*')"
