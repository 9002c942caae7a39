// Package event defines usher's events: every state change of a room, a
// hold or a reservation, with a stable schema (seed 001's event pipeline).
// Producers publish them; a collector counts them into analytics; the
// console shows a room's recent ones as its timeline. Publisher is the
// best-effort publisher both transports (natsevent, kafkaevent) run over
// their Sink: the buffer, the drops and the retry of counted events live
// there once.
//
// The queue's high-rate facts travel as Counted events, one per room and
// instance about every second while the room is busy: O(rooms), not
// O(visitors). Holds, reservations and settings changes are one event each,
// a few a second at most.
//
// The schema is a contract with whoever consumes the stream: fields are only
// ever added, never renamed or given a new meaning. Entered, Admitted,
// Expired, Skipped and Left are no longer emitted; consumers still read them
// from older streams.
package event

import (
	"encoding/json"
	"strings"
	"time"
)

// Type names what happened. The values are part of the wire format (and of
// the subject usher.events.<room>.<type>).
type Type string

// The event types. Entered, Admitted, Expired, Left and Skipped are what
// usher published, one per visitor, before the Counted events; no producer
// emits them now.
const (
	Entered              Type = "entered"  // a visitor joined the queue
	Admitted             Type = "admitted" // a visitor was admitted
	Expired              Type = "expired"  // an admitted visitor's pass ran out
	Left                 Type = "left"     // a visitor left the queue or the active set
	Skipped              Type = "skipped"  // an absent visitor was parked out of line
	HoldPlaced           Type = "hold_placed"
	HoldReleased         Type = "hold_released"
	HoldExpired          Type = "hold_expired"
	ReservationSubmitted Type = "reservation_submitted"
	ReservationConfirmed Type = "reservation_confirmed"
	ReservationRejected  Type = "reservation_rejected"
	SettingsChanged      Type = "settings_changed" // Data: {"who", "old", "new"}
	// Counted is a room's queue counts over a span (at most a second or
	// so) of one instance: what entered, admitted, expired, skipped and
	// left carried one visitor at a time before.
	Counted Type = "counted"
)

// Event is one state change.
type Event struct {
	// ID is unique per event; consumers de-duplicate on it.
	ID   string    `json:"id"`
	Type Type      `json:"type"`
	Room string    `json:"room"`
	At   time.Time `json:"at"`
	// Visitor is the visitor the event is about, when there is one.
	Visitor string `json:"visitor,omitempty"`
	// Data holds the type's own fields (a JSON object of Data's fields),
	// when it has any.
	Data json.RawMessage `json:"data,omitempty"`
}

// Data lists the fields an event's Data may hold, by type; all are
// optional and a consumer ignores fields it does not know.
//
//   - counted: what one instance counted in the room since its previous
//     counted event (about a second before At): Arrivals (new places),
//     Admissions, Abandons (left from waiting, and skipped visitors given
//     up as gone), Expired, LeftActive, and the times in queue observed
//     (Waits, WaitSumMS, WaitHist: counts by hist.Bucket; ETAs,
//     ETAErrSumMS, ETAAbsErrSumMS: the error of those with a forecast).
//     Every field adds up; a consumer sums them.
//   - entered: ETAMS, the wait forecast when the place was created (none in
//     a pre-queue). Only a new place is an entry; a visitor entering again
//     into the place it holds is not.
//   - admitted: none (the time in queue is At less the visitor's entered
//     At; the ETA error compares it with that entry's ETAMS).
//   - left: From, "waiting" or "active".
//   - expired: Count, active visitors whose pass lapsed in one admission
//     step (the step knows how many, not who).
//   - skipped: Count parked as absent in one step, Removed of them given
//     up as gone (abandons).
//   - hold_placed, hold_released, hold_expired: Schedule, Units.
//   - reservation_submitted, reservation_confirmed, reservation_rejected:
//     Reservation, Schedule, Units, and Amount (minor units, confirmed
//     seats with prices).
//   - settings_changed: Who, Old, New (the room's settings as the API
//     shows them).
type Data struct {
	ETAMS       int64           `json:"eta_ms,omitempty"`
	From        string          `json:"from,omitempty"`
	Count       int64           `json:"count,omitempty"`
	Removed     int64           `json:"removed,omitempty"`
	Schedule    int64           `json:"schedule,omitempty"`
	Units       int64           `json:"units,omitempty"`
	Reservation string          `json:"reservation,omitempty"`
	Amount      int64           `json:"amount,omitempty"`
	Who         string          `json:"who,omitempty"`
	Old         json.RawMessage `json:"old,omitempty"`
	New         json.RawMessage `json:"new,omitempty"`

	// counted's fields.
	SpanMS         int64         `json:"span_ms,omitempty"`
	Arrivals       int64         `json:"arrivals,omitempty"`
	Admissions     int64         `json:"admissions,omitempty"`
	Abandons       int64         `json:"abandons,omitempty"`
	Expired        int64         `json:"expired,omitempty"`
	LeftActive     int64         `json:"left_active,omitempty"`
	Waits          int64         `json:"waits,omitempty"`
	WaitSumMS      int64         `json:"wait_sum_ms,omitempty"`
	WaitHist       map[int]int64 `json:"wait_hist,omitempty"`
	ETAs           int64         `json:"etas,omitempty"`
	ETAErrSumMS    int64         `json:"eta_err_sum_ms,omitempty"`
	ETAAbsErrSumMS int64         `json:"eta_abs_err_sum_ms,omitempty"`
}

// The NATS layout of the event stream, shared by the publishers (the queue
// instance and the outbox relay) and the collector. prefix is the
// deployment's --nats-name ("usher" by default).
//
//   - subject: <prefix>.events.<room>.<type> (room IDs are [a-z0-9-], so
//     they are always one subject token);
//   - stream: <PREFIX>_EVENTS (prefix upper-cased) over <prefix>.events.>;
//   - message: the JSON of one Event, with the header Nats-Msg-Id set to
//     Event.ID so that the broker drops a re-published duplicate.

// Subject is the subject an event is published on.
func Subject(prefix, room string, t Type) string {
	return prefix + ".events." + room + "." + string(t)
}

// SubjectFilter matches every event of a deployment.
func SubjectFilter(prefix string) string { return prefix + ".events.>" }

// StreamName is the JetStream stream that holds a deployment's events.
func StreamName(prefix string) string { return strings.ToUpper(prefix) + "_EVENTS" }

// The Kafka layout of the event stream (--events kafka://…), shared by the
// publishers and the collector:
//
//   - topic: <prefix>.events, one for every room;
//   - key: the room, so that a room's events share a partition and keep
//     their order in it (the default partitioner hashes the key);
//   - value: the JSON of one Event. Kafka does not drop a re-published
//     duplicate: consumers de-duplicate on Event.ID.

// Topic is the Kafka topic that holds a deployment's events.
func Topic(prefix string) string { return prefix + ".events" }
