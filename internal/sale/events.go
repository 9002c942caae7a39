package sale

import (
	"context"
	"fmt"
	"time"

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
// hold_expired comes from the hold store, where a hold lapses: every
// instance asks it each second (ReportLapsed) for the holds that lapsed
// since, which it hands out once each, whichever instance asks first.

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

// lapsedBatch is the most lapsed holds taken from one scope per call.
const lapsedBatch = 1000

// ReportLapsed emits hold_expired, at its expiry, for every hold of every
// schedule that lapsed since any instance last asked (hold.Store.Lapsed).
// It returns the first error, after trying every schedule; a failed
// schedule's lapsed holds wait in the store for the next call. Run calls it
// every second when Events is set.
func (s *Service) ReportLapsed(ctx context.Context) error {
	schedules, err := s.cfg.Catalog.Schedules(ctx)
	if err != nil {
		return fmt.Errorf("sale: lapsed holds: %w", err)
	}
	var first error
	for _, sch := range schedules {
		for {
			hs, err := s.cfg.Holds.Lapsed(ctx, Scope(sch.ID), s.cfg.Now(), lapsedBatch)
			for _, h := range hs {
				units := h.Quantity
				if units == 0 {
					units = int64(len(h.Seats))
				}
				s.cfg.Events.Emit(event.New(event.HoldExpired, sch.Room, h.Holder, h.ExpiresAt, event.Data{Schedule: sch.ID, Units: units}))
			}
			if err != nil && first == nil {
				first = fmt.Errorf("sale: lapsed holds of schedule %d: %w", sch.ID, err)
			}
			if err != nil || len(hs) < lapsedBatch {
				break
			}
		}
	}
	return first
}

// reportLapsed runs ReportLapsed every second until ctx ends, logging when
// it starts failing and when it recovers.
func (s *Service) reportLapsed(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	failing := false
	for {
		err := s.ReportLapsed(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			s.cfg.Logger.Warn("reading lapsed holds failed: their hold_expired events wait", "err", err)
		case err == nil && failing:
			s.cfg.Logger.Info("reading lapsed holds again")
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
