package capacity_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"usher/internal/capacity"
	"usher/internal/queue"
	"usher/internal/queue/forecast"
	"usher/internal/queue/memqueue"
)

// simResult is what a simulated sale counted, second by second from the
// opening.
type simResult struct {
	polls, storePolls, enters []float64 // per second
	waiting                   []int64   // the line at the end of each second
	maxWaiting, maxActive     int64
	// heapPerWaiting is the Go heap the memory store grew by, per waiting
	// visitor, at the end of the arrivals (after a collection).
	heapPerWaiting float64
}

// simulate runs a sale of n visitors arriving evenly over `over` into a
// real memqueue room with settings s, on a virtual clock with 1 ms ticks,
// until `until` after the opening. Every visitor polls as usher tells it
// to: the interval of the view's pacing (View.PollBase) with its jitter
// (forecast.Jitter), an entry's first at a random point of it
// (forecast.First), from a seeded generator; a poll behind the near zone
// is answered from the view (refreshed every 100 ms, as usher's Run does),
// one within it (View.Near) asks the store, as Queue.Status does. The
// room admits every s.Interval (the scheduler's step). Nothing reads the
// wall clock, so a seed gives the same counts every time.
func simulate(t testing.TB, n int64, over, until time.Duration, s queue.Settings, seed uint64) simResult {
	t.Helper()
	ctx := context.Background()
	const tick = time.Millisecond
	t0 := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("v%015d", i)
	}
	seqs := make([]int64, n)
	// A calendar of polls: ring[k] holds the visitors polling at tick k
	// modulo the ring (longer than the longest interval, MaxPoll + 20 %).
	ring := make([][]int32, 1<<18)
	secs := int(until / time.Second)
	r := simResult{polls: make([]float64, secs), storePolls: make([]float64, secs), enters: make([]float64, secs), waiting: make([]int64, secs)}

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapBefore := ms.HeapAlloc

	store := memqueue.New()
	if _, err := store.PutRoom(ctx, "sim", s, queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	var v queue.View
	refresh := func(now time.Time) {
		st, err := store.Stats(ctx, "sim", now)
		if err != nil {
			t.Fatal(err)
		}
		v = queue.View{Stats: st, Rates: forecast.Rates{Rate: s.AdmitRate}, At: now}
		r.maxWaiting, r.maxActive = max(r.maxWaiting, st.Waiting), max(r.maxActive, st.Active)
	}
	schedule := func(k int64, i int32, position int64, first bool) {
		after := forecast.Jitter(v.PollBase(position), rng.Float64())
		if first {
			after = forecast.First(after, rng.Float64())
		}
		at := k + int64((after+tick/2)/tick) // to the nearest tick
		ring[at%int64(len(ring))] = append(ring[at%int64(len(ring))], i)
	}
	refresh(t0)
	next := int64(0) // the next visitor to arrive
	step, refreshEvery := int64(s.Interval/tick), int64(100*time.Millisecond/tick)
	peakTick := int64(over / tick)
	for k := int64(0); k < int64(until/tick); k++ {
		now := t0.Add(time.Duration(k) * tick)
		sec := int(k / int64(time.Second/tick))
		if k%step == 0 {
			if _, err := store.Admit(ctx, "sim", now); err != nil {
				t.Fatal(err)
			}
		}
		if k%refreshEvery == 0 {
			refresh(now)
		}
		for ; next < n && time.Duration(next)*over/time.Duration(n) <= time.Duration(k)*tick; next++ {
			e, _, err := store.Enter(ctx, "sim", ids[next], now, queue.EnterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			r.enters[sec]++
			if e.Status == queue.Waiting {
				seqs[next] = e.Seq
				schedule(k, int32(next), e.Position, true)
			}
		}
		slot := &ring[k%int64(len(ring))]
		due := *slot
		*slot = nil
		for _, i := range due {
			r.polls[sec]++
			seq := seqs[i]
			if pos := seq - v.HeadSeq + 1; seq >= v.HeadSeq && seq <= v.LastSeq && pos > v.Near() {
				schedule(k, i, pos, false) // answered from the view
				continue
			}
			r.storePolls[sec]++
			e, err := store.Status(ctx, "sim", ids[i], now)
			if err != nil {
				t.Fatal(err)
			}
			if e.Status == queue.Waiting {
				schedule(k, i, max(e.Position, 1), false)
			}
		}
		if due != nil && len(*slot) == 0 {
			*slot = due[:0] // reuse the slice
		}
		if (k+1)%int64(time.Second/tick) == 0 {
			r.waiting[sec] = v.Waiting
		}
		if k == peakTick {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			if v.Waiting > 0 {
				r.heapPerWaiting = (float64(ms.HeapAlloc) - float64(heapBefore)) / float64(v.Waiting)
			}
		}
	}
	return r
}

// TestSimulationChecksThePlan runs simulated sales at two rates and checks
// the scale section's arithmetic against what the pacing really produced:
// the polls a second, second by second, against PollRate over the line the
// store held that second; the longest line against PeakWaiting; and the
// polls a second around the peak against the plan's. Set
// USHER_SIM_VISITORS (default 100,000) for a bigger sale.
func TestSimulationChecksThePlan(t *testing.T) {
	t.Parallel()
	n := int64(100_000)
	if s := os.Getenv("USHER_SIM_VISITORS"); s != "" {
		var err error
		if n, err = strconv.ParseInt(s, 10, 64); err != nil || n < 10_000 {
			t.Fatalf("USHER_SIM_VISITORS=%q: want a number, at least 10000", s)
		}
	}
	for _, tc := range []struct {
		name    string
		pool    int
		service time.Duration
		over    time.Duration
	}{
		{"seed 002, 90 per second", 10, 76 * time.Millisecond, 30 * time.Second},
		{"1,000 per second", 100, 70 * time.Millisecond, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := capacity.DefaultInput()
			in.Pool, in.ServiceTime = tc.pool, tc.service
			p, err := capacity.Make(in)
			if err != nil {
				t.Fatal(err)
			}
			sc, err := capacity.MakeScale(p, capacity.ScaleInput{Visitors: n, ArriveOver: tc.over, Units: capacity.DefaultUnits()})
			if err != nil {
				t.Fatal(err)
			}
			s := p.RoomSettings()
			end := int(tc.over / time.Second)
			// A newcomer's first poll comes one interval after its entry,
			// up to the longest base in the line + 20 %: from then on every
			// visitor's polls are steady.
			peak := capacity.LineView(s, sc.PeakWaiting)
			longest := peak.PollBase(sc.PeakWaiting)
			settle := end + int((longest*6/5)/time.Second) + 10
			r := simulate(t, n, tc.over, time.Duration(settle+30)*time.Second, s, 42)

			// compare sums the formula over the line the store held each
			// second, with the admitted visitors' last polls.
			compare := func(from, to int) (polls, store float64) {
				var sim, formula, simStore, formulaStore float64
				for sec := from; sec < to; sec++ {
					all, st := capacity.PollRate(capacity.LineView(s, r.waiting[sec]), r.waiting[sec])
					sim, formula = sim+r.polls[sec], formula+all+s.AdmitRate
					simStore, formulaStore = simStore+r.storePolls[sec], formulaStore+st+s.AdmitRate
				}
				t.Logf("seconds %d–%d: polls simulated ÷ formula %.0f ÷ %.0f = %.4f; store polls %.0f ÷ %.0f = %.4f",
					from, to, sim, formula, sim/formula, simStore, formulaStore, simStore/formulaStore)
				return sim / formula, simStore / formulaStore
			}
			t.Logf("%d visitors over %v at %v/s, arriving at %.0f/s", n, tc.over, s.AdmitRate, sc.EnterRate)
			// While they arrive (after the first 10 s, in which the line is
			// young): an entry's first poll comes at a random point of its
			// interval, so newcomers poll at the steady rate at once.
			during, duringStore := compare(10, end)
			// Once every visitor polls steadily.
			after, afterStore := compare(settle, settle+30)
			// The formula is the steady sum, so it may only overstate: by up
			// to 7 % where a visitor's interval is a tenth of its ETA (it
			// keeps the interval chosen where its ETA was up to 12 % longer,
			// jitter included: about 5 % on average).
			for _, c := range []struct {
				what   string
				got    float64
				lo, hi float64
			}{{"polls while arriving", during, 0.93, 1.01}, {"store polls while arriving", duringStore, 0.97, 1.01},
				{"steady polls", after, 0.93, 1.01}, {"steady store polls", afterStore, 0.97, 1.01}} {
				if c.got < c.lo || c.got > c.hi {
					t.Errorf("%s: simulated ÷ formula = %.4f, want %.2f to %.2f", c.what, c.got, c.lo, c.hi)
				}
			}
			peakSim := 0.0
			for _, polls := range r.polls {
				peakSim = max(peakSim, polls)
			}
			t.Logf("peak line simulated %d, plan %d; busiest second simulated %.0f polls, plan %.0f/s (%.4f); enters/s simulated %.0f, plan %.0f; memqueue heap %.1f B per waiting visitor",
				r.maxWaiting, sc.PeakWaiting, peakSim, sc.Polls, peakSim/sc.Polls, r.enters[end-1], sc.EnterRate, r.heapPerWaiting)
			if d := math.Abs(float64(r.maxWaiting-sc.PeakWaiting)) / float64(sc.PeakWaiting); d > 0.01 {
				t.Errorf("longest line simulated %d, plan %d: %.2f %% apart, want within 1 %%", r.maxWaiting, sc.PeakWaiting, 100*d)
			}
			// The plan's polls are the steady figure at the peak line: the
			// busiest second of the sale is within 5 % of it (the first
			// polls' random phase keeps the abrupt start and end of the
			// arrivals from ringing).
			if d := peakSim/sc.Polls - 1; math.Abs(d) > 0.05 {
				t.Errorf("busiest second simulated %.0f polls, plan %.0f/s: %+.2f %%, want within ±5 %%", peakSim, sc.Polls, 100*d)
			}
			if r.maxActive > s.MaxActive {
				t.Errorf("active reached %d, above the cap %d", r.maxActive, s.MaxActive)
			}
		})
	}
}
