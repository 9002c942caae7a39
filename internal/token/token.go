// Package token signs and verifies what a visitor carries: the anonymous
// visitor cookie, the ticket that proves a place in a room's queue, and the
// pass that proves admission to a room. It also owns the signing keys (one
// JSON file per key in a directory), their rotation and the JWKS.
//
// # Contract
//
//   - A Keyring is immutable once loaded and safe for concurrent use. The
//     newest key (by created) whose activate_at has passed signs; when no key
//     is active yet, the oldest key signs. Every key in the ring verifies.
//   - Passes are EdDSA (Ed25519) JWTs that any origin can verify offline
//     against the JWKS. ExpiresAt is kept to the second.
//   - Tickets and visitor cookies are checked on every status poll, so they
//     are not JWTs: they carry an HMAC-SHA256 whose secret is derived from
//     the key's Ed25519 seed, one secret per kind. Only holders of the key
//     directory can mint or verify them; the JWKS does not help an origin.
//     A ticket's IssuedAt is kept to the second.
//   - Parse errors are exactly one of ErrInvalid, ErrExpired, ErrWrongRoom
//     (test with errors.Is). A token both for another room and expired gets
//     ErrWrongRoom. Parsing never panics, whatever the input.
//
// # Formats
//
// All three are made of [A-Za-z0-9_.-], safe in a cookie value and in an
// Authorization header. Base64url is without padding and only its canonical
// spelling is accepted, so a token has one spelling.
//
//	pass     <header>.<claims>.<signature>      JWT, alg EdDSA, header kid;
//	         claims iss "usher", sub visitor, aud [room], iat, exp
//	ticket   t1.<kid>.<payload>.<mac>           payload: uvarint(len(room)) room
//	         varint(seq) varint(issued-at, unix seconds) visitor
//	visitor  v1.<kid>.<base64url id>.<mac>
//
// The mac is HMAC-SHA256 over everything before the last dot, keyed with
// HMAC-SHA256(seed, "usher ticket v1") or HMAC-SHA256(seed, "usher visitor
// v1").
//
// # Limits
//
//   - Tickets, passes and visitor cookies are bearer tokens: whoever holds one
//     can use it. A ticket or pass is bound to one room, not to a client.
//   - There is no revocation list: a token dies when it expires (tickets
//     TicketTTL after issue, passes at ExpiresAt, visitor cookies never) or
//     when the key that signed it is retired: its file deleted and the ring
//     reloaded.
//   - Expiry is checked against each instance's clock, with no leeway:
//     instances' clocks must be roughly in sync.
//   - Tokens longer than MaxTokenLen are rejected. With the queue's limits
//     (room ≤ 64 bytes, visitor ≤ 128 printable ASCII bytes) every token
//     stays under 1.5 KiB; a ticket for a 22-character visitor id is about
//     100 bytes, a pass about 300.
//   - A Keyring does not watch its directory: a key staged with Rotate, or a
//     key file deleted, takes effect on the next LoadDir. Every instance must
//     hold the same key files (copy them, or share the directory); instances
//     that each create a first key in an empty directory cannot verify each
//     other's tokens.
package token

import (
	"encoding/base64"
	"time"

	"usher/internal/fault"
)

// Errors returned by the Parse methods. Signing errors and key-file errors are
// ordinary errors.
var (
	// ErrInvalid: malformed, forged, signed by an unknown key id, or a token
	// of another kind.
	ErrInvalid   = fault.New(fault.TokenInvalid, "token invalid")
	ErrExpired   = fault.New(fault.TokenExpired, "token expired")
	ErrWrongRoom = fault.New(fault.TokenWrongRoom, "token for another room")
)

// TicketTTL is how long a ticket (proof of a queue place) stays valid after it
// is issued.
const TicketTTL = 24 * time.Hour

// MaxTokenLen is the longest ticket, pass or visitor cookie that the Parse
// methods accept, in bytes (a browser keeps cookies up to 4096 bytes).
const MaxTokenLen = 4096

// b64 is base64url without padding, strict: of the encodings that decode to
// the same bytes, only the canonical one is accepted, so a token has exactly
// one spelling. Read-only.
var b64 = base64.RawURLEncoding.Strict()
