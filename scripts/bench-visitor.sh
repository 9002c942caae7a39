#!/usr/bin/env bash
# What a waiting visitor sees and costs (issue 21 §1, issue 22 §3), old
# against new in the same run: usher built from $OLD_REF (default 1ac5fb3:
# far-back polls every 8 s at most, no Usher-Shown header) and from this
# tree (far-back polls every tenth of the ETA up to 2 min; a place never
# answered further back than the one the client shows), one after the
# other, each as two `usher serve` instances on one Redis behind nginx
# round-robin, so that a visitor's consecutive polls go to different
# instances and their views differ. Midway through each run one instance is
# stopped and started again on its port (a rolling restart).
#
# The load is `usher loadtest --scenario queued` through nginx: USERS
# visitors (one visit each) spawned at 100/s into a room that admits 5/s,
# so the last are told ETAs of minutes, for SECS seconds. The load
# generator is this tree's in both runs; it sends Usher-Shown, which the
# old server ignores. Per build the script reports: visitors admitted;
# status polls counted in nginx's access log (GETs of .../entries/me; the
# same for both builds, and it survives the restart); polls per admitted
# visitor; answers that put a visitor further back than the place it
# showed, as the load generator saw them (and in how many visitors); and
# usher_position_rises_total summed over the new instances (rises usher
# held back; the restarted instance is also read just before its restart).
# Prints a Markdown table; the reports stay in artifacts/visitor/ (or
# $RESULTS).
#
#   [OLD_REF=1ac5fb3] scripts/bench-visitor.sh [secs=150] [users=2000] [redis=redis://127.0.0.1:6379/0]
#
# GIVE_UP=share lets that share of visitors stop polling at a random moment
# within their ETA (loadtest --give-up): near the front they are parked.
# Needs git, nginx, curl, jq and redis-cli (to delete the keys it made).
# USHER_BIN=path uses a prebuilt usher, OLD_BIN=path a prebuilt old one.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-150} users=${2:-2000} redis=${3:-redis://127.0.0.1:6379/0}
out=${RESULTS:-artifacts/visitor}
mkdir -p "$out"
. scripts/benchlib.sh
nginx=$(command -v nginx || echo /usr/sbin/nginx)
old=${OLD_BIN:-}
if [ -z "$old" ]; then
  mkdir "$tmp/old"
  git archive "${OLD_REF:-1ac5fb3}" | tar -x -C "$tmp/old"
  (cd "$tmp/old" && go build -o "$tmp/usher-old" ./cmd/usher)
  old=$tmp/usher-old
fi
prefix="bench-visitor-$$:"
at_exit "redis-cli -u '$redis' --scan --pattern '$prefix*' | xargs -r -n 500 redis-cli -u '$redis' del >/dev/null"

# origin :18491, instances :18492 and :18493, nginx :18494.
key=bench-visitor-admin-key-0123456789abcdef
ports=(18492 18493)
lb=http://127.0.0.1:18494
# Every user enters from 127.0.0.1: client_enters_per_minute 0 lets them.
room='{"state":"open","admit_rate":5,"max_active":1000,"client_enters_per_minute":0}'
start origin "$usher" origin --addr 127.0.0.1:18491 --workers 200 --conns 10 --service lognormal:20ms:0.25
wait_healthy localhost:18491/healthz

# serve NAME BINARY I: start instance I (its port, its data directory) of
# build NAME; its pid in inst[I].
declare -A inst
serve() {
  local name=$1 bin=$2 i=$3
  USHER_ADMIN_ADDR=127.0.0.1:$((ports[$i] + 1000)) "$bin" serve --addr "127.0.0.1:${ports[$i]}" --data-dir "$tmp/$name-$i" --keys-dir "$tmp/$name-keys" \
    --store "$redis" --redis-prefix "$prefix$name:" --admin-key "$key" --collect=false \
    >>"$tmp/serve-$name-$i.log" 2>&1 &
  inst[$i]=$!
  pids+=("${inst[$i]}")
  wait_healthy "localhost:${ports[$i]}/healthz"
}
stop() { # stop I: SIGTERM, as a rolling restart does; requests in flight finish
  kill "${inst[$1]}"
  wait "${inst[$1]}" 2>/dev/null || true
}
# rises I: usher_position_rises_total of instance I, summed over its
# rooms (no sample before the first rise: 0).
rises() {
  local m
  m=$(curl -sf -H "Authorization: Bearer $key" "localhost:$(admin_port "${ports[$1]}")/metrics")
  awk '/^usher_position_rises_total/ { n += $NF } END { print n + 0 }' <<<"$m"
}

# Round-robin over both instances, a new upstream connection per request:
# nginx picks the instance per request, so a visitor's polls alternate.
# A request that finds an instance down (connection refused) goes to the
# other (proxy_next_upstream's default).
nginx_conf() { # nginx_conf DIR
  cat >"$1/nginx.conf" <<EOF
daemon off;
worker_processes 1;
worker_rlimit_nofile 16384;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 8192; }
http {
	log_format polls '\$request_method \$uri \$status \$upstream_addr';
	access_log $1/access.log polls;
	client_body_temp_path $1/client_body;
	proxy_temp_path $1/proxy;
	fastcgi_temp_path $1/fastcgi;
	uwsgi_temp_path $1/uwsgi;
	scgi_temp_path $1/scgi;
	upstream usher { server 127.0.0.1:${ports[0]}; server 127.0.0.1:${ports[1]}; }
	server {
		listen 127.0.0.1:18494;
		location / { proxy_pass http://usher; }
	}
}
EOF
}

rows=()
for which in old new; do
  bin=$usher
  [ "$which" = old ] && bin=$old
  echo "run $which" >&2
  serve "$which" "$bin" 0 # first alone: it makes the shared signing keys
  serve "$which" "$bin" 1
  dir=$tmp/nginx-$which
  mkdir -p "$dir"
  nginx_conf "$dir"
  start "nginx-$which" "$nginx" -p "$dir" -c "$dir/nginx.conf"
  ngx=${pids[-1]}
  wait_healthy "$lb/healthz"
  "$usher" loadtest --scenario queued --target http://127.0.0.1:18491/seats --usher "$lb" --admin-key "$key" \
    --usher-admin "http://127.0.0.1:$(admin_port "${ports[0]}")" --room sale --setup-room "$room" --users "$users" --spawn-rate 100 --iterations 1 --duration "${secs}s" \
    --calls 2 --give-up "${GIVE_UP:-0}" --max-error-rate 1 --progress=false --out "$out/$which.json" >"$out/$which.txt" &
  lt=$!
  pids+=("$lt")
  sleep $((secs / 2))
  held=$(rises 1) # its counters start again at 0
  stop 1
  serve "$which" "$bin" 1
  wait "$lt"
  no_refusals "$out/$which.json"
  a=$(rises 0) b=$(rises 1)
  figures "$which: usher_position_rises_total" "$a" "$b" "$held"
  held=$((a + b + held))
  # A build without the metric (the old one) holds nothing back.
  grep -qa usher_position_rises_total "$bin" || held=-
  polls=$(awk '$1 == "GET" && $2 ~ /\/entries\/me$/' "$dir/access.log" | wc -l)
  # How the polls were spread over the instances, to show they alternate.
  awk '$1 == "GET" && $2 ~ /\/entries\/me$/ { n[NF > 4 ? "retried at the other" : $4]++ }
    END { for (u in n) printf "  %s: %d polls\n", u, n[u] }' \
    "$dir/access.log" | sort >&2
  kill "$ngx"
  wait "$ngx" 2>/dev/null || true
  stop 0
  stop 1
  row=$(jq -r --arg w "$which" --argjson polls "$polls" --arg held "$held" '.[0].visits as $v |
    "| \($w) | \($v.admitted) | \($polls) | \(if $v.admitted > 0 then $polls / $v.admitted * 10 | round / 10 else "-" end) | \($v.position_rises) (\($v.rose_visitors) visitors) | \($held) |"' \
    "$out/$which.json")
  rows+=("$row")
done
echo
echo "| usher | admitted | status polls (nginx) | polls per admitted | rises seen by visitors | rises held by usher |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
