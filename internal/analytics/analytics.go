// Package analytics counts usher's events (package event) into per-room,
// per-minute rows in SQL, and keeps each room's recent events for the
// console's timeline. The collector feeds it from the event stream; the API
// reads it (GET /api/v1/rooms/{room}/analytics and …/events). Backends
// (sqliteanalytics, pganalytics) only store; the arithmetic lives here, once.
//
// Contract: Apply is idempotent per event ID, and a batch that fails changes
// nothing. Rows are keyed by room and the UTC minute of the event's At.
//
// Limits: events older than Options.Dedupe are ignored, since their ID is
// forgotten; an admission whose entry is unknown (before the collector's
// history, or pruned after Options.MaxWait) counts as an admission but not in
// the time in queue. Pairing, quantiles, retention:
// docs/architecture.md#the-collector-and-analytics.
package analytics

import (
	"context"
	"encoding/json"
	"time"

	"usher/internal/event"
	"usher/internal/fault"
	"usher/internal/hist"
)

// Errors.
var (
	ErrInvalid = fault.New(fault.Invalid, "invalid input")
	// ErrUnavailable wraps any failure to reach the database.
	ErrUnavailable = fault.New(fault.Unavailable, "database unavailable")
	// ErrDisabled is what the API answers when the server has no
	// analytics (usher proxy; usher serve always reads them).
	ErrDisabled = fault.New(fault.AnalyticsDisabled, "this server keeps no analytics (usher serve does)")
)

// Counts are the counters of one room and minute. Every field adds up when
// minutes are merged.
type Counts struct {
	Arrivals      int64 `json:"arrivals"`
	Admissions    int64 `json:"admissions"`
	Abandons      int64 `json:"abandons"` // left from waiting, and skipped visitors given up as gone
	Expired       int64 `json:"expired"`
	LeftActive    int64 `json:"left_active"`
	HoldsPlaced   int64 `json:"holds_placed"`
	HoldsReleased int64 `json:"holds_released"`
	HoldsExpired  int64 `json:"holds_expired"`
	Submitted     int64 `json:"reservations_submitted"`
	Confirmed     int64 `json:"reservations_confirmed"`
	Rejected      int64 `json:"reservations_rejected"`
	Revenue       int64 `json:"revenue"`
	// The time in queue of the admissions with a known entry: count and
	// sum in milliseconds (their quantiles come from the histogram).
	Waits     int64 `json:"-"`
	WaitSumMS int64 `json:"-"`
	// The ETA error (wait less forecast) of the admissions with a forecast.
	ETAs           int64 `json:"-"`
	ETAErrSumMS    int64 `json:"-"`
	ETAAbsErrSumMS int64 `json:"-"`
}

func (c *Counts) add(o Counts) {
	c.Arrivals += o.Arrivals
	c.Admissions += o.Admissions
	c.Abandons += o.Abandons
	c.Expired += o.Expired
	c.LeftActive += o.LeftActive
	c.HoldsPlaced += o.HoldsPlaced
	c.HoldsReleased += o.HoldsReleased
	c.HoldsExpired += o.HoldsExpired
	c.Submitted += o.Submitted
	c.Confirmed += o.Confirmed
	c.Rejected += o.Rejected
	c.Revenue += o.Revenue
	c.Waits += o.Waits
	c.WaitSumMS += o.WaitSumMS
	c.ETAs += o.ETAs
	c.ETAErrSumMS += o.ETAErrSumMS
	c.ETAAbsErrSumMS += o.ETAAbsErrSumMS
}

// Minute is one room's counters in one minute, with the histogram of its
// times in queue (stored one row per non-empty bucket).
type Minute struct {
	Room string
	At   time.Time // the minute's start, UTC
	Counts
	Wait hist.Counts
}

// Entry is what is known of a visitor's wait until both its ends are: its
// entry (At, the forecast ETAMS, 0 for none) until its admission, or its
// admission (AdmittedAt, At zero) until its entry arrives late.
type Entry struct {
	Room, Visitor string
	At            time.Time
	ETAMS         int64
	AdmittedAt    time.Time
}

// Visit names a waiting visitor.
type Visit struct{ Room, Visitor string }

// Stored is an event as the timeline keeps it, with its position (newer
// events have larger ones).
type Stored struct {
	Seq int64
	event.Event
}

// Tx is one transaction of a Store. Its methods see the transaction's own
// writes.
type Tx interface {
	// Claim records the IDs (with their events' At, for pruning) and
	// returns those that were not recorded before.
	Claim(ctx context.Context, ids []string, at []time.Time) (map[string]bool, error)
	// TakeEntries deletes the entries of vs and returns those that existed.
	TakeEntries(ctx context.Context, vs []Visit) ([]Entry, error)
	// PutEntries records entries, replacing any of the same visitors.
	PutEntries(ctx context.Context, es []Entry) error
	// AddMinutes adds each row's counts and histogram to the stored row of
	// its room and minute, creating it.
	AddMinutes(ctx context.Context, ms []Minute) error
	// AddEvents appends events to their rooms' timelines and trims each
	// room it touched to its keep newest.
	AddEvents(ctx context.Context, evs []event.Event, keep int) error
}

// Store is what a backend implements. Errors reaching the database wrap
// ErrUnavailable.
type Store interface {
	// Update runs fn in one transaction, committed if fn returns nil and
	// rolled back otherwise.
	Update(ctx context.Context, fn func(context.Context, Tx) error) error
	// Minutes returns room's rows with from ≤ At < to, oldest first.
	Minutes(ctx context.Context, room string, from, to time.Time) ([]Minute, error)
	// Events returns room's newest timeline events older than before
	// (Seq < before; 0: from the newest), newest first, at most limit.
	Events(ctx context.Context, room string, before int64, limit int) ([]Stored, error)
	// Prune deletes minute rows older than minutes, recorded IDs of events
	// older than ids, and entries older than entries.
	Prune(ctx context.Context, minutes, ids, entries time.Time) error
	Close() error
}

// Options bound what the analytics keep. The zero value is the default.
type Options struct {
	// Retention is how long minute rows are kept. Default 90 days.
	Retention time.Duration
	// Dedupe is how long event IDs are kept (and how old an event may be
	// and still count). Default 7 days.
	Dedupe time.Duration
	// MaxWait is how long a waiting visitor's entry is kept for pairing
	// with an admission. Default 24 h.
	MaxWait time.Duration
	// Recent is how many events each room's timeline keeps. Default 1000.
	Recent int
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Retention <= 0 {
		o.Retention = 90 * 24 * time.Hour
	}
	if o.Dedupe <= 0 {
		o.Dedupe = 7 * 24 * time.Hour
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 24 * time.Hour
	}
	if o.Recent <= 0 {
		o.Recent = 1000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Analytics is the wrapper over a Store: the arithmetic, the validation and
// the clock live here.
type Analytics struct {
	s Store
	o Options
}

// New returns the analytics on s. It starts nothing.
func New(s Store, o Options) *Analytics { return &Analytics{s: s, o: o.withDefaults()} }

// Result says what Apply did with a batch.
type Result struct {
	Applied   int // events counted
	Duplicate int // events whose ID was recorded already
	TooOld    int // events older than Options.Dedupe, ignored
}

// Apply counts a batch of events in one transaction, which records the
// events' IDs with the counters they change: an event already recorded
// (Result.Duplicate) or older than Options.Dedupe (Result.TooOld) is not
// counted again. Events that are not valid (no ID, room or At) must be
// filtered out by the caller; Apply refuses a batch holding one with
// ErrInvalid.
//
// Two kinds of events count: a room's counted events (its queue's counts,
// one per instance and second or so, added as they are: the current
// producers) and the per-visitor entered, admitted, left, expired and
// skipped events of usher before them, still counted and paired, so that a
// stream written by older instances (or by both during a rolling upgrade)
// reads in full. Counted events are not kept in the timeline. Time in queue
// is an admission's At less the same visitor's entry's, counted in the
// admission's minute in whichever order the two events arrive.
func (a *Analytics) Apply(ctx context.Context, evs []event.Event) (Result, error) {
	var res Result
	oldest := a.o.Now().Add(-a.o.Dedupe)
	fresh := make([]event.Event, 0, len(evs))
	seen := make(map[string]bool, len(evs))
	for _, e := range evs {
		if err := Valid(e); err != nil {
			return Result{}, err
		}
		switch {
		case e.At.Before(oldest):
			res.TooOld++
		case seen[e.ID]:
			res.Duplicate++
		default:
			seen[e.ID] = true
			fresh = append(fresh, e)
		}
	}
	if len(fresh) == 0 {
		return res, nil
	}
	err := a.s.Update(ctx, func(ctx context.Context, tx Tx) error {
		ids := make([]string, len(fresh))
		at := make([]time.Time, len(fresh))
		for i, e := range fresh {
			ids[i], at[i] = e.ID, e.At
		}
		isNew, err := tx.Claim(ctx, ids, at)
		if err != nil {
			return err
		}
		var todo []event.Event
		for _, e := range fresh {
			if isNew[e.ID] {
				todo = append(todo, e)
			}
		}
		res.Applied, res.Duplicate = len(todo), res.Duplicate+len(fresh)-len(todo)
		if len(todo) == 0 {
			return nil
		}
		return a.count(ctx, tx, todo)
	})
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// count applies new events. Every waiting visitor the batch mentions has
// its stored entry taken out first; the batch is walked in order, pairing
// each admission with its entry whichever of the two comes first (a
// redelivery can reorder them); what is left unpaired is stored again.
func (a *Analytics) count(ctx context.Context, tx Tx, evs []event.Event) error {
	asked := map[Visit]bool{}
	var take []Visit
	for _, e := range evs {
		v := Visit{e.Room, e.Visitor}
		if e.Visitor != "" && (e.Type == event.Entered || e.Type == event.Admitted || e.Type == event.Left) && !asked[v] {
			asked[v] = true
			take = append(take, v)
		}
	}
	state := map[Visit]Entry{}
	if len(take) > 0 {
		got, err := tx.TakeEntries(ctx, take)
		if err != nil {
			return err
		}
		for _, en := range got {
			state[Visit{en.Room, en.Visitor}] = en
		}
	}
	rows := map[Visit]*Minute{} // keyed by room and minute (as text)
	row := func(room string, at time.Time) *Minute {
		m := at.UTC().Truncate(time.Minute)
		k := Visit{room, m.Format(time.RFC3339)}
		if r, ok := rows[k]; ok {
			return r
		}
		r := &Minute{Room: room, At: m, Wait: hist.Counts{}}
		rows[k] = r
		return r
	}
	for _, e := range evs {
		r, d, v := row(e.Room, e.At), data(e), Visit{e.Room, e.Visitor}
		en, known := state[v]
		switch e.Type {
		case event.Entered:
			r.Arrivals++
			switch {
			case e.Visitor == "":
			case known && en.At.IsZero() && !en.AdmittedAt.Before(e.At):
				// Its admission came first: count the wait in its minute.
				row(e.Room, en.AdmittedAt).waited(en.AdmittedAt.Sub(e.At), d.ETAMS)
				delete(state, v)
			case known && en.At.After(e.At):
				// A later entry (a new place) is known: keep it.
			default:
				state[v] = Entry{Room: e.Room, Visitor: e.Visitor, At: e.At, ETAMS: d.ETAMS}
			}
		case event.Admitted:
			r.Admissions++
			switch {
			case e.Visitor == "":
			case known && !en.At.IsZero() && !en.At.After(e.At):
				r.waited(e.At.Sub(en.At), en.ETAMS)
				delete(state, v)
			case known && !en.At.IsZero():
				// Only a later entry is known: this admission's is lost.
			default:
				state[v] = Entry{Room: e.Room, Visitor: e.Visitor, AdmittedAt: e.At}
			}
		case event.Left:
			if d.From == "active" {
				r.LeftActive++
				break
			}
			r.Abandons++
			if known && en.AdmittedAt.IsZero() && !en.At.After(e.At) {
				delete(state, v)
			}
		case event.Expired:
			switch {
			case d.Count > 0:
				r.Expired += d.Count
			case e.Visitor != "":
				r.Expired++
			}
		case event.Skipped:
			r.Abandons += max(d.Removed, 0)
		case event.Counted:
			r.counted(d)
		case event.HoldPlaced:
			r.HoldsPlaced++
		case event.HoldReleased:
			r.HoldsReleased++
		case event.HoldExpired:
			r.HoldsExpired++
		case event.ReservationSubmitted:
			r.Submitted++
		case event.ReservationConfirmed:
			r.Confirmed++
			r.Revenue += max(d.Amount, 0)
		case event.ReservationRejected:
			r.Rejected++
		}
	}
	put := make([]Entry, 0, len(state))
	for _, en := range state {
		put = append(put, en)
	}
	if err := tx.PutEntries(ctx, put); err != nil {
		return err
	}
	ms := make([]Minute, 0, len(rows))
	for _, r := range rows {
		ms = append(ms, *r)
	}
	if err := tx.AddMinutes(ctx, ms); err != nil {
		return err
	}
	// A room's timeline keeps its changes, not its counts (a counted event
	// a second would push the settings and holds out of it).
	timeline := evs[:0:0]
	for _, e := range evs {
		if e.Type != event.Counted {
			timeline = append(timeline, e)
		}
	}
	if len(timeline) == 0 {
		return nil
	}
	return tx.AddEvents(ctx, timeline, a.o.Recent)
}

// counted adds a counted event's counts (negative ones count as 0).
func (m *Minute) counted(d event.Data) {
	m.Arrivals += max(d.Arrivals, 0)
	m.Admissions += max(d.Admissions, 0)
	m.Abandons += max(d.Abandons, 0)
	m.Expired += max(d.Expired, 0)
	m.LeftActive += max(d.LeftActive, 0)
	n := m.Wait.Merge(d.WaitHist)
	if n == 0 {
		return
	}
	// The sums go with the histogram: an event whose Waits disagrees with
	// it counts the histogram's samples.
	m.Waits += n
	m.WaitSumMS += max(d.WaitSumMS, 0)
	if d.ETAs > 0 && d.ETAs <= n {
		m.ETAs += d.ETAs
		m.ETAErrSumMS += d.ETAErrSumMS
		m.ETAAbsErrSumMS += max(d.ETAAbsErrSumMS, 0)
	}
}

// waited counts one time in queue and, with a forecast, its ETA error.
func (m *Minute) waited(wait time.Duration, etaMS int64) {
	m.Waits++
	m.WaitSumMS += wait.Milliseconds()
	m.Wait.Add(wait)
	if etaMS > 0 {
		diff := wait.Milliseconds() - etaMS
		m.ETAs++
		m.ETAErrSumMS += diff
		m.ETAAbsErrSumMS += abs(diff)
	}
}

// data decodes an event's Data; a malformed one counts as empty.
func data(e event.Event) event.Data {
	var d event.Data
	if len(e.Data) > 0 {
		_ = json.Unmarshal(e.Data, &d)
	}
	return d
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// Valid checks what Apply needs of an event: an ID, a room, a type and a
// time. Unknown types are counted nowhere but kept in the timeline.
func Valid(e event.Event) error {
	switch {
	case e.ID == "" || len(e.ID) > 200:
		return ErrInvalid.Detail("event: id: want 1 to 200 bytes")
	case e.Room == "" || len(e.Room) > 64:
		return ErrInvalid.Detail("event %s: room: want 1 to 64 bytes", e.ID)
	case e.Type == "" || len(e.Type) > 64:
		return ErrInvalid.Detail("event %s: type: want 1 to 64 bytes", e.ID)
	case e.At.IsZero():
		return ErrInvalid.Detail("event %s: at: missing", e.ID)
	case len(e.Visitor) > 200:
		return ErrInvalid.Detail("event %s: visitor: want at most 200 bytes", e.ID)
	}
	return nil
}

// Prune deletes what the options no longer keep: minute rows past
// Retention, event IDs past Dedupe, entries past MaxWait.
func (a *Analytics) Prune(ctx context.Context) error {
	now := a.o.Now()
	return a.s.Prune(ctx, now.Add(-a.o.Retention), now.Add(-a.o.Dedupe), now.Add(-a.o.MaxWait))
}

// Column is one counter and the SQL column that stores it.
type Column struct {
	Name string
	P    *int64
}

// Columns lists every counter of c once, with its column name: the
// backends build their SQL from it, so a new counter is one line here and
// one column in each backend's migration.
func (c *Counts) Columns() []Column {
	return []Column{
		{"arrivals", &c.Arrivals}, {"admissions", &c.Admissions}, {"abandons", &c.Abandons},
		{"expired", &c.Expired}, {"left_active", &c.LeftActive},
		{"holds_placed", &c.HoldsPlaced}, {"holds_released", &c.HoldsReleased}, {"holds_expired", &c.HoldsExpired},
		{"submitted", &c.Submitted}, {"confirmed", &c.Confirmed}, {"rejected", &c.Rejected},
		{"revenue", &c.Revenue}, {"waits", &c.Waits}, {"wait_sum_ms", &c.WaitSumMS},
		{"etas", &c.ETAs}, {"eta_err_sum_ms", &c.ETAErrSumMS}, {"eta_abs_err_sum_ms", &c.ETAAbsErrSumMS},
	}
}

// Since is the earlier known end of the entry's wait, which Prune ages.
func (e Entry) Since() time.Time {
	if e.At.IsZero() || !e.AdmittedAt.IsZero() && e.AdmittedAt.Before(e.At) {
		return e.AdmittedAt
	}
	return e.At
}
