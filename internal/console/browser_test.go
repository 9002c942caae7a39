package console_test

// Browser tests: Debian's chromium, driven with chromedp, against the API
// with the console mounted, on the memory store with the admission
// scheduler running (as internal/gateway's browser tests). They run when
// chromium is installed; under CI a missing chromium fails them.
// Screenshots go to artifacts/screenshots/.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"usher/internal/queue"
	"usher/internal/testenv"
)

// browserDeadline guards each browser test against a hang; it is not a
// speed requirement.
const browserDeadline = 4 * time.Minute

// newBrowser starts chromium with a fresh profile in a desktop window and
// returns its first tab.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(testenv.Chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1360, 900),
	}
	ctx, cancel := context.WithTimeout(context.Background(), browserDeadline)
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	ctx, cancelTab := chromedp.NewContext(ctx)
	t.Cleanup(func() { cancelTab(); cancelAlloc(); cancel() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// run runs steps, failing the test on an error.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// text reads the text of the element matched by the CSS selector sel.
func text(ctx context.Context, sel string) (string, error) {
	try, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return chromedp.Run(try, chromedp.TextContent(chromedp.CSS(sel)))
}

// waitText waits until the element matched by sel (a CSS selector) shows
// want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("%s to show %q", sel, want), func() bool {
		got, err := text(ctx, sel)
		return err == nil && strings.TrimSpace(got) == want
	})
}

// eval runs JavaScript in the page and returns its result.
func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("eval %s: %v", js, err)
	}
	return out
}

// setValue sets an input's value as typing would, input event included.
func setValue(t *testing.T, ctx context.Context, sel, v string) {
	t.Helper()
	js, _ := json.Marshal([]string{sel, v})
	eval[bool](t, ctx, `((a) => { const e = document.querySelector(a[0]); e.value = a[1]; e.dispatchEvent(new Event("input", {bubbles: true})); return true })(`+string(js)+`)`)
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("..", "..", "artifacts", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserConsole walks an operator's night in the browser: a wrong key
// refused, sign-in, a live number changing while visitors enter, a forged
// write refused, a pause clicked, confirmed and found in the store.
func TestBrowserConsole(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	e := newEnv(t, envOptions{booking: true})
	paused := queue.DefaultSettings()
	paused.State = queue.Paused
	e.room("concert-a", paused)
	open := queue.DefaultSettings()
	open.MaxActive, open.AdmitRate = 50, 5
	e.room("concert-b", open)
	url := e.srv.URL + "/console/"

	// A wrong key is refused and the console stays closed.
	run(t, ctx, "open the console", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.ID("key")))
	run(t, ctx, "a wrong key", chromedp.SendKeys(chromedp.ID("key"), "not-the-admin-key-000000000"), chromedp.Click(chromedp.ID("signin-button")))
	waitText(t, ctx, "#signin-error", "Wrong admin key.")
	if eval[bool](t, ctx, `!document.getElementById("bar").hidden`) {
		t.Fatal("the console opened after a wrong key")
	}

	// Sign in; the rooms screen shows both rooms.
	setValue(t, ctx, "#key", "")
	run(t, ctx, "sign in", chromedp.SendKeys(chromedp.ID("key"), adminKey),
		chromedp.Click(chromedp.ID("signin-button")), chromedp.WaitVisible(chromedp.ID("rooms-view")))
	waitText(t, ctx, `tr[data-room="concert-a"] td[data-k="waiting"]`, "0")
	if js := eval[bool](t, ctx, `document.cookie.includes("usher_console")`); js {
		t.Error("the session cookie is readable from JavaScript")
	}

	// A live number changes as visitors enter through the API.
	e.enter("concert-a", "a", 3)
	waitText(t, ctx, `tr[data-room="concert-a"] td[data-k="waiting"]`, "3")
	e.enter("concert-a", "b", 9)
	waitText(t, ctx, `tr[data-room="concert-a"] td[data-k="waiting"]`, "12")

	// A write without the CSRF token, from the console's own page, is
	// refused and changes nothing.
	status := eval[float64](t, ctx, `fetch("api/v1/rooms/concert-b", {method: "PUT", headers: {"Content-Type": "application/json"}, body: '{"state":"closed"}'}).then(r => r.status)`)
	if status != 403 {
		t.Errorf("PUT without the CSRF token from the page = %v, want 403", status)
	}
	// From a page of another origin on the same host (same site, so the
	// SameSite=Strict cookie would go along), the write never lands.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>evil</title><p id="out">…</p>`)
	}))
	defer evil.Close()
	tab, cancelTab := chromedp.NewContext(ctx)
	defer cancelTab()
	run(t, tab, "open the other origin", chromedp.Navigate(evil.URL))
	got := eval[string](t, tab, `fetch("`+url+`api/v1/rooms/concert-b", {method: "PUT", credentials: "include", headers: {"Content-Type": "application/json", "X-Usher-CSRF": "guess"}, body: '{"state":"closed"}'}).then(r => "status " + r.status, e => "blocked")`)
	if got != "blocked" && got != "status 403" {
		t.Errorf("PUT from another origin: %s, want blocked or 403", got)
	}
	if v, err := e.q.Room(context.Background(), "concert-b"); err != nil || v.Settings.State != queue.Open {
		t.Fatalf("concert-b is %v (%v) after the forged writes, want open", v.Settings.State, err)
	}

	// Pause concert-b: click, confirm, and the store has it paused.
	run(t, ctx, "open concert-b", chromedp.Navigate(url+"#/room/concert-b"), chromedp.WaitVisible(chromedp.ID("room-view")))
	waitText(t, ctx, "#room-state", "open")
	run(t, ctx, "click pause", chromedp.Click(chromedp.CSS(`.actions button[data-state="paused"]`)), chromedp.WaitVisible(chromedp.ID("confirm")))
	waitText(t, ctx, "#confirm-title", "Pause the room?")
	if v, _ := e.q.Room(context.Background(), "concert-b"); v.Settings.State != queue.Open {
		t.Fatalf("concert-b is %v before the confirmation, want open", v.Settings.State)
	}
	run(t, ctx, "confirm", chromedp.Click(chromedp.ID("confirm-ok")))
	testenv.Eventually(t, time.Minute, "concert-b paused in the store", func() bool {
		v, err := e.q.Room(context.Background(), "concert-b")
		return err == nil && v.Settings.State == queue.Paused
	})
	waitText(t, ctx, "#room-state", "paused")

	// A settings change goes through the API's validation: a refused value
	// shows the API's message and changes nothing.
	setValue(t, ctx, `#settings input[name="max_active"]`, "-5")
	run(t, ctx, "max_active -5", chromedp.Click(chromedp.ID("save")), chromedp.WaitVisible(chromedp.ID("confirm")), chromedp.Click(chromedp.ID("confirm-ok")))
	testenv.Eventually(t, time.Minute, "the API's refusal shown", func() bool {
		msg, _ := text(ctx, "#settings-error")
		return strings.Contains(msg, "invalid_request")
	})
	if v, _ := e.q.Room(context.Background(), "concert-b"); v.Settings.MaxActive != 50 {
		t.Errorf("max_active %d after a refused change, want 50", v.Settings.MaxActive)
	}
	setValue(t, ctx, `#settings input[name="max_active"]`, "80")
	run(t, ctx, "max_active 80", chromedp.Click(chromedp.ID("save")), chromedp.WaitVisible(chromedp.ID("confirm")), chromedp.Click(chromedp.ID("confirm-ok")))
	testenv.Eventually(t, time.Minute, "max_active 80 in the store", func() bool {
		v, err := e.q.Room(context.Background(), "concert-b")
		return err == nil && v.Settings.MaxActive == 80
	})

	// The what-if answers for the form's numbers; the timeline says what it
	// has.
	waitText(t, ctx, "#whatif li:first-child", "Nobody is waiting now.")
	testenv.Eventually(t, time.Minute, "the event timeline", func() bool {
		s, _ := text(ctx, "#events")
		return s != ""
	})

	// The schedules screen lists a schedule with its sales.
	admin := []string{"Authorization: Bearer " + adminKey, "Content-Type: application/json"}
	for _, c := range []struct{ path, body string }{
		{"/api/v1/concerts", `{"title":"Winter Tour"}`},
		{"/api/v1/concerts/1/schedules", `{"starts_at":"2026-12-24T19:00:00Z","room":"winter-tour"}`},
		{"/api/v1/schedules/1/seats", `{"sections":["A","B"],"rows":10,"seats_per_row":20,"price":80000}`},
	} {
		if r := e.do("POST", c.path, c.body, admin...); r.status != 201 {
			t.Fatalf("POST %s = %d %s", c.path, r.status, r.body)
		}
	}
	run(t, ctx, "open the schedules", chromedp.Navigate(url+"#/schedules"), chromedp.WaitVisible(chromedp.ID("schedules-view")))
	waitText(t, ctx, `tr[data-schedule="1"] td:nth-child(2)`, "Winter Tour")
	waitText(t, ctx, `tr[data-schedule="1"] td:nth-child(7)`, "400")
	waitText(t, ctx, `tr[data-schedule="1"] td:nth-child(5)`, "0")

	// Sign out: the console asks for the key again.
	run(t, ctx, "sign out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("signin-view")))
	if r := e.do("GET", "/console/api/v1/rooms", ""); r.status != 401 {
		t.Errorf("after sign-out, no cookie = %d", r.status)
	}
}

// TestBrowserScreenshots fills a room with 100,000 waiting visitors and
// lets another admit for a minute, then captures the rooms screen and the
// room's page for the docs.
func TestBrowserScreenshots(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	e := newEnv(t, envOptions{})
	bg := context.Background()
	big := queue.DefaultSettings()
	big.State, big.MaxActive, big.AdmitRate = queue.Paused, 2000, 50
	e.room("concert-seoul", big)
	for i := range 100_000 {
		if _, _, err := e.q.Enter(bg, "concert-seoul", "v"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	live := queue.DefaultSettings()
	live.MaxActive, live.AdmitRate, live.ActiveTTL = 400, 8, 30*time.Second
	live.PresenceTimeout = 0 // these visitors never poll: they are not absent
	e.room("concert-busan", live)
	adaptive := live
	adaptive.Admission, adaptive.TargetP95, adaptive.MinAdmitRate, adaptive.MaxAdmitRate = queue.Adaptive, 300*time.Millisecond, 2, 40
	e.room("presale", adaptive)
	closed := queue.DefaultSettings()
	closed.State = queue.SoldOut
	e.room("encore", closed)
	// Visitors keep arriving at concert-busan and presale while the charts fill;
	// the presale's origin answers in about 250 ms.
	ctx2, stop := context.WithCancel(bg)
	defer stop()
	go func() {
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for i := 0; ctx2.Err() == nil; i++ {
			for j := range 1 + i%3 {
				e.q.Enter(bg, "concert-busan", fmt.Sprintf("b%d-%d", i, j))
				e.q.Enter(bg, "presale", fmt.Sprintf("p%d-%d", i, j))
			}
			for range 20 {
				e.q.Observe("presale", time.Duration(200+i%100)*time.Millisecond, false)
			}
			if i > 20 && i%4 == 0 { // some give up
				e.q.Leave(bg, "concert-busan", fmt.Sprintf("b%d-0", i-20))
			}
			select {
			case <-ctx2.Done():
			case <-tk.C:
			}
		}
	}()
	cookie, _ := e.signIn()
	testenv.Eventually(t, 3*time.Minute, "60 samples of concert-busan", func() bool {
		r := e.do("GET", "/console/rooms/concert-busan/history", "", cookie)
		return strings.Count(string(r.body), ",") > 9*60
	})
	url := e.srv.URL + "/console/"
	run(t, ctx, "sign in", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.ID("key")),
		chromedp.SendKeys(chromedp.ID("key"), adminKey), chromedp.Click(chromedp.ID("signin-button")),
		chromedp.WaitVisible(chromedp.ID("rooms-view")))
	waitText(t, ctx, `tr[data-room="concert-seoul"] td[data-k="waiting"]`, "100,000")
	screenshot(t, ctx, "console-rooms.png")
	run(t, ctx, "open concert-busan", chromedp.Navigate(url+"#/room/concert-busan"), chromedp.WaitVisible(chromedp.CSS("#c-queue svg")))
	waitText(t, ctx, "#room-state", "open")
	testenv.Eventually(t, time.Minute, "the what-if", func() bool {
		s, _ := text(ctx, "#whatif")
		return strings.Contains(s, "λ = L ÷ W")
	})
	screenshot(t, ctx, "console-room.png")
	stop()
}

// TestBrowserEventSummary: the timeline says what a settings change
// changed, not the whole settings before and after.
func TestBrowserEventSummary(t *testing.T) {
	t.Parallel()
	ctx := newBrowser(t)
	e := newEnv(t, envOptions{})
	run(t, ctx, "open the console", chromedp.Navigate(e.srv.URL+"/console/"), chromedp.WaitVisible(chromedp.ID("key")))
	for _, tc := range []struct{ event, want string }{
		{`{"type":"settings_changed","data":{"who":"admin","old":{"state":"open","admit_rate":10,"max_active":50,"opens_at":"2026-12-24T10:00:00Z"},"new":{"state":"paused","admit_rate":20,"max_active":50}}}`,
			"by admin: state open → paused, admit_rate 10 → 20, opens_at 2026-12-24T10:00:00Z → –"},
		{`{"type":"settings_changed","data":{"who":"console","old":{"state":"open"},"new":{"state":"open"}}}`, "by console: no change"},
		{`{"type":"admitted","data":{"batch":3}}`, "batch 3"},
		{`{"type":"entered"}`, ""},
	} {
		if got := eval[string](t, ctx, "eventSummary("+tc.event+")"); got != tc.want {
			t.Errorf("eventSummary(%s) = %q, want %q", tc.event, got, tc.want)
		}
	}
}
