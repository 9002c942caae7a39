# Sourced by the bench-*.sh scripts that run usher: a temporary directory,
# the processes to stop and the commands to run on exit (failure included),
# the usher binary, a wait for servers to answer, and a check of figures.
#
#   . "$(dirname "$0")/benchlib.sh"   # after cd to the repository root
#   start NAME ARGS...                # run a background process, logged to $tmp/NAME.log
#   at_exit COMMAND                   # run COMMAND (a string) on exit, after the processes stop
#   wait_healthy URL...               # fail unless every URL answers within 20 s
#   figures WHAT VALUE...             # fail unless every VALUE is a number
#   no_refusals REPORT...             # fail if a loadtest report has enters refused
#   admin_port PORT                   # the admin listener of the usher serving on PORT
#   real_stores NAME REDIS            # sets stores: usher's flags for REDIS under a key prefix and
#                                     # PostgreSQL ($USHER_TEST_POSTGRES) in a schema of its own,
#                                     # both removed on exit
#
# A tool's figures read with `read -r a b < <(tool)` hide its failure; read
# them from a variable (`out=$(tool)`, which fails under set -e) and pass
# them to figures. scripts/bench-smoke.sh runs every script with small
# arguments.

tmp=$(mktemp -d)
pids=()
exits=()
bench_exit() {
  local status=$? p c
  if [ "$status" != 0 ] && compgen -G "$tmp/*.log" >/dev/null; then
    echo "bench: failed ($status); the last lines of the logs in $tmp:" >&2
    tail -n 20 "$tmp"/*.log >&2 || true
  fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for c in "${exits[@]}"; do eval "$c" || true; done
  rm -rf "$tmp"
}
trap bench_exit EXIT
trap 'exit 130' INT # so that bench_exit sees the failure
trap 'exit 143' TERM

at_exit() { exits+=("$1"); }

# usher is $USHER_BIN, or a fresh build of ./cmd/usher.
usher=${USHER_BIN:-}
if [ -z "$usher" ]; then
  go build -o "$tmp/usher" ./cmd/usher
  usher=$tmp/usher
fi

start() { # start NAME ARGS...
  local name=$1
  shift
  "$@" >"$tmp/$name.log" 2>&1 &
  pids+=($!)
}

wait_healthy() { # wait_healthy URL...
  local url
  for url in "$@"; do
    for _ in $(seq 100); do
      curl -sf "$url" >/dev/null && continue 2
      sleep 0.2
    done
    echo "bench: $url did not answer" >&2
    exit 1
  done
}

figures() { # figures WHAT VALUE...
  local what=$1 v
  shift
  for v in "$@"; do
    [[ $v =~ ^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]] && continue
    echo "bench: $what: '$v' is not a number (the tool's output was not what was expected)" >&2
    exit 1
  done
}

# no_refusals REPORT...: fail if a usher loadtest report (--out) counts
# enters refused with a 4xx answer (the per-client limit's 429, a room
# that is not there): its figures would measure the refusals.
# admin_port PORT: the port of the admin API of the usher whose visitors'
# listener is PORT. The scripts give each usher --admin-addr (through
# USHER_ADMIN_ADDR, which an older usher ignores) on PORT+1000; an usher
# older than the admin listener serves its admin API on PORT itself.
admin_port() {
  local a=$(($1 + 1000))
  if curl -sf -o /dev/null "localhost:$a/healthz"; then echo "$a"; else echo "$1"; fi
}

no_refusals() {
  local f n
  for f in "$@"; do
    n=$(jq '[.[].visits.failed // {} | to_entries[] | select(.key | startswith("enter http 4")) | .value] | add // 0' "$f")
    if [ "$n" != 0 ]; then
      echo "bench: $f: $n enters refused: $(jq -c '[.[].visits.failed]' "$f")" >&2
      exit 1
    fi
  done
}

real_stores() { # real_stores NAME REDIS
  local name=$1 pg=${USHER_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable} sep='?'
  bench_redis=$2 bench_prefix="bench-$name-$$:" bench_pg=$pg
  bench_schema="usher_${name}_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
  at_exit 'redis-cli -u "$bench_redis" --scan --pattern "$bench_prefix*" 2>/dev/null | xargs -r -n 1000 redis-cli -u "$bench_redis" del >/dev/null'
  at_exit 'psql "$bench_pg" -qc "SET client_min_messages = warning; DROP SCHEMA IF EXISTS $bench_schema CASCADE" >/dev/null'
  psql "$pg" -qc "CREATE SCHEMA $bench_schema" >/dev/null
  [[ $pg == *\?* ]] && sep='&'
  stores=(--store "$bench_redis" --redis-prefix "$bench_prefix" --db "$pg${sep}search_path=$bench_schema" --data-dir "$tmp/data")
}
