package gateway

// Browser tests: Debian's chromium, driven with chromedp, against an
// in-process gateway on the memory store with the admission scheduler
// running. They run when chromium is installed; under CI a missing chromium
// fails them. Screenshots of the waiting page go to artifacts/screenshots/.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"usher/internal/admission"
	"usher/internal/queue"
	"usher/internal/testenv"
)

// browserDeadline bounds each browser test: a guard against a hang, not a
// speed requirement. 30 s was once too short for a whole test on a loaded
// 2-core machine (load average 23).
const browserDeadline = 3 * time.Minute

// shopOrigin is the gated site: an HTML page naming the URL it was asked.
func shopOrigin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, `<!doctype html><title>Shop</title><h1 id="origin">Welcome to the shop</h1><p id="uri">%s</p>`, r.URL.RequestURI())
}

// browserEnv is a gateway in front of shopOrigin whose room "sale" is
// paused, admits one visitor at a time, and is served by a running
// scheduler and view refresher.
func browserEnv(t *testing.T, mod ...func(*Config)) *env {
	t.Helper()
	e := newEnv(t, newOrigin(t, shopOrigin), Rules{}, mod...)
	runPausedSale(t, e.q)
	return e
}

// runPausedSale makes q's room "sale" paused, admitting one visitor at a
// time, and runs q's view refresher and admission scheduler until the
// test ends.
func runPausedSale(t *testing.T, q *queue.Queue) {
	t.Helper()
	s := queue.DefaultSettings()
	s.State, s.MaxActive, s.Interval = queue.Paused, 1, 100*time.Millisecond
	if err := q.PutRoom(context.Background(), "sale", s); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { q.Run(ctx) })
	wg.Go(func() { admission.New(q, slog.New(slog.DiscardHandler)).Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// newBrowser starts chromium with a fresh profile and returns the context
// of its first tab, which ends after browserDeadline; extra flags are added
// to the launch flags.
func newBrowser(t testing.TB, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	return newBrowserFor(t, browserDeadline, extra...)
}

// newBrowserFor is newBrowser with a deadline of its own (benchmarks).
func newBrowserFor(t testing.TB, deadline time.Duration, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(testenv.Chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(412, 860), // a phone
	}, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	ctx, cancelTab := chromedp.NewContext(ctx)
	t.Cleanup(func() { cancelTab(); cancelAlloc(); cancel() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// newBrowserContext opens a tab in a new browser context of the browser of
// ctx: a second visitor with its own cookies.
func newBrowserContext(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	return ctx
}

// koreanContext is newBrowserContext for a visitor whose browser prefers
// Korean: every request of its tab sends Accept-Language ko-KR first.
func koreanContext(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	ctx = newBrowserContext(t, ctx)
	ua, err := chromedp.Run(ctx, chromedp.Evaluate[string](`navigator.userAgent`))
	if err != nil {
		t.Fatal(err)
	}
	override := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{
			UserAgent: ua, AcceptLanguage: "ko-KR,ko;q=0.9,en-US;q=0.8,en;q=0.7",
		})
		return err
	})
	if err := chromedp.Do(ctx, override); err != nil {
		t.Fatalf("Korean browser context: %v", err)
	}
	return ctx
}

// waitText waits until the element with id shows want, or the test's
// deadline passes. It survives navigations.
func waitText(t *testing.T, ctx context.Context, id, want string) {
	t.Helper()
	var got string
	var err error
	for ctx.Err() == nil {
		try, cancel := context.WithTimeout(ctx, time.Second)
		got, err = chromedp.Run(try, chromedp.Text(chromedp.ID(id)))
		cancel()
		if err == nil && got == want {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The tab's context has ended: give the page dump a short deadline of
	// its own, so that a failure reports instead of hanging.
	dump, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	html, _ := chromedp.Run(dump, chromedp.OuterHTML(chromedp.CSS("html")))
	t.Fatalf("#%s never showed %q (last %q, %v); page:\n%.2000s", id, want, got, err, html)
}

func navigate(t testing.TB, ctx context.Context, u string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
		t.Fatalf("navigate %s: %v", u, err)
	}
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
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

func TestBrowserWaitAdmitAndLand(t *testing.T) {
	e := browserEnv(t)
	first := newBrowser(t)
	gated := e.url + "/shop?item=42"

	navigate(t, first, gated)
	waitText(t, first, "position", "1")
	waitText(t, first, "title", "The sale has not started yet")
	screenshot(t, first, "waiting-paused-phone.png")

	// A reload keeps the place.
	if err := chromedp.Do(first, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitText(t, first, "position", "1")

	// A second visitor (its own cookies) waits behind the first.
	second := newBrowserContext(t, first)
	navigate(t, second, gated)
	waitText(t, second, "position", "2")
	waitText(t, second, "ahead", "1 person ahead of you")
	if err := chromedp.Do(second, chromedp.EmulateViewport(900, 640)); err != nil {
		t.Fatal(err)
	}
	screenshot(t, second, "waiting-paused-desktop.png")

	// A third visitor whose browser prefers Korean gets the page in Korean
	// from the same proxy, behind the other two.
	korean := koreanContext(t, first)
	navigate(t, korean, gated)
	waitText(t, korean, "position", "3")
	waitText(t, korean, "title", "아직 판매가 시작되지 않았습니다")
	waitText(t, korean, "ahead", "앞에 2명이 있습니다")
	if lang, err := chromedp.Run(korean, chromedp.Evaluate[string](`document.documentElement.lang`)); err != nil || lang != "ko" {
		t.Errorf("Korean browser: <html lang=%q>, %v; want ko", lang, err)
	}
	screenshot(t, korean, "waiting-paused-ko-phone.png")

	// The sale starts: the scheduler admits the first visitor, whose page
	// notices by polling and goes on to the URL first asked for; the second
	// visitor's page moves up to position 1 without a reload.
	setState(t, e.q, "sale", queue.Open)
	waitText(t, first, "origin", "Welcome to the shop")
	waitText(t, first, "uri", "/shop?item=42")
	waitText(t, second, "position", "1")
	waitText(t, second, "title", "You are in line")
	// The script shows the server's words for the wait (eta_text): at the
	// head of an open room, seconds.
	waitText(t, second, "eta", "less than a minute")
	// The Korean page moves up too, and its script words it in Korean.
	waitText(t, korean, "position", "2")
	waitText(t, korean, "title", "대기 중입니다")
	waitText(t, korean, "ahead", "앞에 1명이 있습니다")
	// The script rewrote "Last updated" with this poll, in the format the
	// server renders and docs/proxy.md documents.
	updated, err := chromedp.Run(second, chromedp.Text(chromedp.ID("updated")))
	if err != nil || !regexp.MustCompile(`^\d\d:\d\d:\d\d UTC$`).MatchString(updated) {
		t.Errorf("#updated after a poll = %q, %v; want HH:MM:SS UTC", updated, err)
	}
	screenshot(t, second, "waiting-open-desktop.png")
}

// TestBrowserWithoutJavaScript: with scripting off the server-rendered
// page shows the place and a link that shows it again; nothing refreshes
// by itself, and following the link once the room opens reaches the site
// (at the latest on the follow after the one that showed the visitor
// there).
func TestBrowserWithoutJavaScript(t *testing.T) {
	e := browserEnv(t)
	ctx := newBrowser(t)
	if err := chromedp.Do(ctx, testenv.DisableScripts()); err != nil {
		t.Fatal(err)
	}

	navigate(t, ctx, e.url+"/shop?nojs=1")
	waitText(t, ctx, "position", "1")
	waitText(t, ctx, "refresh", "Refresh my place")
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('meta[http-equiv]').length`)); err != nil || n != 0 {
		t.Errorf("%d meta refreshes (%v), want none: the page never reloads by itself", n, err)
	}
	screenshot(t, ctx, "waiting-nojs-phone.png")

	// The room opens. Without a script nothing polls, so the visitor may
	// not have been seen since the paused room marked it (presence): it
	// is admitted at the step after the link shows its place again, and
	// a later follow of the link reaches the site.
	link, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('refresh').href`))
	if err != nil || !strings.HasPrefix(link, e.url+"/") {
		t.Fatalf("the refresh link is %q, %v; want a link to this site", link, err)
	}
	setState(t, e.q, "sale", queue.Open)
	testenv.Eventually(t, time.Minute, "the refresh link reaches the site", func() bool {
		navigate(t, ctx, link)
		at, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('origin') !== null`))
		return err == nil && at
	})
	waitText(t, ctx, "origin", "Welcome to the shop")
	waitText(t, ctx, "uri", "/shop?nojs=1")
}

// TestBrowserRestartKeepsPlace closes the browser and opens it again on the
// same profile: the visitor cookie outlives the session, so the visitor is
// still first in line, not a second entry at the back.
func TestBrowserRestartKeepsPlace(t *testing.T) {
	e := browserEnv(t)
	profile := t.TempDir()
	gated := e.url + "/shop"

	before := newBrowser(t, chromedp.UserDataDir(profile))
	navigate(t, before, gated)
	waitText(t, before, "position", "1")
	if err := chromedp.Cancel(before); err != nil { // closes the browser, writing its cookies
		t.Fatalf("close chromium: %v", err)
	}

	after := newBrowser(t, chromedp.UserDataDir(profile))
	navigate(t, after, gated)
	waitText(t, after, "position", "1")
	v, err := e.q.Room(context.Background(), "sale")
	if err != nil || v.Waiting != 1 {
		t.Errorf("waiting = %d, %v after the restart; want 1 (the same place)", v.Waiting, err)
	}
}
