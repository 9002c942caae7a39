package sale_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"usher/internal/booking"
	"usher/internal/booking/pgbooking"
	"usher/internal/hold"
	"usher/internal/hold/redishold"
	"usher/internal/mq/natsmq"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/sale"
	"usher/internal/testenv"
)

// benchPool is the database pool: the consumer's concurrency, and the most
// connections PostgreSQL may ever see from usher.
const benchPool = 10

// BenchmarkBurst is issue 3's experiment on the real services (holds in
// Redis, reservations through NATS JetStream, PostgreSQL with a pool of 10):
// visitors race for the seats of one schedule, a third of them first aiming
// at 50 hot seats, each retrying on other seats the seat map shows as
// available until it holds one, then reserving it. Every op is one burst.
// It fails unless every seat is confirmed exactly once, SQL and the hold
// store agree afterwards, and PostgreSQL never saw more connections than the
// pool (polled from pg_stat_activity during the burst).
//
//	CI=true USHER_TEST_REDIS=redis://127.0.0.1:6379 \
//	USHER_TEST_POSTGRES='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	USHER_TEST_NATS=nats://127.0.0.1:4222 \
//	go test -run '^$' -bench Burst -benchtime 1x ./internal/sale/
func BenchmarkBurst(b *testing.B) {
	for _, c := range []struct{ seats, visitors int }{{1000, 10_000}, {5000, 5000}} {
		b.Run(fmt.Sprintf("seats=%d/visitors=%d", c.seats, c.visitors), func(b *testing.B) {
			for range b.N {
				burst(b, c.seats, c.visitors)
			}
		})
	}
}

func burst(b *testing.B, seats, visitors int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	app := "usher-bench-" + suffix

	// PostgreSQL in a schema of its own, tagged so its connections can be
	// counted.
	base := testenv.URL(b, "USHER_TEST_POSTGRES")
	schema := freshSchema(b, base)
	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	catalog, err := pgbooking.Open(ctx, u.String(), benchPool)
	if err != nil {
		b.Fatal(err)
	}
	defer catalog.Close()

	rc := testenv.Redis(b)
	holds := redishold.New(rc, testenv.RedisPrefix(b, rc))

	nc, err := nats.Connect(testenv.URL(b, "USHER_TEST_NATS"))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	name := "bench" + suffix
	broker, err := natsmq.Open(ctx, nc, natsmq.Options{Name: name})
	if err != nil {
		b.Fatal(err)
	}
	defer deleteStream(b, nc, name)

	svc := sale.New(sale.Config{
		Catalog: catalog, Holds: holds, Broker: broker, Queue: queue.New(memqueue.New(), queue.Options{}),
		SnapshotEvery: 100 * time.Millisecond, SeatLimit: 1, Workers: benchPool, MaxBatch: 64,
	})
	done := make(chan error, 1)
	runCtx, stop := context.WithCancel(ctx)
	go func() { done <- svc.Run(runCtx) }()
	defer func() { stop(); <-done }()

	c, _ := svc.CreateConcert(ctx, "burst")
	sch, err := svc.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID}, time.Time{})
	if err != nil {
		b.Fatal(err)
	}
	ids, err := svc.AddSeats(ctx, sch.ID, sale.SeatLayout{Sections: []string{"A"}, Rows: seats / 50, SeatsPerRow: 50})
	if err != nil {
		b.Fatal(err)
	}

	// Count the pool's connections from PostgreSQL's side while it runs.
	var peak atomic.Int64
	watch, watchCtx := make(chan struct{}), ctx
	go func() {
		defer close(watch)
		conn, err := pgx.Connect(watchCtx, base)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		for watchCtx.Err() == nil {
			var n int64
			if conn.QueryRow(watchCtx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n) == nil && n > peak.Load() {
				peak.Store(n)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	b.ResetTimer()
	start := time.Now()
	var mu sync.Mutex
	reservations := map[string]string{} // id → visitor
	var wg sync.WaitGroup
	var holdAttempts atomic.Int64
	sem := make(chan struct{}, 400) // concurrent visitors at once
	for v := range visitors {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			visitor := "v" + strconv.Itoa(v)
			rng := rand.New(rand.NewPCG(uint64(v), 1))
			seat := ids[rng.IntN(seats)]
			if v%3 == 0 {
				seat = ids[rng.IntN(50)] // hot
			}
			for attempt := 0; ; attempt++ {
				holdAttempts.Add(1)
				_, err := svc.Hold(ctx, sch.ID, visitor, []int64{seat})
				if err != nil && !errors.Is(err, hold.ErrTaken) {
					b.Errorf("hold: %v", err)
					return
				}
				if err == nil {
					res, _, err := svc.Reserve(ctx, visitor, sch.ID, []int64{seat}, "k"+strconv.Itoa(attempt))
					if err != nil {
						b.Errorf("reserve: %v", err)
						return
					}
					mu.Lock()
					reservations[res.ID] = visitor
					mu.Unlock()
					if decided := waitDecided(b, svc, visitor, res.ID); decided.Status == booking.Confirmed {
						return
					}
					// Rejected (its seat was sold while the seat map said
					// otherwise): back to the seat map, as a person would.
				}
				m, err := svc.SeatMap(ctx, sch.ID)
				if err != nil {
					b.Errorf("seat map: %v", err)
					return
				}
				var free []int64
				for _, s := range m.Seats {
					if s.Status == booking.Available {
						free = append(free, s.ID)
					}
				}
				if len(free) == 0 {
					return // sold out, as far as this visitor can see
				}
				seat = free[rng.IntN(len(free))]
			}
		}()
	}
	wg.Wait()
	confirmed, rejected := 0, 0
	for id, visitor := range reservations {
		switch waitDecided(b, svc, visitor, id).Status {
		case booking.Confirmed:
			confirmed++
		case booking.Rejected:
			rejected++
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	<-watch

	// Every seat sold exactly once, to a confirmed reservation; no holds left.
	all, err := catalog.Seats(context.Background(), sch.ID)
	if err != nil {
		b.Fatal(err)
	}
	sold, owners := 0, map[string]bool{}
	for _, s := range all {
		if s.Status == booking.Sold {
			sold++
			if owners[s.ReservationID] {
				b.Errorf("reservation %s owns two seats with a limit of one", s.ReservationID)
			}
			owners[s.ReservationID] = true
			if _, ok := reservations[s.ReservationID]; !ok {
				b.Errorf("seat %d sold to unknown reservation %q", s.ID, s.ReservationID)
			}
		}
	}
	held, err := holds.HeldSeats(context.Background(), sale.Scope(sch.ID), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	if confirmed != seats || sold != seats || len(held) != 0 {
		b.Fatalf("confirmed %d, sold %d in SQL, %d still held; want %d, %d, 0", confirmed, sold, len(held), seats, seats)
	}
	if p := peak.Load(); p > benchPool {
		b.Fatalf("PostgreSQL saw %d connections from the pool of %d", p, benchPool)
	}
	b.ReportMetric(float64(confirmed), "confirmed")
	b.ReportMetric(float64(len(reservations)), "reservations")
	b.ReportMetric(float64(sold-confirmed), "oversold")
	b.ReportMetric(float64(peak.Load()), "peak_db_conns")
	b.ReportMetric(float64(holdAttempts.Load()), "hold_attempts")
	b.ReportMetric(float64(confirmed)/elapsed.Seconds(), "confirmed/s")
	b.ReportMetric(float64(rejected), "rejected")
}

// waitDecided polls a reservation until it is decided.
func waitDecided(b *testing.B, svc *sale.Service, visitor, id string) booking.Reservation {
	for {
		r, err := svc.Reservation(context.Background(), visitor, id)
		if err != nil {
			b.Errorf("reservation %s: %v", id, err)
			return r
		}
		if r.Status != booking.Pending {
			return r
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func deleteStream(tb testing.TB, nc *nats.Conn, name string) {
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	js.DeleteStream(ctx, strings.ToUpper(name)+"_RESERVATIONS")
	js.DeleteKeyValue(ctx, name+"_reservations")
}
