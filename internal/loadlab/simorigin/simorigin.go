// Package simorigin is a simulated origin site: a pool of workers (Tomcat's
// 200 threads) in front of a pool of database connections (HikariCP's 10),
// each request holding a connection for a service time drawn from a
// distribution. Requests beyond the pools wait in FIFO order, so under
// overload the latency is waiting, not work: the no-queue collapse that the
// waiting room exists to prevent. Phases (Config.Phases) change the pools,
// the service time and the timeout during a run.
//
// Limits: the "work" is a timer, not CPU or I/O, so the origin models a
// pool-bound site, not a CPU-bound one; the worker queue is unbounded
// (Tomcat's accept queue and the kernel backlog are not modelled); a Timeout
// bounds only the wait for a worker and a connection, answered 503. Endpoints
// and phases: docs/loadlab.md#usher-origin-a-faithful-simulated-origin.
package simorigin

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"usher/internal/hist"
	"usher/internal/wire"
)

// Config configures an Origin. Zero values take the defaults noted.
type Config struct {
	// Workers is the worker pool (default 200, Tomcat's threads).
	Workers int
	// Conns is the connection pool (default 10, HikariCP's).
	Conns int
	// Service is the time a request holds a connection (default
	// lognormal:50ms:0.25: mean ≈ 52 ms, p95 ≈ 75 ms, as seed 002 measured).
	Service Dist
	// Timeout bounds the wait for a worker and a connection; a request that
	// waits longer is answered 503. 0 waits for ever.
	Timeout time.Duration
	// Seats is the number of seats (default 50,000, seed 002's).
	Seats int
	// Phases, if any, change the settings while the origin runs, from its
	// first pool-bound request on (the first phase's settings override the
	// ones above); the last phase's settings stay.
	Phases []Phase
	// Gate, if set, is asked about every pool-bound request while it holds a
	// worker but no connection (seed 000 checks its queue token so).
	Gate   Gate
	Logger *slog.Logger
}

// Gate decides whether a request may use the site.
type Gate interface {
	// Check lets r through (nil) or returns the error to answer, a
	// *GateError for a status. renewed is a fresh pass to hand back, if any.
	Check(ctx context.Context, r *http.Request) (renewed string, err error)
}

// GateError is a gate's refusal.
type GateError struct {
	Status int
	Body   []byte
}

func (e *GateError) Error() string { return "gate: refused with status " + strconv.Itoa(e.Status) }

// Origin is the simulated site.
type Origin struct {
	cfg      Config
	workers  *pool
	conns    *pool
	service  atomic.Pointer[Dist]
	timeout  atomic.Int64 // nanoseconds; 0 waits for ever
	start    time.Time
	phases   phaseClock
	reserved []atomic.Bool
	taken    atomic.Int64
	nextID   atomic.Int64

	inFlight, busyWorkers, busyConns   atomic.Int64
	waitingWorker, waitingConn         atomic.Int64
	peakBusyConns                      atomic.Int64
	served, rejected, timedOut, queued atomic.Int64
	connBusy                           atomic.Int64 // nanoseconds of connections held, summed
	wait, serviceHist                  *hist.Recorder
}

// New returns an Origin; it starts nothing (serve its Handler).
func New(cfg Config) *Origin {
	if cfg.Workers <= 0 {
		cfg.Workers = 200
	}
	if cfg.Conns <= 0 {
		cfg.Conns = 10
	}
	if cfg.Service == nil {
		cfg.Service = Lognormal{Median: 50 * time.Millisecond, Sigma: 0.25}
	}
	if cfg.Seats <= 0 {
		cfg.Seats = 50_000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	o := &Origin{
		cfg:         cfg,
		start:       time.Now(),
		reserved:    make([]atomic.Bool, cfg.Seats+1),
		wait:        hist.NewRecorder(),
		serviceHist: hist.NewRecorder(),
	}
	o.workers = newPool(cfg.Workers, &o.waitingWorker)
	o.conns = newPool(cfg.Conns, &o.waitingConn)
	o.service.Store(&cfg.Service)
	o.timeout.Store(int64(cfg.Timeout))
	o.phases.init(o.start, cfg.Workers, cfg.Conns)
	return o
}

// Handler serves the origin's endpoints.
func (o *Origin) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, o.Stats()) })
	mux.Handle("GET /seats", o.pooled(o.seats))
	mux.Handle("POST /reservations", o.pooled(o.reserve))
	return mux
}

// errTimeout is a wait that outlasted Config.Timeout.
var errTimeout = errors.New("timed out waiting for the pool")

// pooled runs serve holding a worker and then a connection for a sampled
// service time; serve writes the answer after the connection is released.
func (o *Origin) pooled(serve func(w http.ResponseWriter, r *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived := time.Now()
		o.phases.once.Do(o.startPhases)
		o.inFlight.Add(1)
		defer o.inFlight.Add(-1)
		var deadline <-chan time.Time
		if timeout := time.Duration(o.timeout.Load()); timeout > 0 {
			t := time.NewTimer(timeout)
			defer t.Stop()
			deadline = t.C
		}
		if _, err := o.workers.acquire(r.Context(), deadline); err != nil {
			o.fail(w, err)
			return
		}
		o.busyWorkers.Add(1)
		defer func() { o.busyWorkers.Add(-1); o.workers.release() }()

		if o.cfg.Gate != nil {
			renewed, err := o.cfg.Gate.Check(r.Context(), r)
			if err != nil {
				o.rejected.Add(1)
				var ge *GateError
				if errors.As(err, &ge) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(ge.Status)
					w.Write(ge.Body)
					return
				}
				o.cfg.Logger.Warn("gate check failed", "err", err)
				http.Error(w, "gate unavailable", http.StatusServiceUnavailable)
				return
			}
			if renewed != "" {
				w.Header().Set(wire.PassHeader, renewed)
			}
		}

		waited, err := o.conns.acquire(r.Context(), deadline)
		if err != nil {
			o.fail(w, err)
			return
		}
		held := time.Now()
		busy := o.busyConns.Add(1)
		for p := o.peakBusyConns.Load(); busy > p && !o.peakBusyConns.CompareAndSwap(p, busy); p = o.peakBusyConns.Load() {
		}
		if waited {
			o.queued.Add(1)
		}
		o.wait.Record(held.Sub(arrived))
		time.Sleep((*o.service.Load()).Sample())
		d := time.Since(held)
		o.busyConns.Add(-1)
		o.conns.release()
		o.connBusy.Add(int64(d))
		o.serviceHist.Record(d)
		o.served.Add(1)
		serve(w, r)
	})
}

func (o *Origin) fail(w http.ResponseWriter, err error) {
	if errors.Is(err, errTimeout) {
		o.timedOut.Add(1)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "busy: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	// The client went away while waiting; nobody reads the answer.
	w.WriteHeader(http.StatusServiceUnavailable)
}

// seats answers a seat lookup: how many are free and the first few.
func (o *Origin) seats(w http.ResponseWriter, r *http.Request) {
	free := make([]int, 0, 10)
	from := 1 + rand.IntN(o.cfg.Seats)
	for i := 0; i < o.cfg.Seats && len(free) < cap(free); i++ {
		id := 1 + (from+i-1)%o.cfg.Seats
		if !o.reserved[id].Load() {
			free = append(free, id)
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Available int64 `json:"available"`
		Seats     []int `json:"seats"`
	}{int64(o.cfg.Seats) - o.taken.Load(), free})
}

// reserve reserves the seat named in the body: {"seat_id": n}.
func (o *Origin) reserve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		SeatID int `json:"seat_id"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad JSON: " + err.Error()})
		return
	}
	switch {
	case req.SeatID < 1 || req.SeatID > o.cfg.Seats:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such seat"})
	case !o.reserved[req.SeatID].CompareAndSwap(false, true):
		writeJSON(w, http.StatusConflict, map[string]string{"error": "seat taken"})
	default:
		o.taken.Add(1)
		writeJSON(w, http.StatusCreated, map[string]int64{"reservation_id": o.nextID.Add(1), "seat_id": int64(req.SeatID)})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
