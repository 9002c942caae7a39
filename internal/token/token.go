// Package token signs and verifies what a visitor carries: the anonymous
// visitor cookie, the ticket that proves a place in a room's queue, the pass
// that proves admission to a room, proof-of-work challenges, presale invites
// and lane codes. It owns the signing keys (a JSON file each), rotation and
// JWKS.
//
// Passes are EdDSA JWTs that any origin can verify offline against the JWKS;
// the other tokens carry an HMAC-SHA256 that only holders of the key
// directory can mint or check. Parse errors are exactly one of ErrInvalid,
// ErrExpired and ErrWrongRoom, and parsing never panics.
//
// Limits: tokens are bearer tokens; a ticket or pass is bound to a room, not
// to a client. There is no revocation: a token dies when it expires (a
// visitor cookie never does) or its key's file is deleted and the ring
// reloaded. Expiry is checked on each instance's clock with no leeway.
package token

import (
	"encoding/base64"
	"time"

	"usher/internal/fault"
)

// Errors returned by the Parse methods (a wrong room wins over an expiry).
// Signing errors and key-file errors are ordinary errors. Formats:
// docs/architecture.md#tokens.
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
