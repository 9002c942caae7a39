package bookingtest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"usher/internal/booking"
)

// page reads a whole list page by page (size per call) with list, which
// returns the rows after a cursor and each row's cursor key.
func page[T any, K any](tb testing.TB, size int, first K, list func(after K, limit int) ([]T, error), key func(T) K) (all []T, calls int) {
	tb.Helper()
	after := first
	for {
		got, err := list(after, size)
		if err != nil {
			tb.Fatalf("list after %v: %v", after, err)
		}
		calls++
		if len(got) > size {
			tb.Fatalf("list returned %d rows, more than the limit %d", len(got), size)
		}
		all = append(all, got...)
		if len(got) < size {
			return all, calls
		}
		after = key(got[len(got)-1])
	}
}

// testListConcerts: Concert reads one; ListConcerts pages through all in
// id order; a limit below 1 is ErrInvalid.
func testListConcerts(t *testing.T, s booking.Store) {
	ctx := context.Background()
	var want []booking.Concert
	for _, title := range []string{"e", "d", "c", "b", "a"} {
		c, err := s.CreateConcert(ctx, title)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, c)
	}
	got, err := s.Concert(ctx, want[2].ID)
	if err != nil || got != want[2] {
		t.Errorf("Concert(%d) = %+v, %v; want %+v", want[2].ID, got, err, want[2])
	}
	if _, err := s.Concert(ctx, want[4].ID+1000); !errors.Is(err, booking.ErrNotFound) {
		t.Errorf("Concert(unknown) err = %v, want ErrNotFound", err)
	}
	all, calls := page(t, 2, 0, func(after int64, limit int) ([]booking.Concert, error) {
		return s.ListConcerts(ctx, after, limit)
	}, func(c booking.Concert) int64 { return c.ID })
	if diff := cmp.Diff(want, all); diff != "" || calls != 3 {
		t.Errorf("ListConcerts by 2 in %d calls, mismatch (-want +got):\n%s", calls, diff)
	}
	if _, err := s.ListConcerts(ctx, 0, 0); !errors.Is(err, booking.ErrInvalid) {
		t.Errorf("ListConcerts(limit 0) err = %v, want ErrInvalid", err)
	}
}

// testListSchedules: every schedule, or one concert's, in id order, page
// by page; an unknown concert has none.
func testListSchedules(t *testing.T, s booking.Store) {
	ctx := context.Background()
	var concerts []booking.Concert
	for _, title := range []string{"x", "y"} {
		c, err := s.CreateConcert(ctx, title)
		if err != nil {
			t.Fatal(err)
		}
		concerts = append(concerts, c)
	}
	var all, ofX []booking.Schedule
	for i := range 7 { // interleaved: x, y, x, y, …
		c := concerts[i%2]
		sch, err := s.CreateSchedule(ctx, booking.Schedule{ConcertID: c.ID, StartsAt: t0})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, sch)
		if c.ID == concerts[0].ID {
			ofX = append(ofX, sch)
		}
	}
	for _, tc := range []struct {
		concert int64
		want    []booking.Schedule
	}{{0, all}, {concerts[0].ID, ofX}} {
		got, _ := page(t, 3, 0, func(after int64, limit int) ([]booking.Schedule, error) {
			return s.ListSchedules(ctx, tc.concert, after, limit)
		}, func(sch booking.Schedule) int64 { return sch.ID })
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ListSchedules(concert %d) by 3 mismatch (-want +got):\n%s", tc.concert, diff)
		}
	}
	if got, err := s.ListSchedules(ctx, concerts[1].ID+1000, 0, 10); err != nil || len(got) != 0 {
		t.Errorf("ListSchedules(unknown concert) = %v, %v; want none", got, err)
	}
	if _, err := s.ListSchedules(ctx, 0, 0, -1); !errors.Is(err, booking.ErrInvalid) {
		t.Errorf("ListSchedules(limit -1) err = %v, want ErrInvalid", err)
	}
}

// testListReservations: a schedule's decided reservations in byte order of
// their ids (upper case before lower case, whatever the collation), all or
// of one status, page by page; another schedule's are not listed.
func testListReservations(t *testing.T, s booking.Store) {
	ctx := context.Background()
	sch, ids := catalog(t, s, 8)
	other, otherIDs := catalog(t, s, 1)
	// Ids whose byte order differs from a dictionary's: "r-1" < "r10" <
	// "r9" < "rB" < "r_" < "ra".
	names := []string{"ra", "rB", "r_", "r-1", "r9", "r10"}
	var rs []booking.Reservation
	for i, id := range names {
		rs = append(rs, pending(id, sch.ID, ids[i]))
	}
	rs = append(rs, pending("rz-taken", sch.ID, ids[0])) // rejected: ra sold it first
	decided := decide(t, s, rs...)
	decide(t, s, pending("r0-other", other.ID, otherIDs[0]))
	byID := map[string]booking.Reservation{}
	for _, r := range decided {
		byID[r.ID] = r
	}
	want := func(ids ...string) []booking.Reservation {
		out := make([]booking.Reservation, len(ids))
		for i, id := range ids {
			out[i] = byID[id]
		}
		return out
	}
	for _, tc := range []struct {
		status booking.ReservationStatus
		want   []booking.Reservation
	}{
		{"", want("r-1", "r10", "r9", "rB", "r_", "ra", "rz-taken")},
		{booking.Confirmed, want("r-1", "r10", "r9", "rB", "r_", "ra")},
		{booking.Rejected, want("rz-taken")},
	} {
		got, _ := page(t, 2, "", func(after string, limit int) ([]booking.Reservation, error) {
			return s.ListReservations(ctx, sch.ID, tc.status, after, limit)
		}, func(r booking.Reservation) string { return r.ID })
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ListReservations(status %q) by 2 mismatch (-want +got):\n%s", tc.status, diff)
		}
	}
	got, err := s.ListReservations(ctx, sch.ID, "", "r9", 100)
	if err != nil || !slices.EqualFunc(got, want("rB", "r_", "ra", "rz-taken"), func(a, b booking.Reservation) bool { return a.ID == b.ID }) {
		t.Errorf("ListReservations after r9 = %v, %v; want rB, r_, ra, rz-taken", got, err)
	}
	if got, err := s.ListReservations(ctx, other.ID+1000, "", "", 10); err != nil || len(got) != 0 {
		t.Errorf("ListReservations(unknown schedule) = %v, %v; want none", got, err)
	}
	if _, err := s.ListReservations(ctx, sch.ID, "", "", 0); !errors.Is(err, booking.ErrInvalid) {
		t.Errorf("ListReservations(limit 0) err = %v, want ErrInvalid", err)
	}
}
