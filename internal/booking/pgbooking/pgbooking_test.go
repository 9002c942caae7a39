package pgbooking_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"usher/internal/booking"
	"usher/internal/booking/bookingtest"
	"usher/internal/booking/pgbooking"
	"usher/internal/testenv"
)

// pgURL returns the test server's URL from USHER_TEST_POSTGRES; it skips
// when unset, but fails under CI.
func pgURL(tb testing.TB) string {
	tb.Helper()
	return testenv.URL(tb, "USHER_TEST_POSTGRES")
}

func open(tb testing.TB, url string, poolSize int) *pgbooking.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := pgbooking.Open(ctx, url, poolSize)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func newStore(tb testing.TB) booking.Store { return open(tb, testenv.PostgresSchema(tb), 8) }

func TestConformance(t *testing.T) {
	t.Parallel()
	bookingtest.Run(t, newStore)
}

// TestConformancePipeline runs the suite with the set path off: every batch
// takes the pipeline path (and the careful path where it must).
func TestConformancePipeline(t *testing.T) {
	t.Parallel()
	bookingtest.Run(t, func(tb testing.TB) booking.Store {
		s := open(tb, testenv.PostgresSchema(tb), 8)
		pgbooking.PipelineOnly(s)
		return s
	})
}

func BenchmarkStore(b *testing.B) { bookingtest.Bench(b, newStore) }

// TestMigrations opens one schema from several goroutines at once: each
// migration is applied once (the advisory lock), and a later Open applies
// nothing and keeps the data.
func TestMigrations(t *testing.T) {
	ctx := context.Background()
	u := testenv.PostgresSchema(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := pgbooking.Open(ctx, u, 1)
			if err != nil {
				t.Errorf("concurrent Open: %v", err)
				return
			}
			s.Close()
		}()
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
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows, versions int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT version) FROM schema_migrations`).Scan(&rows, &versions); err != nil {
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

// TestPoolBound checks that the store never holds more connections than
// its pool size, however many callers decide at once.
func TestPoolBound(t *testing.T) {
	ctx := context.Background()
	u := testenv.PostgresSchema(t)
	const poolSize = 3
	s := open(t, testenv.WithParam(t, u, "application_name", "usher_pool_bound"), poolSize)
	conc, err := s.CreateConcert(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := s.CreateSchedule(ctx, booking.Schedule{ConcertID: conc.ID, StartsAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	specs := make([]booking.SeatSpec, 400)
	for i := range specs {
		specs[i] = booking.SeatSpec{Section: "A", Row: "1", Number: i}
	}
	ids, err := s.AddSeats(ctx, sch.ID, specs)
	if err != nil {
		t.Fatal(err)
	}
	watch, err := pgx.Connect(ctx, pgURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	var wg sync.WaitGroup
	for w := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(ids); i += 20 {
				r := booking.Reservation{ID: fmt.Sprint("r", i), ScheduleID: sch.ID, SeatIDs: []int64{ids[i]}}
				if _, err := s.Decide(ctx, []booking.Reservation{r}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	most := 0
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		var n int
		if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'usher_pool_bound'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		most = max(most, n)
		select {
		case <-done:
			if most > poolSize {
				t.Errorf("%d connections seen, want at most %d", most, poolSize)
			}
			if most == 0 {
				t.Errorf("no connection seen: the check is broken")
			}
			return
		case <-time.After(5 * time.Millisecond):
		}
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
	_, err := pgbooking.Open(ctx, "postgres://usher@"+testenv.ClosedAddr(t)+"/usher?sslmode=disable&connect_timeout=2", 2)
	wantUnavailable(t, "Open", err)
	if ctx.Err() != nil {
		t.Error("Open waited for the caller's deadline, want a failure of its own before it")
	}
}

// TestOpenSilentServer needs no server: one that accepts connections and
// never answers fails Open after connect_timeout.
func TestOpenSilentServer(t *testing.T) {
	addr := testenv.SilentServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a guard against a hang
	defer cancel()
	_, err := pgbooking.Open(ctx, "postgres://usher@"+addr+"/usher?sslmode=disable&connect_timeout=1", 2)
	wantUnavailable(t, "Open", err)
	if ctx.Err() != nil {
		t.Error("Open waited for the caller's deadline, want connect_timeout to end it first")
	}
}

// TestOpenMissingSchema: a search_path whose schema does not exist is
// refused at Open, naming the fix, and nothing is created.
func TestOpenMissingSchema(t *testing.T) {
	base := pgURL(t)
	schema := fmt.Sprintf("usher_missing_%d", time.Now().UnixNano())
	_, err := pgbooking.Open(context.Background(), testenv.WithParam(t, base, "search_path", schema), 2)
	if !errors.Is(err, booking.ErrInvalid) || !strings.Contains(err.Error(), "CREATE SCHEMA") {
		t.Errorf("Open with search_path=%s: err = %v, want invalid, naming CREATE SCHEMA", schema, err)
	}
}

func TestOpenInvalid(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		url  string
		size int
	}{
		{"postgres://usher@127.0.0.1/usher", 0},
		{"postgres://usher@127.0.0.1:notaport/usher", 2},
	} {
		if _, err := pgbooking.Open(ctx, tt.url, tt.size); !errors.Is(err, booking.ErrInvalid) {
			t.Errorf("Open(%q, %d) err = %v, want ErrInvalid", tt.url, tt.size, err)
		}
	}
}

// TestServerVanished opens a store through a proxy, uses it, then cuts the
// proxy: every method fails promptly with ErrUnavailable, pooled
// connections and new ones alike.
func TestServerVanished(t *testing.T) {
	u := testenv.PostgresSchema(t)
	parsed, err := url.Parse(u)
	if err != nil || parsed.Host == "" {
		testenv.Skip(t, "USHER_TEST_POSTGRES as a URL", fmt.Sprintf("set USHER_TEST_POSTGRES to a postgres:// URL with a host, not %q (%v),", u, err))
	}
	target := parsed.Host
	if parsed.Port() == "" {
		target = net.JoinHostPort(parsed.Hostname(), "5432")
	}
	p := testenv.NewProxy(t, target)
	parsed.Host = p.Addr()
	q := parsed.Query()
	q.Set("connect_timeout", "2")
	parsed.RawQuery = q.Encode()
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
		wantUnavailable(t, c.op, err)
	}
}
