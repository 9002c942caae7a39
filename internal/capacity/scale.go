package capacity

import (
	"fmt"
	"math"
	"time"

	"usher/internal/queue"
	"usher/internal/queue/forecast"
)

// Units are the per-unit figures the scale section divides by. Their
// defaults (DefaultUnits) were measured on this project's 2-vCPU machine and
// are cited in docs/scaling.md; measure yours and pass them instead.
type Units struct {
	// WaitingBytes and ActiveBytes are the Redis memory one waiting and one
	// active visitor take (a member of the wait or the active sorted set).
	WaitingBytes float64 `json:"waiting_bytes"`
	ActiveBytes  float64 `json:"active_bytes"`
	// PrimaryOps is the store calls a second one Redis primary runs: the
	// enter script from 50 callers, the heaviest of the per-visitor calls.
	PrimaryOps float64 `json:"primary_ops"`
	// InstancePolls and InstanceEnters are the status polls and the enters
	// a second one usher instance answers over HTTP.
	InstancePolls  float64 `json:"instance_polls"`
	InstanceEnters float64 `json:"instance_enters"`
	// PollAnswerBytes is one status poll's answer on the wire: headers and
	// JSON body.
	PollAnswerBytes float64 `json:"poll_answer_bytes"`
}

// DefaultUnits are the figures measured for docs/benchmarks.md#waiting-room-core
// and docs/scaling.md (see there for the runs).
func DefaultUnits() Units {
	return Units{
		WaitingBytes:    125.8,
		ActiveBytes:     ActiveBytesMeasured,
		PrimaryOps:      PrimaryOpsMeasured,
		InstancePolls:   88_000,
		InstanceEnters:  10_000,
		PollAnswerBytes: PollAnswerBytesMeasured,
	}
}

// Figures measured for this section on this project's machine
// (docs/scaling.md, "Per-unit figures").
const (
	ActiveBytesMeasured     = 125.7
	PrimaryOpsMeasured      = 111_839
	PollAnswerBytesMeasured = 300
)

// ScaleInput describes a sale: Visitors arrive evenly over ArriveOver from
// the opening into a room configured as the plan says.
type ScaleInput struct {
	Visitors   int64         `json:"visitors"`
	ArriveOver time.Duration `json:"-"`
	Units      Units         `json:"units"`
}

// Scale is the scale section of a plan: what a sale costs at its peak.
type Scale struct {
	Input ScaleInput `json:"input"`
	// EnterRate is the arrivals a second (Visitors ÷ ArriveOver), the
	// enters/s at the peak; AdmitRate the room's admissions a second.
	EnterRate float64 `json:"enter_rate"`
	AdmitRate float64 `json:"admit_rate"`
	// PeakWaiting is the longest line, reached at PeakAt (the end of the
	// arrivals) when visitors arrive faster than they are admitted:
	// Visitors − AdmitRate × ArriveOver. PeakActive is the active set then.
	PeakWaiting int64         `json:"peak_waiting"`
	PeakAt      time.Duration `json:"-"`
	PeakActive  int64         `json:"peak_active"`
	// ActiveBound says which bound PeakActive is: "arrivals" (the
	// visitors admitted by PeakAt: admit_rate × PeakAt, or all of them)
	// or "ttl" (the admissions of the last TTL, admit_rate × TTL, within
	// the room's max_active).
	ActiveBound string `json:"active_bound"`
	maxActive   int64
	ttl         time.Duration
	// LastAdmitted is when the last visitor is admitted: Visitors ÷
	// AdmitRate after the opening, or the end of the arrivals.
	LastAdmitted time.Duration `json:"-"`
	// Memory is the store's memory at the peak, in bytes.
	WaitingMemory float64 `json:"waiting_memory_bytes"`
	ActiveMemory  float64 `json:"active_memory_bytes"`
	// Polls is the status polls a second at the peak: PollRate over the
	// peak line, and the AdmitRate polls a second by which admitted
	// visitors learn it. StorePolls are those of them that reach the store
	// (from the near zone, queue.View.Near). While
	// visitors still arrive the polls run about EnterRate ÷ 2 below this:
	// a newcomer's first poll is a whole interval after its entry, so its
	// polls lag a steady poller's by half a poll (renewal theory; the
	// simulation measures it). Once the arrivals stop, the polls rise to
	// this within one longest interval, while the line is still about its
	// longest: the plan's figure is that peak.
	// Near is the near zone's places: polled every forecast.FastPoll.
	Near       int64   `json:"near_zone"`
	Polls      float64 `json:"polls"`
	StorePolls float64 `json:"store_polls"`
	// StoreOps is the store calls a second at the peak: enters, store
	// polls, admission steps and every instance's view refreshes.
	StoreOps float64 `json:"store_ops"`
	// Instances and Primaries are the usher instances and Redis primaries
	// the peak needs at the per-unit figures.
	Instances int `json:"instances"`
	Primaries int `json:"primaries"`
	// Bandwidth is the status polls' answers, bytes a second.
	Bandwidth float64  `json:"bandwidth_bytes"`
	Notes     []string `json:"notes,omitempty"`
}

// viewRefreshes is how often each usher instance reads a room's stats
// (queue.Options.Refresh's default, 100 ms).
const viewRefreshes = 10

// RoomSettings are the queue settings of the plan's room: the defaults
// with the plan's state, cap, rate, interval, TTL and claim window.
func (p Plan) RoomSettings() queue.Settings { return p.room }

// LineView is the view an instance has of a room with these settings and
// waiting visitors in line, admitting at the configured rate: the view the
// pacing of the plan is computed from.
func LineView(s queue.Settings, waiting int64) queue.View {
	return queue.View{Stats: queue.Stats{Settings: s, Waiting: waiting}, Rates: forecast.Rates{Rate: s.AdmitRate}}
}

// PollRate is the status polls a second that a line of waiting visitors
// makes under view v's pacing: the sum over the places 1…waiting of 1 ÷
// the mean interval there (v.PollBase: usher's pacing before jitter; the
// jitter is uniform around the base, so a visitor's intervals average to
// it). store is the part from the near zone (v.Near()), whose polls reach
// the store. Far back every place polls at forecast.MaxPoll, so the sum
// stops there and counts the rest at once.
func PollRate(v queue.View, waiting int64) (all, store float64) {
	near := v.Near()
	for p := int64(1); p <= waiting; p++ {
		base := v.PollBase(p)
		r := 1 / base.Seconds()
		if p <= near {
			store += r
		}
		if base == forecast.MaxPoll && p > near {
			all += float64(waiting-p+1) * r
			break
		}
		all += r
	}
	return all, store
}

// Validate reports the first scale input out of range.
func (in ScaleInput) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	u := in.Units
	switch {
	case in.Visitors < 1:
		return bad("visitors %d: want at least 1", in.Visitors)
	case in.ArriveOver <= 0:
		return bad("arrive over %v: want more than 0", in.ArriveOver)
	case !(u.WaitingBytes > 0 && u.ActiveBytes > 0 && u.PrimaryOps > 0 && u.InstancePolls > 0 && u.InstanceEnters > 0 && u.PollAnswerBytes > 0):
		return bad("per-unit figures %+v: want each more than 0", u)
	}
	return nil
}

// MakeScale computes the scale section of plan p for a sale.
func MakeScale(p Plan, in ScaleInput) (Scale, error) {
	if err := in.Validate(); err != nil {
		return Scale{}, err
	}
	s := p.RoomSettings()
	u := in.Units
	sc := Scale{Input: in, AdmitRate: s.AdmitRate}
	n, window := float64(in.Visitors), in.ArriveOver.Seconds()
	sc.EnterRate = n / window
	sc.PeakAt = in.ArriveOver
	if left := n - s.AdmitRate*window; left >= 1 {
		sc.PeakWaiting = int64(math.Round(left))
	} else {
		sc.Notes = append(sc.Notes, fmt.Sprintf("visitors arrive at %s/s, no faster than the room admits (%s/s): no line forms, and the cap (%s active) is what holds them",
			fmtNum(sc.EnterRate), fmtNum(s.AdmitRate), fmtInt(s.MaxActive)))
	}
	sc.LastAdmitted = max(in.ArriveOver, time.Duration(n/s.AdmitRate*float64(time.Second)))
	// Admitted visitors stay active for the TTL: by the peak the active set
	// holds the admissions of the last TTL, up to the cap.
	admitted, lastTTL := min(n, s.AdmitRate*window), s.AdmitRate*s.ActiveTTL.Seconds()
	sc.PeakActive = int64(min(float64(s.MaxActive), admitted, lastTTL))
	sc.maxActive, sc.ttl = s.MaxActive, s.ActiveTTL
	sc.ActiveBound = "ttl"
	if admitted < min(float64(s.MaxActive), lastTTL) {
		sc.ActiveBound = "arrivals"
	}
	if p.Input.RequestsPerVisitor == 1 {
		sc.Notes = append(sc.Notes, "the plan counts one pool-bound request per admitted visitor; a buyer who loads the seat map, holds and reserves makes several: pass --requests-per-visitor")
	}
	sc.WaitingMemory = float64(sc.PeakWaiting) * u.WaitingBytes
	sc.ActiveMemory = float64(sc.PeakActive) * u.ActiveBytes

	v := LineView(s, sc.PeakWaiting)
	sc.Near = v.Near()
	line, store := PollRate(v, sc.PeakWaiting)
	// An admitted visitor learns it with one more poll, from the head.
	sc.Polls, sc.StorePolls = line+s.AdmitRate, store+s.AdmitRate
	sc.Bandwidth = sc.Polls * u.PollAnswerBytes

	sc.Instances = max(1, int(math.Ceil(sc.Polls/u.InstancePolls+sc.EnterRate/u.InstanceEnters-1e-9)))
	sc.StoreOps = sc.EnterRate + sc.StorePolls + 1/s.Interval.Seconds() + float64(sc.Instances*viewRefreshes)
	sc.Primaries = max(1, int(math.Ceil(sc.StoreOps/u.PrimaryOps-1e-9)))
	if sc.Primaries > 1 {
		sc.Notes = append(sc.Notes, fmt.Sprintf("a room is one Redis Cluster slot, so one primary: this room's %s store calls/s are %s times what one primary runs (%s/s), and more primaries do not share one room's load: give the room %d shards (docs/operations.md), split the sale over as many rooms, or slow the arrivals",
			fmtRate(sc.StoreOps), fmtNum(sc.StoreOps/u.PrimaryOps), fmtRate(u.PrimaryOps), sc.Primaries))
	}
	if sc.Instances > 1 {
		sc.Notes = append(sc.Notes, "several instances need a shared store (--store redis://…): the memory store serves one instance")
	}
	return sc, nil
}
