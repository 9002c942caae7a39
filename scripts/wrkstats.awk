# Reads `wrk --latency` output; prints "requests/s p99_ms non-2xx requests"
# (non-2xx: answers of 400 or more, as wrk counts them).
# Used by scripts/bench-http.sh, bench-edge.sh and bench-loadgen.sh.
/^ +99%/ {
  v = $2; u = 1
  if (v ~ /us$/) u = 0.001; else if (v ~ /ms$/) u = 1; else if (v ~ /s$/) u = 1000
  sub(/[a-z]+$/, "", v); p99 = v * u
}
/Non-2xx/ { bad = $NF }
/ requests in / { total = $1 }
/Requests\/sec/ { rate = $2 }
END { printf "%s %.2f %d %d\n", rate, p99, bad, total }
