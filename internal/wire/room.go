package wire

import "time"

// EnterRequest is the body of POST /api/v1/rooms/{room}/entries. Only a
// caller with the admin key may name the visitor; a browser sends no body.
type EnterRequest struct {
	VisitorID string `json:"visitor_id"`
	// Identity is a signed identity assertion from the site (a JWT; see
	// package identity): the visitor is the account it names.
	Identity string `json:"identity"`
	// Invite is an invite code of the room (a presale): the visitor is the
	// invite, one place per code.
	Invite string `json:"invite"`
	// Lane is a priority lane code of the room: the visitor (whoever it
	// is) waits in the room's priority lane.
	Lane string `json:"lane,omitempty"`
}

// Draw is the answer of GET /api/v1/rooms/{room}/draw: a room's opening
// draw, with its seed once it took place.
type Draw struct {
	Room    string    `json:"room"`
	OpensAt time.Time `json:"opens_at"`
	// Commitment is hex(SHA-256(seed)), published before the opening.
	Commitment string `json:"commitment"`
	// Entrants counts the pre-queue: so far before the draw, the entrants
	// ordered after it.
	Entrants int64 `json:"entrants"`
	// Drawn reports that the draw took place; Seed (hex) is then set.
	Drawn bool   `json:"drawn"`
	Seed  string `json:"seed,omitempty"`
}

// InvitesRequest is the body of POST /api/v1/rooms/{room}/invites.
type InvitesRequest struct {
	Count int `json:"count"`
	// ValidSeconds is how long the codes are valid (default 30 days).
	ValidSeconds int64 `json:"valid_seconds,omitempty"`
	// Lane asks for priority lane codes instead of invites, each good
	// for Uses places (default 1).
	Lane bool  `json:"lane,omitempty"`
	Uses int64 `json:"uses,omitempty"`
}

// Invites is the answer of POST /api/v1/rooms/{room}/invites.
type Invites struct {
	Room      string    `json:"room"`
	ExpiresAt time.Time `json:"expires_at"`
	Invites   []string  `json:"invites"`
	// Lane and Uses describe lane codes (InvitesRequest.Lane).
	Lane bool  `json:"lane,omitempty"`
	Uses int64 `json:"uses,omitempty"`
}

// RoomStats are a room's live counters.
type RoomStats struct {
	Waiting int64 `json:"waiting"`
	// Lane counts those of Waiting in the priority lane.
	Lane              int64   `json:"lane"`
	Active            int64   `json:"active"`
	AdmittedTotal     int64   `json:"admitted_total"`
	AdmitRateMeasured float64 `json:"admit_rate_measured"`
	// EffectiveState is the state the room acts in: its state, or sold_out
	// while its inventory is 0.
	EffectiveState string `json:"effective_state"`
	// Inventory is the units the sale has left (neither sold nor held),
	// when a schedule's sale keeps it; omitted otherwise.
	Inventory *int64 `json:"inventory,omitempty"`
	// AdmitRateCurrent is the rate in force: admit_rate, or what the
	// adaptive controller set.
	AdmitRateCurrent float64 `json:"admit_rate_current"`
	// Adaptive rooms: the origin's p95 in the controller's last window and
	// the p95 it holds (ms), once known.
	OriginP95MS *float64 `json:"origin_p95_ms,omitempty"`
	TargetP95MS *float64 `json:"target_p95_ms,omitempty"`
}

// MaxSignalSamples is the most latencies one signals report carries.
const MaxSignalSamples = 1000

// Signals is the body of POST /api/v1/rooms/{room}/signals: what a site
// that gates with the API measured of its origin since its last report,
// for the room's adaptive controller.
type Signals struct {
	// LatencyMS are request latencies in milliseconds (at most
	// MaxSignalSamples, each finite and not negative).
	LatencyMS []float64 `json:"latency_ms"`
	// Errors counts failed requests (5xx, timeouts).
	Errors int64 `json:"errors"`
}

// SignalsAccepted is the answer of POST /api/v1/rooms/{room}/signals.
type SignalsAccepted struct {
	Room    string `json:"room"`
	Samples int    `json:"samples"`
	Errors  int64  `json:"errors"`
	// Pooled is false when the room is not adaptive: the report was
	// dropped.
	Pooled bool `json:"pooled"`
}

// RoomList is the answer of GET /api/v1/rooms.
type RoomList struct {
	Rooms []Room `json:"rooms"`
}

// Pass is the answer of GET /api/v1/rooms/{room}/pass.
type Pass struct {
	Room      string    `json:"room"`
	Visitor   string    `json:"visitor"`
	ExpiresAt time.Time `json:"expires_at"`
	// Pass is the pass to use from now on (renewed when half used).
	Pass string `json:"pass"`
}
