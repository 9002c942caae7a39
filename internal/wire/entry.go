package wire

import (
	"encoding/json"
	"strconv"
	"time"
)

// Entry is the answer about a visitor's place: the body of enter and status
// answers of the API, and of the proxy's JSON waiting protocol.
type Entry struct {
	Room string `json:"room"`
	// Ticket is set only when a new ticket was issued.
	Ticket string `json:"ticket,omitempty"`
	// State is one of the visitor states (StateWaiting, …).
	State string `json:"state"`
	// RoomState is one of the room states (RoomOpen, …).
	RoomState  string `json:"room_state"`
	Position   int64  `json:"position"`
	Ahead      int64  `json:"ahead"`
	ETASeconds int64  `json:"eta_seconds"`
	// ETARangeSeconds is the range the wait should fall in nine times in
	// ten, [low, high] in whole seconds around ETASeconds; only for a
	// place in line (not in the pre-queue). Zero: none (high is never 0,
	// as a visitor learns of an admission at its next poll). A value, not
	// a pointer, so that the status poll allocates nothing for it.
	ETARangeSeconds [2]int64 `json:"eta_range_seconds,omitzero"`
	// ETAText is the ETA in words in the waiting page's language, set by
	// the edges on their answers to the page's polls, so that the page
	// shows the server's wording rather than composing its own.
	ETAText string `json:"eta_text,omitempty"`
	// AheadText is Ahead in words ("3 people ahead of you"), in the
	// plural form of the waiting page's language; set by the edges as
	// ETAText is, for a place in line (Position > 0).
	AheadText string `json:"ahead_text,omitempty"`
	// PollAfterMS is when to poll again, with jitter already applied; 0 when
	// polling cannot change the answer (admitted, or the place is gone).
	PollAfterMS   int64      `json:"poll_after_ms"`
	Pass          string     `json:"pass,omitempty"`
	PassExpiresAt *time.Time `json:"pass_expires_at,omitempty"`
	// OpensAt is the room's opening, in the pre-queue only (RoomPreQueue);
	// ETASeconds then counts down to it and Position is 0 until the draw.
	OpensAt *time.Time `json:"opens_at,omitempty"`
}

// Place is what EntryFor needs to know about a visitor's place, in plain
// values, so that wire needs no queue types.
type Place struct {
	Room   string
	Ticket string
	// RoomState is the room's state (RoomOpen, …).
	RoomState string
	// Status is the queue's word for the entry: "waiting", "active", or
	// anything else for a place that is gone.
	Status string
	// Position (1 at the head), ETA and PollAfter count when waiting;
	// ETALow and ETAHigh are the ETA's range (both zero: none).
	Position                        int64
	ETA, ETALow, ETAHigh, PollAfter time.Duration
	// Pass and PassExpiresAt count when active.
	Pass          string
	PassExpiresAt time.Time
	// OpensAt counts in the pre-queue (RoomState RoomPreQueue): ETA is the
	// time left until it.
	OpensAt time.Time
}

// EntryFor is the one place that turns a visitor's place into the answer:
//   - waiting: StateWaiting with position, ahead, the ETA in whole seconds,
//     its range (low rounded down, high up) and PollAfter in milliseconds;
//   - active: StateAdmitted with the pass and its expiry (whole seconds, UTC),
//     poll_after_ms 0;
//   - gone: StateExpired, poll_after_ms 0;
//   - in the pre-queue (RoomState RoomPreQueue): waiting at position 0,
//     with opens_at and the ETA counting down to it;
//
// except that in a room that refuses entries (closed, sold out) a waiting or
// gone visitor's state is the room's state.
func EntryFor(p Place) Entry {
	e := Entry{Room: p.Room, Ticket: p.Ticket, RoomState: p.RoomState}
	refuses := p.RoomState == RoomClosed || p.RoomState == RoomSoldOut
	switch p.Status {
	case "waiting":
		e.State = StateWaiting
		e.Position, e.Ahead = p.Position, max(0, p.Position-1)
		e.ETASeconds = int64(p.ETA.Round(time.Second) / time.Second)
		e.PollAfterMS = p.PollAfter.Milliseconds()
		if p.RoomState == RoomPreQueue || p.RoomState == RoomDraw {
			at := p.OpensAt.UTC()
			e.OpensAt = &at
		} else if p.ETALow != 0 || p.ETAHigh != 0 {
			e.ETARangeSeconds = [2]int64{
				int64(p.ETALow / time.Second),                      // floor
				int64((p.ETAHigh + time.Second - 1) / time.Second), // ceiling
			}
		}
	case "active":
		exp := p.PassExpiresAt.Truncate(time.Second).UTC()
		e.State, e.Pass, e.PassExpiresAt = StateAdmitted, p.Pass, &exp
		return e
	default:
		e.State = StateExpired
	}
	if refuses {
		e.State = p.RoomState
	}
	return e
}

// AppendJSON appends e as encoding/json would encode it (without the
// trailing newline). Status polls are the hottest path of the server, and
// this is about four times cheaper than reflection; TestEntryJSON pins the
// equivalence.
func (e Entry) AppendJSON(b []byte) []byte {
	b = append(b, `{"room":`...)
	b = appendString(b, e.Room)
	if e.Ticket != "" {
		b = append(b, `,"ticket":`...)
		b = appendString(b, e.Ticket)
	}
	b = append(b, `,"state":`...)
	b = appendString(b, e.State)
	b = append(b, `,"room_state":`...)
	b = appendString(b, e.RoomState)
	b = append(b, `,"position":`...)
	b = strconv.AppendInt(b, e.Position, 10)
	b = append(b, `,"ahead":`...)
	b = strconv.AppendInt(b, e.Ahead, 10)
	b = append(b, `,"eta_seconds":`...)
	b = strconv.AppendInt(b, e.ETASeconds, 10)
	if r := e.ETARangeSeconds; r != [2]int64{} {
		b = append(b, `,"eta_range_seconds":[`...)
		b = strconv.AppendInt(b, r[0], 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, r[1], 10)
		b = append(b, ']')
	}
	if e.ETAText != "" {
		b = append(b, `,"eta_text":`...)
		b = appendString(b, e.ETAText)
	}
	if e.AheadText != "" {
		b = append(b, `,"ahead_text":`...)
		b = appendString(b, e.AheadText)
	}
	b = append(b, `,"poll_after_ms":`...)
	b = strconv.AppendInt(b, e.PollAfterMS, 10)
	if e.Pass != "" {
		b = append(b, `,"pass":`...)
		b = appendString(b, e.Pass)
	}
	if e.PassExpiresAt != nil {
		b = append(b, `,"pass_expires_at":"`...)
		b = e.PassExpiresAt.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	if e.OpensAt != nil {
		b = append(b, `,"opens_at":"`...)
		b = e.OpensAt.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	return append(b, '}')
}

// appendString appends s as a JSON string: directly when it has only
// characters that need no escaping (ids, tokens), else through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
