package sale

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"sync"

	"github.com/klauspost/compress/gzip"

	"usher/internal/booking"
	"usher/internal/wire"
)

// The seat map in two parts, for stadiums: the layout (sections, rows,
// numbers, prices), which changes only when seats are added, named by a
// hash of its content; and the status, every seat's state packed in base 3
// (wire.PackSeatStates), named by a hash of the layout and the states.
// Both are made from the seat map snapshot, at most once per snapshot and
// only when asked for; a layout that did not change is the previous
// snapshot's, with its encodings. Names are content hashes, so every
// instance gives the same snapshot the same name.
//
// Changes since a status: each schedule keeps its last historyLen distinct
// statuses served by this instance; ?since= a version among them answers
// the seats that changed, any other version (too old, or named by another
// instance's snapshot) the full status.

// historyLen is how many past statuses a schedule keeps for ?since: at one
// per SnapshotEvery (500 ms), at least half a minute.
const historyLen = 64

// Encoded is a JSON body and its gzip encoding (made once, when first
// asked for), named by Version.
type Encoded struct {
	Version string
	JSON    []byte
	Gzip    func() []byte
}

func newEncoded(version string, v any) *Encoded {
	b, _ := json.Marshal(v)
	return &Encoded{Version: version, JSON: b, Gzip: sync.OnceValue(func() []byte { return gzipped(b, gzip.BestCompression) })}
}

func gzipped(b []byte, level int) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, level)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// layout is a snapshot's layout, with its seats' ids in layout order.
type layout struct {
	*Encoded
	ids []int64
}

// status is a snapshot's status: its states in layout order.
type status struct {
	*Encoded
	full   wire.SeatMapStatus
	states []byte
}

// hashName names content: 16 characters of URL-safe base64 of its SHA-256.
func hashName(parts ...[]byte) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:12])
}

// sameLayout reports whether two snapshots' seats have the same ids and
// specs in the same order.
func sameLayout(a, b []booking.Seat) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].SeatSpec != b[i].SeatSpec {
			return false
		}
	}
	return true
}

func buildLayout(scheduleID int64, seats []booking.Seat) *layout {
	l := wire.SeatMapLayout{ScheduleID: scheduleID, Seats: len(seats), Runs: []wire.SeatRun{}}
	ids := make([]int64, len(seats))
	for i, s := range seats {
		ids[i] = s.ID
		if n := len(l.Runs); n > 0 {
			r := &l.Runs[n-1]
			if r.Section == s.Section && r.Row == s.Row && r.Price == s.Price &&
				r.SeatID+int64(r.Count) == s.ID && r.Number+r.Count == s.Number {
				r.Count++
				continue
			}
		}
		l.Runs = append(l.Runs, wire.SeatRun{Section: s.Section, Row: s.Row, SeatID: s.ID, Number: s.Number, Count: 1, Price: s.Price})
	}
	content, _ := json.Marshal(l)
	l.Version = hashName(content)
	return &layout{Encoded: newEncoded(l.Version, l), ids: ids}
}

func stateOf(s booking.SeatStatus) byte {
	switch s {
	case booking.Sold:
		return wire.SeatSold
	case booking.Held:
		return wire.SeatHeld
	default:
		return wire.SeatAvailable
	}
}

func (s *Service) buildStatus(slot *seatMapSlot, m *SeatMap) *status {
	l := m.layout()
	states := make([]byte, len(m.Seats))
	for i, seat := range m.Seats {
		states[i] = stateOf(seat.Status)
	}
	packed := wire.PackSeatStates(states)
	st := wire.SeatMapStatus{ScheduleID: m.ScheduleID, Layout: l.Version, Seats: len(states), Status: packed, BuiltAt: m.BuiltAt.UTC()}
	st.Version = hashName([]byte(l.Version), states)
	slot.hmu.Lock()
	defer slot.hmu.Unlock()
	n := len(slot.history)
	if n > 0 && slot.history[n-1].Version == st.Version {
		// Unchanged: the same body, so that one ETag names one body.
		return slot.history[n-1]
	}
	out := &status{Encoded: newEncoded(st.Version, st), full: st, states: states}
	if n == historyLen {
		slot.history = append(slot.history[:0], slot.history[1:]...)
	}
	slot.history = append(slot.history, out)
	return out
}

// SeatMapLayout returns the layout of the schedule's current seat map.
func (s *Service) SeatMapLayout(ctx context.Context, scheduleID int64) (*Encoded, error) {
	m, err := s.SeatMap(ctx, scheduleID)
	if err != nil {
		return nil, err
	}
	return m.layout().Encoded, nil
}

// SeatMapStatus returns the status of the schedule's current seat map.
func (s *Service) SeatMapStatus(ctx context.Context, scheduleID int64) (*Encoded, error) {
	m, err := s.SeatMap(ctx, scheduleID)
	if err != nil {
		return nil, err
	}
	return m.status().Encoded, nil
}

// SeatMapChanges answers the status since the version since: the seats whose
// state changed (Changes), or the full status (Status) when since is not
// a status this instance still keeps for the current layout, or when the
// changes would be longer than the full status.
func (s *Service) SeatMapChanges(ctx context.Context, scheduleID int64, since string) (wire.SeatMapStatus, error) {
	m, err := s.SeatMap(ctx, scheduleID)
	if err != nil {
		return wire.SeatMapStatus{}, err
	}
	return m.changesSince(since), nil
}

// changesSince is SeatMapChanges for the snapshot m.
func (m *SeatMap) changesSince(since string) wire.SeatMapStatus {
	cur := m.status()
	out := cur.full
	old := m.slot.past(since)
	if old == nil || old.full.Layout != out.Layout {
		return out
	}
	l := m.layout()
	c := wire.SeatChanges{Available: []int64{}, Held: []int64{}, Sold: []int64{}}
	n := 0
	for i, st := range cur.states {
		if st == old.states[i] {
			continue
		}
		switch n++; st {
		case wire.SeatSold:
			c.Sold = append(c.Sold, l.ids[i])
		case wire.SeatHeld:
			c.Held = append(c.Held, l.ids[i])
		default:
			c.Available = append(c.Available, l.ids[i])
		}
	}
	// A seat id costs up to about 8 characters; the full status is there.
	if 8*n > len(out.Status) {
		return out
	}
	out.Status, out.Since, out.Changes = "", since, &c
	return out
}

// past returns the kept status named version, or nil.
func (slot *seatMapSlot) past(version string) *status {
	slot.hmu.Lock()
	defer slot.hmu.Unlock()
	for i := len(slot.history) - 1; i >= 0; i-- {
		if slot.history[i].Version == version {
			return slot.history[i]
		}
	}
	return nil
}
