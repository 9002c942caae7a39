# Reads `wrk --latency` output; prints "requests/s p99_ms non-2xx".
# Used by scripts/bench-http.sh and scripts/bench-edge.sh.
/^ +99%/ {
  v = $2; u = 1
  if (v ~ /us$/) u = 0.001; else if (v ~ /ms$/) u = 1; else if (v ~ /s$/) u = 1000
  sub(/[a-z]+$/, "", v); p99 = v * u
}
/Non-2xx/ { bad = $NF }
/Requests\/sec/ { rate = $2 }
END { printf "%s %.2f %d\n", rate, p99, bad }
