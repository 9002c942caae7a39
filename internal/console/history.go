package console

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"usher/internal/queue"
)

// History limits: one sample a second for an hour, for at most
// MaxHistoryRooms rooms (about 200 KB a room). Rooms take a ring as they
// are seen; once every ring is taken, a room someone waits in takes the
// ring of the room that has been quiet (nobody waiting or active) for
// longest, so that idle rooms never keep a busy one off the charts.
const (
	HistoryLen      = 3600
	MaxHistoryRooms = 256
)

// sample is one second of one room. Counters and rates are float32 (exact
// for counts below 16 million); the ETA error's running sum and count are
// kept whole so that a window's mean is a difference of two samples.
type sample struct {
	at                                  int64 // unix seconds
	waiting, active                     float32
	rate, measured, current, leave, p95 float32 // p95: NaN when unknown
	etaSum, etaCount                    float64
}

func (s sample) quiet() bool { return s.waiting == 0 && s.active == 0 }

// ring is one room's last HistoryLen samples.
type ring struct {
	s      [HistoryLen]sample
	next   int   // where the next sample goes
	n      int   // samples held
	busyAt int64 // unix seconds of the last sample that was not quiet
}

func (r *ring) add(s sample) {
	r.s[r.next] = s
	r.next = (r.next + 1) % HistoryLen
	r.n = min(r.n+1, HistoryLen)
	if !s.quiet() {
		r.busyAt = s.at
	}
}

// at returns the i-th sample from the oldest.
func (r *ring) at(i int) sample { return r.s[(r.next-r.n+i+HistoryLen)%HistoryLen] }

// history keeps the rings of this instance's rooms.
type history struct {
	mu    sync.Mutex
	rooms map[string]*ring
}

func newHistory() *history { return &history{rooms: make(map[string]*ring)} }

// evictQuiet drops the ring of the room quiet for longest, if a ring's
// last sample is quiet; it reports whether it dropped one.
func (h *history) evictQuiet() bool {
	var (
		oldest string
		at     int64
	)
	for room, r := range h.rooms {
		if r.n > 0 && r.at(r.n-1).quiet() && (oldest == "" || r.busyAt < at) {
			oldest, at = room, r.busyAt
		}
	}
	if oldest == "" {
		return false
	}
	delete(h.rooms, oldest)
	return true
}

// Run samples every room once a second until ctx ends; then it ends the
// live streams. Call it once.
func (k *Console) Run(ctx context.Context) error {
	defer close(k.stopped)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		k.sampleOnce()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// sampleOnce adds one sample to each ring from the room views (and the ETA
// error histogram when a Gatherer is set), dropping the rings of rooms gone
// from the views, then gives rings to rooms someone waits in, then, while
// rings are left, to the other rooms in order. Once every ring is taken it
// costs the rings and the rooms someone waits in, not the rooms held.
func (k *Console) sampleOnce() {
	now := k.c.Now()
	eta := k.etaTotals()
	h := k.history
	h.mu.Lock()
	defer h.mu.Unlock()
	for room, r := range h.rooms {
		v, ok := k.c.Queue.View(room)
		if !ok {
			delete(h.rooms, room)
			continue
		}
		r.add(sampleOf(v, now, eta[room]))
	}
	// start gives room a ring and its first sample, unless it has a ring or
	// no view; it reports false when no ring is left.
	start := func(room string) bool {
		if h.rooms[room] != nil {
			return true
		}
		if len(h.rooms) >= MaxHistoryRooms && !h.evictQuiet() {
			return false
		}
		if v, ok := k.c.Queue.View(room); ok {
			r := new(ring)
			r.add(sampleOf(v, now, eta[room]))
			h.rooms[room] = r
		}
		return true
	}
	for _, room := range k.c.Queue.WaitingRooms() {
		if !start(room) {
			break
		}
	}
	if len(h.rooms) < MaxHistoryRooms {
		rooms, _ := k.c.Queue.ViewRooms()
		for _, room := range rooms {
			if len(h.rooms) >= MaxHistoryRooms {
				break
			}
			start(room)
		}
	}
}

func sampleOf(v queue.View, now time.Time, eta [2]float64) sample {
	s := v.Settings
	p95 := float32(math.NaN())
	if s.Admission == queue.Adaptive && v.Control.P95 > 0 {
		p95 = float32(ms(v.Control.P95))
	}
	return sample{
		at: now.Unix(), waiting: float32(v.Waiting), active: float32(v.Active),
		rate: float32(s.AdmitRate), measured: float32(v.Admitted()), current: float32(s.CurrentRate(v.Control)),
		leave: float32(leaveRate(v)), p95: p95, etaSum: eta[0], etaCount: eta[1],
	}
}

// etaTotals reads usher_eta_error_ratio's running sum and count by room.
func (k *Console) etaTotals() map[string][2]float64 {
	if k.c.Gatherer == nil {
		return nil
	}
	mfs, err := k.c.Gatherer.Gather()
	if err != nil {
		return nil
	}
	out := map[string][2]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "usher_eta_error_ratio" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "room" {
					h := m.GetHistogram()
					out[l.GetValue()] = [2]float64{h.GetSampleSum(), float64(h.GetSampleCount())}
				}
			}
		}
	}
	return out
}

// etaError is the room's mean ETA error over the last window, if visitors
// were seen admitted in it.
func (h *history) etaError(room string, window time.Duration) (float64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.rooms[room]
	if r == nil || r.n < 2 {
		return 0, false
	}
	last := r.at(r.n - 1)
	first := r.at(max(0, r.n-1-int(window/time.Second)))
	if n := last.etaCount - first.etaCount; n > 0 {
		return (last.etaSum - first.etaSum) / n, true
	}
	return 0, false
}

// roomHistory answers the room's samples as columns:
// {"room":…,"t":[unix seconds…],"waiting":[…],…}; p95 and eta_error hold
// null where unknown. eta_error is the mean over the minute before each
// sample.
func (k *Console) roomHistory() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		room := r.PathValue("room")
		if !queue.ValidRoomID(room) {
			k.errs.Write(w, r, queue.ErrInvalid.Detail("room id %q: want [a-z0-9][a-z0-9-]{0,63}", room))
			return
		}
		h := k.history
		h.mu.Lock()
		var samples []sample
		if rg := h.rooms[room]; rg != nil {
			samples = make([]sample, rg.n)
			for i := range samples {
				samples[i] = rg.at(i)
			}
		}
		h.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(historyJSON(room, samples))
	})
}

func historyJSON(room string, ss []sample) []byte {
	b := make([]byte, 0, 64+len(ss)*80)
	b = append(b, `{"room":`...)
	b = strconv.AppendQuote(b, room)
	col := func(name string, f func(i int) (float64, bool), digits int) {
		b = append(b, `,"`...)
		b = append(b, name...)
		b = append(b, `":[`...)
		for i := range ss {
			if i > 0 {
				b = append(b, ',')
			}
			if v, ok := f(i); ok {
				b = strconv.AppendFloat(b, v, 'f', digits, 64)
			} else {
				b = append(b, "null"...)
			}
		}
		b = append(b, ']')
	}
	col("t", func(i int) (float64, bool) { return float64(ss[i].at), true }, 0)
	col("waiting", func(i int) (float64, bool) { return float64(ss[i].waiting), true }, 0)
	col("active", func(i int) (float64, bool) { return float64(ss[i].active), true }, 0)
	col("admit_rate", func(i int) (float64, bool) { return float64(ss[i].rate), true }, 2)
	col("admit_rate_measured", func(i int) (float64, bool) { return float64(ss[i].measured), true }, 2)
	col("admit_rate_current", func(i int) (float64, bool) { return float64(ss[i].current), true }, 2)
	col("leave_rate", func(i int) (float64, bool) { return float64(ss[i].leave), true }, 2)
	col("origin_p95_ms", func(i int) (float64, bool) {
		p := float64(ss[i].p95)
		return p, !math.IsNaN(p)
	}, 1)
	col("eta_error", func(i int) (float64, bool) {
		j := max(0, i-60)
		if n := ss[i].etaCount - ss[j].etaCount; n > 0 {
			return (ss[i].etaSum - ss[j].etaSum) / n, true
		}
		return 0, false
	}, 3)
	return append(b, "}\n"...)
}
