package sale_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"usher/internal/booking"
	"usher/internal/booking/pgbooking"
	"usher/internal/mq"
	"usher/internal/queue"
	"usher/internal/sale"
	"usher/internal/testenv"
)

// TestDatabaseDown takes the real PostgreSQL away (a proxy in front of it is
// cut) while reservations arrive: they stay pending in the stream, the last
// seat map is served, and once the database is back every reservation is
// applied.
func TestDatabaseDown(t *testing.T) {
	ctx := context.Background()
	base := testenv.URL(t, "USHER_TEST_POSTGRES")
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	schema := freshSchema(t, base)
	proxy := testenv.NewProxy(t, u.Host)
	u.Host = proxy.Addr()
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	catalog, err := pgbooking.Open(ctx, u.String(), 2)
	if err != nil {
		t.Fatal(err)
	}
	r := newRigWith(t, rigSeats, catalog)
	for _, v := range []string{"a", "b"} {
		if _, _, err := r.q.Enter(ctx, r.sched.Room, v); err != nil {
			t.Fatal(err)
		}
	}
	first := reserve(t, r, "a", r.seats[0])
	if got := r.wait(t, "a", first.ID); got.Status != booking.Confirmed {
		t.Fatalf("with the database up: %+v, want confirmed", got)
	}

	cutAt := time.Now()
	proxy.Cut()
	second := reserve(t, r, "b", r.seats[1]) // the broker takes it
	// The consumer retries meanwhile: the reservation stays pending while
	// the database turns away at least three connections.
	testenv.Eventually(t, time.Minute, "three connections refused while the database is down", func() bool {
		got, err := r.svc.Reservation(ctx, "b", second.ID)
		if err != nil || got.Status != booking.Pending {
			t.Fatalf("with the database down: %+v, %v; want pending", got, err)
		}
		return proxy.Refused() >= 3
	})
	if m, err := r.svc.SeatMap(ctx, r.sched.ID); err != nil || !m.BuiltAt.Before(cutAt) {
		t.Errorf("seat map with the database down: %v; want the last one, built before the cut", err)
	}

	proxy.Restore(t)
	if got := r.wait(t, "b", second.ID); got.Status != booking.Confirmed {
		t.Fatalf("after the database returned: %+v, want confirmed", got)
	}
}

const rigSeats = 4

func reserve(t *testing.T, r *rig, visitor string, seat int64) booking.Reservation {
	t.Helper()
	ctx := context.Background()
	if _, err := r.svc.Hold(ctx, r.sched.ID, visitor, []int64{seat}); err != nil {
		t.Fatalf("%s holds %d: %v", visitor, seat, err)
	}
	res, _, err := r.svc.Reserve(ctx, visitor, r.sched.ID, []int64{seat}, "k-"+visitor)
	if err != nil {
		t.Fatalf("%s reserves %d: %v", visitor, seat, err)
	}
	return res
}

// freshSchema creates a schema for this test alone, dropped at the end.
func freshSchema(t testing.TB, base string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("USHER_TEST_POSTGRES is set but PostgreSQL does not answer: %v", err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	schema := "usher_sale_" + hex.EncodeToString(b)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), base)
		if err == nil {
			conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			conn.Close(context.Background())
		}
	})
	return schema
}

// TestBrokerDown stops the embedded NATS server: reserving answers
// unavailable and the visitor's hold is kept for a retry.
func TestBrokerDown(t *testing.T) {
	ctx := context.Background()
	r := newRig(t, 4)
	if _, _, err := r.q.Enter(ctx, r.sched.Room, "a"); err != nil {
		t.Fatal(err)
	}
	h, err := r.svc.Hold(ctx, r.sched.ID, "a", r.seats[:2])
	if err != nil {
		t.Fatal(err)
	}
	r.nats.Shutdown()
	r.nats.WaitForShutdown()
	if _, _, err := r.svc.Reserve(ctx, "a", r.sched.ID, r.seats[:2], "k"); !errors.Is(err, mq.ErrUnavailable) {
		t.Fatalf("reserve with the broker down: err = %v, want unavailable", err)
	}
	if got, err := r.holds.Get(ctx, sale.Scope(r.sched.ID), h.ID, time.Now()); err != nil || got.Holder != "a" {
		t.Errorf("hold after the failed reserve = %+v, %v; want it kept", got, err)
	}
	if e, _, _ := r.q.Status(ctx, r.sched.Room, "a", 0, time.Time{}); e.Status != queue.Active {
		t.Errorf("visitor after the failed reserve = %+v, want still active", e)
	}
}
