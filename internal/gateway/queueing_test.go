package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"usher/internal/queue"
)

func setQueueing(t *testing.T, q *queue.Queue, room string, m queue.Queueing) {
	t.Helper()
	updateRoom(t, q, room, func(s *queue.Settings) { s.Queueing = m })
}

// TestQueueingThroughProxy: a reject room shows newcomers the closed page
// while those waiting keep theirs; a passthrough room lets the waiting
// and newcomers through to the origin.
func TestQueueingThroughProxy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	e.admit("sale", "occupant", time.Time{})
	waiting := browser(t)
	if res := do(t, waiting, "GET", e.url+"/shop", nil); !strings.Contains(res.body, `"state":"waiting"`) {
		t.Fatalf("first visitor past the occupant: %d, want the waiting page:\n%s", res.status, res.body)
	}

	setQueueing(t, e.q, "sale", queue.QueueReject)
	res := do(t, browser(t), "GET", e.url+"/shop", nil)
	if res.status != http.StatusConflict || !strings.Contains(res.body, "This waiting room is closed") {
		t.Errorf("reject, newcomer: %d, want 409 and the closed page:\n%s", res.status, res.body)
	}
	if res := do(t, waiting, "GET", e.url+"/shop", nil); !strings.Contains(res.body, `"state":"waiting"`) {
		t.Errorf("reject, waiting visitor: %d, want its place:\n%s", res.status, res.body)
	}

	setQueueing(t, e.q, "sale", queue.QueuePassthrough)
	for range 2 { // the first step refills the bucket from the last
		if _, err := e.q.Admit(context.Background(), "sale"); err != nil {
			t.Fatal(err)
		}
	}
	if res := do(t, waiting, "GET", e.url+"/shop", nil); res.body != "origin /shop" {
		t.Errorf("passthrough, the visitor who waited: %d, want the origin:\n%s", res.status, res.body)
	}
	if res := do(t, browser(t), "GET", e.url+"/shop", nil); res.body != "origin /shop" {
		t.Errorf("passthrough, newcomer: %d, want the origin:\n%s", res.status, res.body)
	}
}

// TestDrawPage: a random room's newcomer behind the near zone sees the
// draw's countdown, not the opening's.
func TestDrawPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newOrigin(t, helloOrigin), Rules{})
	updateRoom(t, e.q, "sale", func(s *queue.Settings) {
		s.State, s.AdmitRate, s.PresenceTimeout, s.Queueing = queue.Paused, 1, 0, queue.QueueRandom
	})
	for i := range 200 {
		if _, _, err := e.q.Enter(context.Background(), "sale", fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// A newcomer is drawn among the window's entrants behind the store's
	// near zone; the few drawn into the view's wider one are told their
	// place. Of five newcomers, one at least waits for the draw.
	drawn := 0
	for range 5 {
		res := do(t, browser(t), "GET", e.url+"/shop", nil)
		switch {
		case strings.Contains(res.body, `"state":"draw"`):
			drawn++
			for _, want := range []string{"Places in line are being drawn", "Places drawn in"} {
				if !strings.Contains(res.body, want) {
					t.Errorf("draw page lacks %q:\n%s", want, res.body)
				}
			}
		case !strings.Contains(res.body, `"state":"paused"`):
			t.Errorf("page of a newcomer to a paused random room: %d, want the draw or its place:\n%s", res.status, res.body)
		}
	}
	if drawn == 0 {
		t.Error("none of five newcomers waits for the draw")
	}
}
