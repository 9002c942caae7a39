package token_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"usher/internal/token"
)

// The fuzz targets verify against the fixed test key in testdata/keys (its
// seed is public: it signs nothing outside tests) at a fixed time, so that
// the valid tokens in testdata/fuzz stay valid.
var fuzzNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func fuzzRing(f *testing.F) *token.Keyring {
	f.Helper()
	k, err := token.LoadDir("testdata/keys", func() time.Time { return fuzzNow })
	if err != nil {
		f.Fatal(err)
	}
	if len(k.Keys()) != 1 {
		f.Fatalf("testdata/keys holds %d keys, want 1", len(k.Keys()))
	}
	return k
}

// checkErr fails unless err is nil or exactly one of the package's sentinels.
func checkErr(t *testing.T, err error) {
	t.Helper()
	if err == nil || err == token.ErrInvalid || err == token.ErrExpired || err == token.ErrWrongRoom {
		return
	}
	t.Fatalf("got error %v, want ErrInvalid, ErrExpired or ErrWrongRoom", err)
}

func FuzzParseTicket(f *testing.F) {
	k := fuzzRing(f)
	for _, tk := range []token.Ticket{
		{Room: "sale", Visitor: "Zr3cq0kqH2wqU7dc2hR7bA", Seq: 1, IssuedAt: fuzzNow.Add(-time.Hour)},
		{Room: "r", Visitor: "", Seq: -1, IssuedAt: fuzzNow},
		{Room: "sale", Visitor: "old", Seq: 9, IssuedAt: fuzzNow.Add(-2 * token.TicketTTL)},
		{Room: "sale", Visitor: "eta", Seq: 3, IssuedAt: fuzzNow.Add(-time.Minute), Wait: 26 * time.Second, WaitLow: 21 * time.Second, WaitHigh: 33 * time.Second},
	} {
		s := k.SignTicket(tk)
		f.Add(s, tk.Room)
		f.Add(s, "other")
		f.Add(s[:len(s)-3], tk.Room)
		f.Add(strings.Replace(s, ".", "..", 1), tk.Room)
	}
	f.Add(k.SignVisitor("Zr3cq0kqH2wqU7dc2hR7bA"), "sale")
	f.Add(must(k.SignPass(token.Pass{Room: "sale", Visitor: "v", ExpiresAt: fuzzNow.Add(time.Hour)})), "sale")
	f.Add("", "")
	f.Add("t1.testkey0001.AA.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "")
	f.Fuzz(func(t *testing.T, s, room string) {
		tk, err := k.ParseTicket(s, room)
		checkErr(t, err)
		if err != nil {
			if tk != (token.Ticket{}) {
				t.Fatalf("got %+v with %v, want a zero Ticket", tk, err)
			}
			return
		}
		if tk.Room != room {
			t.Fatalf("accepted a ticket for %q as one for %q", tk.Room, room)
		}
		if !fuzzNow.Before(tk.IssuedAt.Add(token.TicketTTL)) {
			t.Fatalf("accepted a ticket issued at %v", tk.IssuedAt)
		}
		if again := k.SignTicket(tk); again != s {
			t.Fatalf("re-signed %+v as %q, want the input %q", tk, again, s)
		}
	})
}

func FuzzParsePass(f *testing.F) {
	k := fuzzRing(f)
	for _, p := range []token.Pass{
		{Room: "sale", Visitor: "Zr3cq0kqH2wqU7dc2hR7bA", ExpiresAt: fuzzNow.Add(time.Hour)},
		{Room: "sale", Visitor: "gone", ExpiresAt: fuzzNow.Add(-time.Hour)},
	} {
		s := must(k.SignPass(p))
		f.Add(s, p.Room)
		f.Add(s, "other")
		f.Add(s[:len(s)-3], p.Room)
	}
	f.Add(k.SignTicket(token.Ticket{Room: "sale", Visitor: "v", IssuedAt: fuzzNow}), "sale")
	f.Add(k.SignVisitor("v"), "sale")
	f.Add("eyJhbGciOiJub25lIn0.eyJpc3MiOiJ1c2hlciJ9.", "sale")
	f.Add("..", "")
	f.Fuzz(func(t *testing.T, s, room string) {
		p, err := k.ParsePass(s, room)
		checkErr(t, err)
		if err != nil {
			if p != (token.Pass{}) {
				t.Fatalf("got %+v with %v, want a zero Pass", p, err)
			}
			return
		}
		if p.Room != room || p.Visitor == "" || !fuzzNow.Before(p.ExpiresAt) {
			t.Fatalf("accepted %+v for room %q at %v", p, room, fuzzNow)
		}
		again, err := k.SignPass(p)
		if err != nil {
			t.Fatalf("re-signing %+v: %v", p, err)
		}
		if p2, err := k.ParsePass(again, room); err != nil || p2 != p {
			t.Fatalf("re-signed %+v parses as %+v, %v", p, p2, err)
		}
	})
}

func FuzzParseVisitor(f *testing.F) {
	k := fuzzRing(f)
	for _, id := range []string{"Zr3cq0kqH2wqU7dc2hR7bA", "x", "a b;c"} {
		s := k.SignVisitor(id)
		f.Add(s)
		f.Add(s[:len(s)-1])
		f.Add("t1" + s[2:])
	}
	f.Add(k.SignTicket(token.Ticket{Room: "sale", Visitor: "v", IssuedAt: fuzzNow}))
	f.Add(k.SignVisitor(""))
	f.Add("v1...")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := k.ParseVisitor(s)
		checkErr(t, err)
		if err != nil {
			if !errors.Is(err, token.ErrInvalid) || id != "" {
				t.Fatalf("got %q, %v; want \"\", ErrInvalid", id, err)
			}
			return
		}
		if id == "" {
			t.Fatal("accepted an empty visitor id")
		}
		if again := k.SignVisitor(id); again != s {
			t.Fatalf("re-signed %q as %q, want the input %q", id, again, s)
		}
	})
}
