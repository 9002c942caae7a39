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
}

// RoomSettings is the JSON form of a room's settings. In a PUT
// /api/v1/rooms/{room}, omitted fields keep their current value (or the
// default, for a new room); answers set every field.
type RoomSettings struct {
	State              *string  `json:"state,omitempty"`
	MaxActive          *int64   `json:"max_active,omitempty"`
	AdmitRate          *float64 `json:"admit_rate,omitempty"`
	IntervalMS         *int64   `json:"interval_ms,omitempty"`
	ActiveTTLSeconds   *float64 `json:"active_ttl_seconds,omitempty"`
	ClaimWindowSeconds *float64 `json:"claim_window_seconds,omitempty"`
	// ClientEntersPerMinute bounds the new places one client takes (0: off).
	ClientEntersPerMinute *int64 `json:"client_enters_per_minute,omitempty"`
	// PowBits is the proof of work an anonymous API entry brings (0: off).
	PowBits *int64 `json:"pow_bits,omitempty"`
	// RequireIdentity admits only entries with a signed identity assertion.
	RequireIdentity *bool `json:"require_identity,omitempty"`
	// RequireInvite admits only entries with an invite code of the room.
	RequireInvite *bool `json:"require_invite,omitempty"`
	// OpensAt is the opening of a sale with a pre-queue and a fair draw
	// (RFC 3339, whole milliseconds; "" in a PUT: none). Answers omit it
	// when the room has none.
	OpensAt *string `json:"opens_at,omitempty"`
	// MaxWaiting caps the waiting line (0: no cap); a longer one is 429.
	MaxWaiting *int64 `json:"max_waiting,omitempty"`
	// PresenceTimeoutSeconds: waiting visitors near the front not seen for
	// this long are passed over by admission (0: off).
	PresenceTimeoutSeconds *float64 `json:"presence_timeout_seconds,omitempty"`
	// VisitorsPerUnit caps the admitted visitors at this many per unit of
	// the sale's inventory left (0: off).
	VisitorsPerUnit *float64 `json:"visitors_per_unit,omitempty"`
	// Admission is static (admit_rate) or adaptive (a controller sets the
	// rate from the origin's latency).
	Admission *string `json:"admission,omitempty"`
	// TargetP95MS is the origin p95 latency an adaptive room holds (0: 1.5 ×
	// the unloaded p95 the controller learns).
	TargetP95MS *int64 `json:"target_p95_ms,omitempty"`
	// MinAdmitRate and MaxAdmitRate bound the adaptive rate.
	MinAdmitRate *float64 `json:"min_admit_rate,omitempty"`
	MaxAdmitRate *float64 `json:"max_admit_rate,omitempty"`
	// ControlPeriodMS is how often the adaptive controller steps.
	ControlPeriodMS *int64 `json:"control_period_ms,omitempty"`
	// Shards spreads the room's line over this many Redis shards (1 to
	// 64); ShardStrategy orders it across them (counter, timestamp,
	// estimate). Both are fixed once the room exists.
	Shards        *int64  `json:"shards,omitempty"`
	ShardStrategy *string `json:"shard_strategy,omitempty"`
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
}

// Invites is the answer of POST /api/v1/rooms/{room}/invites.
type Invites struct {
	Room      string    `json:"room"`
	ExpiresAt time.Time `json:"expires_at"`
	Invites   []string  `json:"invites"`
}

// RoomStats are a room's live counters.
type RoomStats struct {
	Waiting           int64   `json:"waiting"`
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

// Room is a room's settings and stats: the answer of GET and PUT
// /api/v1/rooms/{room}.
type Room struct {
	Room string `json:"room"`
	RoomSettings
	Stats RoomStats `json:"stats"`
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
