#!/usr/bin/env bash
# A package's Go benchmarks at another commit and in this tree, in one run:
# each tree's test binary is built once, then the two run in turn ROUNDS
# times (old, new, old, new, …) so that the machine's load weighs on both
# alike. Prints, per benchmark and unit, the median of each side and the
# ratio (this tree ÷ the reference). The benchmarks must exist at REF.
#
#   [ROUNDS=3] [BENCHTIME=1s] scripts/bench-compare.sh REF PACKAGE REGEXP
#   e.g. scripts/bench-compare.sh 1ac5fb3 ./internal/httpapi 'BenchmarkStatusPollHandler/events=off'
#
# Benchmarks that need a service read it from the environment as
# `go test` does (USHER_TEST_REDIS, …).
set -euo pipefail
cd "$(dirname "$0")/.."
ref=$1 pkg=$2 pattern=$3 rounds=${ROUNDS:-3} benchtime=${BENCHTIME:-1s}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/old"
git archive "$ref" | tar -x -C "$tmp/old"
(cd "$tmp/old" && go test -c -o "$tmp/old.test" "$pkg")
go test -c -o "$tmp/new.test" "$pkg"
for _ in $(seq "$rounds"); do
  for side in old new; do
    dir=$pkg
    [ "$side" = old ] && dir=$tmp/old/$pkg
    (cd "$dir" && "$tmp/$side.test" -test.run '^$' -test.bench "$pattern" -test.benchmem -test.benchtime "$benchtime") |
      awk -v side="$side" '/^Benchmark/ { name = $1; sub(/-[0-9]+$/, "", name); for (i = 3; i < NF; i += 2) print side, name, $(i + 1), $i }' >>"$tmp/results"
  done
done
[ -s "$tmp/results" ] || { echo "bench-compare: no benchmark matched $pattern in $pkg" >&2; exit 1; }
echo "| benchmark | unit | $ref | this tree | ratio |"
echo "| --- | --- | --- | --- | --- |"
sort -k2,2 -k3,3 -k1,1 -k4,4g "$tmp/results" | awk '
  function median(side,   n) { n = count[side]; return n % 2 ? v[side, (n + 1) / 2] : (v[side, n / 2] + v[side, n / 2 + 1]) / 2 }
  function flush() {
    if (key == "") return
    o = median("old"); n = median("new")
    printf "| %s | %s | %.4g | %.4g | %s |\n", name, unit, o, n, o ? sprintf("%.3f", n / o) : "-"
  }
  { k = $2 SUBSEP $3
    if (k != key) { flush(); key = k; name = $2; unit = $3; count["old"] = count["new"] = 0 }
    v[$1, ++count[$1]] = $4 }
  END { flush() }'
