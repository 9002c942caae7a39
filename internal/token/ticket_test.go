package token_test

import (
	"encoding/base64"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"usher/internal/token"
)

// checkSafe fails unless s is made of [A-Za-z0-9._-]: safe in a cookie value
// and an Authorization header.
func checkSafe(t *testing.T, s string) {
	t.Helper()
	for _, c := range s {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			t.Errorf("token %q holds %q", s, c)
			return
		}
	}
}

func TestTicketRoundTrip(t *testing.T) {
	clk := newClock(t0)
	k, _ := newRing(t, clk)
	tests := []token.Ticket{
		{Room: "sale", Visitor: "Zr3cq0kqH2wqU7dc2hR7bA", Seq: 1, IssuedAt: t0},
		{Room: "a", Visitor: "", Seq: 0, IssuedAt: t0.Add(-time.Hour)},
		{Room: "big-sale-2026", Visitor: "visitor with spaces; \"quotes\", commas", Seq: math.MaxInt64, IssuedAt: t0},
		{Room: "r", Visitor: "ünïcödé ✓", Seq: -5, IssuedAt: t0.Add(time.Second - token.TicketTTL)},
		{Room: strings.Repeat("r", 64), Visitor: strings.Repeat("v", 128), Seq: math.MinInt64, IssuedAt: t0},
		{Room: "", Visitor: "v", Seq: 3, IssuedAt: t0},
	}
	for _, want := range tests {
		s := k.SignTicket(want)
		checkSafe(t, s)
		if !strings.HasPrefix(s, "t1.") {
			t.Errorf("ticket %q does not start with t1.", s)
		}
		got, err := k.ParseTicket(s, want.Room)
		if err != nil {
			t.Errorf("ParseTicket(SignTicket(%+v)): %v", want, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
}

func TestTicketKeepsSeconds(t *testing.T) {
	k, _ := newRing(t, newClock(t0))
	in := token.Ticket{Room: "r", Visitor: "v", Seq: 1, IssuedAt: t0.Add(999 * time.Millisecond).In(time.FixedZone("X", 3600))}
	got, err := k.ParseTicket(k.SignTicket(in), "r")
	if err != nil {
		t.Fatal(err)
	}
	if !got.IssuedAt.Equal(t0) || got.IssuedAt.Location() != time.UTC {
		t.Errorf("IssuedAt: got %v, want %v", got.IssuedAt, t0)
	}
}

func TestParseTicketErrors(t *testing.T) {
	clk := newClock(t0)
	k, dir := newRing(t, clk)
	kid := k.Keys()[0].ID
	tk := token.Ticket{Room: "sale", Visitor: "v1", Seq: 42, IssuedAt: t0}
	valid := k.SignTicket(tk)
	parts := strings.Split(valid, ".") // t1 kid payload mac
	pass, err := k.SignPass(token.Pass{Room: "sale", Visitor: "v1", ExpiresAt: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}

	// A ring whose key has the same kid but another seed: its tickets are forgeries.
	forgerDir := t.TempDir()
	kf := readKeyFile(t, dir, kid)
	kf.Seed = base64.RawURLEncoding.EncodeToString(make([]byte, 32))
	writeKeyFile(t, forgerDir, kf)
	forger := load(t, forgerDir, clk)
	// Another ring with its own key: an unknown kid.
	stranger, _ := newRing(t, clk)

	join := func(p ...string) string { return strings.Join(p, ".") }
	tests := []struct {
		name string
		s    string
		room string
		now  time.Time
		want error
	}{
		{"empty", "", "sale", t0, token.ErrInvalid},
		{"garbage", "hello world", "sale", t0, token.ErrInvalid},
		{"prefix only", "t1.", "sale", t0, token.ErrInvalid},
		{"truncated", valid[:len(valid)-1], "sale", t0, token.ErrInvalid},
		{"truncated mac", join(parts[0], parts[1], parts[2], parts[3][:20]), "sale", t0, token.ErrInvalid},
		{"no mac", join(parts[0], parts[1], parts[2]), "sale", t0, token.ErrInvalid},
		{"extra dot", valid + ".", "sale", t0, token.ErrInvalid},
		{"forged mac", join(parts[0], parts[1], parts[2], flip(parts[3], 0)), "sale", t0, token.ErrInvalid},
		{"mac not canonical", join(parts[0], parts[1], parts[2], respell(parts[3])), "sale", t0, token.ErrInvalid},
		{"tampered payload", join(parts[0], parts[1], flip(parts[2], 3), parts[3]), "sale", t0, token.ErrInvalid},
		{"payload of another ticket", join(parts[0], parts[1], strings.Split(k.SignTicket(token.Ticket{Room: "sale", Visitor: "v1", Seq: 1, IssuedAt: t0}), ".")[2], parts[3]), "sale", t0, token.ErrInvalid},
		{"other version", join("t2", parts[1], parts[2], parts[3]), "sale", t0, token.ErrInvalid},
		{"same kid, other seed", forger.SignTicket(tk), "sale", t0, token.ErrInvalid},
		{"unknown kid", stranger.SignTicket(tk), "sale", t0, token.ErrInvalid},
		{"kid swapped", join(parts[0], stranger.Keys()[0].ID, parts[2], parts[3]), "sale", t0, token.ErrInvalid},
		{"visitor cookie", k.SignVisitor("v1"), "sale", t0, token.ErrInvalid},
		{"visitor cookie relabelled", "t1" + strings.TrimPrefix(k.SignVisitor("v1"), "v1"), "sale", t0, token.ErrInvalid},
		{"pass", pass, "sale", t0, token.ErrInvalid},
		{"too long", valid + strings.Repeat("A", token.MaxTokenLen), "sale", t0, token.ErrInvalid},
		{"wrong room", valid, "other", t0, token.ErrWrongRoom},
		{"room prefix", valid, "sal", t0, token.ErrWrongRoom},
		{"expired", valid, "sale", t0.Add(token.TicketTTL), token.ErrExpired},
		{"expired, wrong room", valid, "other", t0.Add(token.TicketTTL), token.ErrWrongRoom},
		{"valid until TTL", valid, "sale", t0.Add(token.TicketTTL - time.Second), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk.Set(tt.now)
			got, err := k.ParseTicket(tt.s, tt.room)
			if !errors.Is(err, tt.want) || (err == nil) != (tt.want == nil) {
				t.Fatalf("ParseTicket(%q, %q): got %+v, %v; want %v", tt.s, tt.room, got, err, tt.want)
			}
			if err != nil && got != (token.Ticket{}) {
				t.Errorf("got %+v with the error, want a zero Ticket", got)
			}
		})
	}
}

// flip changes the i-th character of a base64url string to another one.
func flip(s string, i int) string {
	b := []byte(s)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// respell flips an unused low bit of the last character of a base64url
// string whose bit length is not a multiple of 6 (a MAC or signature): the
// same bytes, spelled differently.
func respell(s string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, s[len(s)-1])
	return s[:len(s)-1] + string(alphabet[last^1])
}

func TestVisitor(t *testing.T) {
	clk := newClock(t0)
	k, _ := newRing(t, clk)
	seen := map[string]bool{}
	for range 100 {
		id := newVisitorID(t)
		if seen[id] {
			t.Fatalf("NewVisitorID repeated %q", id)
		}
		seen[id] = true
		s := k.SignVisitor(id)
		checkSafe(t, s)
		got, err := k.ParseVisitor(s)
		if err != nil || got != id {
			t.Fatalf("ParseVisitor(SignVisitor(%q)): got %q, %v", id, got, err)
		}
	}
	if got, err := k.ParseVisitor(k.SignVisitor("a b;c,\"d\"")); err != nil || got != "a b;c,\"d\"" {
		t.Errorf("id with delimiters: got %q, %v", got, err)
	}

	valid := k.SignVisitor("abc")
	parts := strings.Split(valid, ".")
	stranger, _ := newRing(t, clk)
	bad := map[string]string{
		"empty":         "",
		"garbage":       "v1.x.y.z",
		"truncated":     valid[:len(valid)-2],
		"forged":        strings.Join([]string{parts[0], parts[1], parts[2], flip(parts[3], 5)}, "."),
		"tampered id":   strings.Join([]string{parts[0], parts[1], "YWJk", parts[3]}, "."),
		"unknown kid":   stranger.SignVisitor("abc"),
		"ticket":        k.SignTicket(token.Ticket{Room: "r", Visitor: "abc", IssuedAt: t0}),
		"ticket as v1":  "v1" + strings.TrimPrefix(k.SignTicket(token.Ticket{Room: "r", Visitor: "abc", IssuedAt: t0}), "t1"),
		"empty id":      k.SignVisitor(""),
		"bare id":       "abc",
		"pass":          must(k.SignPass(token.Pass{Room: "r", Visitor: "abc", ExpiresAt: t0.Add(time.Hour)})),
		"too long":      k.SignVisitor(strings.Repeat("x", token.MaxTokenLen)),
		"other version": "v2" + strings.TrimPrefix(valid, "v1"),
	}
	for name, s := range bad {
		if got, err := k.ParseVisitor(s); !errors.Is(err, token.ErrInvalid) || got != "" {
			t.Errorf("%s: ParseVisitor(%q): got %q, %v; want ErrInvalid", name, s, got, err)
		}
	}
}

// newVisitorID returns token.NewVisitorID() after checking its form.
func newVisitorID(t *testing.T) string {
	t.Helper()
	id := token.NewVisitorID()
	b, err := base64.RawURLEncoding.DecodeString(id)
	if len(id) != 22 || err != nil || len(b) != 16 {
		t.Fatalf("NewVisitorID() = %q: want 16 bytes in 22 base64url characters", id)
	}
	return id
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

// TestConcurrent signs and parses every kind of token from many goroutines at
// once, with two keys in the ring; run it under -race.
func TestConcurrent(t *testing.T) {
	clk := newClock(t0)
	_, dir := newRing(t, clk)
	if _, err := token.Rotate(dir, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	k := load(t, dir, clk)
	oldTicket := k.SignTicket(token.Ticket{Room: "r0", Visitor: "old", Seq: 1, IssuedAt: t0})

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Go(func() {
			room := "room-" + string(rune('a'+g))
			for i := range 200 {
				if g == 0 && i == 100 {
					clk.Set(t0.Add(time.Second)) // the second key starts signing midway
				}
				vid := token.NewVisitorID()
				tk := token.Ticket{Room: room, Visitor: vid, Seq: int64(i), IssuedAt: t0}
				got, err := k.ParseTicket(k.SignTicket(tk), room)
				if err != nil || !cmp.Equal(got, tk) {
					errs <- errors.Join(errors.New("ticket round trip"), err)
					return
				}
				if id, err := k.ParseVisitor(k.SignVisitor(vid)); err != nil || id != vid {
					errs <- errors.Join(errors.New("visitor round trip"), err)
					return
				}
				if _, err := k.ParseTicket(oldTicket, "r0"); err != nil {
					errs <- errors.Join(errors.New("old ticket"), err)
					return
				}
				if i%20 == 0 {
					p := token.Pass{Room: room, Visitor: vid, ExpiresAt: t0.Add(time.Hour)}
					s, err := k.SignPass(p)
					if err == nil {
						var got token.Pass
						got, err = k.ParsePass(s, room)
						if err == nil && !got.ExpiresAt.Equal(p.ExpiresAt) {
							err = errors.New("expiry differs")
						}
					}
					if err != nil {
						errs <- errors.Join(errors.New("pass round trip"), err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestKeyFileUnchanged checks that loading never rewrites a key file.
func TestKeyFileUnchanged(t *testing.T) {
	clk := newClock(t0)
	k, dir := newRing(t, clk)
	path := filepath.Join(dir, k.Keys()[0].ID+".json")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	load(t, dir, clk)
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(before), string(after)); diff != "" {
		t.Errorf("key file changed (-before +after):\n%s", diff)
	}
}

// TestTicketForecast: a ticket with a wait forecast is a t2 ticket that
// keeps its issue time to the millisecond; one without stays t1, as older
// instances read it.
func TestTicketForecast(t *testing.T) {
	k, _ := newRing(t, newClock(t0))
	want := token.Ticket{Room: "sale", Visitor: "v", Seq: 7, IssuedAt: t0.Add(-1234 * time.Millisecond),
		Wait: 26400 * time.Millisecond, WaitLow: 22 * time.Second, WaitHigh: 31500 * time.Millisecond}
	s := k.SignTicket(want)
	checkSafe(t, s)
	if !strings.HasPrefix(s, "t2.") {
		t.Errorf("ticket with a forecast %q does not start with t2.", s)
	}
	got, err := k.ParseTicket(s, "sale")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if _, err := k.ParseTicket(s, "other"); !errors.Is(err, token.ErrWrongRoom) {
		t.Errorf("t2 ticket for another room: %v, want ErrWrongRoom", err)
	}
	if _, err := k.ParseTicket("t1"+s[2:], "sale"); !errors.Is(err, token.ErrInvalid) {
		t.Errorf("t2 ticket relabelled t1: %v, want ErrInvalid", err)
	}
	low := want
	low.Wait, low.WaitHigh = 0, 0 // a forecast of "now" still is one
	if got, err := k.ParseTicket(k.SignTicket(low), "sale"); err != nil || got != low {
		t.Errorf("forecast with only a low end: %+v, %v; want %+v", got, err, low)
	}
	plain := want
	plain.Wait, plain.WaitLow, plain.WaitHigh = 0, 0, 0
	if s := k.SignTicket(plain); !strings.HasPrefix(s, "t1.") {
		t.Errorf("ticket without a forecast %q does not start with t1.", s)
	}
}
