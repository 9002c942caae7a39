package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"usher/internal/testenv"
	"usher/internal/wire"
)

// instance is one `usher serve` of a fleet, stoppable on its own.
type instance struct {
	base string
	stop func()
}

// startInstance runs `usher serve args…` (through run, no environment)
// until stop or the end of the test, and returns once /healthz answers.
func startInstance(t *testing.T, args ...string) *instance {
	t.Helper()
	return startStoppable(t, "serve", "/healthz", args...)
}

// startStoppable runs `usher command args…` (through run, no environment)
// until stop or the end of the test, and returns once healthPath answers
// 200 (asked for Host localhost, which a --public-host localhost serves).
func startStoppable(t *testing.T, command, healthPath string, args ...string) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{command}, withAdminAddr(command, args, nil)...), func(string) string { return "" }, stdout, stderr)
	}()
	var once sync.Once
	in := &instance{stop: func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("usher %s returned %v after shutdown, want nil\n%s", command, err, stderr)
			}
		})
	}}
	t.Cleanup(in.stop)
	testenv.Eventually(t, time.Minute, "usher "+command+" to answer "+healthPath, func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("usher %s exited early: %v\n%s", command, err, stderr)
		default:
		}
		m := servingRE.FindStringSubmatch(stdout.String())
		if m == nil {
			return false
		}
		req, _ := http.NewRequest("GET", m[1]+healthPath, nil)
		req.Host = "localhost"
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		res.Body.Close()
		in.base = m[1]
		noteAdmin(in.base, stdout.String())
		return res.StatusCode == 200
	})
	return in
}

// fleet is the load balancer of TestRollingRestart: the instances taking
// requests, of which each request goes to a random one.
type fleet struct {
	mu   sync.Mutex
	live []string
}

func (f *fleet) pick() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live[rand.IntN(len(f.live))]
}

func (f *fleet) set(live []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.live = slices.Clone(live)
}

// visitorLog is what one visitor was told, and when (TestRollingRestart).
type visitorLog struct {
	enterSent, enterAcked time.Time
	ticket                string
	activeAt              time.Time // first answer that said active
	lastWaitingSent       time.Time // when the last poll answered waiting was sent
	left                  bool      // the leave was acknowledged
}

// TestRollingRestart runs three `usher serve` instances on one Redis and
// a sale through all of them (each request to a random live instance, a
// request that finds none retried at another, as a load balancer does),
// and restarts the instances one by one during it: each is taken out of
// the balancer, shut down (its requests in flight finish), and started
// again. Visitors enter, poll until admitted, and leave. It asserts, from a
// client-side log of every answer:
//
//   - no acknowledged entry is lost: at the end every visitor that entered
//     and did not leave is waiting or active, and one told active is active;
//   - no acknowledged admission is lost: nobody told active is told waiting
//     again;
//   - the cap held: the visitors who were told active and had not yet
//     sent their leave, a subset of the store's active set, never
//     outnumbered max_active;
//   - FIFO: once a visitor B is told active, no visitor whose entry was
//     acknowledged before B's was sent is told waiting by a poll sent after.
//
// The instances share the signing keys (--keys-dir) and the admin key; each
// has its own data directory (SQLite and embedded NATS, not used here).
func TestRollingRestart(t *testing.T) { testRollingRestart(t, "USHER_TEST_REDIS") }

// TestRollingRestartCluster is TestRollingRestart on the Redis Cluster of
// USHER_TEST_REDIS_CLUSTER (scripts/cluster.sh).
func TestRollingRestartCluster(t *testing.T) { testRollingRestart(t, "USHER_TEST_REDIS_CLUSTER") }

// testRollingRestart runs TestRollingRestart on the Redis whose URL is in
// the variable redisVar.
func testRollingRestart(t *testing.T, redisVar string) {
	t.Parallel()
	redisURL := testenv.URL(t, redisVar)
	prefix := testenv.RedisPrefix(t, testenv.RedisAt(t, redisVar))
	keys := t.TempDir()
	const admin = "rolling-restart-admin-key-0123456789"
	const maxActive, workers = 12, 24
	dirs := []string{testenv.DataDir(t), testenv.DataDir(t), testenv.DataDir(t)}
	args := func(i int) []string {
		return []string{"--addr", "127.0.0.1:0", "--store", redisURL, "--redis-prefix", prefix, "--keys-dir", keys,
			"--admin-key", admin, "--data-dir", dirs[i]}
	}
	var insts []*instance
	for i := range 3 { // one after the other: the first writes the keys
		insts = append(insts, startInstance(t, args(i)...))
	}
	lb := &fleet{}
	bases := func() []string {
		var b []string
		for _, in := range insts {
			if in != nil {
				b = append(b, in.base)
			}
		}
		return b
	}
	lb.set(bases())

	// do sends one request to a live instance, again at another when the
	// connection fails or the answer is 503 (an instance shutting down).
	httpc := &http.Client{Timeout: 10 * time.Second}
	do := func(method, path, bearer, body string) (status int, m map[string]any, sent time.Time) {
		for range 50 {
			req, _ := http.NewRequest(method, lb.pick()+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+bearer)
			sent = time.Now()
			res, err := httpc.Do(req)
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusServiceUnavailable {
				continue
			}
			m = map[string]any{}
			json.Unmarshal(b, &m)
			return res.StatusCode, m, sent
		}
		t.Errorf("%s %s: no instance answered in 50 tries", method, path)
		return 0, nil, sent
	}

	room := "/api/v1/rooms/sale"
	if st, _, _ := (client{t, insts[0].base}).admin().do("PUT", room, admin, fmt.Sprintf(`{"state":"open","max_active":%d,"admit_rate":100,"interval_ms":250,`+
		`"active_ttl_seconds":600,"claim_window_seconds":600,"presence_timeout_seconds":0}`, maxActive)); st != 200 && st != 201 {
		t.Fatalf("PUT room: %d", st)
	}

	var mu sync.Mutex
	logs := map[string]*visitorLog{}
	believers, maxBelievers, admitted, polls, enters := 0, 0, 0, 0, 0
	count := func(f func() int) int { mu.Lock(); defer mu.Unlock(); return f() }
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				v := &visitorLog{enterSent: time.Now()}
				st, m, _ := do("POST", room+"/entries", admin, fmt.Sprintf(`{"visitor_id":%q}`, id))
				state, _ := m["state"].(string)
				if st != 200 && st != 201 || (state != wire.StateWaiting && state != wire.StateAdmitted) {
					t.Errorf("enter %s: %d %v", id, st, m)
					return
				}
				v.enterAcked, v.ticket = time.Now(), m["ticket"].(string)
				mu.Lock()
				logs[id] = v
				enters++
				mu.Unlock()
				for state == wire.StateWaiting {
					// The client keeps to a pacing of its own, faster than
					// poll_after_ms, so that the test sees many admissions.
					select {
					case <-stop:
						return
					case <-time.After(time.Duration(50+rand.IntN(100)) * time.Millisecond):
					}
					st, m, sent := do("GET", room+"/entries/me", v.ticket, "")
					state, _ = m["state"].(string)
					mu.Lock()
					polls++
					switch {
					case st != 200:
						t.Errorf("poll %s: %d %v", id, st, m)
					case state == wire.StateWaiting:
						v.lastWaitingSent = sent
					case state != wire.StateAdmitted:
						t.Errorf("poll %s: lost its place: %v", id, m)
					}
					mu.Unlock()
					if st != 200 || (state != wire.StateWaiting && state != wire.StateAdmitted) {
						return
					}
				}
				mu.Lock()
				v.activeAt = time.Now()
				admitted++
				believers++
				maxBelievers = max(maxBelievers, believers)
				mu.Unlock()
				// Admitted: it stays a while (three more polls, each of which
				// must still say admitted), so that the cap binds, then leaves.
				for range 3 {
					select {
					case <-stop:
					case <-time.After(time.Duration(50+rand.IntN(100)) * time.Millisecond):
					}
					if st, m, _ := do("GET", room+"/entries/me", v.ticket, ""); m["state"] != wire.StateAdmitted {
						t.Errorf("poll %s after its admission: %d %v", id, st, m)
					}
				}
				mu.Lock()
				believers--
				mu.Unlock()
				if st, m, _ := do("DELETE", room+"/entries/me", v.ticket, ""); st != 200 && st != 204 {
					t.Errorf("leave %s: %d %v", id, st, m)
					return
				}
				mu.Lock()
				v.left = true
				mu.Unlock()
			}
		})
	}
	halted := false
	halt := func() {
		if !halted {
			halted = true
			close(stop)
			wg.Wait()
		}
	}
	t.Cleanup(halt)

	testenv.Eventually(t, time.Minute, "50 admissions before the restarts", func() bool { return count(func() int { return admitted }) >= 50 })
	start := time.Now()
	startAdmitted, startPolls, startEnters := count(func() int { return admitted }), count(func() int { return polls }), count(func() int { return enters })
	for i := range insts {
		// Out of the balancer, shut down, started again, back in.
		old := insts[i]
		insts[i] = nil
		lb.set(bases())
		old.stop()
		insts[i] = startInstance(t, args(i)...)
		lb.set(bases())
		before := count(func() int { return admitted })
		testenv.Eventually(t, time.Minute, fmt.Sprintf("20 admissions after restarting instance %d", i), func() bool {
			return count(func() int { return admitted }) >= before+20
		})
	}
	elapsed := time.Since(start)
	halt()

	mu.Lock()
	defer mu.Unlock()
	t.Logf("rolling restart of 3 instances in %.1fs: %d enters, %d polls, %d admissions during it (%.0f enters/s, %.0f polls/s, %.1f admissions/s); %d visitors in all, at most %d active at once by the client's count (max_active %d)",
		elapsed.Seconds(), enters-startEnters, polls-startPolls, admitted-startAdmitted,
		float64(enters-startEnters)/elapsed.Seconds(), float64(polls-startPolls)/elapsed.Seconds(), float64(admitted-startAdmitted)/elapsed.Seconds(),
		len(logs), maxBelievers, maxActive)
	if maxBelievers > maxActive {
		t.Errorf("%d visitors held a slot at once by the client's count, max_active is %d", maxBelievers, maxActive)
	}
	// Nothing acknowledged is lost.
	lost := 0
	for id, v := range logs {
		if v.left {
			continue
		}
		_, m, _ := do("GET", room+"/entries/me", v.ticket, "")
		switch state := m["state"]; {
		case !v.activeAt.IsZero() && state != wire.StateAdmitted:
			t.Errorf("%s was told active and did not leave, now %v", id, m)
			lost++
		case state != wire.StateWaiting && state != wire.StateAdmitted:
			t.Errorf("%s entered (acknowledged) and did not leave, now %v", id, m)
			lost++
		}
	}
	// FIFO: for each visitor a, the earliest admission among the visitors
	// whose entry was sent after a's entry was acknowledged must come
	// after a's last poll answered waiting was sent.
	all := make([]*visitorLog, 0, len(logs))
	for _, v := range logs {
		all = append(all, v)
	}
	slices.SortFunc(all, func(a, b *visitorLog) int { return a.enterSent.Compare(b.enterSent) })
	// suffix[i]: the earliest activeAt among all[i:].
	suffix := make([]time.Time, len(all)+1)
	for i := len(all) - 1; i >= 0; i-- {
		suffix[i] = suffix[i+1]
		if a := all[i].activeAt; !a.IsZero() && (suffix[i].IsZero() || a.Before(suffix[i])) {
			suffix[i] = a
		}
	}
	overtaken := 0
	for _, a := range all {
		if a.lastWaitingSent.IsZero() {
			continue
		}
		j, _ := slices.BinarySearchFunc(all, a.enterAcked, func(v *visitorLog, t time.Time) int {
			if v.enterSent.After(t) {
				return 1
			}
			return -1
		})
		if first := suffix[j]; !first.IsZero() && first.Before(a.lastWaitingSent) {
			overtaken++
		}
	}
	if overtaken > 0 {
		t.Errorf("%d visitors were told waiting after a visitor who entered after them had been admitted", overtaken)
	}
	t.Logf("lost entries or admissions: %d; overtaken: %d", lost, overtaken)
}

// TestInstancesThroughput measures, for docs/benchmarks.md, status polls/s
// (a visitor far back in a paused room of 2,000) and enters/s (a new
// visitor each, into another paused room) through one `usher serve` on
// Redis and through three on the same Redis, the load spread evenly over
// them, in interleaved rounds. The load generator is a closed loop of 64
// goroutines in this process, and the instances run in it too (through
// run, as every cmd/usher test runs them): they, the generator and Redis
// share the machine's cores and one Go runtime, so the figure is the
// ratio, three ÷ one, and what it shows is the cost of three instances
// on the same cores, not the gain of three machines. Opt-in:
// USHER_BENCH_INSTANCES=1 (rounds of USHER_BENCH_INSTANCES_SECONDS, 5 s).
func TestInstancesThroughput(t *testing.T) {
	if os.Getenv("USHER_BENCH_INSTANCES") == "" {
		t.Skip("USHER_BENCH_INSTANCES is unset: a measurement, not a test")
	}
	redisURL := testenv.URL(t, "USHER_TEST_REDIS")
	prefix := testenv.RedisPrefix(t, testenv.Redis(t))
	keys := t.TempDir()
	const admin = "instances-bench-admin-key-0123456789"
	seconds := 5
	if s := os.Getenv("USHER_BENCH_INSTANCES_SECONDS"); s != "" {
		fmt.Sscan(s, &seconds)
	}
	var bases []string
	for range 3 {
		bases = append(bases, startInstance(t, "--addr", "127.0.0.1:0", "--store", redisURL, "--redis-prefix", prefix,
			"--keys-dir", keys, "--admin-key", admin, "--data-dir", testenv.DataDir(t)).base)
	}
	c := client{t, bases[0]}
	for _, room := range []string{"sale", "crowd"} {
		if st, _, m := c.admin().do("PUT", "/api/v1/rooms/"+room, admin, `{"state":"paused","admit_rate":50,"client_enters_per_minute":0}`); st != 200 && st != 201 {
			t.Fatalf("PUT %s: %d %v", room, st, m)
		}
	}
	var ticket string
	for i := range 2000 {
		_, _, m := c.do("POST", "/api/v1/rooms/sale/entries", admin, fmt.Sprintf(`{"visitor_id":"fill-%d"}`, i))
		ticket, _ = m["ticket"].(string)
	}
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer httpc.CloseIdleConnections()
	var seq sync.Mutex
	next := 0
	// load runs 64 goroutines for the round against targets (each request
	// to the next in turn) and returns the answers a second.
	load := func(targets []string, enter bool) float64 {
		var n, failed int
		var mu sync.Mutex
		end := time.Now().Add(time.Duration(seconds) * time.Second)
		var wg sync.WaitGroup
		for g := range 64 {
			wg.Go(func() {
				ok, bad := 0, 0
				for i := g; time.Now().Before(end); i++ {
					base := targets[i%len(targets)]
					var req *http.Request
					if enter {
						seq.Lock()
						next++
						id := next
						seq.Unlock()
						req, _ = http.NewRequest("POST", base+"/api/v1/rooms/crowd/entries", strings.NewReader(fmt.Sprintf(`{"visitor_id":"e-%d"}`, id)))
						req.Header.Set("Authorization", "Bearer "+admin)
					} else {
						req, _ = http.NewRequest("GET", base+"/api/v1/rooms/sale/entries/me", nil)
						req.Header.Set("Authorization", "Bearer "+ticket)
					}
					res, err := httpc.Do(req)
					if err != nil {
						bad++
						continue
					}
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode/100 == 2 {
						ok++
					} else {
						bad++
					}
				}
				mu.Lock()
				n, failed = n+ok, failed+bad
				mu.Unlock()
			})
		}
		wg.Wait()
		if failed > n/1000 {
			t.Errorf("%d requests failed, %d succeeded", failed, n)
		} else if failed > 0 {
			t.Logf("%d requests failed, %d succeeded", failed, n)
		}
		return float64(n) / float64(seconds)
	}
	sums := map[string]float64{}
	for round := range 4 {
		order := [][]string{bases[:1], bases}
		if round%2 == 1 {
			order = [][]string{bases, bases[:1]}
		}
		for _, targets := range order {
			for _, what := range []string{"polls", "enters"} {
				r := load(targets, what == "enters")
				k := fmt.Sprintf("%s on %d", what, len(targets))
				sums[k] += r
				t.Logf("round %d: %s instance(s): %.0f/s", round+1, k, r)
			}
		}
	}
	t.Logf("BenchmarkInstances polls_1 %.0f polls_3 %.0f ratio %.2f enters_1 %.0f enters_3 %.0f ratio %.2f (means of 4 rounds of %d s)",
		sums["polls on 1"]/4, sums["polls on 3"]/4, sums["polls on 3"]/sums["polls on 1"],
		sums["enters on 1"]/4, sums["enters on 3"]/4, sums["enters on 3"]/sums["enters on 1"], seconds)
}
