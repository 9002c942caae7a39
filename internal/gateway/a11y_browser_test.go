package gateway

// Accessibility in the browser (issue 21 §4): the waiting page in each of
// its states passes axe-core's WCAG 2.2 AA rules (testenv.Audit, with the
// script USHER_TEST_AXE names), announces changes in a polite live region,
// never reloads itself, honours prefers-reduced-motion, and works without
// JavaScript.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/queue"
	"usher/internal/testenv"
)

// putSettings changes room's settings with mod.
func putSettings(t *testing.T, q *queue.Queue, room string, mod func(*queue.Settings)) {
	t.Helper()
	v, err := q.Room(context.Background(), room)
	if err != nil {
		t.Fatal(err)
	}
	s := v.Settings
	mod(&s)
	if err := q.PutRoom(context.Background(), room, s); err != nil {
		t.Fatal(err)
	}
}

// waitState waits until the page's <main> has data-state want.
func waitState(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "data-state "+want, func() bool {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById("usher") || {dataset: {}}).dataset.state || ""`))
		return err == nil && got == want
	})
}

// TestAxeWaitingPage audits the waiting page in every state a visitor
// meets: paused with a place, waiting in an open room, the pre-queue's
// countdown, the proof of work, the line full, closed, sold out, and the
// store's error; on a phone, and the waiting state on a desktop too.
func TestAxeWaitingPage(t *testing.T) {
	axe := testenv.Axe(t)
	e := browserEnv(t, withFlood)
	ctx := newBrowser(t)
	gated := e.url + "/shop"

	navigate(t, ctx, gated)
	waitText(t, ctx, "position", "1")
	testenv.Audit(t, ctx, axe, "paused")

	second := newBrowserContext(t, ctx)
	navigate(t, second, gated)
	waitText(t, second, "position", "2")
	putSettings(t, e.q, "sale", func(s *queue.Settings) { s.State = queue.Open })
	waitText(t, second, "title", "You are in line")
	testenv.Audit(t, second, axe, "waiting")
	if err := chromedp.Do(second, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatal(err)
	}
	testenv.Audit(t, second, axe, "waiting, desktop")
	if err := chromedp.Do(second, testenv.EmulateMedia("prefers-color-scheme", "dark")); err != nil {
		t.Fatal(err)
	}
	testenv.Audit(t, second, axe, "waiting, dark")
	// The parts shown only on a failure or without JavaScript.
	if _, err := chromedp.Run(second, chromedp.Evaluate[bool](`document.getElementById("problem").hidden = false; document.querySelectorAll("noscript").forEach(n => n.outerHTML = n.textContent); true`)); err != nil {
		t.Fatal(err)
	}
	testenv.Audit(t, second, axe, "waiting, dark, with the problem notice and the refresh link")

	putSettings(t, e.q, "sale", func(s *queue.Settings) { s.MaxWaiting = 1 })
	full := newBrowserContext(t, ctx)
	navigate(t, full, gated)
	waitState(t, full, StateFull)
	testenv.Audit(t, full, axe, "full")

	putSettings(t, e.q, "sale", func(s *queue.Settings) { s.MaxWaiting, s.PowBits = 0, 28 }) // unsolvable in the test's time
	challenge := newBrowserContext(t, ctx)
	navigate(t, challenge, gated)
	waitState(t, challenge, StateChallenge)
	testenv.Audit(t, challenge, axe, "proof of work")
	if err := chromedp.Do(challenge, chromedp.Navigate("about:blank")); err != nil { // stops the worker
		t.Fatal(err)
	}

	putSettings(t, e.q, "sale", func(s *queue.Settings) {
		s.PowBits, s.OpensAt = 0, time.Now().Add(time.Hour).Truncate(time.Millisecond)
	})
	pre := newBrowserContext(t, ctx)
	navigate(t, pre, e.url+"/other")
	waitState(t, pre, StatePreQueue)
	testenv.Audit(t, pre, axe, "pre-queue")

	for _, state := range []queue.RoomState{queue.Closed, queue.SoldOut} {
		putSettings(t, e.q, "sale", func(s *queue.Settings) { s.OpensAt, s.State = time.Time{}, state })
		c := newBrowserContext(t, ctx)
		navigate(t, c, gated)
		waitState(t, c, string(state))
		testenv.Audit(t, c, axe, string(state))
	}

	// The store's error: the page as renderPage writes it.
	p, err := New(Config{Origin: mustURL(t, e.url), Queue: e.q, Keys: e.keys, Registry: prometheus.NewRegistry(), Rules: Rules{DefaultRoom: "sale"}})
	if err != nil {
		t.Fatal(err)
	}
	errPage := httpServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.renderPage(w, r, http.StatusServiceUnavailable, Page{State: StateError, Room: "sale", Refresh: 2, PollAfterMS: 60000})
	}))
	navigate(t, ctx, errPage+"/shop")
	waitState(t, ctx, StateError)
	testenv.Audit(t, ctx, axe, "error")
}

// auditRecorder is a testing.TB whose Errorf is recorded, not reported.
type auditRecorder struct {
	testing.TB
	errs []string
}

func (r *auditRecorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// TestAxeAuditFails: the audit reports a page that breaks the rules (a
// page without a language, an image without text, grey on grey), so that a
// clean audit of the waiting page means something.
func TestAxeAuditFails(t *testing.T) {
	axe := testenv.Axe(t)
	bad := httpServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(`<!doctype html><html><title>bad</title><main><img src="/x.png"><p style="color:#aaa;background:#bbb">faint</p></main></html>`))
	}))
	ctx := newBrowser(t)
	navigate(t, ctx, bad+"/")
	rec := &auditRecorder{TB: t}
	testenv.Audit(rec, ctx, axe, "bad page")
	got := strings.Join(rec.errs, "\n")
	for _, rule := range []string{"html-has-lang", "image-alt", "color-contrast"} {
		if !strings.Contains(got, "axe "+rule+" ") {
			t.Errorf("the audit missed %s; it reported:\n%s", rule, got)
		}
	}
}

// TestA11yAnnouncesChanges: the polite live region #announce says a
// position that moves up and a change of state, and the page shows both in
// place: it never reloads (a mark left in the window survives), not even
// when the room closes under the visitor.
func TestA11yAnnouncesChanges(t *testing.T) {
	e := browserEnv(t)
	var earlier queue.Entry
	for _, v := range []string{"early", "earlier"} {
		entry, _, err := e.q.Enter(context.Background(), "sale", v)
		if err != nil {
			t.Fatal(err)
		}
		earlier = entry
	}
	// earlier polls, as a waiting page does: one that never polls while
	// the room is paused is a ghost, parked at the opening, not admitted.
	ctxPoll, stop := context.WithCancel(context.Background())
	var polls sync.WaitGroup
	polls.Go(func() {
		for ctxPoll.Err() == nil {
			e.q.Status(ctxPoll, "sale", "earlier", earlier.Seq, time.Now())
			select {
			case <-ctxPoll.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	})
	t.Cleanup(func() { stop(); polls.Wait() })
	ctx := newBrowser(t)
	navigate(t, ctx, e.url+"/shop")
	waitText(t, ctx, "position", "3")
	live, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const a = document.getElementById("announce");
		window.usherMark = 1;
		return a.getAttribute("aria-live") + " " + a.getAttribute("role") + " [" + a.textContent + "]" })()`))
	if err != nil || live != "polite status []" {
		t.Fatalf("#announce = %q, %v; want an empty polite status region at first", live, err)
	}

	// The place moves up in the paused room: announced, no state change.
	if err := e.q.Leave(context.Background(), "sale", "early"); err != nil {
		t.Fatal(err)
	}
	waitText(t, ctx, "announce", "Your position: 2. 1 person ahead of you.")

	// The room opens: the one ahead takes the one slot and the visitor is
	// next; then the room closes before the visitor's turn.
	setState(t, e.q, "sale", queue.Open)
	waitText(t, ctx, "announce", "You are in line. Your position: 1. 0 people ahead of you.")
	setState(t, e.q, "sale", queue.Closed)
	waitText(t, ctx, "announce", "This waiting room is closed. Nobody more will be let in. Thank you for your patience.")
	waitText(t, ctx, "title", "This waiting room is closed")
	if place, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("place").hidden`)); err != nil || !place {
		t.Errorf("the place is still shown in the closed room (%v)", err)
	}
	if mark, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.usherMark === 1`)); err != nil || !mark {
		t.Errorf("the page reloaded itself (the window's mark is gone, %v)", err)
	}
}

// TestA11yNoSelfReload: neither the page nor its script has a way to
// reload by itself; the only navigation left is location.replace to the
// site at the visitor's turn.
func TestA11yNoSelfReload(t *testing.T) {
	for _, bad := range []string{"location.reload", "http-equiv", "location.href ="} {
		if strings.Contains(mustRead("page/waiting.html"), bad) || strings.Contains(string(waitingJS), bad) {
			t.Errorf("the waiting page has %q", bad)
		}
	}
	if n := strings.Count(string(waitingJS), "location.replace("); n != 1 {
		t.Errorf("%d location.replace calls in waiting.js, want 1 (go, to the site)", n)
	}
}

// TestA11yReducedMotion: the position's highlight when it moves up is an
// animation, which prefers-reduced-motion: reduce turns off, with every
// other animation and transition of the page.
func TestA11yReducedMotion(t *testing.T) {
	e := browserEnv(t)
	ctx := newBrowser(t)
	navigate(t, ctx, e.url+"/shop")
	waitText(t, ctx, "position", "1")
	const moved = `(() => { const p = document.getElementById("position"); p.classList.add("moved"); return getComputedStyle(p).animationName })()`
	for _, c := range []struct{ pref, want string }{{"no-preference", "usher-moved"}, {"reduce", "none"}} {
		if err := chromedp.Do(ctx, testenv.EmulateMedia("prefers-reduced-motion", c.pref)); err != nil {
			t.Fatal(err)
		}
		if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](moved)); err != nil || got != c.want {
			t.Errorf("prefers-reduced-motion %s: the moved position's animation = %q, %v; want %q", c.pref, got, err, c.want)
		}
	}
	moving, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("*")].filter(e => {
		const s = getComputedStyle(e);
		return s.animationName !== "none" || s.transitionDuration.split(",").some(d => parseFloat(d) > 0);
	}).map(e => e.tagName + "#" + e.id)`))
	if err != nil || len(moving) != 0 {
		t.Errorf("under prefers-reduced-motion: reduce, these still move: %v (%v)", moving, err)
	}
}

// TestA11ySaysWhyTheWaitGrew (issue 21 §1): when the estimated wait grows
// because the line slowed down (here the room's rate falls 5,000-fold),
// the page says why, and announces it once.
func TestA11ySaysWhyTheWaitGrew(t *testing.T) {
	e := browserEnv(t)
	if _, _, err := e.q.Enter(context.Background(), "sale", "holder"); err != nil {
		t.Fatal(err)
	}
	setState(t, e.q, "sale", queue.Open) // the holder takes the one slot
	ctx := newBrowser(t)
	navigate(t, ctx, e.url+"/shop")
	waitText(t, ctx, "position", "1")
	waitText(t, ctx, "eta", "less than a minute")
	if hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("slower").hidden`)); err != nil || !hidden {
		t.Fatalf("the slowed-down note shows before anything slowed (%v)", err)
	}
	v, err := e.q.Room(context.Background(), "sale")
	if err != nil {
		t.Fatal(err)
	}
	s := v.Settings
	s.AdmitRate = 0.01 // one in 100 s
	if err := e.q.PutRoom(context.Background(), "sale", s); err != nil {
		t.Fatal(err)
	}
	want := "The line is moving more slowly than before, so your estimated wait grew. Your place is kept."
	waitText(t, ctx, "slower", want)
	waitText(t, ctx, "announce", "Your position: 1. 0 people ahead of you. "+want)
	if hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("slower").hidden`)); err != nil || hidden {
		t.Errorf("the slowed-down note is hidden after the wait grew (%v)", err)
	}
}

// TestAxeBrandedPage audits the page an operator's brand.json makes, as
// the proxy serves it: its logo, site name and colours, in the waiting
// state and paused, in English and in Japanese.
func TestAxeBrandedPage(t *testing.T) {
	axe := testenv.Axe(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"brand.json": goodBrand, "logo.png": string(pngLogo)})
	e := browserEnv(t, func(c *Config) { c.PageDir = dir })
	ctx := newBrowser(t)
	navigate(t, ctx, e.url+"/shop")
	waitText(t, ctx, "position", "1")
	testenv.Audit(t, ctx, axe, "branded, paused")
	putSettings(t, e.q, "sale", func(s *queue.Settings) { s.State = queue.Open })
	second := newBrowserContext(t, ctx)
	navigate(t, second, e.url+"/shop")
	waitState(t, second, StateWaiting)
	if err := chromedp.Do(second, testenv.EmulateMedia("prefers-color-scheme", "dark")); err != nil {
		t.Fatal(err)
	}
	testenv.Audit(t, second, axe, "branded, waiting, dark preference")
	navigate(t, second, e.url+LangPath+"?lang=ja&to=%2Fshop")
	waitState(t, second, StateWaiting)
	if lang, err := chromedp.Run(second, chromedp.Evaluate[string](`document.documentElement.lang`)); err != nil || lang != "ja" {
		t.Fatalf("page language %q, %v; want ja", lang, err)
	}
	testenv.Audit(t, second, axe, "branded, waiting, ja")
}
