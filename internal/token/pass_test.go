package token_test

import (
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"usher/internal/token"
)

func TestPassRoundTrip(t *testing.T) {
	clk := newClock(t0)
	k, _ := newRing(t, clk)
	tests := []token.Pass{
		{Room: "sale", Visitor: "Zr3cq0kqH2wqU7dc2hR7bA", ExpiresAt: t0.Add(10 * time.Minute)},
		{Room: "a", Visitor: "visitor with spaces; \"quotes\"", ExpiresAt: t0.Add(time.Second)},
		{Room: strings.Repeat("r", 64), Visitor: strings.Repeat("v", 128), ExpiresAt: t0.Add(24 * time.Hour)},
	}
	for _, want := range tests {
		s, err := k.SignPass(want)
		if err != nil {
			t.Fatal(err)
		}
		checkSafe(t, s)
		got, err := k.ParsePass(s, want.Room)
		if err != nil {
			t.Errorf("ParsePass(SignPass(%+v)): %v", want, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
}

func TestSignPassRequiresFields(t *testing.T) {
	k, _ := newRing(t, newClock(t0))
	for _, p := range []token.Pass{
		{Visitor: "v", ExpiresAt: t0},
		{Room: "r", ExpiresAt: t0},
		{Room: "r", Visitor: "v"},
	} {
		if s, err := k.SignPass(p); err == nil {
			t.Errorf("SignPass(%+v) = %q, want an error", p, s)
		}
	}
}

// signJWT signs claims as an EdDSA JWT with header kid, bypassing SignPass.
func signJWT(t *testing.T, priv ed25519.PrivateKey, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParsePassErrors(t *testing.T) {
	clk := newClock(t0)
	k, dir := newRing(t, clk)
	kid := k.Keys()[0].ID
	priv := privateKey(t, dir, kid)
	exp := t0.Add(time.Hour)
	valid, err := k.SignPass(token.Pass{Room: "sale", Visitor: "v1", ExpiresAt: exp})
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(valid, ".")
	stranger, strangerDir := newRing(t, clk)
	strangerKID := stranger.Keys()[0].ID
	claims := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": "usher", "sub": "v1", "aud": []string{"sale"}, "iat": t0.Unix(), "exp": exp.Unix()}
		edit(c)
		return c
	}
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims(func(jwt.MapClaims) {})).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	hsTok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(func(jwt.MapClaims) {}))
	hsTok.Header["kid"] = kid
	hs, err := hsTok.SignedString([]byte(priv.Public().(ed25519.PublicKey))) // alg confusion: MAC keyed with the public key
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		s    string
		room string
		now  time.Time
		want error
	}{
		{"empty", "", "sale", t0, token.ErrInvalid},
		{"garbage", "not.a.jwt", "sale", t0, token.ErrInvalid},
		{"truncated", valid[:len(valid)-1], "sale", t0, token.ErrInvalid},
		{"no signature", parts[0] + "." + parts[1] + ".", "sale", t0, token.ErrInvalid},
		{"forged signature", parts[0] + "." + parts[1] + "." + flip(parts[2], 10), "sale", t0, token.ErrInvalid},
		{"signature not canonical", parts[0] + "." + parts[1] + "." + respell(parts[2]), "sale", t0, token.ErrInvalid},
		{"ticket", k.SignTicket(token.Ticket{Room: "sale", Visitor: "v1", IssuedAt: t0}), "sale", t0, token.ErrInvalid},
		{"visitor cookie", k.SignVisitor("v1"), "sale", t0, token.ErrInvalid},
		{"unknown kid", must(stranger.SignPass(token.Pass{Room: "sale", Visitor: "v1", ExpiresAt: exp})), "sale", t0, token.ErrInvalid},
		{"our kid, other key", signJWT(t, privateKey(t, strangerDir, strangerKID), kid, claims(func(jwt.MapClaims) {})), "sale", t0, token.ErrInvalid},
		{"no kid", signJWT(t, priv, "", claims(func(jwt.MapClaims) {})), "sale", t0, token.ErrInvalid},
		{"alg none", none, "sale", t0, token.ErrInvalid},
		{"alg HS256 with the public key", hs, "sale", t0, token.ErrInvalid},
		{"other issuer", signJWT(t, priv, kid, claims(func(c jwt.MapClaims) { c["iss"] = "evil" })), "sale", t0, token.ErrInvalid},
		{"no issuer", signJWT(t, priv, kid, claims(func(c jwt.MapClaims) { delete(c, "iss") })), "sale", t0, token.ErrInvalid},
		{"no exp", signJWT(t, priv, kid, claims(func(c jwt.MapClaims) { delete(c, "exp") })), "sale", t0, token.ErrInvalid},
		{"exp not a number", signJWT(t, priv, kid, claims(func(c jwt.MapClaims) { c["exp"] = "soon" })), "sale", t0, token.ErrInvalid},
		{"no sub", signJWT(t, priv, kid, claims(func(c jwt.MapClaims) { delete(c, "sub") })), "sale", t0, token.ErrInvalid},
		{"no aud", signJWT(t, priv, kid, claims(func(c jwt.MapClaims) { delete(c, "aud") })), "sale", t0, token.ErrInvalid},
		{"not yet valid", signJWT(t, priv, kid, claims(func(c jwt.MapClaims) { c["nbf"] = exp.Unix() - 1 })), "sale", t0, token.ErrInvalid},
		{"other issuer, expired", signJWT(t, priv, kid, claims(func(c jwt.MapClaims) { c["iss"] = "evil" })), "sale", exp, token.ErrInvalid},
		{"too long", signJWT(t, priv, kid, claims(func(c jwt.MapClaims) { c["pad"] = strings.Repeat("x", token.MaxTokenLen) })), "sale", t0, token.ErrInvalid},
		{"wrong room", valid, "other", t0, token.ErrWrongRoom},
		{"expired", valid, "sale", exp, token.ErrExpired},
		{"expired, wrong room", valid, "other", exp, token.ErrWrongRoom},
		{"valid until exp", valid, "sale", exp.Add(-time.Second), nil},
		{"aud as a string", signJWT(t, priv, kid, claims(func(c jwt.MapClaims) { c["aud"] = "sale" })), "sale", t0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk.Set(tt.now)
			got, err := k.ParsePass(tt.s, tt.room)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Fatalf("ParsePass(%q, %q): got %+v, %v; want %v", tt.s, tt.room, got, err, tt.want)
			}
			if err != nil && got != (token.Pass{}) {
				t.Errorf("got %+v with the error, want a zero Pass", got)
			}
		})
	}
}
