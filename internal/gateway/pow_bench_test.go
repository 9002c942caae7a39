package gateway

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"usher/internal/limit/memlimit"
	"usher/internal/pow"
	"usher/internal/token"
)

// BenchmarkBrowserSolve measures what a proof of work costs the waiting
// page: solving challenges in headless chromium's worker, with WebCrypto
// and with the worker's own SHA-256 (its fallback), next to Go's native
// pow.Solve, in one run. Every solver gets the same challenges and tries
// the nonces in the same order, so each challenge costs each solver the
// same number of hashes: the ratios compare speed alone. It runs only with
// USHER_BENCH_BROWSER=1 (docs/benchmarks.md):
//
//	USHER_BENCH_BROWSER=1 go test -run XXX -bench BrowserSolve -benchtime 20x ./internal/gateway
//
// Each sub-benchmark reports the median and p90 time of one solve (for the
// worker: from starting it to its answer, in the page, as a visitor pays
// it) and the hash rate over all its solves.
func BenchmarkBrowserSolve(b *testing.B) {
	if os.Getenv("USHER_BENCH_BROWSER") != "1" {
		b.Skip("set USHER_BENCH_BROWSER=1 to measure solving in chromium")
	}
	site := workerSite(b)
	ctx := newBrowserFor(b, time.Hour)
	navigate(b, ctx, site+"/")
	keys, err := token.LoadDir(b.TempDir(), time.Now)
	if err != nil {
		b.Fatal(err)
	}
	guard := pow.New(keys, memlimit.New(), time.Now)
	for _, bits := range []int{12, 16, 18, 20} {
		challenges := make([]pow.Challenge, 20) // b.N cycles through them
		for i := range challenges {
			challenges[i] = guard.Issue("sale", bits)
		}
		for _, impl := range []string{"go", "webcrypto", "js"} {
			b.Run(fmt.Sprintf("bits=%d/%s", bits, impl), func(b *testing.B) {
				var ms []float64
				var tried int64
				for i := range b.N {
					c := challenges[i%len(challenges)]
					if impl == "go" {
						start := time.Now()
						nonce := pow.Solve(c)
						ms = append(ms, float64(time.Since(start))/float64(time.Millisecond))
						n, err := strconv.ParseInt(nonce, 16, 64)
						if err != nil {
							b.Fatal(err)
						}
						tried += n + 1
						continue
					}
					r := inWorker(b, ctx, map[string]any{"token": c.Token, "bits": c.Bits, "impl": impl})
					if r.Impl != impl || !pow.Solves(c.Token, r.Nonce, c.Bits) {
						b.Fatalf("%s: nonce %q by %s does not solve %d bits", impl, r.Nonce, r.Impl, c.Bits)
					}
					ms = append(ms, r.MS)
					tried += r.Tried
				}
				total := 0.0
				for _, m := range ms {
					total += m
				}
				slices.Sort(ms)
				n := len(ms)
				b.ReportMetric((ms[(n-1)/2]+ms[n/2])/2, "ms-median")
				b.ReportMetric(ms[(n*9+9)/10-1], "ms-p90") // nearest rank
				b.ReportMetric(float64(tried)/(total/1000), "hash/s")
			})
		}
	}
}
