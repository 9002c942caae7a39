package token_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"usher/internal/token"
)

var update = flag.Bool("update", false, "rewrite "+vectorsPath+" from internal/token")

// vectorsPath is the conformance table that every connector
// (connectors/<name>/) and this package's ParsePass must pass.
const vectorsPath = "../../connectors/testdata/vectors.json"

// vectorFile is the table's JSON form; connectors/README.md explains it.
type vectorFile struct {
	About         string   `json:"about"`
	Alg           string   `json:"alg"`
	Issuer        string   `json:"issuer"`
	LeewaySeconds int      `json:"leeway_seconds"`
	MaxTokenBytes int      `json:"max_token_bytes"`
	Verdicts      []string `json:"verdicts"`
	Cases         []vector `json:"cases"`
}

type vector struct {
	Name  string `json:"name"`
	About string `json:"about"`
	// JWKS is what the verifier holds at first; JWKSRefetched, when set,
	// is what a fetch made on an unknown kid returns.
	JWKS          json.RawMessage `json:"jwks"`
	JWKSRefetched json.RawMessage `json:"jwks_refetched,omitempty"`
	Token         string          `json:"token"`
	Room          string          `json:"room"`
	Now           string          `json:"now"`
	Verdict       string          `json:"verdict"`
	Visitor       string          `json:"visitor,omitempty"`
	ExpiresAt     string          `json:"expires_at,omitempty"`
}

// Verdicts: the codes of the token package's errors, as the API answers
// them, and "valid".
const (
	valid     = "valid"
	invalid   = "token_invalid"
	expired   = "token_expired"
	wrongRoom = "token_wrong_room"
)

// nowLayout writes a vector's now: RFC 3339, UTC, in milliseconds.
const nowLayout = "2006-01-02T15:04:05.000Z07:00"

// vectorKey is a fixed key, so that -update writes the same file twice.
type vectorKey struct {
	kid  string
	seed []byte
}

func newVectorKey(kid, label string) vectorKey {
	s := sha256.Sum256([]byte("usher conformance vectors " + label))
	return vectorKey{kid: kid, seed: s[:]}
}

func (k vectorKey) priv() ed25519.PrivateKey { return ed25519.NewKeyFromSeed(k.seed) }

// vectorRing loads keys, each created and active from created, through
// the key files an operator's directory holds.
func vectorRing(t *testing.T, clk *clock, created time.Time, keys ...vectorKey) *token.Keyring {
	t.Helper()
	dir := t.TempDir()
	for i, k := range keys {
		at := created.Add(time.Duration(i) * time.Hour) // the last key is the newest: it signs
		writeKeyFile(t, dir, keyFile{KID: k.kid, Created: at, ActivateAt: at, Seed: base64.RawURLEncoding.EncodeToString(k.seed)})
	}
	return load(t, dir, clk)
}

// jws signs header and claims (JSON-encoded as given) with priv: an
// EdDSA token made by hand, for the cases SignPass never makes.
func jws(t *testing.T, priv ed25519.PrivateKey, header, claims any) string {
	t.Helper()
	in := segment(t, header) + "." + segment(t, claims)
	return in + "." + b64(ed25519.Sign(priv, []byte(in)))
}

func segment(t *testing.T, v any) string {
	t.Helper()
	if s, ok := v.(string); ok {
		return b64([]byte(s))
	}
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b64(data)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

type obj = map[string]any

// vectorCase is one row of the table before it is written.
type vectorCase struct {
	name, about string
	ring        *token.Keyring // what verifies, after any refetch
	first       *token.Keyring // the JWKS held at first, when it lacks the token's key
	token       string
	room        string
	now         time.Time
	verdict     string
}

// vectorCases builds the table: passes usher signs (SignPass), and tokens
// made by hand for what an attacker or a lenient decoder might bring.
func vectorCases(t *testing.T) ([]vectorCase, *clock) {
	t.Helper()
	a := newVectorKey("vectors-key-a", "a")
	b := newVectorKey("vectors-key-b", "b")
	x := newVectorKey("vectors-key-a", "x") // a's kid, another private key
	clk := newClock(t0)
	ringA := vectorRing(t, clk, t0.Add(-48*time.Hour), a)
	ringAB := vectorRing(t, clk, t0.Add(-48*time.Hour), a, b)

	const visitor = "0BCAJptp8EyRb1qUcaVThg"
	iat, exp := t0, t0.Add(5*time.Minute) // a room's default active_ttl
	sign := func(k *token.Keyring, room, visitor string, exp time.Time) string {
		t.Helper()
		clk.Set(iat)
		s, err := k.SignPass(token.Pass{Room: room, Visitor: visitor, ExpiresAt: exp})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	pass := sign(ringA, "sale", visitor, exp)
	rotated := sign(ringAB, "sale", visitor, exp)
	head, claims, sig := parts(t, pass)
	header := obj{"alg": "EdDSA", "kid": a.kid, "typ": "JWT"}
	claimsWith := func(set obj, del ...string) obj {
		c := obj{"iss": "usher", "sub": visitor, "aud": []string{"sale"}, "iat": iat.Unix(), "exp": exp.Unix()}
		for k, v := range set {
			c[k] = v
		}
		for _, k := range del {
			delete(c, k)
		}
		return c
	}
	byA := func(c obj) string { return jws(t, a.priv(), header, c) }
	rawSig, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(rawSig)
	flipped[0] ^= 1
	hs256 := func() string {
		in := segment(t, obj{"alg": "HS256", "kid": a.kid, "typ": "JWT"}) + "." + claims
		m := hmac.New(sha256.New, a.priv().Public().(ed25519.PublicKey))
		m.Write([]byte(in))
		return in + "." + b64(m.Sum(nil))
	}()
	// The signature's S + L: the same point equation, a second spelling
	// that RFC 8032 verifiers must refuse (S must be below L).
	malleable := func() string {
		l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
		s := make([]byte, 32)
		for i := range s { // little-endian to big-endian
			s[i] = rawSig[63-i]
		}
		sum := new(big.Int).Add(new(big.Int).SetBytes(s), l).FillBytes(make([]byte, 32))
		out := bytes.Clone(rawSig)
		for i := range 32 {
			out[32+i] = sum[31-i]
		}
		return head + "." + claims + "." + b64(out)
	}()
	// An 86-character signature spells 516 bits for 512: the last
	// character's 4 low bits are unused, and 0 in the canonical spelling.
	last := strings.IndexByte(base64URLAlphabet, sig[len(sig)-1])
	noncanonical := head + "." + claims + "." + sig[:len(sig)-1] + string(base64URLAlphabet[last^1])
	// A pass that holds - or _, to spell with + and / instead.
	var stdAlphabet string
	for i := 0; stdAlphabet == ""; i++ {
		s := sign(ringA, "sale", fmt.Sprintf("visitor-%d", i), exp)
		if std := strings.NewReplacer("-", "+", "_", "/").Replace(s); std != s {
			stdAlphabet = std
		}
	}

	ms := time.Millisecond
	cases := []vectorCase{
		{name: "valid", about: "a pass usher signed, checked a minute after it was issued",
			token: pass, room: "sale", now: iat.Add(time.Minute), verdict: valid},
		{name: "valid_last_millisecond", about: "clock skew within the allowance (none): valid until the millisecond before exp",
			token: pass, room: "sale", now: exp.Add(-ms), verdict: valid},
		{name: "expired_at_exp", about: "exp is the first instant the pass is no longer valid",
			token: pass, room: "sale", now: exp, verdict: expired},
		{name: "expired", about: "an hour after exp",
			token: pass, room: "sale", now: exp.Add(time.Hour), verdict: expired},
		{name: "skew_ahead_beyond_allowance", about: "the verifier's clock 1 ms past exp: beyond the allowance (none), expired",
			token: pass, room: "sale", now: exp.Add(ms), verdict: expired},
		{name: "skew_behind_issued_in_future", about: "the verifier's clock 30 s behind usher's: iat in the future is not checked, the pass is valid",
			token: pass, room: "sale", now: iat.Add(-30 * time.Second), verdict: valid},
		{name: "other_room", about: "a valid pass for room sale shown to room other",
			token: pass, room: "other", now: iat.Add(time.Minute), verdict: wrongRoom},
		{name: "other_room_and_expired", about: "a wrong room wins over an expiry",
			token: pass, room: "other", now: exp.Add(time.Hour), verdict: wrongRoom},
		{name: "forged_signature", about: "one bit of the signature flipped",
			token: head + "." + claims + "." + b64(flipped), room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "forged_claims", about: "the claims changed (exp a day later) under the original signature",
			token: head + "." + segment(t, claimsWith(obj{"exp": exp.Add(24 * time.Hour).Unix()})) + "." + sig,
			room:  "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "forged_other_key", about: "signed by another private key under the kid of a key in the JWKS",
			token: jws(t, x.priv(), header, claimsWith(nil)), room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "forged_other_room_signature", about: "room other's signature on claims naming room sale",
			token: head + "." + segment(t, claimsWith(nil)) + "." + parts3(t, sign(ringA, "other", visitor, exp)),
			room:  "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "malleable_signature", about: "S + L: another spelling of a valid signature, refused (RFC 8032: S < L)",
			token: malleable, room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "alg_none", about: "alg none and no signature",
			token: segment(t, obj{"alg": "none", "kid": a.kid, "typ": "JWT"}) + "." + claims + ".",
			room:  "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "alg_none_with_signature", about: "alg none, the original signature kept",
			token: segment(t, obj{"alg": "none", "kid": a.kid, "typ": "JWT"}) + "." + claims + "." + sig,
			room:  "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "alg_hs256_public_key_as_secret", about: "HS256 keyed with the public key's 32 bytes (key confusion)",
			token: hs256, room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "alg_ed25519_name", about: "alg Ed25519 (RFC 9864's name) over a good signature: only EdDSA is accepted",
			token: jws(t, a.priv(), obj{"alg": "Ed25519", "kid": a.kid, "typ": "JWT"}, claimsWith(nil)),
			room:  "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "alg_missing", about: "no alg in the header",
			token: jws(t, a.priv(), obj{"kid": a.kid, "typ": "JWT"}, claimsWith(nil)),
			room:  "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "rotated_key", about: "signed by a key the first JWKS lacks; the JWKS fetched again on the unknown kid has it",
			first: ringA, ring: ringAB, token: rotated, room: "sale", now: iat.Add(time.Minute), verdict: valid},
		{name: "rotated_key_old_pass", about: "a pass of the older key verifies against the new JWKS",
			ring: ringAB, token: pass, room: "sale", now: iat.Add(time.Minute), verdict: valid},
		{name: "unknown_kid", about: "a kid neither JWKS holds, before or after the refetch",
			first: ringA, ring: ringAB,
			token: jws(t, x.priv(), obj{"alg": "EdDSA", "kid": "vectors-key-z", "typ": "JWT"}, claimsWith(nil)),
			room:  "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "kid_missing", about: "no kid in the header",
			token: jws(t, a.priv(), obj{"alg": "EdDSA", "typ": "JWT"}, claimsWith(nil)), room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "wrong_issuer", about: "signed by the key, iss other than usher",
			token: byA(claimsWith(obj{"iss": "someone"})), room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "issuer_missing", token: byA(claimsWith(nil, "iss")), room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "exp_missing", token: byA(claimsWith(nil, "exp")), room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "sub_missing", token: byA(claimsWith(nil, "sub")), room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "sub_empty", token: byA(claimsWith(obj{"sub": ""})), room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "sub_not_string", token: byA(claimsWith(obj{"sub": 7})), room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "audience_missing", about: "no aud at all is invalid, not another room",
			token: byA(claimsWith(nil, "aud")), room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "audience_string", about: "aud as one string rather than a list",
			token: byA(claimsWith(obj{"aud": "sale"})), room: "sale", now: iat.Add(time.Minute), verdict: valid},
		{name: "audience_list", about: "the room anywhere in a list of audiences",
			token: byA(claimsWith(obj{"aud": []string{"other", "sale"}})), room: "sale", now: iat.Add(time.Minute), verdict: valid},
		{name: "audience_not_strings", about: "an aud list holding a number",
			token: byA(claimsWith(obj{"aud": []any{"sale", 7}})), room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "not_before_future", about: "nbf a minute after now (usher sets none; a verifier honours it)",
			token: byA(claimsWith(obj{"nbf": iat.Add(2 * time.Minute).Unix()})), room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "exp_fraction_truncated", about: "exp 300.75 s after iat counts as 300: dates are whole seconds",
			token: byA(claimsWith(obj{"exp": float64(exp.Unix()) + 0.75})), room: "sale", now: exp.Add(500 * ms), verdict: expired},
		{name: "exp_not_number", token: byA(claimsWith(obj{"exp": true})), room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "claims_not_object", token: jws(t, a.priv(), header, "[]"), room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "header_not_json", token: jws(t, a.priv(), "{alg:EdDSA}", claimsWith(nil)), room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "signature_noncanonical_base64", about: "the signature's last character with an unused bit set: the same bytes, refused (strict base64url)",
			token: noncanonical, room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "signature_padded", about: "base64url with = padding, refused",
			token: pass + "==", room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "standard_base64_alphabet", about: "+ and / for - and _, refused",
			token: stdAlphabet, room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "two_segments", token: head + "." + claims, room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "four_segments", token: pass + ".", room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "empty", token: "", room: "sale", now: iat.Add(time.Minute), verdict: invalid},
		{name: "too_long", about: "a signed pass longer than max_token_bytes (a visitor id of 3,100 characters)",
			token: sign(ringA, "sale", strings.Repeat("v", 3100), exp), room: "sale", now: iat.Add(time.Minute), verdict: invalid},
	}
	for i := range cases {
		if cases[i].ring == nil {
			cases[i].ring = ringA
		}
	}
	return cases, clk
}

const base64URLAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

func parts(t *testing.T, s string) (head, claims, sig string) {
	t.Helper()
	p := strings.Split(s, ".")
	if len(p) != 3 {
		t.Fatalf("token %q: want 3 parts", s)
	}
	return p[0], p[1], p[2]
}

func parts3(t *testing.T, s string) string { _, _, sig := parts(t, s); return sig }

// verdictOf maps ParsePass's error to the table's verdict.
func verdictOf(err error) string {
	switch {
	case err == nil:
		return valid
	case errors.Is(err, token.ErrExpired):
		return expired
	case errors.Is(err, token.ErrWrongRoom):
		return wrongRoom
	case errors.Is(err, token.ErrInvalid):
		return invalid
	}
	return "error: " + err.Error()
}

// TestVectors checks that ParsePass gives every case of the conformance
// table its expected verdict (so the Go gate passes the table the
// connectors pass), and that the file is what this package writes; with
// -update it rewrites the file.
func TestVectors(t *testing.T) {
	cases, clk := vectorCases(t)
	f := vectorFile{
		About: "usher pass conformance vectors, written by `go test ./internal/token -run TestVectors -update`; " +
			"every connector and internal/token's ParsePass give each case its verdict. Format: connectors/README.md.",
		Alg: "EdDSA", Issuer: "usher", LeewaySeconds: 0, MaxTokenBytes: token.MaxTokenLen,
		Verdicts: []string{valid, invalid, expired, wrongRoom},
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("case %s twice", c.name)
		}
		seen[c.name] = true
		ring := c.ring
		clk.Set(c.now)
		got, err := ring.ParsePass(c.token, c.room)
		if v := verdictOf(err); v != c.verdict {
			t.Errorf("%s: ParsePass verdict %s, want %s", c.name, v, c.verdict)
		}
		v := vector{Name: c.name, About: c.about, Token: c.token, Room: c.room,
			Now: c.now.UTC().Format(nowLayout), Verdict: c.verdict, JWKS: ring.JWKS()}
		if c.first != nil {
			v.JWKS, v.JWKSRefetched = c.first.JWKS(), ring.JWKS()
		}
		if c.verdict == valid {
			v.Visitor, v.ExpiresAt = got.Visitor, got.ExpiresAt.UTC().Format(time.RFC3339)
		}
		f.Cases = append(f.Cases, v)
	}
	want, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *update {
		if err := os.MkdirAll(filepath.Dir(vectorsPath), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vectorsPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatalf("%v (write it: go test ./internal/token -run TestVectors -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what this test writes (-file +test):\n%s\nrun go test ./internal/token -run TestVectors -update",
			vectorsPath, cmp.Diff(string(got), string(want)))
	}
}
