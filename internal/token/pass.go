package token

import (
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// issuer is the iss claim of every pass.
const issuer = "usher"

// Pass proves admission to a room until ExpiresAt. It is an EdDSA JWT that any
// origin can verify offline against the JWKS.
type Pass struct {
	Room, Visitor string
	ExpiresAt     time.Time // kept to the second
}

// SignPass returns p as a JWT signed by the ring's current key: header kid,
// claims iss "usher", sub = p.Visitor, aud = [p.Room], iat = now, exp =
// p.ExpiresAt. Room, Visitor and ExpiresAt must be set.
func (k *Keyring) SignPass(p Pass) (string, error) {
	if p.Room == "" || p.Visitor == "" || p.ExpiresAt.IsZero() {
		return "", fmt.Errorf("token: sign pass: room, visitor and expiry are required")
	}
	ky := k.signer()
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.RegisteredClaims{
		Issuer:    issuer,
		Subject:   p.Visitor,
		Audience:  jwt.ClaimStrings{p.Room},
		IssuedAt:  jwt.NewNumericDate(k.now()),
		ExpiresAt: jwt.NewNumericDate(p.ExpiresAt),
	})
	t.Header["kid"] = ky.ID
	s, err := t.SignedString(ky.priv)
	if err != nil {
		return "", fmt.Errorf("token: sign pass: %w", err)
	}
	return s, nil
}

// ParsePass verifies s (signature by a key of the ring, alg EdDSA, issuer,
// expiry) and that it admits to room. It returns ErrInvalid, ErrWrongRoom or
// ErrExpired.
func (k *Keyring) ParsePass(s, room string) (Pass, error) {
	if len(s) > MaxTokenLen {
		return Pass{}, ErrInvalid
	}
	var c jwt.RegisteredClaims
	parser := jwt.NewParser( // per call: the audience differs; a Parser is cheap next to Ed25519
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithIssuer(issuer),
		jwt.WithAudience(room),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(k.now),
		jwt.WithStrictDecoding(),
	)
	_, err := parser.ParseWithClaims(s, &c, k.passKey)
	if err != nil {
		return Pass{}, passError(err)
	}
	if c.Subject == "" {
		return Pass{}, ErrInvalid
	}
	return Pass{Room: room, Visitor: c.Subject, ExpiresAt: c.ExpiresAt.Time}, nil
}

// passKey returns the public key named by the token's kid.
func (k *Keyring) passKey(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	ky := k.byID[kid]
	if ky == nil {
		return nil, fmt.Errorf("unknown kid %q", kid)
	}
	return ky.pub, nil
}

// passError maps an error of jwt's parser to ErrInvalid, ErrWrongRoom or
// ErrExpired. Claims are validated only once the signature is good, and the
// validator reports every failed claim at once: a pass that fails any check
// other than audience and expiry is invalid; else wrong room beats expired.
func passError(err error) error {
	switch {
	case !errors.Is(err, jwt.ErrTokenInvalidClaims),
		errors.Is(err, jwt.ErrTokenInvalidIssuer),
		errors.Is(err, jwt.ErrTokenRequiredClaimMissing),
		errors.Is(err, jwt.ErrTokenNotValidYet),
		errors.Is(err, jwt.ErrTokenUsedBeforeIssued),
		errors.Is(err, jwt.ErrTokenInvalidSubject),
		errors.Is(err, jwt.ErrTokenUnverifiable),
		errors.Is(err, jwt.ErrTokenMalformed):
		return ErrInvalid
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return ErrWrongRoom
	case errors.Is(err, jwt.ErrTokenExpired):
		return ErrExpired
	}
	return ErrInvalid
}
