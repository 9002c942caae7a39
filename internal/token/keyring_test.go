package token_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"usher/internal/token"
)

// t0 is the tests' start time; whole seconds, as tokens keep them.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable clock, safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// newRing loads a fresh ring with one key in a temporary dir.
func newRing(tb testing.TB, clk *clock) (*token.Keyring, string) {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "keys")
	k, err := token.LoadDir(dir, clk.Now)
	if err != nil {
		tb.Fatal(err)
	}
	return k, dir
}

func load(tb testing.TB, dir string, clk *clock) *token.Keyring {
	tb.Helper()
	k, err := token.LoadDir(dir, clk.Now)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

type keyFile struct {
	KID        string    `json:"kid"`
	Created    time.Time `json:"created"`
	ActivateAt time.Time `json:"activate_at"`
	Seed       string    `json:"seed"`
}

func writeKeyFile(tb testing.TB, dir string, kf keyFile) {
	tb.Helper()
	data, err := json.Marshal(kf)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, kf.KID+".json"), data, 0o600); err != nil {
		tb.Fatal(err)
	}
}

func readKeyFile(tb testing.TB, dir, kid string) keyFile {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(dir, kid+".json"))
	if err != nil {
		tb.Fatal(err)
	}
	var kf keyFile
	if err := json.Unmarshal(data, &kf); err != nil {
		tb.Fatal(err)
	}
	return kf
}

// privateKey reads a key's Ed25519 private key from its file.
func privateKey(tb testing.TB, dir, kid string) ed25519.PrivateKey {
	tb.Helper()
	seed, err := base64.RawURLEncoding.DecodeString(readKeyFile(tb, dir, kid).Seed)
	if err != nil {
		tb.Fatal(err)
	}
	return ed25519.NewKeyFromSeed(seed)
}

// kidOf returns the kid part of a ticket or visitor cookie.
func kidOf(s string) string { return strings.Split(s, ".")[1] }

func TestLoadDirCreatesFirstKey(t *testing.T) {
	clk := newClock(t0)
	k, dir := newRing(t, clk)

	keys := k.Keys()
	if len(keys) != 1 {
		t.Fatalf("got %d keys, want 1", len(keys))
	}
	if got := keys[0]; !got.Created.Equal(t0) || !got.ActivateAt.Equal(t0) {
		t.Errorf("got key %+v, want created and activate_at %v", got, t0)
	}
	if n := len(keys[0].ID); n < 8 || n > 12 {
		t.Errorf("kid %q: got %d characters, want 8 to 12", keys[0].ID, n)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o700 {
		t.Errorf("dir mode: got %v, want 0700", got)
	}
	fi, err = os.Stat(filepath.Join(dir, keys[0].ID+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("key file mode: got %v, want 0600", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("dir holds %d entries, want 1 (no temporary files left)", len(entries))
	}

	// Loading again reads the same key and creates none.
	k2 := load(t, dir, clk)
	if diff := cmp.Diff(keys, k2.Keys()); diff != "" {
		t.Errorf("keys after reload (-first +reload):\n%s", diff)
	}
	tk := token.Ticket{Room: "r", Visitor: "v", Seq: 1, IssuedAt: t0}
	if _, err := k2.ParseTicket(k.SignTicket(tk), "r"); err != nil {
		t.Errorf("reloaded ring rejects a ticket of the first: %v", err)
	}
}

func TestLoadDirIgnoresNonKeyFiles(t *testing.T) {
	clk := newClock(t0)
	k, dir := newRing(t, clk)
	for name, data := range map[string]string{
		"README":          "not a key",
		"notes.txt":       "{}",
		".hidden.json":    "garbage",
		".key-123.tmp":    "garbage",
		"backup.json.bak": "garbage",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "old.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	k2 := load(t, dir, clk)
	if diff := cmp.Diff(k.Keys(), k2.Keys()); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
}

func TestLoadDirCorruptKeyFile(t *testing.T) {
	seed := base64.RawURLEncoding.EncodeToString(make([]byte, 32))
	tests := []struct {
		name, file, data, want string
	}{
		{"not json", "abcdefgh.json", "{", "not a key"},
		{"kid mismatch", "abcdefgh.json", `{"kid":"zzzzzzzz","created":"2026-01-01T00:00:00Z","activate_at":"2026-01-01T00:00:00Z","seed":"` + seed + `"}`, "does not match"},
		{"bad kid", "a.b.json", `{"kid":"a.b","created":"2026-01-01T00:00:00Z","activate_at":"2026-01-01T00:00:00Z","seed":"` + seed + `"}`, "base64url characters"},
		{"short seed", "abcdefgh.json", `{"kid":"abcdefgh","created":"2026-01-01T00:00:00Z","activate_at":"2026-01-01T00:00:00Z","seed":"AAAA"}`, "seed"},
		{"padded seed", "abcdefgh.json", `{"kid":"abcdefgh","created":"2026-01-01T00:00:00Z","activate_at":"2026-01-01T00:00:00Z","seed":"` + seed + `="}`, "seed"},
		{"no created", "abcdefgh.json", `{"kid":"abcdefgh","activate_at":"2026-01-01T00:00:00Z","seed":"` + seed + `"}`, "created"},
		{"no activate_at", "abcdefgh.json", `{"kid":"abcdefgh","created":"2026-01-01T00:00:00Z","seed":"` + seed + `"}`, "activate_at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, tt.file), []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			k, err := token.LoadDir(dir, newClock(t0).Now)
			if err == nil {
				t.Fatalf("got keys %v, want an error", k.Keys())
			}
			if !strings.Contains(err.Error(), tt.file) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %q, want one naming %s and saying %q", err, tt.file, tt.want)
			}
		})
	}
}

func TestRotate(t *testing.T) {
	clk := newClock(t0)
	old, dir := newRing(t, clk)
	oldKID := old.Keys()[0].ID
	tk := token.Ticket{Room: "r", Visitor: "v", Seq: 7, IssuedAt: t0}
	oldTicket := old.SignTicket(tk)
	oldPass, err := old.SignPass(token.Pass{Room: "r", Visitor: "v", ExpiresAt: t0.Add(48 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	oldVisitor := old.SignVisitor("v")

	activate := t0.Add(time.Hour)
	newKID, err := token.Rotate(dir, activate)
	if err != nil {
		t.Fatal(err)
	}
	if newKID == oldKID {
		t.Fatalf("Rotate returned the old kid %q", newKID)
	}
	k := load(t, dir, clk)
	keys := k.Keys()
	if len(keys) != 2 || keys[0].ID != newKID || keys[1].ID != oldKID {
		t.Fatalf("got keys %+v, want [%s %s] (newest first)", keys, newKID, oldKID)
	}
	if !keys[0].ActivateAt.Equal(activate) {
		t.Errorf("new key activates at %v, want %v", keys[0].ActivateAt, activate)
	}

	// Staged: the new key verifies at once but does not sign yet.
	if got := kidOf(k.SignTicket(tk)); got != oldKID {
		t.Errorf("before activate_at: signed by %s, want the old key %s", got, oldKID)
	}
	// After activate_at the new key signs, and the old key still verifies.
	clk.Set(activate)
	newTicket := k.SignTicket(tk)
	if got := kidOf(newTicket); got != newKID {
		t.Errorf("at activate_at: signed by %s, want the new key %s", got, newKID)
	}
	newPass, err := k.SignPass(token.Pass{Room: "r", Visitor: "v", ExpiresAt: t0.Add(48 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"old ticket":  second(k.ParseTicket(oldTicket, "r")),
		"old pass":    second(k.ParsePass(oldPass, "r")),
		"old visitor": second(k.ParseVisitor(oldVisitor)),
		"new ticket":  second(k.ParseTicket(newTicket, "r")),
		"new pass":    second(k.ParsePass(newPass, "r")),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A ring loaded before the key was staged does not know it.
	if _, err := old.ParseTicket(newTicket, "r"); !errors.Is(err, token.ErrInvalid) {
		t.Errorf("unstaged ring, new ticket: got %v, want ErrInvalid", err)
	}

	// Retire the old key: after a reload its tokens no longer verify.
	if err := os.Remove(filepath.Join(dir, oldKID+".json")); err != nil {
		t.Fatal(err)
	}
	k = load(t, dir, clk)
	for name, err := range map[string]error{
		"old ticket":  second(k.ParseTicket(oldTicket, "r")),
		"old pass":    second(k.ParsePass(oldPass, "r")),
		"old visitor": second(k.ParseVisitor(oldVisitor)),
	} {
		if !errors.Is(err, token.ErrInvalid) {
			t.Errorf("retired key, %s: got %v, want ErrInvalid", name, err)
		}
	}
	if _, err := k.ParseTicket(newTicket, "r"); err != nil {
		t.Errorf("after retiring the old key, new ticket: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestSigner(t *testing.T) {
	seed := func(b byte) string {
		s := make([]byte, 32)
		s[0] = b
		return base64.RawURLEncoding.EncodeToString(s)
	}
	keys := []keyFile{ // created in this order
		{KID: "key-a", Created: t0, ActivateAt: t0.Add(2 * time.Hour), Seed: seed(1)},
		{KID: "key-b", Created: t0.Add(time.Minute), ActivateAt: t0.Add(1 * time.Hour), Seed: seed(2)},
		{KID: "key-c", Created: t0.Add(2 * time.Minute), ActivateAt: t0.Add(3 * time.Hour), Seed: seed(3)},
	}
	dir := t.TempDir()
	for _, kf := range keys {
		writeKeyFile(t, dir, kf)
	}
	tests := []struct {
		now  time.Time
		want string
	}{
		{t0, "key-a"}, // none active: the oldest signs
		{t0.Add(time.Hour), "key-b"},
		{t0.Add(2 * time.Hour), "key-b"}, // a is active too, but b is newer
		{t0.Add(3 * time.Hour), "key-c"},
	}
	clk := newClock(t0)
	k := load(t, dir, clk)
	var ids []string
	for _, ki := range k.Keys() {
		ids = append(ids, ki.ID)
	}
	if diff := cmp.Diff([]string{"key-c", "key-b", "key-a"}, ids); diff != "" {
		t.Errorf("Keys order (-want +got):\n%s", diff)
	}
	for _, tt := range tests {
		clk.Set(tt.now)
		if got := kidOf(k.SignVisitor("v")); got != tt.want {
			t.Errorf("at %v: signed by %s, want %s", tt.now, got, tt.want)
		}
	}
}

// TestJWKS verifies a pass as a non-Go origin would: find the JWK by the
// header's kid, decode x, check the Ed25519 signature, read the claims.
func TestJWKS(t *testing.T) {
	clk := newClock(t0)
	_, dir := newRing(t, clk)
	if _, err := token.Rotate(dir, t0); err != nil {
		t.Fatal(err)
	}
	k := load(t, dir, clk)

	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	if err := json.Unmarshal(k.JWKS(), &set); err != nil {
		t.Fatalf("JWKS is not JSON: %v", err)
	}
	if len(set.Keys) != 2 {
		t.Fatalf("JWKS has %d keys, want 2", len(set.Keys))
	}
	byKID := map[string]ed25519.PublicKey{}
	for i, jwk := range set.Keys {
		if jwk["kid"] != k.Keys()[i].ID {
			t.Errorf("JWKS key %d: kid %q, want %q (newest first)", i, jwk["kid"], k.Keys()[i].ID)
		}
		want := map[string]string{"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig", "kid": jwk["kid"], "x": jwk["x"]}
		if diff := cmp.Diff(want, jwk); diff != "" {
			t.Errorf("JWK %d (-want +got):\n%s", i, diff)
		}
		x, err := base64.RawURLEncoding.DecodeString(jwk["x"])
		if err != nil || len(x) != ed25519.PublicKeySize {
			t.Fatalf("JWK %d: x %q is not a base64url Ed25519 key", i, jwk["x"])
		}
		byKID[jwk["kid"]] = x
	}

	pass, err := k.SignPass(token.Pass{Room: "sale", Visitor: "vis-1", ExpiresAt: t0.Add(10 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(pass, ".")
	if len(parts) != 3 {
		t.Fatalf("pass has %d parts, want 3", len(parts))
	}
	var header map[string]string
	decodeJSON(t, parts[0], &header)
	if header["alg"] != "EdDSA" {
		t.Errorf("alg %q, want EdDSA", header["alg"])
	}
	pub := byKID[header["kid"]]
	if pub == nil {
		t.Fatalf("header kid %q is not in the JWKS", header["kid"])
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	if !ed25519.Verify(pub, []byte(parts[0]+"."+parts[1]), sig) {
		t.Fatal("the pass's signature does not verify against the JWKS")
	}
	var claims map[string]any
	decodeJSON(t, parts[1], &claims)
	want := map[string]any{
		"iss": "usher", "sub": "vis-1", "aud": []any{"sale"},
		"iat": float64(t0.Unix()), "exp": float64(t0.Add(10 * time.Minute).Unix()),
	}
	if diff := cmp.Diff(want, claims); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}

	// JWKS returns a copy.
	b := k.JWKS()
	b[0] = 'x'
	if k.JWKS()[0] != '{' {
		t.Error("JWKS shares its buffer with callers")
	}
}

func decodeJSON(t *testing.T, seg string, v any) {
	t.Helper()
	data, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}
