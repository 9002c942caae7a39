package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"usher/internal/apierror"
	"usher/internal/booking"
	"usher/internal/hold"
	"usher/internal/mq"
	"usher/internal/mq/natsmq"
	"usher/internal/queue"
	"usher/internal/sale"
	"usher/internal/testenv"
)

// TestBrokerURLList: --nats takes one URL or the comma-separated nodes of
// a cluster, and the startup line hides their passwords.
func TestBrokerURLList(t *testing.T) {
	for _, tc := range []struct {
		spec     string
		replicas int
		ok       bool
	}{
		{"nats://127.0.0.1:4222", 1, true},
		{"nats://127.0.0.1:14231,nats://127.0.0.1:14232,nats://127.0.0.1:14233", 3, true},
		{"nats://a:4222, nats://b:4222, nats://c:4222", 3, true},
		{"tls://u:p@a:4222,tls://u:p@b:4222", 5, true},
		{"embedded", 1, true},
		{"embedded", 3, false},
		{"nats://a:4222,nats://b:4222", 2, false},
		{"nats://a:4222,http://b:4222", 3, false},
		{"nats://a:4222,", 3, false},
		{"nats://", 1, false},
		{"nats://:4222", 1, false},
		{"nats://a:4222,embedded", 1, false},
	} {
		if err := checkBroker(tc.spec, tc.replicas); (err == nil) != tc.ok {
			t.Errorf("checkBroker(%q, %d) = %v, want ok %v", tc.spec, tc.replicas, err, tc.ok)
		}
	}
	for in, want := range map[string]string{
		"nats://u:secret@a:1,nats://u:secret@b:2": "nats://…@a:1,nats://…@b:2",
		"nats://a:1,nats://b:2":                   "nats://a:1,nats://b:2",
		"postgres://u:p,x@h/db":                   "postgres://…@h/db", // a comma in a password, not a list
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNATSClusterFailover runs a sale through the booking path usher
// serves (sale.Service on the Redis queue and hold stores, SQL, and the
// broker that openBroker opens on `--nats nats://a,nats://b,nats://c
// --nats-replicas 3`, with natsmq's default AckWait and Timeout) on a
// three-node JetStream cluster of its own (testenv.StartNATSCluster), and:
//
//  1. kills with SIGKILL the node that leads most of the reservation
//     stream, its consumer and the bucket, in the middle of the sale, while
//     visitors enter, hold a seat and reserve it (retrying with the same
//     idempotency key on 503, as a client does);
//  2. once the sale went on without it, starts it again, waits until every
//     replica is current, and kills two nodes (no quorum): Reserve must
//     fail with unavailable (503 with Retry-After) and the visitor's hold
//     and active slot must stay; the two nodes come back and the same
//     visitor's retry is confirmed, and the sale goes on.
//
// It asserts what must hold whatever the timing: every failed call is
// unavailable, never another error; every submitted reservation ends
// decided, in the broker and in SQL with the same decision; SQL has at
// most one reservation per visitor and idempotency key, sells no seat
// twice, and every sold seat belongs to a confirmed reservation; the
// consumer decides reservations submitted after each failure. It
// measures, and logs as one record for docs/benchmarks.md: the seconds
// of unavailability seen by the visitors after the kill, how long the
// reservations in flight at the kill waited for their decision, how long
// Reserve took to fail without quorum, and the seconds from the restart
// of the two nodes to the first successful Reserve.
func TestNATSClusterFailover(t *testing.T) {
	t.Parallel()
	top := testenv.StartNATSCluster(t)
	redisURL := testenv.URL(t, "USHER_TEST_REDIS")
	prefix := testenv.RedisPrefix(t, testenv.Redis(t))
	dbSpec := testDB(t)
	ctx := context.Background()
	var cl closers
	t.Cleanup(func() { cl.Close() })
	qs, hs := openQueueHold(t, redisURL, prefix, &cl)
	catalog, err := openCatalog(ctx, dbSpec, t.TempDir(), 4, &cl)
	if err != nil {
		t.Fatal(err)
	}
	log := warnLog(t)
	decisions := &decisionLog{Store: catalog, at: map[string]time.Time{}, calls: map[string]int{}}
	if err := checkBroker(top.URL, 3); err != nil {
		t.Fatal(err)
	}
	name := natsName(t)
	broker, _, err := openBroker(ctx, top.URL, natsmq.Options{Name: name, Replicas: 3}, t.TempDir(), log, &cl)
	if err != nil {
		t.Fatal(err)
	}
	q := queue.New(queue.WithTimeout(qs, queue.DefaultStoreTimeout), queue.Options{})
	hs = hold.WithTimeout(hs, queue.DefaultStoreTimeout)
	svc := runSale(t, sale.Config{Catalog: decisions, Holds: hs, Broker: broker, Queue: q, Workers: 4, Logger: log})

	sched, seats := seatedSchedule(t, svc, 20)
	room := queue.DefaultSettings()
	room.MaxActive, room.AdmitRate = 100_000, 100_000
	if err := q.PutRoom(ctx, sched.Room, room); err != nil {
		t.Fatal(err)
	}
	// The visitors pick among all seats but the last ten, kept for the
	// quorum phase.
	s := &failoverSale{svc: svc, q: q, hs: hs, sched: sched, seats: seats[:len(seats)-10], decisions: decisions,
		visitor: map[string]string{}, submitted: map[string]time.Time{}}

	// An inspection connection of its own, for the leaders.
	nc, err := nats.Connect(top.URL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	assets := clusterAssets{js: js, stream: strings.ToUpper(name) + "_RESERVATIONS", bucket: "KV_" + name + "_reservations"}

	// 1. One node killed in the middle of the sale.
	stop := s.start(8)
	testenv.Eventually(t, 2*time.Minute, "150 reservations submitted before the kill", func() bool { return s.count() >= 150 })
	victim := top.Node(assets.mostLeader(t))
	inFlight := s.undecided()
	s.kill()
	victim.Kill(t)
	before := s.count()
	testenv.Eventually(t, 2*time.Minute, "150 more reservations submitted after the kill", func() bool { return s.count() >= before+150 })
	stop()
	s.waitDecided(t, broker)
	s.mu.Lock()
	firstFail, recovered, failedCalls, slowest := s.firstFail, s.recovered, s.failed, s.slowest
	s.mu.Unlock()
	var inFlightWait time.Duration
	for _, id := range inFlight {
		inFlightWait = max(inFlightWait, decisions.decidedAt(id).Sub(s.killed))
	}
	var afterWait, beforeWait []time.Duration
	since := s.submittedSince(s.killed)
	for id, at := range s.submittedSince(time.Time{}) {
		if _, after := since[id]; after {
			afterWait = append(afterWait, decisions.decidedAt(id).Sub(at))
		} else {
			beforeWait = append(beforeWait, decisions.decidedAt(id).Sub(at))
		}
	}
	s.mu.Lock()
	reserveBefore := slices.Clone(s.reserveBefore)
	s.mu.Unlock()
	// The visitors' unavailability: from the kill to the first successful
	// Reserve after the first failed one (calls in flight at the kill hang
	// until they fail).
	unavailable, firstFailAfter := 0.0, 0.0
	if !firstFail.IsZero() {
		unavailable, firstFailAfter = recovered.Sub(s.killed).Seconds(), firstFail.Sub(s.killed).Seconds()
	}

	// 2. The node back, then two nodes down: no quorum.
	victim.Start(t)
	top.WaitHealthy(t)
	testenv.Eventually(t, 2*time.Minute, "every replica of the stream, the consumer and the bucket current", assets.current)
	late := "late-visitor"
	lateSeat := seats[len(seats)-1]
	if _, _, err := q.Enter(ctx, sched.Room, late); err != nil {
		t.Fatal(err)
	}
	h, err := svc.Hold(ctx, sched.ID, late, []int64{lateSeat})
	if err != nil {
		t.Fatal(err)
	}
	leader := assets.mostLeader(t)
	down := []*testenv.NATSNode{top.Node(leader)}
	for _, n := range top.Nodes {
		if n.Name != leader && len(down) < 2 {
			down = append(down, n)
		}
	}
	for _, n := range down {
		n.Kill(t)
	}
	var failTimes []time.Duration
	for range 3 {
		start := time.Now()
		_, _, err := svc.Reserve(ctx, late, sched.ID, []int64{lateSeat}, "k")
		failTimes = append(failTimes, time.Since(start))
		if !errors.Is(err, mq.ErrUnavailable) {
			t.Fatalf("Reserve with two of three nodes down: err = %v, want unavailable", err)
		}
		if st, code, retry := answer(err); st != http.StatusServiceUnavailable || code != "unavailable" || retry == "" {
			t.Errorf("Reserve with two nodes down answers %d %s (Retry-After %q), want 503 unavailable with Retry-After", st, code, retry)
		}
	}
	if got, err := hs.Get(ctx, sale.Scope(sched.ID), h.ID, time.Now()); err != nil || got.Holder != late {
		t.Errorf("hold after the failed reserves = %+v, %v; want it kept", got, err)
	}
	if e, _, err := q.Status(ctx, sched.Room, late, 0, time.Time{}); err != nil || e.Status != queue.Active {
		t.Errorf("visitor after the failed reserves = %+v, %v; want still active", e, err)
	}
	upAt := time.Now()
	for _, n := range down {
		n.Start(t)
	}
	var lateRes booking.Reservation
	retries := 0
	testenv.Eventually(t, 2*time.Minute, "Reserve to succeed once the two nodes are back", func() bool {
		var err error
		lateRes, _, err = svc.Reserve(ctx, late, sched.ID, []int64{lateSeat}, "k")
		if err != nil && !errors.Is(err, mq.ErrUnavailable) {
			t.Fatalf("Reserve while the nodes come back: %v, want success or unavailable", err)
		}
		retries++
		return err == nil
	})
	back := time.Since(upAt)
	if got, err := hs.Get(ctx, sale.Scope(sched.ID), h.ID, time.Now()); lateRes.Status == booking.Pending && (err != nil || got.Holder != late) {
		t.Errorf("hold when the broker came back = %+v, %v; want it kept until the decision", got, err)
	}
	s.record(late, lateRes.ID, time.Now())

	// The sale goes on.
	n := s.count()
	stop = s.start(8)
	testenv.Eventually(t, 2*time.Minute, "50 reservations submitted after the nodes came back", func() bool { return s.count() >= n+50 })
	stop()
	s.waitDecided(t, broker)
	if got, err := broker.Get(ctx, lateRes.ID); err != nil || got.Status != booking.Confirmed {
		t.Errorf("the late visitor's reservation = %+v, %v; want confirmed (the seat was held)", got, err)
	}
	s.check(t, ctx, broker, decisions)

	s.mu.Lock()
	defer s.mu.Unlock()
	for _, err := range s.unexpected {
		t.Errorf("a call failed with something other than unavailable (503): %v", err)
	}
	p := func(ds []time.Duration, q float64) float64 {
		if len(ds) == 0 {
			return 0
		}
		slices.Sort(ds)
		return ds[int(q*float64(len(ds)-1))].Seconds()
	}
	t.Logf("killed %s (leader of most of stream, consumer, bucket); calls after the kill: %v", victim.Name, s.calls)
	t.Logf("BenchmarkNATSClusterFailover reservations %d failed_calls %d unavailable_s %.2f first_fail_after_kill_s %.2f slowest_reserve_s %.2f in_flight_at_kill %d in_flight_decided_after_s %.2f "+
		"reserve_p50_before_kill_s %.3f decided_p50_before_kill_s %.3f after_kill_decided_p50_s %.3f after_kill_decided_max_s %.2f redelivered %d no_quorum_reserve_fail_s %s back_to_first_reserve_s %.2f retries %d",
		len(s.visitor), failedCalls, unavailable, firstFailAfter, slowest.Seconds(), len(inFlight), inFlightWait.Seconds(),
		p(reserveBefore, 0.5), p(beforeWait, 0.5), p(afterWait, 0.5), p(afterWait, 1),
		decisions.redelivered(), durations(failTimes), back.Seconds(), retries)
}

// failoverSale is the client side of TestNATSClusterFailover: the
// reservations the broker acknowledged, and when calls failed.
type failoverSale struct {
	svc       *sale.Service
	q         *queue.Queue
	hs        hold.Store
	sched     booking.Schedule
	seats     []int64
	decisions *decisionLog

	mu        sync.Mutex
	next      int
	killed    time.Time // zero before the kill
	firstFail time.Time // first failed Reserve after the kill
	recovered time.Time // first successful Reserve after firstFail
	failed    int
	slowest   time.Duration // the longest Reserve that ended after the kill
	// reserveBefore are the successful Reserves before the kill: the
	// reference.
	reserveBefore []time.Duration
	calls         map[string]int    // after the kill, by outcome
	visitor       map[string]string // reservation id → visitor
	submitted     map[string]time.Time
	unexpected    []error
}

// start runs workers visitors until the returned stop is called; stop
// waits for each worker's current visitor to finish.
func (s *failoverSale) start(workers int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				s.visit()
			}
		})
	}
	return func() { close(done); wg.Wait() }
}

// visit takes one new visitor through the sale: enter, hold a free seat (a
// few tries), reserve it, retrying a 503 with the same idempotency key
// for up to two minutes as a client would.
func (s *failoverSale) visit() {
	ctx := context.Background()
	s.mu.Lock()
	s.next++
	v := fmt.Sprintf("v%d", s.next)
	s.mu.Unlock()
	if _, _, err := s.q.Enter(ctx, s.sched.Room, v); err != nil {
		s.fail(fmt.Errorf("enter %s: %w", v, err))
		return
	}
	var seat int64
	for range 5 {
		seat = s.seats[mathrand.IntN(len(s.seats))]
		_, err := s.svc.Hold(ctx, s.sched.ID, v, []int64{seat})
		if err == nil {
			break
		}
		if !errors.Is(err, hold.ErrTaken) {
			s.fail(fmt.Errorf("hold %s: %w", v, err))
			return
		}
		seat = 0
	}
	if seat == 0 {
		return
	}
	pace := time.NewTicker(20 * time.Millisecond) // a client's retry pace
	defer pace.Stop()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); <-pace.C {
		start := time.Now()
		r, _, err := s.svc.Reserve(ctx, v, s.sched.ID, []int64{seat}, "k")
		now := time.Now()
		s.outcome(err, start, now)
		if err == nil {
			s.record(v, r.ID, now)
			return
		}
		if !errors.Is(err, mq.ErrUnavailable) {
			s.fail(fmt.Errorf("reserve %s: %w", v, err))
			return
		}
	}
	s.fail(fmt.Errorf("reserve %s: unavailable for two minutes", v))
}

func (s *failoverSale) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unexpected = append(s.unexpected, err)
}

// outcome records the result of a Reserve that ran from start to at; a
// failure must be unavailable.
func (s *failoverSale) outcome(err error, start, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.killed.IsZero() {
		k := "reserve ok"
		if err != nil {
			k = "reserve failed"
		}
		s.calls[k]++
		if at.After(s.killed) {
			s.slowest = max(s.slowest, at.Sub(start))
		}
	} else if err == nil {
		s.reserveBefore = append(s.reserveBefore, at.Sub(start))
	}
	switch {
	case err == nil:
		if !s.firstFail.IsZero() && s.recovered.IsZero() {
			s.recovered = at
		}
	case errors.Is(err, mq.ErrUnavailable):
		s.failed++
		if !s.killed.IsZero() && s.firstFail.IsZero() {
			s.firstFail = at
		}
		if st, code, retry := answer(err); st != http.StatusServiceUnavailable || code != "unavailable" || retry == "" {
			s.unexpected = append(s.unexpected, fmt.Errorf("answered %d %s (Retry-After %q): %w", st, code, retry, err))
		}
	}
}

func (s *failoverSale) record(visitor, id string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.visitor[id]; ok && prev != visitor {
		s.unexpected = append(s.unexpected, fmt.Errorf("reservation %s returned to %s and %s", id, prev, visitor))
	}
	s.visitor[id], s.submitted[id] = visitor, at
}

func (s *failoverSale) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killed, s.calls = time.Now(), map[string]int{}
}

func (s *failoverSale) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.visitor)
}

// undecided lists the submitted reservations that SQL has not decided.
func (s *failoverSale) undecided() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.visitor {
		if s.decisions.decidedAt(id).IsZero() {
			ids = append(ids, id)
		}
	}
	return ids
}

func (s *failoverSale) submittedSince(t time.Time) map[string]time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]time.Time{}
	for id, at := range s.submitted {
		if at.After(t) {
			out[id] = at
		}
	}
	return out
}

// waitDecided waits until the broker shows every submitted reservation
// decided: none is lost.
func (s *failoverSale) waitDecided(t *testing.T, broker mq.Broker) {
	t.Helper()
	s.mu.Lock()
	ids := make([]string, 0, len(s.visitor))
	for id := range s.visitor {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	waitDecided(t, broker, ids)
}

// waitDecided waits until the broker shows every reservation of ids
// decided.
func waitDecided(t *testing.T, broker mq.Broker, ids []string) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("%d reservations decided", len(ids)), func() bool {
		for len(ids) > 0 {
			r, err := broker.Get(context.Background(), ids[0])
			if err != nil && !errors.Is(err, mq.ErrUnavailable) {
				t.Fatalf("Get(%s): %v", ids[0], err)
			}
			if err != nil || r.Status == booking.Pending {
				return false
			}
			ids = ids[1:]
		}
		return true
	})
}

// check compares the broker, SQL and the client log once every
// reservation is decided.
func (s *failoverSale) check(t *testing.T, ctx context.Context, broker mq.Broker, decisions *decisionLog) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	inSQL := reservationsInSQL(t, ctx, decisions, s.sched.ID)
	perVisitor := map[string][]string{}
	confirmed := map[string]booking.Reservation{}
	for _, r := range inSQL {
		perVisitor[r.Visitor] = append(perVisitor[r.Visitor], r.ID)
		if _, ok := s.visitor[r.ID]; !ok {
			t.Errorf("SQL holds reservation %s of %s that no Reserve returned", r.ID, r.Visitor)
		}
		if r.Status == booking.Confirmed {
			confirmed[r.ID] = r
		}
		got, err := broker.Get(ctx, r.ID)
		if err != nil || got.Status != r.Status {
			t.Errorf("reservation %s: %s in SQL, %+v, %v in the broker", r.ID, r.Status, got, err)
		}
	}
	for v, ids := range perVisitor {
		if len(ids) > 1 {
			t.Errorf("visitor %s has %d reservations in SQL under one idempotency key: %v", v, len(ids), ids)
		}
	}
	if len(inSQL) != len(s.visitor) {
		t.Errorf("SQL holds %d reservations, Reserve returned %d", len(inSQL), len(s.visitor))
	}
	checkSold(t, ctx, decisions, s.sched.ID, confirmed)
}

// reservationsInSQL lists every reservation of the schedule in SQL.
func reservationsInSQL(t *testing.T, ctx context.Context, catalog booking.Store, schedule int64) []booking.Reservation {
	t.Helper()
	var inSQL []booking.Reservation
	for after := ""; ; {
		page, err := catalog.ListReservations(ctx, schedule, "", after, 500)
		if err != nil {
			t.Fatal(err)
		}
		inSQL = append(inSQL, page...)
		if len(page) < 500 {
			break
		}
		after = page[len(page)-1].ID
	}
	return inSQL
}

// checkSold checks that SQL sold each seat of the schedule once, to a
// confirmed reservation (of the ones in confirmed, by id) that holds it,
// and every seat of those reservations; it returns the seats sold.
func checkSold(t *testing.T, ctx context.Context, catalog booking.Store, schedule int64, confirmed map[string]booking.Reservation) int {
	t.Helper()
	all, err := catalog.Seats(ctx, schedule)
	if err != nil {
		t.Fatal(err)
	}
	sold := 0
	for _, st := range all {
		if st.Status != booking.Sold {
			continue
		}
		sold++
		if r, ok := confirmed[st.ReservationID]; !ok || !slices.Contains(r.SeatIDs, st.ID) {
			t.Errorf("seat %d sold to %q, which is no confirmed reservation of it", st.ID, st.ReservationID)
		}
	}
	seatsConfirmed := 0
	for _, r := range confirmed {
		seatsConfirmed += len(r.SeatIDs)
	}
	if sold != seatsConfirmed || sold == 0 {
		t.Errorf("SQL sold %d seats, confirmed reservations hold %d (want equal, > 0): a seat in two confirmed reservations, or one not sold", sold, seatsConfirmed)
	}
	return sold
}

// testDB is the --db of a test that sells seats: a schema of its own in
// the PostgreSQL at USHER_TEST_POSTGRES when it is set, else SQLite in a
// temporary directory.
func testDB(t *testing.T) string {
	t.Helper()
	if os.Getenv("USHER_TEST_POSTGRES") != "" {
		return testenv.PostgresSchema(t)
	}
	return "sqlite:" + filepath.Join(t.TempDir(), "usher.db")
}

// warnLog is a logger of the sale's and the broker's warnings, the first
// 100 lines of which the test logs if it fails.
func warnLog(t *testing.T) *slog.Logger {
	t.Helper()
	logs := &lineLog{max: 100}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the first warnings of the sale and the broker:\n%s", logs)
		}
	})
	return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// seatedSchedule makes a concert's schedule of rows × 100 seats in
// section A through svc, and waits until its seat map shows them all.
func seatedSchedule(t *testing.T, svc *sale.Service, rows int) (booking.Schedule, []int64) {
	t.Helper()
	ctx := context.Background()
	c, err := svc.CreateConcert(ctx, "failover")
	if err != nil {
		t.Fatal(err)
	}
	sched, err := svc.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	seats, err := svc.AddSeats(ctx, sched.ID, sale.SeatLayout{Sections: []string{"A"}, Rows: rows, SeatsPerRow: 100, Price: 100})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the seat map to show every seat", func() bool {
		m, err := svc.SeatMap(ctx, sched.ID)
		return err == nil && len(m.Seats) == len(seats)
	})
	return sched, seats
}

// runSale runs the sale service of cfg (its consumer decides reservations
// in SQL) until the test ends.
func runSale(t *testing.T, cfg sale.Config) *sale.Service {
	t.Helper()
	svc := sale.New(cfg)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("sale.Run: %v", err)
		}
	})
	return svc
}

// decisionLog is the booking store with a record of when each reservation
// was first decided and how often it was handed to Decide.
type decisionLog struct {
	booking.Store
	mu    sync.Mutex
	at    map[string]time.Time
	calls map[string]int
}

func (d *decisionLog) Decide(ctx context.Context, rs []booking.Reservation) ([]booking.Reservation, error) {
	out, err := d.Store.Decide(ctx, rs)
	if err != nil {
		return out, err
	}
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range out {
		d.calls[r.ID]++
		if _, ok := d.at[r.ID]; !ok {
			d.at[r.ID] = now
		}
	}
	return out, nil
}

func (d *decisionLog) decidedAt(id string) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at[id]
}

// redelivered counts the reservations handed to Decide more than once.
func (d *decisionLog) redelivered() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, c := range d.calls {
		if c > 1 {
			n++
		}
	}
	return n
}

// clusterAssets are the broker's replicated stream, consumer and bucket.
type clusterAssets struct {
	js             jetstream.JetStream
	stream, bucket string
}

// leaders returns the node leading each asset ("" while there is none).
func (a clusterAssets) infos() (infos []*jetstream.ClusterInfo, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, name := range []string{a.stream, a.bucket} {
		st, err := a.js.Stream(ctx, name)
		if err != nil {
			return nil, err
		}
		infos = append(infos, st.CachedInfo().Cluster)
		if name == a.stream {
			c, err := st.Consumer(ctx, "deciders")
			if err != nil {
				return nil, err
			}
			infos = append(infos, c.CachedInfo().Cluster)
		}
	}
	return infos, nil
}

// mostLeader names the node that leads most of the assets.
func (a clusterAssets) mostLeader(t *testing.T) string {
	t.Helper()
	infos, err := a.infos()
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	best := ""
	for _, ci := range infos {
		if ci == nil || ci.Leader == "" {
			t.Fatalf("an asset without a leader: %+v", infos)
		}
		if n[ci.Leader]++; n[ci.Leader] > n[best] {
			best = ci.Leader
		}
	}
	return best
}

// current reports whether every asset has a leader and two current
// replicas.
func (a clusterAssets) current() bool {
	infos, err := a.infos()
	if err != nil {
		return false
	}
	for _, ci := range infos {
		if ci == nil || ci.Leader == "" || len(ci.Replicas) != 2 {
			return false
		}
		for _, p := range ci.Replicas {
			if !p.Current || p.Offline {
				return false
			}
		}
	}
	return true
}

// answer is how the API answers err: status, code, Retry-After.
func answer(err error) (int, string, string) {
	rec := httptest.NewRecorder()
	apierror.Writer{}.Write(rec, httptest.NewRequest("POST", "/api/v1/reservations", nil), err)
	var body struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(rec.Body.Bytes(), &body)
	return rec.Code, body.Error.Code, rec.Header().Get("Retry-After")
}

func durations(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = fmt.Sprintf("%.2f", d.Seconds())
	}
	return strings.Join(s, ",")
}

// lineLog keeps the first max lines written to it.
type lineLog struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) < l.max {
		l.lines = append(l.lines, strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
