// Package identity verifies identity assertions: short-lived JWTs that a
// site with logged-in users signs for one of its accounts and hands to the
// visitor, so that usher queues the account rather than the browser. One
// account is then one place, on every device, and a bot cannot mint
// visitors faster than the site mints accounts.
//
// An assertion is a JWT with the account id as sub (1 to 100 printable ASCII
// bytes) and an exp at most MaxLifetime after now, signed with HS256 and a
// shared secret of at least 32 bytes, or with EdDSA and an Ed25519 key whose
// public half usher is given. Nothing else is required; an aud, if present,
// must name "usher". The account's visitor id is "acct:" + sub.
package identity

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"usher/internal/fault"
)

// MaxLifetime is the longest an assertion may live: it is handed over in a
// redirect or a request, not kept.
const MaxLifetime = 10 * time.Minute

// MaxToken is the longest assertion accepted, in bytes.
const MaxToken = 4096

var (
	// ErrRequired: the room asks for an identity and the entry has none.
	ErrRequired = fault.New(fault.IdentityRequired, "this room admits signed-in visitors only: sign in on the site first")
	// ErrInvalid: the assertion is malformed, forged, expired, too long-lived,
	// or no verifier is configured.
	ErrInvalid = fault.New(fault.IdentityInvalid, "identity assertion invalid: sign in again")
)

// Verifier checks assertions with a secret (HS256), a public key (EdDSA),
// or both. Its zero value verifies nothing.
type Verifier struct {
	secret []byte
	public ed25519.PublicKey
	now    func() time.Time
}

// New returns a verifier. secret may be empty (no HS256) and public nil (no
// EdDSA); with neither, every assertion is invalid.
func New(secret []byte, public ed25519.PublicKey, now func() time.Time) (*Verifier, error) {
	if len(secret) > 0 && len(secret) < 32 {
		return nil, fmt.Errorf("identity secret: %d bytes, want at least 32", len(secret))
	}
	return &Verifier{secret: secret, public: public, now: now}, nil
}

// LoadPublicKey reads an Ed25519 public key in PEM (PKIX) form.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%s: a %T, want an Ed25519 public key", path, k)
	}
	return pub, nil
}

// Enabled reports whether the verifier can accept any assertion.
func (v *Verifier) Enabled() bool { return v != nil && (len(v.secret) > 0 || v.public != nil) }

// Visitor verifies an assertion and returns the account's visitor id.
func (v *Verifier) Visitor(assertion string) (string, error) {
	if !v.Enabled() || len(assertion) > MaxToken {
		return "", ErrInvalid
	}
	var c jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(assertion, &c, v.key,
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg(), jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(v.now),
	)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(c.Audience) > 0 {
		ok := false
		for _, a := range c.Audience {
			ok = ok || a == "usher"
		}
		if !ok {
			return "", fmt.Errorf("%w: aud %v does not name usher", ErrInvalid, c.Audience)
		}
	}
	if c.ExpiresAt.Sub(v.now()) > MaxLifetime {
		return "", fmt.Errorf("%w: exp more than %v away", ErrInvalid, MaxLifetime)
	}
	if !validAccount(c.Subject) {
		return "", fmt.Errorf("%w: sub: want 1 to 100 printable ASCII bytes without spaces", ErrInvalid)
	}
	return "acct:" + c.Subject, nil
}

func (v *Verifier) key(t *jwt.Token) (any, error) {
	switch t.Method.Alg() {
	case jwt.SigningMethodHS256.Alg():
		if len(v.secret) > 0 {
			return v.secret, nil
		}
	case jwt.SigningMethodEdDSA.Alg():
		if v.public != nil {
			return v.public, nil
		}
	}
	return nil, errors.New("no key for this algorithm")
}

func validAccount(s string) bool {
	if len(s) == 0 || len(s) > 100 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
