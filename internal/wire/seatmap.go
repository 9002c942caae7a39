package wire

import (
	"encoding/base64"
	"fmt"
	"time"
)

// The seat map in two parts (GET /api/v1/schedules/{id}/seats/layout and
// …/seats/status): the layout, which changes only when seats are added,
// and the status of every seat, in the layout's order, packed.

// SeatMapLayout is a schedule's seats without their status, as runs. Seat i
// of the layout is the i-th seat counting the runs in order; Version names
// this layout (the status says which layout it indexes).
type SeatMapLayout struct {
	ScheduleID int64     `json:"schedule_id"`
	Version    string    `json:"version"`
	Seats      int       `json:"seats"`
	Runs       []SeatRun `json:"runs"`
}

// SeatRun is Count seats side by side in a row, at one price: seat ids
// SeatID, SeatID+1, … and numbers Number, Number+1, ….
type SeatRun struct {
	Section string `json:"section"`
	Row     string `json:"row"`
	SeatID  int64  `json:"seat_id"`
	Number  int    `json:"number"`
	Count   int    `json:"count"`
	Price   int64  `json:"price"`
}

// SeatMapStatus is the status of a schedule's seats for the layout named
// Layout; Version names this status and BuiltAt is the first snapshot that
// showed it (a status that does not change keeps its body and its ETag). A full answer has Status
// (PackSeatStates); an answer to ?since=<version> the status still knows
// has Since and Changes instead: the seats whose state differs from then.
type SeatMapStatus struct {
	ScheduleID int64        `json:"schedule_id"`
	Layout     string       `json:"layout"`
	Version    string       `json:"version"`
	Seats      int          `json:"seats"`
	Status     string       `json:"status,omitempty"`
	Since      string       `json:"since,omitempty"`
	Changes    *SeatChanges `json:"changes,omitempty"`
	BuiltAt    time.Time    `json:"built_at"`
}

// SeatChanges lists seat ids by their new state.
type SeatChanges struct {
	Available []int64 `json:"available"`
	Held      []int64 `json:"held"`
	Sold      []int64 `json:"sold"`
}

// Seat states in a packed status.
const (
	SeatAvailable byte = 0
	SeatHeld      byte = 1
	SeatSold      byte = 2
)

// PackSeatStates packs states (SeatAvailable, SeatHeld or SeatSold, one per
// seat in layout order) as base64 (standard, padded) of bytes holding five
// seats each: seat i is base-3 digit i%5, least significant first, of byte
// i/5. 50,000 seats take 13,336 characters whatever their states.
func PackSeatStates(states []byte) string {
	b := make([]byte, (len(states)+4)/5)
	for i := len(states) - 1; i >= 0; i-- {
		b[i/5] = b[i/5]*3 + states[i]
	}
	return base64.StdEncoding.EncodeToString(b)
}

// UnpackSeatStates is PackSeatStates' inverse for n seats.
func UnpackSeatStates(packed string, n int) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(packed)
	if err != nil {
		return nil, fmt.Errorf("seat status: %w", err)
	}
	if len(b) != (n+4)/5 {
		return nil, fmt.Errorf("seat status: %d bytes for %d seats, want %d", len(b), n, (n+4)/5)
	}
	out := make([]byte, n)
	for i, d := range b {
		if d > 242 { // 3^5-1
			return nil, fmt.Errorf("seat status: byte %d out of range", i)
		}
		for j := i * 5; j < min(n, i*5+5); j++ {
			out[j], d = d%3, d/3
		}
	}
	return out, nil
}
