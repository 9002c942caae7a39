package gate_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"usher/internal/gate"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/token"
	"usher/internal/wire"
)

// TestAdmitDecides: Admit returns the decision, with the renewed pass in
// it, and Renewal the headers a caller writes.
func TestAdmitDecides(t *testing.T) {
	ctx := context.Background()
	q := queue.New(memqueue.New(), queue.Options{})
	if err := q.PutRoom(ctx, "sale", queue.DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	keys, err := token.LoadDir(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	g := gate.New(q, keys, gate.Options{SecureCookie: true})
	if _, _, err := q.Enter(ctx, "sale", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Admit(httptest.NewRequest("GET", "/", nil), "sale"); !errors.Is(err, queue.ErrNotAdmitted) {
		t.Errorf("no pass: %v, want ErrNotAdmitted", err)
	}
	halfUsed, _ := keys.SignPass(token.Pass{Room: "sale", Visitor: "alice", ExpiresAt: time.Now().Add(time.Minute)})
	fresh, _ := keys.SignPass(token.Pass{Room: "sale", Visitor: "alice", ExpiresAt: time.Now().Add(5 * time.Minute)})
	for _, tc := range []struct {
		name       string
		pass       string
		viaCookie  bool
		renewed    bool
		wantCookie bool
	}{
		{"fresh, header", fresh, false, false, false},
		{"half used, header", halfUsed, false, true, false},
		{"half used, cookie", halfUsed, true, true, true},
	} {
		req := httptest.NewRequest("GET", "/", nil)
		if tc.viaCookie {
			req.AddCookie(&http.Cookie{Name: wire.PassCookie, Value: tc.pass})
		} else {
			req.Header.Set("Authorization", "Bearer "+tc.pass)
		}
		a, err := g.Admit(req, "sale")
		if err != nil || a.Visitor != "alice" || a.Renewed != tc.renewed || (a.Pass == tc.pass) == tc.renewed {
			t.Errorf("%s: Admit = %+v, %v; want alice, renewed %v", tc.name, a, err, tc.renewed)
			continue
		}
		h := g.Renewal(a)
		if got := h.Get(wire.PassHeader); (got != "") != tc.renewed || tc.renewed && got != a.Pass {
			t.Errorf("%s: %s = %q, want the renewed pass only when renewed", tc.name, wire.PassHeader, got)
		}
		cookies := (&http.Response{Header: h}).Cookies()
		if got := len(cookies) == 1 && cookies[0].Name == wire.PassCookie && cookies[0].Value == a.Pass && cookies[0].Secure; got != tc.wantCookie {
			t.Errorf("%s: cookies %v, want a Secure pass cookie: %v", tc.name, cookies, tc.wantCookie)
		}
	}
}

// TestAdmitConcurrent: one gate serves many requests at once.
func TestAdmitConcurrent(t *testing.T) {
	ctx := context.Background()
	q := queue.New(memqueue.New(), queue.Options{})
	// Room for all 64 at once: every one is admitted by passthrough, however
	// fast the machine (the default rate's bucket holds only 51 tokens).
	s := queue.DefaultSettings()
	s.AdmitRate = 1000
	if err := q.PutRoom(ctx, "sale", s); err != nil {
		t.Fatal(err)
	}
	keys, err := token.LoadDir(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	g := gate.New(q, keys, gate.Options{})
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			visitor := "v" + string(rune('a'+i%26)) + string(rune('a'+i/26))
			if _, _, err := q.Enter(ctx, "sale", visitor); err != nil {
				t.Error(err)
				return
			}
			pass, _ := keys.SignPass(token.Pass{Room: "sale", Visitor: visitor, ExpiresAt: time.Now().Add(time.Minute)})
			for range 20 {
				req := httptest.NewRequest("GET", "/", nil)
				req.Header.Set("Authorization", "Bearer "+pass)
				a, err := g.Admit(req, "sale")
				if err != nil || a.Visitor != visitor || !a.Renewed {
					t.Errorf("%s: %+v %v, want admitted with a renewed pass", visitor, a, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
