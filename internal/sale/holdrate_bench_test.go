package sale_test

import (
	"context"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"usher/internal/booking"
	"usher/internal/booking/pgbooking"
	"usher/internal/hold/redishold"
	"usher/internal/mq/natsmq"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/sale"
	"usher/internal/testenv"
)

// BenchmarkHoldRate is issue 35 §4's hold at a fixed rate, inside one
// process: holds of distinct seats arrive at 130/s on a 50,000-seat
// schedule (PostgreSQL, holds in Redis) while a reader asks for the
// status every 100 ms, so that the seat map is rebuilt every
// --seat-map-every; every=1h is the reference without rebuilds. It reports
// a Hold call's p50 and p95 (µs, measured around the call: no HTTP, no
// load generator) and p95/p50. NATS carries no reservation here. Run with -blockprofile to see what, if
// anything, a hold waits on:
//
//	USHER_TEST_REDIS=redis://127.0.0.1:6379/0 \
//	USHER_TEST_POSTGRES='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	USHER_TEST_NATS=nats://127.0.0.1:4222 \
//	go test -run '^$' -bench HoldRate -benchtime 2000x ./internal/sale/
func BenchmarkHoldRate(b *testing.B) {
	for _, every := range []time.Duration{500 * time.Millisecond, time.Hour} {
		b.Run("every="+every.String(), func(b *testing.B) { holdRate(b, 50_000, 130, every) })
	}
}

func holdRate(b *testing.B, seats, rate int, every time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := testenv.URL(b, "USHER_TEST_POSTGRES")
	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("search_path", freshSchema(b, base))
	u.RawQuery = q.Encode()
	catalog, err := pgbooking.Open(ctx, u.String(), benchPool)
	if err != nil {
		b.Fatal(err)
	}
	defer catalog.Close()
	rc := testenv.Redis(b)
	nc, err := nats.Connect(testenv.URL(b, "USHER_TEST_NATS"))
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	name := "benchrate" + strconv.FormatInt(time.Now().UnixNano(), 36)
	broker, err := natsmq.Open(ctx, nc, natsmq.Options{Name: name})
	if err != nil {
		b.Fatal(err)
	}
	defer deleteStream(b, nc, name)
	svc := sale.New(sale.Config{
		Catalog: catalog, Holds: redishold.New(rc, testenv.RedisPrefix(b, rc)), Broker: broker,
		Queue: queue.New(memqueue.New(), queue.Options{}), SnapshotEvery: every, SeatLimit: 1,
		InventoryEvery: sale.NoInventory,
	})
	c, _ := svc.CreateConcert(ctx, "rate")
	sch, err := svc.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID}, time.Time{})
	if err != nil {
		b.Fatal(err)
	}
	ids, err := svc.AddSeats(ctx, sch.ID, sale.SeatLayout{Sections: []string{"A"}, Rows: seats / 50, SeatsPerRow: 50})
	if err != nil {
		b.Fatal(err)
	}
	if b.N > len(ids) {
		b.Fatalf("%d holds of distinct seats on %d seats", b.N, len(ids))
	}
	if _, err := svc.SeatMapStatus(ctx, sch.ID); err != nil {
		b.Fatal(err)
	}
	reader, stopped := make(chan struct{}), make(chan struct{})
	go func() { // a crowd's status polls: a rebuild as soon as one is due
		defer close(stopped)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-reader:
				return
			case <-t.C:
				svc.SeatMapStatus(ctx, sch.ID)
			}
		}
	}()
	lat := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	b.ResetTimer()
	for i := range b.N {
		<-tick.C
		wg.Go(func() {
			start := time.Now()
			_, err := svc.Hold(ctx, sch.ID, "v"+strconv.Itoa(i), []int64{ids[i]})
			lat[i] = time.Since(start)
			if err != nil {
				b.Errorf("hold %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(reader)
	<-stopped
	slices.Sort(lat)
	p50, p95 := lat[len(lat)/2], lat[len(lat)*95/100]
	b.ReportMetric(float64(p50.Microseconds()), "p50_µs")
	b.ReportMetric(float64(p95.Microseconds()), "p95_µs")
	b.ReportMetric(float64(p95)/float64(p50), "p95/p50")
}
