package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"usher/internal/fault"
	"usher/internal/queue"
)

// Stream limits: each console tab holds one live stream (a connection and
// a goroutine).
const (
	StreamsPerSession = 8
	StreamsTotal      = 64
	// tick is how often a live stream sends the rooms' numbers.
	tick = time.Second
)

// ErrTooManyStreams answers a live stream over either limit.
var ErrTooManyStreams = fault.New(fault.RateLimited, "too many console tabs open; close some")

// RoomLive is one room's live numbers: counters from this instance's view
// of the room, never a list of visitors.
type RoomLive struct {
	Room           string `json:"room"`
	State          string `json:"state"`
	EffectiveState string `json:"effective_state"`
	Waiting        int64  `json:"waiting"`
	Active         int64  `json:"active"`
	MaxActive      int64  `json:"max_active"`
	MaxWaiting     int64  `json:"max_waiting"`
	AdmittedTotal  int64  `json:"admitted_total"`
	// AdmitRate is the configured rate; AdmitRateMeasured the admissions
	// this instance counted over the last 10 s (queue.View.Admitted, as the
	// room API shows it: 0 in an idle room); AdmitRateCurrent the rate in
	// force (the adaptive controller's, or AdmitRate).
	AdmitRate         float64 `json:"admit_rate"`
	AdmitRateMeasured float64 `json:"admit_rate_measured"`
	AdmitRateCurrent  float64 `json:"admit_rate_current"`
	Admission         string  `json:"admission"`
	// OriginP95MS and TargetP95MS: adaptive rooms, once the controller
	// stepped with samples.
	OriginP95MS *float64 `json:"origin_p95_ms,omitempty"`
	TargetP95MS *float64 `json:"target_p95_ms,omitempty"`
	// LeaveRate is the rate at which waiting visitors leave the line
	// (visitors/s; 0 while nobody waits); Abandonment the share of those
	// leaving the line that leave without being admitted, LeaveRate ÷
	// (LeaveRate + AdmitRateMeasured), while either rate shows (0.05/s or
	// more, a visitor every 20 s).
	LeaveRate   float64  `json:"leave_rate"`
	Abandonment *float64 `json:"abandonment,omitempty"`
	// ETAError is the mean of (actual − forecast) ÷ actual wait of the
	// visitors this instance saw admitted in the last minute: positive
	// when they waited longer than told. Absent without such visitors.
	ETAError  *float64 `json:"eta_error,omitempty"`
	Inventory *int64   `json:"inventory,omitempty"`
	// AgeMS is how old this instance's view of the room is.
	AgeMS int64 `json:"age_ms"`
}

// Live is one tick: every room this instance has a view of.
type Live struct {
	At    time.Time  `json:"at"`
	Rooms []RoomLive `json:"rooms"`
}

// snapshot reads every room's view: no store call, no visitor listed.
func (k *Console) snapshot() Live {
	now := k.c.Now()
	rooms, _ := k.c.Queue.ViewRooms()
	out := Live{At: now.UTC(), Rooms: make([]RoomLive, 0, len(rooms))}
	for _, room := range rooms {
		v, ok := k.c.Queue.View(room)
		if !ok {
			continue
		}
		out.Rooms = append(out.Rooms, k.roomLive(room, v, now))
	}
	return out
}

func (k *Console) roomLive(room string, v queue.View, now time.Time) RoomLive {
	s := v.Settings
	l := RoomLive{
		Room: room, State: string(s.State), EffectiveState: string(v.EffectiveState()),
		Waiting: v.Waiting, Active: v.Active, MaxActive: s.MaxActive, MaxWaiting: s.MaxWaiting, AdmittedTotal: v.AdmittedTotal,
		AdmitRate: s.AdmitRate, AdmitRateMeasured: v.Admitted(), AdmitRateCurrent: s.CurrentRate(v.Control),
		Admission: string(s.Admission), LeaveRate: leaveRate(v), AgeMS: max(0, now.Sub(v.At).Milliseconds()),
	}
	if s.Admission == queue.Adaptive && v.Control.P95 > 0 {
		p95, goal := ms(v.Control.P95), ms(s.Target(v.Control))
		l.OriginP95MS, l.TargetP95MS = &p95, &goal
	}
	l.Abandonment = abandonment(l.LeaveRate, l.AdmitRateMeasured)
	if e, ok := k.history.etaError(room, time.Minute); ok {
		l.ETAError = &e
	}
	if v.Inventory.Known {
		n := v.Inventory.Units
		l.Inventory = &n
	}
	return l
}

// leaveRate is the rate at which v's waiting visitors leave its line: the
// view's estimate while someone waits, 0 otherwise (the estimate keeps its
// last value while the room is idle).
func leaveRate(v queue.View) float64 {
	if v.Waiting == 0 {
		return 0
	}
	return v.Leave
}

// minShownRate is the smallest rate the console shows as more than 0.
const minShownRate = 0.05

// abandonment is leave ÷ (leave + admitted), nil unless either rate shows:
// a share of nearly nothing would read 100 % next to "0 left/s".
func abandonment(leave, admitted float64) *float64 {
	if leave < minShownRate && admitted < minShownRate {
		return nil
	}
	a := leave / (leave + admitted)
	return &a
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// live streams a tick a second as server-sent events ("event: tick"),
// until the client goes, the session expires ("event: signed_out") or Run
// ends.
func (k *Console) live() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		se := sessionOf(r)
		release, err := k.streams.acquire(se.id)
		if err != nil {
			k.errs.Write(w, r, err)
			return
		}
		defer release()
		rc := http.NewResponseController(w)
		// The stream outlives the server's read and write timeouts.
		rc.SetWriteDeadline(time.Time{})
		rc.SetReadDeadline(time.Time{})
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			if !k.c.Now().Before(se.expires) {
				fmt.Fprint(w, "event: signed_out\ndata: {}\n\n")
				rc.Flush()
				return
			}
			b, _ := json.Marshal(k.snapshot())
			fmt.Fprintf(w, "event: tick\ndata: %s\n\n", b)
			if err := rc.Flush(); err != nil {
				return
			}
			select {
			case <-r.Context().Done():
				return
			case <-k.stopped:
				return
			case <-t.C:
			}
		}
	})
}

// streams counts open live streams per session and in all.
type streams struct {
	mu         sync.Mutex
	total      int
	bySession  map[string]int
	perSession int
	max        int
}

func newStreams(perSession, total int) *streams {
	return &streams{bySession: make(map[string]int), perSession: perSession, max: total}
}

func (s *streams) acquire(id string) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bySession[id] >= s.perSession {
		return nil, ErrTooManyStreams.Detail("at most %d console tabs per sign-in", s.perSession)
	}
	if s.total >= s.max {
		return nil, ErrTooManyStreams.Detail("this server holds the most console streams it allows (%d)", s.max)
	}
	s.bySession[id]++
	s.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.total--
			if s.bySession[id]--; s.bySession[id] == 0 {
				delete(s.bySession, id)
			}
		})
	}, nil
}
