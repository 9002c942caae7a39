package queue

import (
	"math"
	"time"

	"usher/internal/fault"
)

// Priority lanes: a room whose PriorityShare is set has, besides its
// waiting line, one priority lane, a FIFO of its own that visitors join
// with a lane code (token.LaneCode, Store.EnterLane). Each admission step
// computes how many it admits exactly as without a lane (the cap, the
// inventory cap and the token bucket hold as they are) and only splits
// them: the lane gets its share (LaneSplit), the main line the rest, and
// either takes what the other cannot use. A lane entry is Waiting with
// Seq 0 (so that Queue.Status always answers it exactly, from the store)
// and its Position within the lane. Lane visitors are exempt from
// presence parking; before an opening draw they wait in the lane, which
// the draw leaves alone, and are admitted from the opening at the share.

// Errors of lane entries.
var (
	// ErrLaneCodeUsed: the code has made as many places as its Uses.
	ErrLaneCodeUsed = fault.New(fault.LaneCodeUsed, "this priority code has been used as often as it may")
	// ErrLanesOff: a lane entry into a room without a lane
	// (PriorityShare 0).
	ErrLanesOff = fault.New(fault.LanesOff, "this room has no priority lane")
)

// MaxLaneUses bounds a lane code's uses.
const MaxLaneUses = 1_000_000

// LaneCode is what a store needs of a verified lane code: its id (the
// store counts its uses under it until ExpiresAt) and how many places it
// may make.
type LaneCode struct {
	ID        string
	Uses      int64
	ExpiresAt time.Time
}

// LaneSplit splits a step's n admissions for a room with priority share
// share: the lane's part is the whole part of credit + share×n, and the
// fraction is carried to the next step in next, so that over many steps
// the lane gets exactly share of what was admitted (while it has
// visitors). A lane with fewer visitors than its part loses the rest of
// it: next stays below 1. redisqueue's admit.lua is its copy.
func LaneSplit(share float64, n int64, credit float64) (lane int64, next float64) {
	c := credit + share*float64(n)
	lane = min(n, int64(math.Floor(c+1e-9)))
	return lane, max(0, c-float64(lane))
}
