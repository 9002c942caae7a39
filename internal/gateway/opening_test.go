package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"usher/internal/queue"
	"usher/internal/wire"
)

// The pre-queue behind the proxy: a countdown page and the JSON protocol's
// pre_queue answer before the opening; after the draw, a position and a
// new ticket.
func TestPreQueuePage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	ctx := context.Background()
	set := queue.DefaultSettings()
	set.OpensAt = time.Now().Add(time.Hour).Truncate(time.Millisecond)
	if err := e.q.PutRoom(ctx, "sale", set); err != nil {
		t.Fatal(err)
	}
	b := browser(t)
	res := do(t, b, "GET", e.url+"/shop", map[string]string{"Accept": "text/html"})
	if res.status != http.StatusTooManyRequests {
		t.Fatalf("status = %d, want 429; body %s", res.status, res.body)
	}
	for _, want := range []string{`data-state="pre_queue"`, `id="countdown">`, "The sale opens soon", set.OpensAt.UTC().Format("2006-01-02 15:04 UTC")} {
		if !strings.Contains(res.body, want) {
			t.Errorf("pre-queue page lacks %q:\n%s", want, res.body)
		}
	}
	res = do(t, b, "GET", e.url+"/shop", map[string]string{"Accept": "application/json"})
	var got wire.Entry
	if err := json.Unmarshal([]byte(res.body), &got); err != nil || res.status != 429 || got.RoomState != "pre_queue" ||
		got.Position != 0 || got.OpensAt == nil || !got.OpensAt.Equal(set.OpensAt) || got.Ticket != "" || got.AheadText != "" || got.ETAText != "" {
		t.Fatalf("JSON in the pre-queue: %d %s", res.status, res.body)
	}

	// The opening: moved to now, it draws at the next call.
	set.OpensAt = time.Now().Truncate(time.Millisecond)
	if err := e.q.PutRoom(ctx, "sale", set); err != nil {
		t.Fatal(err)
	}
	res = do(t, b, "GET", e.url+"/shop", map[string]string{"Accept": "application/json"})
	if err := json.Unmarshal([]byte(res.body), &got); err != nil || res.status != 429 || got.State != "waiting" || got.Position != 1 || got.Ticket == "" {
		t.Fatalf("JSON after the draw: %d %s, want position 1 with a new ticket", res.status, res.body)
	}
	if cookieNamed(res.header, wire.RoomTicketCookie("sale")) == nil {
		t.Error("no new ticket cookie after the draw")
	}
	if res := do(t, b, "GET", e.url+"/shop", map[string]string{"Accept": "text/html"}); !strings.Contains(res.body, `class="position" id="position">1<`) {
		t.Errorf("page after the draw lacks position 1:\n%s", res.body)
	}
}

// A full line: the page says so and retries; JSON clients get 429
// queue_full; nothing is created.
func TestFullLinePage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	ctx := context.Background()
	set := queue.DefaultSettings()
	set.MaxActive, set.MaxWaiting = 1, 1
	if err := e.q.PutRoom(ctx, "sale", set); err != nil {
		t.Fatal(err)
	}
	e.admit("sale", "occupant", time.Time{})
	if res := do(t, browser(t), "GET", e.url+"/shop", nil); res.status != 429 || !strings.Contains(res.body, `id="position">1<`) {
		t.Fatalf("first in line: %d %s", res.status, res.body)
	}
	res := do(t, browser(t), "GET", e.url+"/shop", map[string]string{"Accept": "text/html"})
	if res.status != 429 || !strings.Contains(res.body, `data-state="full"`) || !strings.Contains(res.body, "The line is full") || res.header.Get("Retry-After") != "10" {
		t.Errorf("full line, HTML: %d (Retry-After %q) %s", res.status, res.header.Get("Retry-After"), res.body)
	}
	res = do(t, browser(t), "GET", e.url+"/shop", map[string]string{"Accept": "application/json"})
	if res.status != 429 || !strings.Contains(res.body, `"queue_full"`) {
		t.Errorf("full line, JSON: %d %s", res.status, res.body)
	}
	if v, _ := e.q.Room(ctx, "sale"); v.Waiting != 1 {
		t.Errorf("%d waiting after refused entries, want 1", v.Waiting)
	}
}

// In a browser: the pre-queue page counts down, and after the opening the
// page goes on by itself, through the draw and the admission, to the shop.
func TestBrowserPreQueueCountdown(t *testing.T) {
	e := browserEnv(t)
	set := queue.DefaultSettings()
	set.MaxActive, set.Interval = 1, 100*time.Millisecond
	// The opening is far enough away that no slow browser start reaches
	// it; the test then moves it to now, as an operator may before the draw.
	set.OpensAt = time.Now().Add(10 * time.Minute).Truncate(time.Millisecond)
	if err := e.q.PutRoom(context.Background(), "sale", set); err != nil {
		t.Fatal(err)
	}
	tab := newBrowser(t)
	navigate(t, tab, e.url+"/shop?item=7")
	waitText(t, tab, "title", "The sale opens soon")
	countdown, err := chromedp.Run(tab, chromedp.Text(chromedp.ID("countdown")))
	if err != nil || !regexp.MustCompile(`^(10:00|[0-9]:[0-5][0-9])$`).MatchString(countdown) {
		t.Errorf("#countdown = %q, %v; want M:SS within 10 minutes", countdown, err)
	}
	screenshot(t, tab, "pre-queue-phone.png")
	set.OpensAt = time.Now().Add(time.Second).Truncate(time.Millisecond)
	if err := e.q.PutRoom(context.Background(), "sale", set); err != nil {
		t.Fatal(err)
	}
	waitText(t, tab, "origin", "Welcome to the shop")
	waitText(t, tab, "uri", "/shop?item=7")
	if d, _ := e.q.Room(context.Background(), "sale"); !d.Draw.Done || d.Draw.Entrants != 1 {
		t.Errorf("draw = %+v, want done with the one entrant", d.Draw)
	}
}
