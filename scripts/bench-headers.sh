#!/usr/bin/env bash
# Issue 30 §4's memory experiment, old against new in the same run: one
# client (127.0.0.2) opens N connections to `usher proxy` and sends on each
# the start of a request and BYTES of small header lines (LINE bytes each,
# default 16: one header kept per line, the costliest kind), never the
# blank line that ends them (scripts/slowheaders). For each N, usher built
# from $OLD_REF (default c73afb4: Go's 1 MB header bound) and from this
# tree (--max-header-bytes 32 KiB) each run a fresh proxy; the script reads
# the proxy's resident memory (VmRSS) before and once every connection has
# sent its bytes or been answered and the proxy has read all it will read
# (no bytes left in its sockets' receive queues, `ss`), and its peak
# (VmHWM). A last row sends,
# on as many connections as one client may open (--max-conns-per-client,
# 512), header lines just under the new bound: the most one client can
# make the new proxy hold. Prints a Markdown table; the tool's reports stay
# in artifacts/headers (or $RESULTS).
#
#   [OLD_REF=c73afb4] [LINE=16] scripts/bench-headers.sh [conns="20 50 200"] [bytes=1048576] [cap=512]
#
# cap=0 leaves the last row out. Needs curl, jq and ss. USHER_BIN=path uses a prebuilt
# usher, OLD_BIN=path a prebuilt old one. All traffic stays on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
conns=${1:-"20 50 200"} bytes=${2:-1048576} cap=${3:-512}
line=${LINE:-16}
out=${RESULTS:-artifacts/headers}
mkdir -p "$out"
. scripts/benchlib.sh
old=${OLD_BIN:-}
if [ -z "$old" ]; then
  mkdir "$tmp/old"
  git archive "${OLD_REF:-c73afb4}" | tar -x -C "$tmp/old"
  (cd "$tmp/old" && go build -o "$tmp/usher-old" ./cmd/usher)
  old=$tmp/usher-old
fi
go build -o "$tmp/slowheaders" ./scripts/slowheaders
key=bench-headers-admin-key-0123456789abcdef
start origin "$usher" origin --addr 127.0.0.1:18591
wait_healthy 127.0.0.1:18591/healthz

kib() { awk -v f="$1" '$1 == f":" { print $2 }' "/proc/$2/status"; }
# unread: bytes in the proxy's receive queues, sent but not read yet.
unread() { ss -Htn state established "( sport = :18592 )" | awk '{ n += $1 } END { print n + 0 }'; }

# measure BUILD BINARY N BYTES: a fresh proxy of BUILD, N connections of
# BYTES header bytes; prints "added_kib peak_added_kib statuses".
measure() {
  local build=$1 bin=$2 n=$3 b=$4 name="$1-$3-$4" pid base rss hwm report
  USHER_PROXY_ADMIN_ADDR=127.0.0.1:19592 "$bin" proxy --addr 127.0.0.1:18592 --origin http://127.0.0.1:18591 --data-dir "$tmp/data-$name" \
    --admin-key "$key" >"$tmp/proxy-$name.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_healthy 127.0.0.1:18592/_usher/healthz
  base=$(kib VmRSS "$pid")
  report=$out/$name.json
  "$tmp/slowheaders" -addr 127.0.0.1:18592 -from 127.0.0.2 -conns "$n" -bytes "$b" -line "$line" \
    -hold 60s -timeout 120s >"$report" &
  local tool=$!
  for _ in $(seq 700); do # the tool reports within its timeout
    [ -s "$report" ] && break
    sleep 0.1
  done
  [ -s "$report" ] || { echo "bench: slowheaders did not report ($name)" >&2; exit 1; }
  for _ in $(seq 600); do # the kernel holds what the proxy has not read yet
    [ "$(unread)" = 0 ] && break
    sleep 0.1
  done
  rss=$(kib VmRSS "$pid")
  hwm=$(kib VmHWM "$pid")
  echo "$name: $(unread) bytes unread when measured" >>"$out/unread.txt"
  kill "$tool"
  wait "$tool" 2>/dev/null || true
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  figures "$name" "$base" "$rss" "$hwm"
  echo "$((rss - base)) $((hwm - base)) $(jq -c .statuses "$report")"
}

mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b <= 0) print "–"; else printf "%.2f×", a / b }'; }

rows=""
row() { # row N BYTES
  local n=$1 b=$2 o nw
  o=$(measure old "$old" "$n" "$b")
  nw=$(measure new "$usher" "$n" "$b")
  read -r oa op os <<<"$o"
  read -r na np ns <<<"$nw"
  rows+="| $n | $b | +$(mb "$oa") MB (peak +$(mb "$op")) | \`$os\` | +$(mb "$na") MB (peak +$(mb "$np")) | \`$ns\` | $(ratio "$na" "$oa") |"$'\n'
}
for n in $conns; do
  row "$n" "$bytes"
done
if [ "$cap" != 0 ]; then
  row "$cap" $((32 * 1024 - 1024)) # just under the new default bound
fi
cat <<TABLE
| connections | header bytes each | old: RSS added | old: answers | new: RSS added | new: answers | new ÷ old |
|---|---|---|---|---|---|---|
$rows
TABLE
