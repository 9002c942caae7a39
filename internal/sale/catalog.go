package sale

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"usher/internal/booking"
	"usher/internal/mq"
	"usher/internal/queue"
)

// CreateConcert creates a concert.
func (s *Service) CreateConcert(ctx context.Context, title string) (booking.Concert, error) {
	if title == "" || len(title) > 200 {
		return booking.Concert{}, ErrInvalid.Detail("title: want 1 to 200 bytes")
	}
	return s.cfg.Catalog.CreateConcert(ctx, title)
}

// CreateSchedule creates a schedule and, when missing, its waiting room
// with the default settings (the operator tunes it with
// PUT /api/v1/rooms/{room}). The show's StartsAt is not the sale's opening:
// the new room opens at saleOpensAt when that is still to come (the room's
// opens_at, with the fair opening draw), and at once otherwise.
func (s *Service) CreateSchedule(ctx context.Context, sch booking.Schedule, saleOpensAt time.Time) (booking.Schedule, error) {
	if sch.Room != "" && !queue.ValidRoomID(sch.Room) {
		return booking.Schedule{}, ErrInvalid.Detail("room %q: want [a-z0-9][a-z0-9-]{0,63}", sch.Room)
	}
	if !saleOpensAt.IsZero() && saleOpensAt.After(sch.StartsAt) {
		return booking.Schedule{}, ErrInvalid.Detail("sale_opens_at: want no later than starts_at")
	}
	sch, err := s.cfg.Catalog.CreateSchedule(ctx, sch)
	if err != nil {
		return booking.Schedule{}, err
	}
	rs := queue.DefaultSettings()
	if saleOpensAt.After(s.cfg.Now()) {
		rs.OpensAt = saleOpensAt.UTC().Truncate(time.Millisecond)
	}
	if _, err := s.cfg.Queue.EnsureRoom(ctx, sch.Room, rs); err != nil {
		return booking.Schedule{}, fmt.Errorf("sale: room of schedule %d: %w", sch.ID, err)
	}
	return sch, nil
}

// SeatLayout describes seats to create in bulk: every section has Rows rows
// ("1"…) of SeatsPerRow seats (1…), all at Price.
type SeatLayout struct {
	Sections    []string `json:"sections"`
	Rows        int      `json:"rows"`
	SeatsPerRow int      `json:"seats_per_row"`
	Price       int64    `json:"price"`
}

// maxSeatsPerCall bounds one AddSeats call.
const maxSeatsPerCall = 200_000

// Specs expands the layout, validating it.
func (l SeatLayout) Specs() ([]booking.SeatSpec, error) {
	n := len(l.Sections) * l.Rows * l.SeatsPerRow
	switch {
	case len(l.Sections) == 0 || l.Rows <= 0 || l.SeatsPerRow <= 0:
		return nil, ErrInvalid.Detail("seat layout: want sections, rows and seats_per_row")
	case l.Rows > maxSeatsPerCall || l.SeatsPerRow > maxSeatsPerCall || n > maxSeatsPerCall:
		return nil, ErrInvalid.Detail("seat layout: at most %d seats per call", maxSeatsPerCall)
	case l.Price < 0:
		return nil, ErrInvalid.Detail("price: want 0 or more")
	}
	specs := make([]booking.SeatSpec, 0, n)
	for _, sec := range l.Sections {
		if sec == "" || len(sec) > 16 {
			return nil, ErrInvalid.Detail("section %q: want 1 to 16 bytes", sec)
		}
		for row := 1; row <= l.Rows; row++ {
			for num := 1; num <= l.SeatsPerRow; num++ {
				specs = append(specs, booking.SeatSpec{Section: sec, Row: strconv.Itoa(row), Number: num, Price: l.Price})
			}
		}
	}
	return specs, nil
}

// AddSeats creates the layout's seats in a schedule.
func (s *Service) AddSeats(ctx context.Context, scheduleID int64, l SeatLayout) ([]int64, error) {
	specs, err := l.Specs()
	if err != nil {
		return nil, err
	}
	ids, err := s.cfg.Catalog.AddSeats(ctx, scheduleID, specs)
	if err == nil {
		s.seatsAdded(scheduleID)
	}
	return ids, err
}

// seatsAdded makes the schedule's next seat map a rebuild, so that seats
// added on this instance show at once (other instances show them within
// SnapshotEvery).
func (s *Service) seatsAdded(scheduleID int64) {
	s.mu.Lock()
	slot := s.maps[scheduleID]
	s.mu.Unlock()
	if slot == nil {
		return
	}
	slot.mu.Lock()
	slot.tried = time.Time{}
	slot.gen++
	slot.mu.Unlock()
}

// Owner returns a reservation whoever made it, to find the room whose
// tokens may read it. Callers then read it with Reservation. The broker
// knows every state; SQL answers for a decided reservation when the broker
// does not know it or is down.
func (s *Service) Owner(ctx context.Context, id string) (booking.Reservation, error) {
	r, err := s.cfg.Broker.Get(ctx, id)
	switch {
	case errors.Is(err, mq.ErrNotFound):
		if r, err = s.cfg.Catalog.Reservation(ctx, id); errors.Is(err, booking.ErrNotFound) {
			err = fmt.Errorf("sale: reservation %s: %w", id, mq.ErrNotFound)
		}
	case errors.Is(err, mq.ErrUnavailable):
		// The broker is down: a decided reservation is still in SQL.
		if decided, serr := s.cfg.Catalog.Reservation(ctx, id); serr == nil {
			return decided, nil
		}
	}
	return r, err
}
