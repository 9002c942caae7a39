// Package wire is usher's JSON API v1 as it travels: the request and response
// bodies, the visitor and room states as strings, and the names of the
// cookies and headers that usher sets and reads.
//
// Contract: wire imports only the standard library, so that the API server
// (httpapi), the gating proxy (gateway), the load generator (loadgen) and the
// planner (capacity) all speak the same words without importing each other.
// A name or a field is defined here once; a copy elsewhere is a bug.
//
// Limits: wire knows nothing of the queue. EntryFor takes plain values; the
// caller reads them from its queue view (queue.View.Wait gives the ETA and
// the poll delay).
package wire

import "time"

// Cookies usher sets for browsers. Every one is HttpOnly and SameSite=Lax.
const (
	// VisitorCookie holds the signed anonymous visitor id, path "/", for all
	// rooms, for VisitorCookieAge.
	VisitorCookie = "usher_vid"
	// TicketCookie holds the ticket the API issued; its path is the room's
	// entries path (/api/v1/rooms/<room>/), so each room has its own.
	TicketCookie = "usher_ticket"
	// PassCookie holds a pass, path "/", until the pass expires.
	PassCookie = "usher_pass"
	// LangCookie holds the waiting page's language a visitor chose, path
	// "/", for a year.
	LangCookie = "usher_lang"
)

// VisitorCookieAge is how long a browser keeps its anonymous visitor id.
const VisitorCookieAge = 30 * 24 * time.Hour

// RoomTicketCookie is the proxy's cookie that keeps a browser's place in
// room's queue: usher_ticket_<room>, path "/" (the proxy gates any path, so
// the API's path-scoped TicketCookie would not be sent back).
func RoomTicketCookie(room string) string { return "usher_ticket_" + room }

// RoomStartCookie is the proxy's cookie that keeps the position a browser
// entered room's queue at (usher_start_<room>), for the progress bar.
func RoomStartCookie(room string) string { return "usher_start_" + room }

// Headers usher sets and reads.
const (
	// PassHeader carries a pass to the client: a renewed one on a gated
	// answer, the first one when the proxy lets an admitted JSON client
	// through.
	PassHeader = "Usher-Pass"
	// ReleaseHeader, `Usher-Release: 1` on an origin's response, ends the
	// visitor's slot; the proxy strips it.
	ReleaseHeader = "Usher-Release"
	// VisitorHeader and RoomHeader name the admitted visitor and its room
	// on usher auth's passed check, for the front proxy to hand to the
	// origin.
	VisitorHeader = "Usher-Visitor"
	RoomHeader    = "Usher-Room"
	// ShownHeader carries, on a waiting client's poll, the position it
	// last showed for its ticket: usher never answers a place further
	// back on the same ticket (queue.Queue.HoldPlace).
	ShownHeader = "Usher-Shown"
	// BypassHeader carries a bypass secret (a monitoring probe's, a
	// partner system's): the edge lets the request through a gated path
	// without a place, and forwards the header to nobody.
	BypassHeader = "Usher-Bypass"
	// WaitHeader, on a waiting client's status poll, asks usher to hold
	// the poll up to that many whole seconds (at most 20) when the turn is
	// near, and to answer as soon as it comes (queue.Queue.AwaitTurn).
	WaitHeader = "Usher-Wait"
	// PassTTLHeader tells a browser the proxy let through at its turn
	// how many seconds the slot lasts without a request.
	PassTTLHeader = "Usher-Pass-TTL"
	// HeaderPrefix begins every usher header; an edge forwards none that a
	// client sent.
	HeaderPrefix = "Usher-"
)

// Visitor states: Entry.State.
const (
	// StateWaiting: in the queue.
	StateWaiting = "waiting"
	// StateAdmitted: holds an active slot; the answer carries a pass.
	StateAdmitted = "admitted"
	// StateExpired: the place or the slot was lost (left, released, timed
	// out); enter again.
	StateExpired = "expired"
	// StateClosed: the room is closed and admits nobody.
	StateClosed = "closed"
	// StateSoldOut: the same, because the sale sold out.
	StateSoldOut = "sold_out"
)

// Room states: Entry.RoomState and RoomSettings.State.
const (
	RoomOpen    = "open"
	RoomPaused  = "paused"
	RoomClosed  = "closed"
	RoomSoldOut = "sold_out"
	// RoomPreQueue (Entry.RoomState only): before the opening of a room
	// with opens_at; entrants wait unordered until the draw.
	RoomPreQueue = "pre_queue"
	// RoomDraw (Entry.RoomState only): waiting for the draw of a random
	// room's window, at OpensAt, at position 0.
	RoomDraw = "draw"
)

// BypassList answers GET /api/v1/bypass: the edge's bypass rules.
type BypassList struct {
	Rules []BypassRule `json:"rules"`
}

// BypassRule is one bypass rule: Name is its CIDR prefix or its secret's
// name (never the secret), Kind "cidr" or "secret", Passed the requests it
// let through since the edge started.
type BypassRule struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Passed int64  `json:"passed"`
}
