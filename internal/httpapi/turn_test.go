package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/httpapi"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/token"
	"usher/internal/wire"
)

// newTurnEnv serves the API on a memory store whose queue holds at most
// maxHeld status polls, with its view refresher running until the test
// ends (polls are held only while it runs); stop ends it.
func newTurnEnv(t *testing.T, maxHeld int) (e *env, stop func()) {
	t.Helper()
	keys, err := token.LoadDir(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	store := &flakyStore{Store: memqueue.New()}
	reg := prometheus.NewRegistry()
	q := queue.New(store, queue.Options{Metrics: queue.NewMetrics(reg), MaxHeld: maxHeld, Refresh: 20 * time.Millisecond})
	srv := httptest.NewTLSServer(httpapi.NewServer(httpapi.Config{Queue: q, Keys: keys, AdminKey: adminKey, Registry: reg}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); q.Run(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return &env{t: t, srv: srv, store: store, q: q, keys: keys, reg: reg}, stop
}

// heldPoll sends a status poll with Usher-Wait: 20 on ticket and returns
// a channel that receives its answer.
func (e *env) heldPoll(ticket string) <-chan resp {
	ch := make(chan resp, 1)
	go func() {
		ch <- e.doHeader(nil, "GET", "/api/v1/rooms/sale/entries/me", ticket, "", map[string]string{wire.WaitHeader: "20"})
	}()
	return ch
}

// waitHeld waits until the queue holds n polls.
func (e *env) waitHeld(n int) {
	e.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); e.q.Held() != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatalf("held polls: %d, want %d", e.q.Held(), n)
		}
	}
}

// waitingTicket enters a visitor behind one admitted visitor (max_active
// 1) and returns the admitted one's client and the waiting one's ticket.
func waitingTicket(t *testing.T, e *env) (*http.Client, string) {
	t.Helper()
	e.putRoom("sale", `{"max_active":1,"admit_rate":10,"interval_ms":1000}`)
	alice := e.client()
	if r := e.do(alice, "POST", "/api/v1/rooms/sale/entries", "", ""); r.entry(t).State != "admitted" {
		t.Fatalf("first enter: %s", r.body)
	}
	r := e.do(e.client(), "POST", "/api/v1/rooms/sale/entries", "", "")
	if got := r.entry(t); got.State != "waiting" || got.Position != 1 {
		t.Fatalf("second enter: %s", r.body)
	}
	return alice, r.entry(t).Ticket
}

// TestLongPollAnswersAtAdmission: a poll with Usher-Wait at the head is
// held, and answered with the pass when this instance's step admits the
// visitor, or another instance's (seen through the view).
func TestLongPollAnswersAtAdmission(t *testing.T) {
	t.Parallel()
	for _, by := range []string{"this instance", "another instance"} {
		t.Run(by, func(t *testing.T) {
			e, _ := newTurnEnv(t, 10)
			alice, ticket := waitingTicket(t, e)
			answer := e.heldPoll(ticket)
			e.waitHeld(1)
			select {
			case r := <-answer:
				t.Fatalf("answered before the admission: %s", r.body)
			default:
			}
			e.do(alice, "DELETE", "/api/v1/rooms/sale/entries/me", "", "")
			admitter := e.q
			if by == "another instance" {
				admitter = queue.New(e.store.Store, queue.Options{})
			}
			if res, err := admitter.Admit(context.Background(), "sale"); err != nil || len(res.Admitted) != 1 {
				t.Fatalf("admit: %+v, %v", res, err)
			}
			r := <-answer
			if got := r.entry(t); r.status != 200 || got.State != "admitted" || got.Pass == "" {
				t.Fatalf("held poll: %d %s, want admitted with a pass", r.status, r.body)
			}
			if n := e.q.Held(); n != 0 {
				t.Errorf("held after the answer: %d", n)
			}
		})
	}
}

// TestLongPollBounds: one held poll per visitor (a second answers the
// first at once), at most MaxHeld per instance (beyond, at once), none
// after the refresher stopped (shutdown), and none far from the head.
func TestLongPollBounds(t *testing.T) {
	t.Parallel()
	t.Run("per visitor", func(t *testing.T) {
		e, _ := newTurnEnv(t, 10)
		_, ticket := waitingTicket(t, e)
		first := e.heldPoll(ticket)
		e.waitHeld(1)
		second := e.heldPoll(ticket)
		r := <-first
		if got := r.entry(t); r.status != 200 || got.State != "waiting" || got.Position != 1 {
			t.Fatalf("first poll: %d %s, want waiting at 1", r.status, r.body)
		}
		e.waitHeld(1) // the second
		select {
		case r := <-second:
			t.Fatalf("second poll answered: %s", r.body)
		default:
		}
	})
	t.Run("per instance", func(t *testing.T) {
		e, _ := newTurnEnv(t, 1)
		e.putRoom("sale", `{"max_active":1,"admit_rate":10,"interval_ms":1000}`)
		var tickets []string
		for range 3 {
			r := e.do(e.client(), "POST", "/api/v1/rooms/sale/entries", "", "")
			tickets = append(tickets, r.entry(t).Ticket)
		}
		held := e.heldPoll(tickets[1])
		e.waitHeld(1)
		r := <-e.heldPoll(tickets[2]) // over the bound: at once
		if got := r.entry(t); r.status != 200 || got.State != "waiting" || got.Position != 2 {
			t.Fatalf("poll over the bound: %d %s, want waiting at 2", r.status, r.body)
		}
		e.waitHeld(1)
		select {
		case r := <-held:
			t.Fatalf("held poll answered: %s", r.body)
		default:
		}
	})
	t.Run("shutdown", func(t *testing.T) {
		e, stop := newTurnEnv(t, 10)
		_, ticket := waitingTicket(t, e)
		held := e.heldPoll(ticket)
		e.waitHeld(1)
		stop()
		if r := <-held; r.status != 200 || r.entry(t).State != "waiting" {
			t.Fatalf("held poll at shutdown: %d %s, want waiting", r.status, r.body)
		}
		if r := <-e.heldPoll(ticket); r.status != 200 || r.entry(t).State != "waiting" {
			t.Fatalf("poll after shutdown: %d %s, want waiting at once", r.status, r.body)
		}
	})
	t.Run("far from the head", func(t *testing.T) {
		e, _ := newTurnEnv(t, 10)
		e.putRoom("sale", `{"state":"paused","admit_rate":1,"interval_ms":1000}`)
		r := e.do(e.client(), "POST", "/api/v1/rooms/sale/entries", "", "")
		// A paused room's turn is not near: at once.
		if r := <-e.heldPoll(r.entry(t).Ticket); r.status != 200 || r.entry(t).State != "waiting" {
			t.Fatalf("poll in a paused room: %d %s", r.status, r.body)
		}
		var last string
		for range 10 { // the turn zone is 5 places at 1/s (five seconds of admissions)
			last = e.do(e.client(), "POST", "/api/v1/rooms/sale/entries", "", "").entry(t).Ticket
		}
		e.putRoom("sale", `{"state":"open","max_active":1,"admit_rate":1,"interval_ms":1000}`)
		if r := <-e.heldPoll(last); r.status != 200 || r.entry(t).Position != 11 {
			t.Fatalf("poll at 11: %d %s, want waiting at 11 at once", r.status, r.body)
		}
	})
}

// TestLongPollRace: many visitors' held polls, repeated and replaced,
// while steps admit them: every poll is answered, and none is held after.
// Run with -race.
func TestLongPollRace(t *testing.T) {
	t.Parallel()
	e, _ := newTurnEnv(t, 8)
	e.putRoom("sale", `{"max_active":1000,"admit_rate":20,"interval_ms":100,"state":"paused"}`)
	var tickets []string
	for range 16 {
		tickets = append(tickets, e.do(e.client(), "POST", "/api/v1/rooms/sale/entries", "", "").entry(t).Ticket)
	}
	e.putRoom("sale", `{"max_active":1000,"admit_rate":20,"interval_ms":100,"state":"open"}`)
	var wg sync.WaitGroup
	for _, ticket := range tickets {
		for range 2 { // two tabs of each visitor
			wg.Go(func() {
				for {
					r := <-e.heldPoll(ticket)
					if r.status != 200 {
						t.Errorf("poll: %d %s", r.status, r.body)
						return
					}
					if r.entry(t).State == "admitted" {
						return
					}
				}
			})
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for admitting := true; admitting; {
		select {
		case <-done:
			admitting = false
		case <-time.After(10 * time.Millisecond):
			e.q.Admit(context.Background(), "sale")
		}
	}
	e.waitHeld(0)
}
