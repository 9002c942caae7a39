package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"usher/internal/loadlab/simorigin"
	"usher/internal/wire"
)

func TestSchedule(t *testing.T) {
	// 0 → 100/s over 2 s (100 arrivals), hold 100/s for 1 s (100 more).
	s := newSchedule(0, []Stage{{2 * time.Second, 100}, {time.Second, 100}})
	var last time.Duration
	n := 0
	for ; ; n++ {
		at, ok := s.at(float64(n + 1))
		if !ok {
			break
		}
		if at < last {
			t.Fatalf("arrival %d at %v before arrival %d at %v", n+1, at, n, last)
		}
		last = at
		// In the ramp, N(t) = 25 t²: arrival n at 0.2 √n s.
		if n+1 <= 100 {
			want := 0.2 * math.Sqrt(float64(n+1))
			if math.Abs(at.Seconds()-want) > 1e-6 {
				t.Fatalf("arrival %d at %v, want %.6fs", n+1, at, want)
			}
		}
	}
	if n != 200 {
		t.Errorf("%d arrivals, want 200", n)
	}
	if last != 3*time.Second {
		t.Errorf("last arrival at %v, want 3s", last)
	}
	// Ramp down: 100/s to 0 over 1 s is 50 arrivals.
	s = newSchedule(100, []Stage{{time.Second, 0}})
	for n = 0; ; n++ {
		if _, ok := s.at(float64(n + 1)); !ok {
			break
		}
	}
	if n != 50 {
		t.Errorf("ramp down: %d arrivals, want 50", n)
	}
}

func TestParse(t *testing.T) {
	st, err := ParseStages("30s:100, 1m:100,10s:0")
	if err != nil || len(st) != 3 || st[1] != (Stage{time.Minute, 100}) {
		t.Errorf("ParseStages = %v, %v", st, err)
	}
	for _, bad := range []string{"", "30s", "x:1", "1s:-1", "0s:5"} {
		if _, err := ParseStages(bad); err == nil {
			t.Errorf("ParseStages(%q): want an error", bad)
		}
	}
	th, err := ParseThink("500ms-1.5s")
	if err != nil || th.Min != 500*time.Millisecond || th.Max != 1500*time.Millisecond {
		t.Errorf("ParseThink = %v, %v", th, err)
	}
	for range 100 {
		if d := th.Sample(); d < th.Min || d > th.Max {
			t.Fatalf("Sample %v outside %v", d, th)
		}
	}
	for _, bad := range []string{"x", "2s-1s", "-1s"} {
		if _, err := ParseThink(bad); err == nil {
			t.Errorf("ParseThink(%q): want an error", bad)
		}
	}
}

func TestInversions(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, int64(ms)*int64(time.Millisecond)) }
	v := func(send, recv, lastWaiting, admitted int) visit {
		out := visit{enterSend: at(send), enterRecv: at(recv)}
		if lastWaiting >= 0 {
			out.lastWaiting = at(lastWaiting)
		}
		if admitted >= 0 {
			out.admittedAt = at(admitted)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		visits []visit
		want   int64
	}{
		{"FIFO", []visit{v(0, 1, 50, 60), v(2, 3, 70, 80)}, 0},
		{"later visitor admitted while the earlier still waits", []visit{v(0, 1, 90, 100), v(2, 3, 50, 60)}, 1},
		{"overlapping entries are not ordered", []visit{v(0, 5, 90, 100), v(2, 3, 50, 60)}, 0},
		{"waiting poll sent before the other's admission arrived", []visit{v(0, 1, 55, 100), v(2, 3, 50, 60)}, 0},
		{"abandoned while a later one got in", []visit{v(0, 1, 90, -1), v(2, 3, -1, 60)}, 1},
	} {
		if got := inversions(tc.visits); got != tc.want {
			t.Errorf("%s: %d inversions, want %d", tc.name, got, tc.want)
		}
	}
}

// checkCalls asserts a Calls' invariants.
func checkCalls(t *testing.T, name string, c Calls) {
	t.Helper()
	_, errs := sumErrors(c.Errors)
	if c.Successes+errs != c.Requests {
		t.Errorf("%s: successes %d + errors %d != requests %d", name, c.Successes, errs, c.Requests)
	}
	l := c.Latency
	if uint64(c.Successes) != l.Count {
		t.Errorf("%s: %d successes but %d latencies", name, c.Successes, l.Count)
	}
	if !(l.Min <= l.P50 && l.P50 <= l.P90 && l.P90 <= l.P95 && l.P95 <= l.P99 && l.P99 <= l.Max && l.Min <= l.Avg && l.Avg <= l.Max) {
		t.Errorf("%s: latency figures out of order: %+v", name, l)
	}
}

func TestDirectClosed(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1)%10 == 0 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	var progress bytes.Buffer
	rep, err := Run(context.Background(), Config{
		Scenario: Direct, Target: Target{URL: srv.URL}, Users: 4, Iterations: 50, Duration: 10 * time.Second,
		Tick: 50 * time.Millisecond, Progress: &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkCalls(t, "origin", rep.Origin.Calls)
	if rep.Origin.Requests != 200 || rep.Origin.Requests != hits.Load() {
		t.Errorf("requests %d, server saw %d, want 200 (4 users × 50)", rep.Origin.Requests, hits.Load())
	}
	if rep.Origin.Errors["http 503"] != 20 {
		t.Errorf("errors %v, want http 503: 20", rep.Origin.Errors)
	}
	if rep.Queue != nil || rep.Visits != nil {
		t.Error("direct scenario reports queue figures")
	}
	if len(rep.Timeline) == 0 || !strings.Contains(progress.String(), "direct [") {
		t.Errorf("timeline %d ticks, progress %q", len(rep.Timeline), progress.String())
	}
}

// TestOpenModelHasNoCoordinatedOmission sends 100 arrivals/s to a server
// that serves one request at a time in 20 ms (50/s): the backlog grows, and
// latency measured from each scheduled time must show it, although every
// request takes only 20 ms once sent.
func TestOpenModelHasNoCoordinatedOmission(t *testing.T) {
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		time.Sleep(20 * time.Millisecond)
		mu.Unlock()
	}))
	defer srv.Close()
	rep, err := Run(context.Background(), Config{
		Scenario: Direct, Target: Target{URL: srv.URL},
		StartRate: 100, Stages: []Stage{{time.Second, 100}}, Grace: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkCalls(t, "origin", rep.Origin.Calls)
	if rep.Origin.Requests+rep.Interrupted+rep.Dropped != 100 {
		t.Errorf("requests %d + interrupted %d + dropped %d, want 100 arrivals", rep.Origin.Requests, rep.Interrupted, rep.Dropped)
	}
	// 100 requests at 50/s end ~2 s after the first; the last was due at 1 s.
	if rep.Origin.Latency.Max < 500 || rep.Origin.Latency.P95 < 10*20 {
		t.Errorf("latency %+v: want the backlog (max ~1 s, p95 ≫ 20 ms)", rep.Origin.Latency)
	}
}

// fakeRoom is a stand-in for usher's visitor API: FIFO (or, to test the
// detector, LIFO) admission at rate per second, passes "p<seq>". Admission
// starts once gather visitors have entered, so that the order among them
// is the room's choice whatever the machine's load.
type fakeRoom struct {
	mu     sync.Mutex
	gather int64
	start  time.Time
	rate   float64
	lifo   bool
	// jumpy puts every other waiting answer 5 places further back.
	jumpy    bool
	answers  int64
	next     int64
	waiting  map[int64]bool
	admitted map[int64]bool
}

func (f *fakeRoom) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.start.IsZero() && f.next >= f.gather {
		f.start = time.Now()
	}
	for due := int(f.rate * time.Since(f.start).Seconds()); !f.start.IsZero() && len(f.admitted) < due && len(f.waiting) > 0; {
		var pick int64 = -1
		for s := range f.waiting {
			if pick < 0 || (s < pick) != f.lifo {
				pick = s
			}
		}
		delete(f.waiting, pick)
		f.admitted[pick] = true
	}
	answer := func(seq int64, ticket string) {
		e := wire.Entry{Ticket: ticket, State: wire.StateWaiting, PollAfterMS: 20}
		if f.admitted[seq] {
			e.State, e.Pass = wire.StateAdmitted, "p"+strconv.FormatInt(seq, 10)
		} else {
			for s := range f.waiting {
				if s <= seq {
					e.Position++
				}
			}
			if f.answers++; f.jumpy && f.answers%2 == 0 {
				e.Position += 5
			}
			e.ETASeconds = int64(float64(e.Position) / f.rate)
			e.ETARangeSeconds = [2]int64{0, 3600}
		}
		json.NewEncoder(w).Encode(e)
	}
	seq, _ := strconv.ParseInt(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer t"), 10, 64)
	switch r.Method {
	case http.MethodPost:
		f.next++
		f.waiting[f.next] = true
		w.WriteHeader(http.StatusCreated)
		answer(f.next, "t"+strconv.FormatInt(f.next, 10))
	case http.MethodGet:
		answer(seq, "")
	case http.MethodDelete:
		delete(f.admitted, seq)
		w.WriteHeader(http.StatusNoContent)
	}
}

func runQueued(t *testing.T, lifo bool) (*Report, *simorigin.Origin) {
	t.Helper()
	return runQueuedGiveUp(t, lifo, 0)
}

func runQueuedGiveUp(t *testing.T, lifo bool, giveUp float64) (*Report, *simorigin.Origin) {
	t.Helper()
	return runQueuedRoom(t, &fakeRoom{gather: 30, rate: 40, lifo: lifo}, giveUp)
}

func runQueuedRoom(t *testing.T, room *fakeRoom, giveUp float64) (*Report, *simorigin.Origin) {
	t.Helper()
	room.waiting, room.admitted = map[int64]bool{}, map[int64]bool{}
	usher := httptest.NewServer(room)
	t.Cleanup(usher.Close)
	o := simorigin.New(simorigin.Config{Conns: 2, Service: simorigin.Constant(2 * time.Millisecond)})
	mux := http.NewServeMux()
	mux.Handle("/", o.Handler())
	gated := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/seats" && !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer p") {
			http.Error(w, "no pass", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	})
	origin := httptest.NewServer(gated)
	t.Cleanup(origin.Close)
	rep, err := Run(context.Background(), Config{
		Scenario: Queued, Target: Target{URL: origin.URL + "/seats"}, Usher: usher.URL, Room: "sale",
		Users: 30, SpawnRate: 200, Iterations: 1, Calls: 3, Think: Think{Min: time.Millisecond, Max: 5 * time.Millisecond}, Leave: true,
		Duration: 15 * time.Second, Tick: 100 * time.Millisecond, OriginStats: origin.URL + "/stats", GiveUp: giveUp,
	})
	if err != nil {
		t.Fatal(err)
	}
	return rep, o
}

func TestQueued(t *testing.T) {
	rep, o := runQueued(t, false)
	checkCalls(t, "origin", rep.Origin.Calls)
	checkCalls(t, "queue", *rep.Queue)
	v := rep.Visits
	_, failed := sumErrors(v.Failed)
	if v.Started != 30 || v.Admitted != 30 || v.Completed != 30 || v.CalledOrigin != v.Admitted || v.CutOff != 0 || v.Abandoned != 0 || failed != 0 {
		t.Errorf("visits %+v: want all 30 admitted, each calling the origin", v)
	}
	if v.Started != v.Admitted+v.Abandoned+failed || v.Admitted != v.Completed+v.CutOff {
		t.Errorf("visits %+v do not add up", v)
	}
	if rep.Origin.Requests != 90 || rep.Origin.Successes != 90 || o.Stats().Served != 90 {
		t.Errorf("origin requests %d successes %d served %d, want 30 × 3 = 90", rep.Origin.Requests, rep.Origin.Successes, o.Stats().Served)
	}
	if *rep.Inversions != 0 {
		t.Errorf("%d admission-order inversions from a FIFO room, want 0", *rep.Inversions)
	}
	if rep.TimeInQueue.Count != 30 || rep.TimeInQueue.P50 > rep.TimeInQueue.Max {
		t.Errorf("time in queue %+v", rep.TimeInQueue)
	}
	if p := rep.PollLatency; p == nil || int64(p.Count) != v.Polls || p.P99 > p.Max {
		t.Errorf("poll latency %+v, want one per poll (%d)", p, v.Polls)
	}
	if rep.ETA == nil || rep.ETA.Count == 0 || rep.ETA.Ranged != rep.ETA.Count || rep.ETA.Coverage == nil || *rep.ETA.Coverage != 1 {
		t.Errorf("ETA error %+v, want measured, every wait inside its hour-long range", rep.ETA)
	}
	if rep.Origin.Utilization == nil || *rep.Origin.Utilization <= 0 {
		t.Errorf("origin utilisation %v, want read from /stats", rep.Origin.Utilization)
	}
	// Queue calls: 30 entries + polls + 30 leaves.
	if rep.Queue.Requests < 60+30 || v.Polls != rep.Queue.Requests-60 || v.PollsPerAdmitted != float64(v.Polls)/30 {
		t.Errorf("%d queue calls, %d polls (%v per admitted visitor), want entries, polls and leaves", rep.Queue.Requests, v.Polls, v.PollsPerAdmitted)
	}
	if v.Rises != 0 || v.RoseVisitors != 0 {
		t.Errorf("%d position rises in %d visitors from a FIFO room, want 0", v.Rises, v.RoseVisitors)
	}

	var text, svg, js bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Scenario queued", "origin", "queue calls", "time in queue", "admission-order inversions: 0", "origin utilisation", "per admitted visitor); position rises: 0 in 0 visitors"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	if err := WriteSVG(&svg, []*Report{rep, rep}); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(svg.Bytes(), new(struct{ XMLName xml.Name })); err != nil || !strings.Contains(svg.String(), "<polyline") {
		t.Errorf("SVG is not well-formed XML with lines: %v", err)
	}
	if err := json.NewEncoder(&js).Encode(rep); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Origin.Requests != 90 || len(back.Timeline) != len(rep.Timeline) {
		t.Errorf("JSON round trip: %v, %+v", err, back.Origin)
	}
}

func TestQueuedDetectsInversions(t *testing.T) {
	rep, _ := runQueued(t, true)
	if *rep.Inversions == 0 {
		t.Error("a LIFO room: 0 admission-order inversions found, want some")
	}
}

func TestQueuedCountsRises(t *testing.T) {
	rep, _ := runQueuedRoom(t, &fakeRoom{gather: 30, rate: 40, jumpy: true}, 0)
	if rep.Visits.Rises == 0 || rep.Visits.RoseVisitors == 0 || rep.Visits.RoseVisitors > rep.Visits.Rises {
		t.Errorf("a room that moves visitors back: %d position rises in %d visitors, want some", rep.Visits.Rises, rep.Visits.RoseVisitors)
	}
}

func TestInvalidConfig(t *testing.T) {
	for name, c := range map[string]Config{
		"no target":      {Scenario: Direct, Users: 1, Duration: time.Second},
		"bad scenario":   {Scenario: "both", Target: Target{URL: "http://x"}, Users: 1, Duration: time.Second},
		"no users":       {Scenario: Direct, Target: Target{URL: "http://x"}, Duration: time.Second},
		"users + stages": {Scenario: Direct, Target: Target{URL: "http://x"}, Users: 1, Stages: []Stage{{time.Second, 1}}},
		"queued no room": {Scenario: Queued, Target: Target{URL: "http://x"}, Usher: "http://u", Users: 1, Duration: time.Second},
		"endless visits": {Scenario: Queued, Target: Target{URL: "http://x"}, Usher: "http://u", Room: "r", Users: 1, Iterations: 1, Duration: time.Second},
	} {
		if _, err := Run(context.Background(), c); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

// With GiveUp 1, every visitor who waits at entry gives up silently: none
// of them is admitted, and the journeys still add up.
func TestQueuedGiveUp(t *testing.T) {
	rep, _ := runQueuedGiveUp(t, false, 1)
	v := rep.Visits
	_, failed := sumErrors(v.Failed)
	if v.GaveUp == 0 || v.Started != v.Admitted+v.Abandoned+v.GaveUp+failed || v.Admitted != v.Passthrough {
		t.Errorf("visits %+v: want those who waited to give up, the rest admitted at entry", v)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil || !strings.Contains(text.String(), "gave up") {
		t.Errorf("text report without the visitors who gave up: %v\n%s", err, text.String())
	}
	if err := (Config{Scenario: Queued, Target: Target{URL: "http://x/"}, Usher: "http://x", Room: "r", Users: 1, Duration: time.Second, GiveUp: 1.5}).validate(); err == nil {
		t.Error("give-up 1.5: no error")
	}
}

// TestETAErrorRelativeAndCoverage: relative errors and range coverage of
// ten visitors who waited 10 s each, told 10 s … 19 s, the range [8, 12].
func TestETAErrorRelativeAndCoverage(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var visits []visit
	for i := range 10 {
		visits = append(visits, visit{
			enterRecv: t0, admittedAt: t0.Add(10 * time.Second), waitedAtEntry: true,
			etaSeconds: int64(10 + i), etaRange: [2]int64{int64(8 + i), int64(12 + i)},
		})
	}
	visits = append(visits,
		visit{enterRecv: t0, admittedAt: t0.Add(time.Second)},                                           // passthrough: not counted
		visit{enterRecv: t0, waitedAtEntry: true, etaSeconds: 5},                                        // never admitted: not counted
		visit{enterRecv: t0, admittedAt: t0.Add(10 * time.Second), waitedAtEntry: true, etaSeconds: 10}, // no range
	)
	e := etaError(visits)
	if e.Count != 11 || e.Ranged != 10 {
		t.Fatalf("count %d, ranged %d; want 11 and 10", e.Count, e.Ranged)
	}
	// |error| ÷ 10 s: 0, 0, 0.1, …, 0.9 → p50 (6th of 11) 0.4, p90 (10th) 0.8.
	if math.Abs(e.P50Relative-0.4) > 1e-9 || math.Abs(e.P90Relative-0.8) > 1e-9 {
		t.Errorf("relative error p50 %v, p90 %v; want 0.4 and 0.8", e.P50Relative, e.P90Relative)
	}
	// Inside [8+i, 12+i] for i = 0, 1, 2.
	if e.Coverage == nil || math.Abs(*e.Coverage-0.3) > 1e-9 || e.MeanRangeSeconds != 4 {
		t.Errorf("coverage %v of ranges %v s wide, want 0.3 of 4 s", e.Coverage, e.MeanRangeSeconds)
	}
	if e := etaError(visits[len(visits)-1:]); e.Coverage != nil || e.Ranged != 0 {
		t.Errorf("without ranges: coverage %v, ranged %d; want none", e.Coverage, e.Ranged)
	}
}

// TestPhases: a run against an origin with phases reports each phase: its
// settings, pool size, p95 against the unloaded p95, utilisation.
func TestPhases(t *testing.T) {
	phases, err := simorigin.ParsePhases("400ms:conns=4,400ms:conns=1")
	if err != nil {
		t.Fatal(err)
	}
	o := simorigin.New(simorigin.Config{Conns: 4, Service: simorigin.Constant(2 * time.Millisecond), Phases: phases})
	origin := httptest.NewServer(o.Handler())
	t.Cleanup(origin.Close)
	rep, err := Run(context.Background(), Config{
		Scenario: Direct, Target: Target{URL: origin.URL + "/seats"}, Users: 4,
		Duration: 1200 * time.Millisecond, Tick: 50 * time.Millisecond, OriginStats: origin.URL + "/stats",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Phases) != 2 {
		t.Fatalf("phases %+v, want 2", rep.Phases)
	}
	for i, want := range []struct {
		settings string
		conns    int
	}{{"400ms:conns=4", 4}, {"400ms:conns=1", 1}} {
		p := rep.Phases[i]
		if p.Phase != i+1 || p.Settings != want.settings || p.Conns != want.conns || p.UnloadedP95MS != 2 || p.Seconds <= 0 ||
			p.Utilization <= 0 || p.OriginP95MS < 2 || p.P95Ratio != p.OriginP95MS/2 {
			t.Errorf("phase %d = %+v, want settings %s, %d conns, unloaded p95 2 ms", i+1, p, want.settings, want.conns)
		}
	}
	var sb strings.Builder
	if err := rep.WriteText(&sb); err != nil || !strings.Contains(sb.String(), "origin phases") {
		t.Errorf("text report lacks the phase table:\n%s", sb.String())
	}
}

// TestQueuedSoldOut: a sold-out room's 409 (room_closed or sold_out) is
// usher's right answer to a newcomer, not a failed call.
func TestQueuedSoldOut(t *testing.T) {
	for _, code := range []string{"room_closed", "sold_out"} {
		usher := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprintf(w, `{"error":{"code":%q,"message":"gone"}}`, code)
		}))
		rep, err := Run(context.Background(), Config{
			Scenario: Queued, Target: Target{URL: usher.URL + "/seats"}, Usher: usher.URL, Room: "sale",
			Users: 5, SpawnRate: 100, Iterations: 1, Calls: 1, Duration: 5 * time.Second, Tick: 100 * time.Millisecond,
		})
		usher.Close()
		if err != nil {
			t.Fatal(err)
		}
		if n, failed := sumErrors(rep.Visits.Failed); rep.Queue.Successes != 5 || n != 1 || failed != 5 || rep.Visits.Failed["entry refused: room closed or sold out"] != 5 {
			t.Errorf("%s: queue calls %+v, visits failed %v; want 5 refused entries counted as right answers", code, rep.Queue, rep.Visits.Failed)
		}
	}
}
