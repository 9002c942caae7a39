package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/queue"
)

func setState(t *testing.T, q *queue.Queue, room string, state queue.RoomState) {
	t.Helper()
	updateRoom(t, q, room, func(s *queue.Settings) { s.State = state })
}

// updateRoom changes room's settings by change.
func updateRoom(t *testing.T, q *queue.Queue, room string, change func(*queue.Settings)) {
	t.Helper()
	v, err := q.Room(context.Background(), room)
	if err != nil {
		t.Fatal(err)
	}
	s := v.Settings
	change(&s)
	if err := q.PutRoom(context.Background(), room, s); err != nil {
		t.Fatal(err)
	}
}

func TestWaitingPageStates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	e.admit("sale", "occupant", time.Time{})
	c := browser(t)
	res := do(t, c, "GET", e.url+"/shop", nil)
	for _, want := range []string{`<progress`, `id="usher-state"`, `"state":"waiting"`, `<noscript><p><a class="button" id="refresh" href="/shop">`, `name="viewport"`, `<main`, `Last updated`} {
		if !strings.Contains(res.body, want) {
			t.Errorf("waiting page lacks %q", want)
		}
	}

	setState(t, e.q, "sale", queue.Paused)
	res = do(t, c, "GET", e.url+"/shop", nil)
	if res.status != http.StatusTooManyRequests || !strings.Contains(res.body, "The sale has not started yet") || !strings.Contains(res.body, `class="position" id="position">1<`) {
		t.Errorf("paused: %d, want 429, the paused message and position 1:\n%s", res.status, res.body)
	}

	setState(t, e.q, "sale", queue.Closed)
	res = do(t, browser(t), "GET", e.url+"/shop", nil) // a newcomer is refused
	if res.status != http.StatusConflict || !strings.Contains(res.body, "This waiting room is closed") || strings.Contains(res.body, `id="refresh"`) {
		t.Errorf("closed, newcomer: %d, want 409 and the closed message without refresh:\n%s", res.status, res.body)
	}
	res = do(t, c, "GET", e.url+"/shop", nil) // the waiting visitor learns it too
	if !strings.Contains(res.body, "This waiting room is closed") {
		t.Errorf("closed, waiting visitor: %d\n%s", res.status, res.body)
	}

	setState(t, e.q, "sale", queue.SoldOut)
	res = do(t, browser(t), "GET", e.url+"/shop", nil)
	if res.status != http.StatusConflict || !strings.Contains(res.body, "Sold out") || strings.Contains(res.body, `id="refresh"`) {
		t.Errorf("sold out, newcomer: %d, want 409 and the sold-out message without refresh:\n%s", res.status, res.body)
	}
	res = do(t, c, "GET", e.url+"/shop", nil)
	if !strings.Contains(res.body, "Every ticket has been sold") || !strings.Contains(res.body, `"state":"sold_out"`) {
		t.Errorf("sold out, waiting visitor: %d\n%s", res.status, res.body)
	}
}

func TestWaitingPageError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	p, err := New(Config{Origin: mustURL(t, e.url), Queue: e.q, Keys: e.keys, Registry: prometheus.NewRegistry(), Rules: Rules{DefaultRoom: "sale"}})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	p.renderPage(w, httptest.NewRequest("GET", "/shop?a=1", nil), http.StatusServiceUnavailable, Page{State: StateError, Refresh: 2})
	body := w.Body.String()
	if w.Code != 503 || !strings.Contains(body, "Something went wrong") || !strings.Contains(body, `href="/shop?a=1">Try again<`) || strings.Contains(body, `http-equiv`) {
		t.Errorf("error page: %d\n%s", w.Code, body)
	}
}

func TestWaitingPageKorean(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{}, func(c *Config) { c.Lang = "ko" })
	e.admit("sale", "occupant", time.Time{})
	do(t, browser(t), "GET", e.url+"/shop", nil)
	res := do(t, browser(t), "GET", e.url+"/shop", nil)
	for _, want := range []string{`<html lang="ko" dir="ltr">`, "대기 중입니다", "앞에 1명이 있습니다", "1분 이내"} {
		if !strings.Contains(res.body, want) {
			t.Errorf("Korean page lacks %q:\n%s", want, res.body)
		}
	}
	if _, err := New(Config{Origin: mustURL(t, e.url), Queue: e.q, Keys: e.keys, Registry: prometheus.NewRegistry(), Rules: Rules{DefaultRoom: "sale"}, Lang: "xx"}); err == nil || !strings.Contains(err.Error(), "en, ko") {
		t.Errorf("Lang xx: err = %v, want the supported list", err)
	}
}

func TestOperatorTemplate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "waiting.html")
	tmpl := `<p>{{.State}} #{{.Position}} of {{.StartPosition}} ({{.Progress}}%) {{.ETA}} {{.AheadText}} {{.URL}}</p><script>{{.Script}}</script>`
	if err := os.WriteFile(path, []byte(tmpl), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{}, func(c *Config) { c.WaitingTemplate = path })
	e.admit("sale", "occupant", time.Time{})
	res := do(t, browser(t), "GET", e.url+"/shop?x=1", nil)
	if want := "<p>waiting #1 of 1 (0%) less than a minute 0 people ahead of you /shop?x=1</p>"; !strings.Contains(res.body, want) {
		t.Errorf("operator template: got\n%s\nwant %s", res.body, want)
	}
	bad := filepath.Join(t.TempDir(), "bad.html")
	os.WriteFile(bad, []byte("{{.Nope"), 0o600)
	if _, err := New(Config{Origin: mustURL(t, e.url), Queue: e.q, Keys: e.keys, Registry: prometheus.NewRegistry(), Rules: Rules{DefaultRoom: "sale"}, WaitingTemplate: bad}); err == nil {
		t.Error("a broken template was accepted")
	}
}

// Progress counts from the position at entry, kept in a cookie.
func TestWaitingPageProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	e.admit("sale", "occupant", time.Time{})
	first, second := browser(t), browser(t)
	do(t, first, "GET", e.url+"/shop", nil)
	do(t, second, "GET", e.url+"/shop", nil)
	if res := do(t, second, "GET", e.url+"/shop", nil); !strings.Contains(res.body, `value="0"`) {
		t.Errorf("second visitor at entry: want progress 0:\n%s", res.body)
	}
	if err := e.q.Leave(context.Background(), "sale", "occupant"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.q.Admit(context.Background(), "sale"); err != nil { // admits first
		t.Fatal(err)
	}
	res := do(t, second, "GET", e.url+"/shop", map[string]string{"Accept": "text/html"})
	if !strings.Contains(res.body, `class="position" id="position">1<`) || !strings.Contains(res.body, `value="100"`) {
		t.Errorf("second visitor now first: want position 1, progress 100:\n%s", res.body)
	}
}

// A second tab carries the same cookies: it shows the same place and takes
// no second one, whatever gated URL it opens.
func TestSecondTabSamePlace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	e.admit("sale", "occupant", time.Time{})
	tabs := browser(t) // one browser: its tabs share the cookie jar
	do(t, tabs, "GET", e.url+"/shop", nil)
	for _, u := range []string{"/shop", "/other?tab=2", "/shop"} {
		res := do(t, tabs, "GET", e.url+u, map[string]string{"Accept": "application/json"})
		var st struct{ Position int64 }
		if err := json.Unmarshal([]byte(res.body), &st); err != nil || st.Position != 1 {
			t.Errorf("tab on %s: position %d (%v), want 1", u, st.Position, err)
		}
	}
	if res := do(t, browser(t), "GET", e.url+"/shop", nil); !strings.Contains(res.body, `id="position">2<`) {
		t.Errorf("another browser: want position 2 (the tabs took one place):\n%s", res.body)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
