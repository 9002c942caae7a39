package sale

import (
	"context"
	"errors"
	"fmt"

	"usher/internal/booking"
	"usher/internal/wire"
)

// The operator's reads: the catalog page by page, a schedule's decided
// reservations, its sales, and which schedule a room belongs to. Lists
// return at most limit rows after the cursor, in id order
// (booking.Store's lists).

// Concert returns a concert.
func (s *Service) Concert(ctx context.Context, id int64) (booking.Concert, error) {
	return s.cfg.Catalog.Concert(ctx, id)
}

// Concerts lists the concerts after the id after.
func (s *Service) Concerts(ctx context.Context, after int64, limit int) ([]booking.Concert, error) {
	return s.cfg.Catalog.ListConcerts(ctx, after, limit)
}

// Schedules lists the schedules after the id after; concertID > 0 keeps
// one concert's, and an unknown concert is booking.ErrNotFound.
func (s *Service) Schedules(ctx context.Context, concertID, after int64, limit int) ([]booking.Schedule, error) {
	if concertID > 0 {
		if _, err := s.cfg.Catalog.Concert(ctx, concertID); err != nil {
			return nil, err
		}
	}
	return s.cfg.Catalog.ListSchedules(ctx, concertID, after, limit)
}

// Reservations lists a schedule's decided reservations (status "" for all)
// after the id after; an unknown schedule is booking.ErrNotFound. Pending
// reservations are in the broker, not listed.
func (s *Service) Reservations(ctx context.Context, scheduleID int64, status booking.ReservationStatus, after string, limit int) ([]booking.Reservation, error) {
	if _, err := s.Schedule(ctx, scheduleID); err != nil {
		return nil, err
	}
	return s.cfg.Catalog.ListReservations(ctx, scheduleID, status, after, limit)
}

// ScheduleOfRoom returns the schedule whose waiting room is room, if any.
func (s *Service) ScheduleOfRoom(ctx context.Context, room string) (booking.Schedule, bool, error) {
	schedules, err := s.cfg.Catalog.Schedules(ctx)
	if err != nil {
		return booking.Schedule{}, false, err
	}
	for _, sch := range schedules {
		if sch.Room == room {
			return sch, true, nil
		}
	}
	return booking.Schedule{}, false, nil
}

// Sales counts a schedule's units: seats from the seat map (SQL's sold, the
// hold store's held; as of its BuiltAt, at most SnapshotEvery old, or a
// stale one for up to a minute while a backend is down), stock from SQL's
// total and sold and the hold store's units left (held: neither sold nor
// left). Revenue is the price of the seats sold.
func (s *Service) Sales(ctx context.Context, scheduleID int64) (wire.Sales, error) {
	sch, err := s.Schedule(ctx, scheduleID)
	if err != nil {
		return wire.Sales{}, err
	}
	m, err := s.SeatMap(ctx, scheduleID)
	if err != nil {
		return wire.Sales{}, err
	}
	out := wire.Sales{ScheduleID: scheduleID, Room: sch.Room, AsOf: m.BuiltAt.UTC()}
	if len(m.Seats) > 0 {
		c := wire.SalesCount{Total: int64(len(m.Seats)), Revenue: new(int64)}
		for _, seat := range m.Seats {
			switch seat.Status {
			case booking.Sold:
				c.Sold++
				*c.Revenue += seat.Price
			case booking.Held:
				c.Held++
			default:
				c.Available++
			}
		}
		out.Seats, out.Revenue = &c, c.Revenue
	}
	st, err := s.cfg.Catalog.Stock(ctx, scheduleID)
	switch {
	case errors.Is(err, booking.ErrNotFound): // seats only
	case err != nil:
		return wire.Sales{}, fmt.Errorf("sale: sales of schedule %d: %w", scheduleID, err)
	default:
		left, err := s.cfg.Holds.Stock(ctx, Scope(scheduleID), s.cfg.Now())
		if err != nil {
			return wire.Sales{}, fmt.Errorf("sale: sales of schedule %d: %w", scheduleID, err)
		}
		// The hold store may count more than SQL's unsold units (stock.go).
		avail := max(0, min(left, st.Total-st.Sold))
		out.Stock = &wire.SalesCount{Total: st.Total, Sold: st.Sold, Held: st.Total - st.Sold - avail, Available: avail}
	}
	for _, c := range []*wire.SalesCount{out.Seats, out.Stock} {
		if c != nil {
			out.Sold, out.Held, out.Available = out.Sold+c.Sold, out.Held+c.Held, out.Available+c.Available
		}
	}
	return out, nil
}
