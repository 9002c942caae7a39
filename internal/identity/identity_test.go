package identity_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"usher/internal/identity"
)

var (
	now    = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	secret = []byte("0123456789abcdef0123456789abcdef")
)

func sign(t *testing.T, m jwt.SigningMethod, key any, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVisitor(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	v, err := identity.New(secret, pub, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	exp := now.Add(5 * time.Minute).Unix()
	good := jwt.MapClaims{"sub": "alice", "exp": exp}
	for _, tc := range []struct {
		name, token, want string
	}{
		{"HS256", sign(t, jwt.SigningMethodHS256, secret, good), "acct:alice"},
		{"EdDSA", sign(t, jwt.SigningMethodEdDSA, priv, good), "acct:alice"},
		{"aud usher", sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "bob", "exp": exp, "aud": "usher"}), "acct:bob"},
	} {
		if got, err := v.Visitor(tc.token); err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, good).SignedString(jwt.UnsafeAllowNoneSignatureType)
	for _, tc := range []struct{ name, token string }{
		{"wrong secret", sign(t, jwt.SigningMethodHS256, []byte("another secret of thirty-two bytes!"), good)},
		{"wrong key", sign(t, jwt.SigningMethodEdDSA, otherPriv, good)},
		{"alg none", none},
		{"expired", sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "exp": now.Add(-time.Second).Unix()})},
		{"no exp", sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice"})},
		{"lives too long", sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "exp": now.Add(time.Hour).Unix()})},
		{"other audience", sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "alice", "exp": exp, "aud": "shop"})},
		{"no sub", sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"exp": exp})},
		{"sub with space", sign(t, jwt.SigningMethodHS256, secret, jwt.MapClaims{"sub": "a b", "exp": exp})},
		{"garbage", "not.a.jwt"},
	} {
		if got, err := v.Visitor(tc.token); !errors.Is(err, identity.ErrInvalid) {
			t.Errorf("%s: %q, %v; want ErrInvalid", tc.name, got, err)
		}
	}
	var off *identity.Verifier
	if _, err := off.Visitor(sign(t, jwt.SigningMethodHS256, secret, good)); !errors.Is(err, identity.ErrInvalid) {
		t.Errorf("no verifier configured: %v, want ErrInvalid", err)
	}
	if _, err := identity.New([]byte("short"), nil, time.Now); err == nil {
		t.Error("a 5-byte secret was accepted")
	}
}
