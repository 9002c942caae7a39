package mysqlbooking_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"usher/internal/booking"
	"usher/internal/booking/bookingtest"
	"usher/internal/booking/mysqlbooking"
	"usher/internal/mysqldb"
	"usher/internal/testenv"
)

func open(tb testing.TB, url string, poolSize int) *mysqlbooking.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := mysqlbooking.Open(ctx, url, poolSize)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func newStore(tb testing.TB) booking.Store { return open(tb, testenv.MySQLDatabase(tb), 8) }

func TestConformance(t *testing.T) {
	t.Parallel()
	bookingtest.Run(t, newStore)
}

// TestConformancePipeline runs the suite with the set path off: every batch
// takes the pipeline path.
func TestConformancePipeline(t *testing.T) {
	t.Parallel()
	bookingtest.Run(t, func(tb testing.TB) booking.Store {
		s := open(tb, testenv.MySQLDatabase(tb), 8)
		mysqlbooking.PipelineOnly(s)
		return s
	})
}

func BenchmarkStore(b *testing.B) { bookingtest.Bench(b, newStore) }

// TestMigrations opens one database from several goroutines at once: each
// migration is applied once (the named lock), and a later Open applies
// nothing and keeps the data.
func TestMigrations(t *testing.T) {
	ctx := context.Background()
	u := testenv.MySQLDatabase(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s, err := mysqlbooking.Open(ctx, u, 1)
			if err != nil {
				t.Errorf("concurrent Open: %v", err)
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	c, err := open(t, u, 2).CreateConcert(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, u, 2)
	if _, err := s.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID, StartsAt: time.Now()}); err != nil {
		t.Fatalf("CreateSchedule after reopening: %v", err)
	}
	cfg, err := mysqldb.Config(u)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, versions int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations`).Scan(&rows, &versions); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if want := len(files); rows != want || versions != want {
		t.Errorf("schema_migrations has %d rows for %d versions, want %d and %d (one per migration file)", rows, versions, want, want)
	}
}

// wantUnavailable checks that err wraps ErrUnavailable (and nothing that
// would send a caller down another path).
func wantUnavailable(t *testing.T, op string, err error) {
	t.Helper()
	if !errors.Is(err, booking.ErrUnavailable) {
		t.Errorf("%s: err = %v, want ErrUnavailable", op, err)
	}
	if errors.Is(err, booking.ErrNotFound) || errors.Is(err, booking.ErrInvalid) {
		t.Errorf("%s: err = %v, want only ErrUnavailable", op, err)
	}
}

// TestOpenClosedPort needs no server: nothing listens, Open fails at once.
func TestOpenClosedPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a guard against a hang
	defer cancel()
	_, err := mysqlbooking.Open(ctx, "mysql://usher@"+testenv.ClosedAddr(t)+"/usher?timeout=2s", 2)
	wantUnavailable(t, "Open", err)
	if ctx.Err() != nil {
		t.Error("Open waited for the caller's deadline, want a failure of its own before it")
	}
}

// TestOpenSilentServer needs no server: one that accepts connections and
// never answers fails Open after the URL's timeout.
func TestOpenSilentServer(t *testing.T) {
	addr := testenv.SilentServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a guard against a hang
	defer cancel()
	_, err := mysqlbooking.Open(ctx, "mysql://usher@"+addr+"/usher?timeout=1s", 2)
	wantUnavailable(t, "Open", err)
	if ctx.Err() != nil {
		t.Error("Open waited for the caller's deadline, want the timeout to end it first")
	}
}

func TestOpenInvalid(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		url  string
		size int
	}{
		{"mysql://usher@127.0.0.1/usher", 0},
		{"mysql://usher@127.0.0.1:notaport/usher", 2},
		{"mysql://usher@127.0.0.1:3306/", 2},
		{"postgres://usher@127.0.0.1:3306/usher", 2},
		{"mysql://usher@127.0.0.1:3306/usher?timeout=soon", 2},
	} {
		if _, err := mysqlbooking.Open(ctx, tt.url, tt.size); !errors.Is(err, booking.ErrInvalid) {
			t.Errorf("Open(%q, %d) err = %v, want ErrInvalid", tt.url, tt.size, err)
		}
	}
}

// TestServerVanished opens a store through a proxy, uses it, then cuts the
// proxy: every method fails promptly with ErrUnavailable, pooled
// connections and new ones alike.
func TestServerVanished(t *testing.T) {
	u := testenv.MySQLDatabase(t)
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	target := parsed.Host
	if parsed.Port() == "" {
		target = net.JoinHostPort(parsed.Hostname(), "3306")
	}
	p := testenv.NewProxy(t, target)
	parsed.Host = p.Addr()
	parsed.RawQuery = "timeout=2s&readTimeout=5s"
	s := open(t, parsed.String(), 4)
	ctx := context.Background()
	c, err := s.CreateConcert(ctx, "before")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := s.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID, StartsAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	p.Cut()

	r := booking.Reservation{ID: "r", ScheduleID: sch.ID, SeatIDs: []int64{1}}
	checks := []struct {
		op   string
		call func(context.Context) error
	}{
		{"CreateConcert", func(ctx context.Context) error { _, err := s.CreateConcert(ctx, "after"); return err }},
		{"CreateSchedule", func(ctx context.Context) error {
			_, err := s.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID, StartsAt: time.Now()})
			return err
		}},
		{"Schedule", func(ctx context.Context) error { _, err := s.Schedule(ctx, sch.ID); return err }},
		{"AddSeats", func(ctx context.Context) error {
			_, err := s.AddSeats(ctx, sch.ID, []booking.SeatSpec{{Section: "A", Row: "1", Number: 1}})
			return err
		}},
		{"Seats", func(ctx context.Context) error { _, err := s.Seats(ctx, sch.ID); return err }},
		{"Decide", func(ctx context.Context) error { _, err := s.Decide(ctx, []booking.Reservation{r}); return err }},
		{"Reservation", func(ctx context.Context) error { _, err := s.Reservation(ctx, "r"); return err }},
	}
	for _, c := range checks {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a guard against a hang
		err := c.call(ctx)
		if ctx.Err() != nil {
			t.Errorf("%s waited for the caller's deadline, want a failure of its own before it", c.op)
		}
		cancel()
		wantUnavailable(t, c.op, fmt.Errorf("%w", err))
	}
}

// TestSetPathPartial: a batch the set path takes, with a reservation of two
// seats one of which is sold already. The set path's UPDATE sells the
// other; the batch runs again on the pipeline path, so that reservation is
// rejected and its free seat stays for sale, while the rest is confirmed.
func TestSetPathPartial(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	c, err := s.CreateConcert(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := s.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID, StartsAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := s.AddSeats(ctx, sch.ID, []booking.SeatSpec{{Section: "A", Row: "1", Number: 1}, {Section: "A", Row: "1", Number: 2}, {Section: "A", Row: "1", Number: 3}})
	if err != nil {
		t.Fatal(err)
	}
	res := func(id string, seats ...int64) booking.Reservation {
		return booking.Reservation{ID: id, Visitor: "v", ScheduleID: sch.ID, SeatIDs: seats}
	}
	if _, err := s.Decide(ctx, []booking.Reservation{res("first", ids[1])}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Decide(ctx, []booking.Reservation{res("pair", ids[0], ids[1]), res("single", ids[2])})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Status != booking.Rejected || got[0].Reason != booking.ReasonSeatTaken || got[1].Status != booking.Confirmed {
		t.Errorf("Decide = %s (%s), %s; want rejected (seat_taken), confirmed", got[0].Status, got[0].Reason, got[1].Status)
	}
	seats, err := s.Seats(ctx, sch.ID)
	if err != nil {
		t.Fatal(err)
	}
	if seats[0].Status != booking.Available || seats[0].ReservationID != "" {
		t.Errorf("seat %d = %s for %q, want AVAILABLE for none (the partial sale rolled back)", seats[0].ID, seats[0].Status, seats[0].ReservationID)
	}
}
