# Sourced by the bench-*.sh scripts: a temporary directory, the processes
# to stop on exit, the usher binary, and a wait for servers to answer.
#
#   . "$(dirname "$0")/benchlib.sh"   # after cd to the repository root
#   start NAME ARGS...                # run a background process, logged to $tmp/NAME.log
#   wait_healthy URL...               # fail unless every URL answers within 20 s

tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$tmp"' EXIT

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
    echo "bench: $url did not answer; logs in $tmp:" >&2
    tail -n 20 "$tmp"/*.log >&2 || true
    exit 1
  done
}
