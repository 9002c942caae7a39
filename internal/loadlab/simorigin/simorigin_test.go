package simorigin

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func start(t *testing.T, cfg Config) (*Origin, *httptest.Server) {
	t.Helper()
	o := New(cfg)
	srv := httptest.NewServer(o.Handler())
	t.Cleanup(srv.Close)
	return o, srv
}

func client(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns}, Timeout: 30 * time.Second}
}

func get(t *testing.T, c *http.Client, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

// closedLoop runs users goroutines that each send each requests back to back,
// and returns every latency, sorted.
func closedLoop(t *testing.T, url string, users, each int) []time.Duration {
	t.Helper()
	c := client(users)
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	for range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				start := time.Now()
				res, err := c.Get(url)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					t.Errorf("status %d", res.StatusCode)
				}
				mu.Lock()
				lat = append(lat, time.Since(start))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	return lat
}

func p95(sorted []time.Duration) time.Duration {
	return sorted[int(math.Ceil(0.95*float64(len(sorted))))-1]
}

// TestOverloadIsWaiting is seed 000's collapse in small: 40 closed-loop users
// on 2 connections. Work stays the service time; latency becomes waiting.
func TestOverloadIsWaiting(t *testing.T) {
	const work = 5 * time.Millisecond
	o, srv := start(t, Config{Workers: 200, Conns: 2, Service: Constant(work)})
	before := o.Stats()
	lat := closedLoop(t, srv.URL+"/seats", 40, 8)
	after := o.Stats()

	if got := after.Served; got != 320 {
		t.Errorf("served %d, want 320", got)
	}
	// Saturation at the pool: the pool was full, never over-full.
	if after.PeakBusyConns != 2 {
		t.Errorf("peak busy connections %d, want exactly the pool, 2", after.PeakBusyConns)
	}
	if u := Utilization(before, after); u < 0.6 {
		t.Errorf("utilisation %.2f over the run, want the pool nearly always busy (≥ 0.6)", u)
	}
	// Most requests waited for a connection.
	if after.Queued < after.Served/2 {
		t.Errorf("%d of %d requests waited for a connection, want most", after.Queued, after.Served)
	}
	// Latency is dominated by waiting: the client's p95 is many service
	// times (40 users ÷ 2 connections ≈ 20), and so is the origin's own wait.
	if got := p95(lat); got < 5*work {
		t.Errorf("client p95 %v, want at least 5 × the service time %v", got, work)
	}
	if after.Wait.P95 < 3*after.Service.P95 {
		t.Errorf("origin wait p95 %v ms vs service p95 %v ms: want waiting to dominate", after.Wait.P95, after.Service.P95)
	}
}

func TestUnloadedIsWork(t *testing.T) {
	const work = 5 * time.Millisecond
	o, srv := start(t, Config{Conns: 2, Service: Constant(work)})
	lat := closedLoop(t, srv.URL+"/seats", 1, 20)
	st := o.Stats()
	if st.Queued != 0 || st.PeakBusyConns != 1 {
		t.Errorf("one user: queued %d, peak connections %d; want 0 and 1", st.Queued, st.PeakBusyConns)
	}
	if lat[0] < work {
		t.Errorf("fastest request %v, want at least the service time %v", lat[0], work)
	}
	if st.Service.Min < 5 {
		t.Errorf("service min %v ms, want at least 5", st.Service.Min)
	}
}

func TestTimeoutAnswers503(t *testing.T) {
	o, srv := start(t, Config{Conns: 1, Service: Constant(100 * time.Millisecond), Timeout: 20 * time.Millisecond})
	c := client(4)
	var wg sync.WaitGroup
	statuses := make([]int, 4)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Get(srv.URL + "/seats")
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			statuses[i] = res.StatusCode
		}()
	}
	wg.Wait()
	var ok, busy int
	for _, s := range statuses {
		switch s {
		case http.StatusOK:
			ok++
		case http.StatusServiceUnavailable:
			busy++
		}
	}
	st := o.Stats()
	if ok < 1 || busy < 1 || ok+busy != 4 || int64(busy) != st.TimedOut || int64(ok) != st.Served {
		t.Errorf("statuses %v, stats served %d timed out %d: want some served, the rest 503 and counted", statuses, st.Served, st.TimedOut)
	}
}

func TestReservations(t *testing.T) {
	_, srv := start(t, Config{Conns: 2, Service: Constant(0), Seats: 3})
	c := client(1)
	post := func(body string) int {
		res, err := c.Post(srv.URL+"/reservations", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"seat_id":2}`, 201}, {`{"seat_id":2}`, 409}, {`{"seat_id":4}`, 404}, {`{"seat_id":0}`, 404}, {`nope`, 400},
	} {
		if got := post(tc.body); got != tc.want {
			t.Errorf("POST %s: %d, want %d", tc.body, got, tc.want)
		}
	}
	res, body := get(t, c, srv.URL+"/seats")
	var seats struct {
		Available int   `json:"available"`
		Seats     []int `json:"seats"`
	}
	if err := json.Unmarshal(body, &seats); err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /seats: %d %s", res.StatusCode, body)
	}
	slices.Sort(seats.Seats)
	if seats.Available != 2 || !slices.Equal(seats.Seats, []int{1, 3}) {
		t.Errorf("seats %+v, want 2 available: 1 and 3", seats)
	}
}

func TestRemoteGate(t *testing.T) {
	// A stand-in for usher's pass endpoint: "good" passes and is renewed,
	// anything else is refused as usher refuses it.
	var calls sync.Map
	usher := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Store(r.URL.Path, true)
		switch r.Header.Get("Authorization") {
		case "Bearer good":
			w.Header().Set("Usher-Pass", "fresh")
			json.NewEncoder(w).Encode(map[string]string{"pass": "fresh"})
		case "Bearer down":
			w.WriteHeader(http.StatusBadGateway)
		default:
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"error":{"code":"not_admitted"}}`))
		}
	}))
	defer usher.Close()
	o, srv := start(t, Config{Conns: 1, Service: Constant(0), Gate: NewRemoteGate(usher.Client(), usher.URL, "sale")})
	c := client(1)

	res, _ := get(t, c, srv.URL+"/seats", "Authorization", "Bearer good")
	if res.StatusCode != 200 || res.Header.Get("Usher-Pass") != "fresh" {
		t.Errorf("admitted visitor: %d, Usher-Pass %q; want 200 and the renewed pass", res.StatusCode, res.Header.Get("Usher-Pass"))
	}
	res, body := get(t, c, srv.URL+"/seats", "Authorization", "Bearer stranger")
	if res.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "not_admitted") {
		t.Errorf("stranger: %d %s; want usher's 403", res.StatusCode, body)
	}
	res, _ = get(t, c, srv.URL+"/seats")
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("no pass: %d, want 403", res.StatusCode)
	}
	res, _ = get(t, c, srv.URL+"/seats", "Authorization", "Bearer down")
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("usher failing: %d, want 503 (fail closed)", res.StatusCode)
	}
	if _, ok := calls.Load("/api/v1/rooms/sale/pass"); !ok {
		t.Error("the gate never called usher's pass endpoint")
	}
	if st := o.Stats(); st.Served != 1 || st.Rejected != 3 {
		t.Errorf("served %d, rejected %d; want 1 and 3", st.Served, st.Rejected)
	}
}

func TestParseDist(t *testing.T) {
	for _, tc := range []struct {
		in         string
		mean, p95  time.Duration
		tolPercent float64
	}{
		{"constant:50ms", 50 * time.Millisecond, 50 * time.Millisecond, 0},
		{"lognormal:50ms:0.25", 51_600 * time.Microsecond, 75_370 * time.Microsecond, 0.5},
		{"exponential:50ms", 50 * time.Millisecond, 149_787 * time.Microsecond, 0.5},
		{"uniform:40ms:60ms", 50 * time.Millisecond, 59 * time.Millisecond, 0.5},
	} {
		d, err := ParseDist(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if d.String() != tc.in {
			t.Errorf("String() = %q, want %q", d.String(), tc.in)
		}
		close := func(got, want time.Duration) bool {
			return math.Abs(float64(got-want)) <= tc.tolPercent/100*float64(want)
		}
		if !close(d.Mean(), tc.mean) || !close(d.Quantile(0.95), tc.p95) {
			t.Errorf("%s: mean %v p95 %v, want %v and %v", tc.in, d.Mean(), d.Quantile(0.95), tc.mean, tc.p95)
		}
		// Samples follow the distribution: the sample mean is near the mean.
		var sum time.Duration
		for range 20_000 {
			sum += d.Sample()
		}
		if got := sum / 20_000; math.Abs(float64(got-tc.mean)) > 0.03*float64(tc.mean) {
			t.Errorf("%s: sample mean %v, want %v ± 3%%", tc.in, got, tc.mean)
		}
	}
	for _, bad := range []string{"", "constant", "constant:x", "lognormal:50ms", "lognormal:50ms:-1", "uniform:60ms:40ms", "gamma:1s"} {
		if _, err := ParseDist(bad); err == nil {
			t.Errorf("ParseDist(%q): err = nil, want an error", bad)
		}
	}
}

func TestStatsEndpoint(t *testing.T) {
	_, srv := start(t, Config{Conns: 3, Service: Constant(time.Millisecond)})
	c := client(1)
	get(t, c, srv.URL+"/seats")
	res, body := get(t, c, srv.URL+"/stats")
	var st Stats
	if err := json.Unmarshal(body, &st); err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /stats: %d %s", res.StatusCode, body)
	}
	if st.Conns != 3 || st.Workers != 200 || st.Served != 1 || st.ServiceDist != "constant:1ms" || st.ServiceP95MS != 1 {
		t.Errorf("stats %+v", st)
	}
	if res, _ := get(t, c, srv.URL+"/healthz"); res.StatusCode != 200 {
		t.Errorf("GET /healthz: %d", res.StatusCode)
	}
}
