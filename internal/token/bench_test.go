package token_test

import (
	"testing"
	"time"

	"usher/internal/token"
)

// benchRing returns a ring with a typical ticket and pass for room "sale".
func benchRing(b *testing.B) (k *token.Keyring, ticket, pass string) {
	b.Helper()
	k, _ = newRing(b, newClock(t0))
	ticket = k.SignTicket(token.Ticket{Room: "sale", Visitor: token.NewVisitorID(), Seq: 123456, IssuedAt: t0})
	pass, err := k.SignPass(token.Pass{Room: "sale", Visitor: token.NewVisitorID(), ExpiresAt: t0.Add(time.Hour)})
	if err != nil {
		b.Fatal(err)
	}
	return k, ticket, pass
}

func BenchmarkSignTicket(b *testing.B) {
	k, _, _ := benchRing(b)
	tk := token.Ticket{Room: "sale", Visitor: token.NewVisitorID(), Seq: 123456, IssuedAt: t0}
	b.ReportAllocs()
	for b.Loop() {
		k.SignTicket(tk)
	}
}

func BenchmarkParseTicket(b *testing.B) {
	k, ticket, _ := benchRing(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.ParseTicket(ticket, "sale"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseTicketParallel(b *testing.B) {
	k, ticket, _ := benchRing(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := k.ParseTicket(ticket, "sale"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkParseVisitor(b *testing.B) {
	k, _, _ := benchRing(b)
	s := k.SignVisitor(token.NewVisitorID())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.ParseVisitor(s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSignPass(b *testing.B) {
	k, _, _ := benchRing(b)
	p := token.Pass{Room: "sale", Visitor: token.NewVisitorID(), ExpiresAt: t0.Add(time.Hour)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.SignPass(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParsePass(b *testing.B) {
	k, _, pass := benchRing(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.ParsePass(pass, "sale"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReusePass: the answer to an admitted visitor's poll, which
// hands out the pass signed for the last one (BenchmarkSignPass: without).
func BenchmarkReusePass(b *testing.B) {
	k, _, _ := benchRing(b)
	p := token.Pass{Room: "sale", Visitor: token.NewVisitorID(), ExpiresAt: t0.Add(time.Hour)}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := k.ReusePass(p); err != nil {
			b.Fatal(err)
		}
	}
}
