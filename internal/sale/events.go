package sale

import (
	"context"

	"usher/internal/booking"
	"usher/internal/event"
	"usher/internal/hold"
)

// The sale's best-effort events, emitted by the instance that made the
// change once it is made: hold_placed (Hold, HoldStock), hold_released (a
// release by the visitor, or by the consumer when the reservation it
// covered was rejected; a hold consumed by a confirmed sale emits none:
// its reservation_confirmed says it) and reservation_submitted (a new
// reservation accepted by the broker). The decisions' events are not
// here: the database writes them with the decision (the outbox).
//
// hold_expired is not emitted: a hold lapses inside the hold store (a key
// expiry, or a time compared at the next read), where nothing observes it
// without a sweep of every hold. A collector counts lapsed units as
// placed − released − sold.

// emit emits an event of the schedule's room. The room comes from the
// schedule cache (a catalog read the first time); an event whose schedule
// cannot be read is not emitted.
func (s *Service) emit(ctx context.Context, t event.Type, scheduleID int64, visitor string, d event.Data) {
	if s.cfg.Events == nil {
		return
	}
	sch, err := s.Schedule(ctx, scheduleID)
	if err != nil {
		return
	}
	d.Schedule = scheduleID
	s.cfg.Events.Emit(event.New(t, sch.Room, visitor, s.cfg.Now(), d))
}

// emitHold emits a hold's event (placed or released).
func (s *Service) emitHold(ctx context.Context, t event.Type, scheduleID int64, h hold.Hold) {
	units := h.Quantity
	if units == 0 {
		units = int64(len(h.Seats))
	}
	s.emit(ctx, t, scheduleID, h.Holder, event.Data{Units: units})
}

// emitSubmitted emits a new reservation's event.
func (s *Service) emitSubmitted(ctx context.Context, r booking.Reservation) {
	units := r.Quantity
	if units == 0 {
		units = int64(len(r.SeatIDs))
	}
	s.emit(ctx, event.ReservationSubmitted, r.ScheduleID, r.Visitor, event.Data{Reservation: r.ID, Units: units})
}
