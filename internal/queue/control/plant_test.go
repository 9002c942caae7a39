package control

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"time"
)

// plant is a simulated origin behind a waiting room: a discrete-event
// simulation, deterministic (seeded random numbers, no wall clock), of what
// usher origin and usher loadtest's queued scenario do. An admitted
// visitor notices its admission after a delay drawn uniformly from
// [0, 2 × delay] (the poll that picks up the pass), then makes Calls
// requests back to back. The origin serves them on a pool of conns
// connections in FIFO order, each for a service time drawn from a
// lognormal (median 50 ms, σ 0.25: usher origin's default), so latency
// is the wait for a connection plus the service time, and the pool's size
// may change between phases.
type plant struct {
	rng     *rand.Rand
	conns   int
	calls   int
	delay   time.Duration
	now     time.Duration // since the start
	events  eventHeap
	busy    int
	queue   []time.Duration // arrival times of waiting requests, FIFO
	lefts   []int           // and what their visitors still have to call
	sig     *Signals        // where completed requests are recorded
	busyInt float64         // connection-seconds held, summed
	capInt  float64         // connection-seconds offered, summed
}

// plantSeed seeds the plant's random numbers.
var plantSeed uint64 = 1

const (
	tick   = 100 * time.Millisecond
	median = 50 * time.Millisecond
	sigma  = 0.25
)

var meanService = time.Duration(float64(median) * math.Exp(sigma*sigma/2))

// unloadedP95 is the plant's p95 with no wait: the service time's.
var unloadedP95 = time.Duration(float64(median) * math.Exp(sigma*1.6449))

func newPlant(conns int, delay time.Duration) *plant {
	return &plant{rng: rand.New(rand.NewPCG(plantSeed, 2)), conns: conns, calls: 10, delay: delay}
}

type event struct {
	at      time.Duration
	arrival time.Duration // done: when the request arrived
	left    int           // calls the visitor still has to make after this one
	done    bool          // a request's completion, else a visitor's first call
}

type eventHeap []event

func (h eventHeap) Len() int           { return len(h) }
func (h eventHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h eventHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)        { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// admit lets n visitors in now.
func (p *plant) admit(n int) {
	for range n {
		d := time.Duration(p.rng.Float64() * 2 * float64(p.delay))
		heap.Push(&p.events, event{at: p.now + d, left: p.calls - 1})
	}
}

// run advances the plant by d, recording completed requests into sig.
func (p *plant) run(d time.Duration, sig *Signals) {
	p.sig = sig
	end := p.now + d
	for len(p.events) > 0 && p.events[0].at <= end {
		e := heap.Pop(&p.events).(event)
		p.account(e.at)
		if e.done {
			p.sig.Add(e.at-e.arrival, false)
			p.busy--
			if e.left > 0 { // the visitor's next call, at once
				p.arrive(e.at, e.left-1)
			}
			p.start()
			continue
		}
		p.arrive(e.at, e.left)
	}
	p.account(end)
}

// arrive queues a request arriving at t; left is what its visitor still
// has to call after it.
func (p *plant) arrive(t time.Duration, left int) {
	p.queue = append(p.queue, t)
	p.lefts = append(p.lefts, left)
	p.start()
}

// start gives free connections to waiting requests.
func (p *plant) start() {
	for p.busy < p.conns && len(p.queue) > 0 {
		arrival, left := p.queue[0], p.lefts[0]
		p.queue, p.lefts = p.queue[1:], p.lefts[1:]
		p.busy++
		svc := time.Duration(float64(median) * math.Exp(sigma*p.rng.NormFloat64()))
		heap.Push(&p.events, event{at: p.now + svc, arrival: arrival, left: left, done: true})
	}
}

// account moves the clock to t, summing the pool's use.
func (p *plant) account(t time.Duration) {
	if dt := (t - p.now).Seconds(); dt > 0 {
		p.busyInt += float64(min(p.busy, p.conns)) * dt
		p.capInt += float64(p.conns) * dt
	}
	p.now = max(p.now, t)
}

// resize sets the pool's size.
func (p *plant) resize(conns int) {
	p.conns = conns
	p.start()
}

// utilisation returns the pool's utilisation since the last call.
func (p *plant) utilisation() float64 {
	u := p.busyInt / p.capInt
	p.busyInt, p.capInt = 0, 0
	return u
}
