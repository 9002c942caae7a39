package sale

import (
	"context"
	"errors"
	"fmt"
	"time"

	"usher/internal/booking"
	"usher/internal/event"
	"usher/internal/hold"
	"usher/internal/mq"
	"usher/internal/queue"
)

// General-admission stock: units of a schedule without seat numbers (a
// flash sale). SQL keeps the total and the units sold (booking.Stock); the
// hold store keeps the units left for holding, taken by one atomic
// check-and-decrement per hold (seed 003's Lua). A stock hold is reserved
// whole: Decide sells its quantity with a conditional UPDATE of the stock
// row, so SQL never sells more than the total, whatever the hold store
// believed. On confirmation the hold is consumed (its units stay sold); on
// rejection it is released (its units come back).
//
// Limits: SetStock gives the hold store total - sold units, so units under
// a live hold or a pending reservation at that moment are counted twice
// until those end (SQL still refuses an oversale: the extra holds are
// rejected as sold out). A hold store that forgets the stock level (memory
// on restart, Redis after a flush) gets it back from SQL with RebuildStock,
// which usher serve calls at start. A visitor who reserves one hold twice under
// two idempotency keys before the first is decided may buy its units twice
// (within the total).

// StockLevel is a schedule's stock as an operator sees it.
type StockLevel struct {
	ScheduleID int64 `json:"schedule_id"`
	Total      int64 `json:"total"`
	Sold       int64 `json:"sold"`
	// Available is the units left for holding in the hold store.
	Available int64 `json:"available"`
}

// MaxStock is the most units a schedule's stock holds: far beyond any sale,
// and far below 2^53, so that every store (Lua numbers are doubles) counts
// it exactly.
const MaxStock = 1_000_000_000

// SetStock creates a schedule's stock or sets its total (ErrInvalid below
// the units already sold or above MaxStock), then gives the hold store the
// units not sold.
func (s *Service) SetStock(ctx context.Context, scheduleID, total int64) (StockLevel, error) {
	if total < 0 || total > MaxStock {
		return StockLevel{}, ErrInvalid.Detail("total: want 0 to %d", MaxStock)
	}
	if err := s.cfg.Catalog.SetStock(ctx, scheduleID, total); err != nil {
		return StockLevel{}, err
	}
	st, err := s.cfg.Catalog.Stock(ctx, scheduleID)
	if err != nil {
		return StockLevel{}, err
	}
	if err := s.cfg.Holds.SetStock(ctx, Scope(scheduleID), st.Total-st.Sold); err != nil {
		return StockLevel{}, err
	}
	return StockLevel{ScheduleID: scheduleID, Total: st.Total, Sold: st.Sold, Available: st.Total - st.Sold}, nil
}

// RebuildStock gives the hold store back each schedule's unsold units where
// it reports none while SQL has some: a memory hold store after a restart,
// a Redis one after a flush. It logs each schedule it rebuilds and returns
// the first error (reading SQL or writing the hold store). Call it at start,
// before requests: a hold store that kept its level is left alone, except
// when all its units are under live holds (it reports 0 then too), where the
// rebuild counts them twice until those holds end (SQL still refuses to sell
// more than the total, as after SetStock).
func (s *Service) RebuildStock(ctx context.Context) error {
	schedules, err := s.cfg.Catalog.Schedules(ctx)
	if err != nil {
		return fmt.Errorf("sale: rebuild stock: %w", err)
	}
	now := s.cfg.Now()
	for _, sch := range schedules {
		st, err := s.cfg.Catalog.Stock(ctx, sch.ID)
		if errors.Is(err, booking.ErrNotFound) {
			continue // seats only
		} else if err != nil {
			return fmt.Errorf("sale: rebuild stock of schedule %d: %w", sch.ID, err)
		}
		unsold := st.Total - st.Sold
		if unsold <= 0 {
			continue
		}
		left, err := s.cfg.Holds.Stock(ctx, Scope(sch.ID), now)
		if err != nil {
			return fmt.Errorf("sale: rebuild stock of schedule %d: %w", sch.ID, err)
		}
		if left > 0 {
			continue
		}
		if err := s.cfg.Holds.SetStock(ctx, Scope(sch.ID), unsold); err != nil {
			return fmt.Errorf("sale: rebuild stock of schedule %d: %w", sch.ID, err)
		}
		s.cfg.Logger.Info("rebuilt general-admission stock from the database", "schedule", sch.ID, "total", st.Total, "sold", st.Sold, "available", unsold)
	}
	return nil
}

// Stock returns the units of a schedule left for holding (0 without stock).
func (s *Service) Stock(ctx context.Context, scheduleID int64) (int64, error) {
	if _, err := s.Schedule(ctx, scheduleID); err != nil {
		return 0, err
	}
	return s.cfg.Holds.Stock(ctx, Scope(scheduleID), s.cfg.Now())
}

// HoldStock holds n units of a schedule's stock for visitor: hold.ErrSoldOut
// when fewer are left, hold.ErrLimit when the visitor would hold more than
// StockLimit units.
func (s *Service) HoldStock(ctx context.Context, scheduleID int64, visitor string, n int64) (hold.Hold, error) {
	if n < 1 {
		return hold.Hold{}, ErrInvalid.Detail("quantity: want 1 to %d", s.cfg.StockLimit)
	}
	if n > int64(s.cfg.StockLimit) {
		err := fmt.Errorf("sale: hold %d units, limit %d: %w", n, s.cfg.StockLimit, hold.ErrLimit)
		s.metrics.held(kindStock, err)
		return hold.Hold{}, err
	}
	if _, err := s.Schedule(ctx, scheduleID); err != nil {
		return hold.Hold{}, err
	}
	limit, err := s.buyerHoldLimit(ctx, scheduleID, visitor, n, s.cfg.StockLimit)
	if err != nil {
		s.metrics.held(kindStock, err)
		return hold.Hold{}, err
	}
	h, err := s.cfg.Holds.HoldStock(ctx, Scope(scheduleID), visitor, n, int64(limit.n), s.cfg.HoldTTL, s.cfg.Now())
	err = limit.explain(err)
	s.metrics.held(kindStock, err)
	if err == nil {
		s.emitHold(ctx, event.HoldPlaced, scheduleID, h)
	}
	return h, err
}

// ReserveStock submits a reservation of the units of one of visitor's live
// stock holds. The same (visitor, idempotency key) returns the first
// reservation (created false), even after its hold ended. Another
// visitor's hold, or one that ended, is hold.ErrNotFound; a seat hold is
// ErrInvalid (reserve its seats with Reserve).
func (s *Service) ReserveStock(ctx context.Context, visitor string, scheduleID int64, holdID, idempotencyKey string) (booking.Reservation, bool, error) {
	if err := checkKey(idempotencyKey); err != nil {
		return booking.Reservation{}, false, err
	}
	if r, err := s.cfg.Broker.Lookup(ctx, visitor, idempotencyKey); err == nil {
		return r, false, nil
	} else if !errors.Is(err, mq.ErrNotFound) {
		return booking.Reservation{}, false, err
	}
	if !queue.ValidVisitorID(holdID) {
		return booking.Reservation{}, false, ErrInvalid.Detail("hold_id: want 1 to %d printable ASCII bytes without spaces", queue.MaxVisitorID)
	}
	if _, err := s.Schedule(ctx, scheduleID); err != nil {
		return booking.Reservation{}, false, err
	}
	now := s.cfg.Now()
	h, err := s.cfg.Holds.Get(ctx, Scope(scheduleID), holdID, now)
	if err != nil {
		return booking.Reservation{}, false, err
	}
	if h.Holder != visitor {
		return booking.Reservation{}, false, fmt.Errorf("sale: reserve stock hold %s: %w", holdID, hold.ErrNotFound)
	}
	if h.Quantity <= 0 {
		return booking.Reservation{}, false, ErrInvalid.Detail("hold_id: the hold has seats; reserve them with seat_ids")
	}
	if err := s.checkBuyer(ctx, scheduleID, visitor, h.Quantity); err != nil {
		return booking.Reservation{}, false, err
	}
	// The reservation's id comes from the hold: reserving one hold under two
	// idempotency keys makes one reservation, not two sales of its units.
	r := booking.Reservation{
		ID: fmt.Sprintf("r%d-%s", scheduleID, holdID), Visitor: visitor, ScheduleID: scheduleID, Quantity: h.Quantity, HoldIDs: []string{holdID},
		BuyerLimit: int64(s.cfg.BuyerLimit),
		Status:     booking.Pending, CreatedAt: now.UTC().Truncate(time.Microsecond), // SQL keeps µs
	}
	return s.submit(ctx, r, idempotencyKey)
}
