package gate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"usher/internal/gate"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/token"
	"usher/internal/wire"
)

func setup(t *testing.T) (*queue.Queue, *token.Keyring, http.Handler) {
	t.Helper()
	q := queue.New(memqueue.New(), queue.Options{})
	if err := q.PutRoom(context.Background(), "sale", queue.DefaultSettings()); err != nil {
		t.Fatal(err)
	}
	keys, err := token.LoadDir(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	g := gate.New(q, keys, gate.Options{Room: func(*http.Request) string { return "sale" }, SecureCookie: true})
	h := g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := gate.FromContext(r.Context())
		if !ok || a.Visitor == "" {
			t.Error("handler behind the gate has no admitted visitor in its context")
		}
		w.Write([]byte(a.Visitor))
	}))
	return q, keys, h
}

func TestRenewsHalfUsedPass(t *testing.T) {
	q, keys, h := setup(t)
	e, _, err := q.Enter(context.Background(), "sale", "alice") // passthrough: active for 5 min
	if err != nil || e.Status != queue.Active {
		t.Fatalf("enter: %+v %v", e, err)
	}
	for _, tc := range []struct {
		name      string
		left      time.Duration // life left on the pass sent
		renewed   bool
		viaCookie bool
	}{
		{"fresh pass via header", 5 * time.Minute, false, false},
		{"half-used pass via header", time.Minute, true, false},
		{"half-used pass via cookie", time.Minute, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pass, err := keys.SignPass(token.Pass{Room: "sale", Visitor: "alice", ExpiresAt: time.Now().Add(tc.left)})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("GET", "/seat-map", nil)
			if tc.viaCookie {
				req.AddCookie(&http.Cookie{Name: wire.PassCookie, Value: pass})
			} else {
				req.Header.Set("Authorization", "Bearer "+pass)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != 200 || rec.Body.String() != "alice" {
				t.Fatalf("gate = %d %q, want 200 alice", rec.Code, rec.Body)
			}
			fresh := rec.Header().Get(wire.PassHeader)
			if (fresh != "") != tc.renewed {
				t.Fatalf("%s header = %q, want renewed=%v", wire.PassHeader, fresh, tc.renewed)
			}
			if fresh != "" {
				p, err := keys.ParsePass(fresh, "sale")
				if err != nil || p.ExpiresAt.Before(time.Now().Add(4*time.Minute)) {
					t.Errorf("renewed pass = %+v, %v; want about 5 min of life", p, err)
				}
			}
			cookies := rec.Result().Cookies()
			if gotCookie := len(cookies) == 1 && cookies[0].Name == wire.PassCookie && cookies[0].Value == fresh && cookies[0].HttpOnly && cookies[0].Secure; gotCookie != (tc.renewed && tc.viaCookie) {
				t.Errorf("cookies = %v, want a renewed HttpOnly Secure pass cookie only when the pass came in one", cookies)
			}
		})
	}
}

func TestRejects(t *testing.T) {
	q, keys, h := setup(t)
	ctx := context.Background()
	if _, _, err := q.Enter(ctx, "sale", "alice"); err != nil {
		t.Fatal(err)
	}
	valid, _ := keys.SignPass(token.Pass{Room: "sale", Visitor: "alice", ExpiresAt: time.Now().Add(time.Minute)})
	expired, _ := keys.SignPass(token.Pass{Room: "sale", Visitor: "alice", ExpiresAt: time.Now().Add(-time.Minute)})
	other, _ := keys.SignPass(token.Pass{Room: "other", Visitor: "alice", ExpiresAt: time.Now().Add(time.Minute)})
	stranger, _ := keys.SignPass(token.Pass{Room: "sale", Visitor: "bob", ExpiresAt: time.Now().Add(time.Minute)})
	for _, tc := range []struct {
		name, pass string
		want       int
	}{
		{"no pass", "", 403},
		{"expired pass", expired, 401},
		{"other room", other, 401},
		{"signed but never admitted", stranger, 403},
		{"valid", valid, 200},
	} {
		req := httptest.NewRequest("GET", "/", nil)
		if tc.pass != "" {
			req.Header.Set("Authorization", "Bearer "+tc.pass)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, rec.Code, rec.Body, tc.want)
		}
	}
}
