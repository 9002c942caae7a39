package sale

import (
	"context"
	"errors"
	"fmt"
	"time"

	"usher/internal/booking"
	"usher/internal/queue"
)

// Inventory-aware admission: every InventoryEvery, every instance counts
// each schedule's units left for sale from what it already keeps, the seat
// map snapshot (seats neither sold nor held) and the general-admission
// stock (units neither sold nor held), and writes the count to the
// schedule's room (queue.Queue.SetInventory). The room turns sold out by
// itself at 0 and caps admission at the room's visitors_per_unit while it is
// low (queue.InventoryCap).
//
// Several instances write the same rooms: the last writer wins. That is
// enough because every writer counts the same SQL and the same hold store,
// each from a snapshot at most SnapshotEvery old, so two writers differ only
// by what changed in between, and the next pass corrects it. A count is
// written only when it differs from the room's view on this instance.
//
// Fail safe: when SQL or the hold store cannot be read, or the seat map is
// a stale one served during an outage, nothing is written and the room keeps
// the last count. An outage never makes a room sold out (nor reopens one).
// A schedule with no seats and no stock has no count: its room acts as a
// room without a schedule.

// NoInventory (or any negative) as Config.InventoryEvery turns counting
// off: rooms keep the last count written (none in a new memory store), so
// they act on the operator's state alone only if they never had one.
const NoInventory time.Duration = -1

// countInventory writes the units left of every schedule to its room. It
// returns the first error, after trying every schedule; failing schedules
// keep their last count.
func (s *Service) countInventory(ctx context.Context) error {
	schedules, err := s.cfg.Catalog.Schedules(ctx)
	if err != nil {
		return fmt.Errorf("sale: count inventory: %w", err)
	}
	var first error
	for _, sch := range schedules {
		units, ok, err := s.available(ctx, sch.ID)
		if err == nil && ok {
			if v, seen := s.cfg.Queue.View(sch.Room); seen && v.Inventory == (queue.Inventory{Units: units, Known: true}) {
				continue
			}
			err = s.cfg.Queue.SetInventory(ctx, sch.Room, units)
			if errors.Is(err, queue.ErrRoomNotFound) {
				err = nil // provisionRooms creates it; the next pass writes it
			}
		}
		if err != nil && first == nil {
			first = fmt.Errorf("sale: count inventory of schedule %d: %w", sch.ID, err)
		}
	}
	return first
}

// available counts a schedule's units left for sale: seats the seat map
// shows AVAILABLE, and stock units neither sold nor held. ok is false when
// the schedule has neither seats nor stock. A seat map older than two
// rebuild periods is one served stale during an outage: an error.
func (s *Service) available(ctx context.Context, scheduleID int64) (units int64, ok bool, err error) {
	m, err := s.SeatMap(ctx, scheduleID)
	if err != nil {
		return 0, false, err
	}
	if age := s.cfg.Now().Sub(m.BuiltAt); age > 2*s.cfg.SnapshotEvery+s.cfg.InventoryEvery {
		return 0, false, fmt.Errorf("the seat map is %v old", age.Round(time.Millisecond))
	}
	for _, seat := range m.Seats {
		if seat.Status == booking.Available {
			units++
		}
	}
	ok = len(m.Seats) > 0
	st, err := s.cfg.Catalog.Stock(ctx, scheduleID)
	switch {
	case errors.Is(err, booking.ErrNotFound):
		return units, ok, nil
	case err != nil:
		return 0, false, err
	}
	left, err := s.cfg.Holds.Stock(ctx, Scope(scheduleID), s.cfg.Now())
	if err != nil {
		return 0, false, err
	}
	// The hold store's count may exceed the truth (SetStock while units
	// were held, stock.go); SQL's unsold units bound it.
	return units + max(0, min(left, st.Total-st.Sold)), true, nil
}

// keepInventory runs countInventory every InventoryEvery until ctx ends,
// logging when counting starts failing and when it recovers.
func (s *Service) keepInventory(ctx context.Context) {
	t := time.NewTicker(s.cfg.InventoryEvery)
	defer t.Stop()
	failing := false
	for {
		err := s.countInventory(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && !failing:
			s.cfg.Logger.Warn("counting inventory failed: rooms keep their last count", "err", err)
		case err == nil && failing:
			s.cfg.Logger.Info("counting inventory again")
		}
		failing = err != nil
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
