package gateway

import (
	"context"
	"net/http"
	"regexp"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"usher/internal/queue"
)

// TestBrowserTurnInHiddenTab: a visitor at the head of an open room whose
// tab is hidden (another tab in front) holds a poll (Usher-Wait); when
// the slot ahead frees, the held poll answers at once: the site gets the
// visitor's first gated request, the hidden tab's title says it is the
// visitor's turn with the time left to continue, and the page goes on to
// the site when the tab comes to the front.
func TestBrowserTurnInHiddenTab(t *testing.T) {
	gated := make(chan string, 16)
	e := newEnv(t, newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case gated <- r.Header.Get("Accept"):
		default:
		}
		shopOrigin(w, r)
	}), Rules{})
	runPausedSale(t, e.q)
	// Someone ahead holds the room's one slot.
	ctx := context.Background()
	if _, _, err := e.q.Enter(ctx, "sale", "ahead"); err != nil {
		t.Fatal(err)
	}
	setState(t, e.q, "sale", queue.Open)
	for {
		if en, _, err := e.q.Status(ctx, "sale", "ahead", 0, time.Time{}); err != nil || en.Status == queue.Active {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	first := newBrowser(t)
	navigate(t, first, e.url+"/shop?item=7")
	waitText(t, first, "position", "1")
	setHidden(t, first, true)
	if v, err := chromedp.Run(first, chromedp.Evaluate[string](`document.visibilityState`)); err != nil || v != "hidden" {
		t.Fatalf("waiting tab: visibilityState %q, %v; want hidden", v, err)
	}
	// The hidden page's poll is held until the turn.
	for e.q.Held() != 1 {
		if first.Err() != nil {
			t.Fatal("no poll held")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case a := <-gated:
		t.Fatalf("the site was asked (Accept %q) before the turn", a)
	default:
	}
	if err := e.q.Leave(ctx, "sale", "ahead"); err != nil {
		t.Fatal(err)
	}
	// The held poll went through to the site: the first gated request.
	if a := <-gated; a != "application/json" {
		t.Errorf("first gated request: Accept %q, want the page's poll", a)
	}
	for {
		title, err := chromedp.Run(first, chromedp.Evaluate[string](`document.title`))
		if err != nil {
			t.Fatal(err)
		}
		if title == "It's your turn" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitText(t, first, "title", "It's your turn")
	left, err := chromedp.Run(first, chromedp.Text(chromedp.ID("turn-left")))
	if err != nil || !regexp.MustCompile(`^You have \d+:\d\d to continue\.$`).MatchString(left) {
		t.Errorf("#turn-left = %q, %v; want the time left to continue", left, err)
	}
	// Back to the tab: the page goes on to the site.
	setHidden(t, first, false)
	waitText(t, first, "origin", "Welcome to the shop")
	waitText(t, first, "uri", "/shop?item=7")
}

// setHidden hides (minimizes) or shows again the window of the tab of
// ctx: its document's visibilityState becomes "hidden", as for a tab in
// the background. (Headless Chromium keeps a tab behind another visible.)
func setHidden(t *testing.T, ctx context.Context, hidden bool) {
	t.Helper()
	id := chromedp.FromContext(ctx).Target.TargetID
	state := cdpbrowser.WindowStateNormal
	if hidden {
		state = cdpbrowser.WindowStateMinimized
	}
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		b := chromedp.FromContext(ctx).Browser
		w, err := cdp.Call(ctx, b, cdpbrowser.GetWindowForTarget, cdpbrowser.GetWindowForTargetParams{TargetID: id})
		if err != nil {
			return err
		}
		_, err = cdp.Call(ctx, b, cdpbrowser.SetWindowBounds, cdpbrowser.SetWindowBoundsParams{WindowID: w.WindowID, Bounds: &cdpbrowser.Bounds{WindowState: state}})
		return err
	}))
	if err != nil {
		t.Fatalf("hide tab: %v", err)
	}
}
