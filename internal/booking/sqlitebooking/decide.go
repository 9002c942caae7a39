package sqlitebooking

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"usher/internal/booking"
)

// The contract's conditional UPDATE: a seat is sold only if it is still for
// sale. Zero rows affected means taken (or not a seat of the schedule).
const sellSeat = `
	UPDATE seat SET status = 'SOLD', reservation_id = ?
	 WHERE schedule_id = ? AND seat_id = ? AND status IN ('AVAILABLE', 'HELD')`

// sellStock is the contract's conditional UPDATE of a schedule's stock:
// zero rows affected means sold out (or no stock).
const sellStock = `
	UPDATE stock SET sold = sold + ?1 WHERE schedule_id = ?2 AND sold + ?1 <= total`

// countBuyer is the contract's conditional UPDATE of a buyer's tickets
// (the row made first by ensureBuyer): zero rows affected means over the
// limit.
const (
	ensureBuyer = `INSERT INTO buyer_tickets (schedule_id, buyer) VALUES (?, ?) ON CONFLICT DO NOTHING`
	countBuyer  = `
	UPDATE buyer_tickets SET tickets = tickets + ?1
	 WHERE schedule_id = ?2 AND buyer = ?3 AND tickets + ?1 <= ?4`
)

const selectReservation = `
	SELECT visitor, schedule_id, seat_ids, quantity, status, reason, created_at, decided_at
	  FROM reservation WHERE reservation_id = ?`

// Decide decides rs in order in one immediate transaction on the writer:
// a reservation already stored is answered from storage; any other sells
// its seats one conditional UPDATE at a time inside a savepoint, rolled
// back if one touches no row (or its quantity with one conditional UPDATE
// of the stock), and its decision is inserted.
func (s *Store) Decide(ctx context.Context, rs []booking.Reservation) ([]booking.Reservation, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	for i, r := range rs {
		if r.ID == "" {
			return nil, fmt.Errorf("sqlitebooking: decide: reservation %d has no id: %w", i, booking.ErrInvalid)
		}
	}
	op := fmt.Sprintf("decide %d reservations", len(rs))
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, wrap(op, err)
	}
	defer tx.Rollback()
	d := decider{tx: tx}
	defer d.close()
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&d.get, selectReservation},
		{&d.sell, sellSeat},
		{&d.stock, sellStock},
		{&d.ensure, ensureBuyer},
		{&d.buyer, countBuyer},
		{&d.count, `SELECT count(*) FROM seat WHERE schedule_id = ? AND seat_id IN (SELECT value FROM json_each(?))`},
		{&d.insert, `INSERT INTO reservation (reservation_id, visitor, schedule_id, seat_ids, quantity, status, reason, created_at, decided_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`},
	} {
		if *p.stmt, err = tx.PrepareContext(ctx, p.sql); err != nil {
			return nil, wrap(op, err)
		}
	}
	decidedAt := now()
	out := make([]booking.Reservation, len(rs))
	for i, r := range rs {
		if out[i], err = d.decide(ctx, r, decidedAt); err != nil {
			return nil, wrap(fmt.Sprintf("%s: %s", op, r.ID), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, wrap(op, err)
	}
	return out, nil
}

// decider holds one Decide call's transaction and prepared statements.
type decider struct {
	tx                                             *sql.Tx
	get, sell, stock, ensure, buyer, count, insert *sql.Stmt
}

func (d *decider) close() {
	for _, st := range []*sql.Stmt{d.get, d.sell, d.stock, d.ensure, d.buyer, d.count, d.insert} {
		if st != nil {
			st.Close()
		}
	}
}

func (d *decider) decide(ctx context.Context, r booking.Reservation, decidedAt time.Time) (booking.Reservation, error) {
	stored, err := scanReservation(r.ID, d.get.QueryRowContext(ctx, r.ID))
	if err == nil {
		return stored, nil // a redelivery
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return booking.Reservation{}, err
	}
	r.Status, r.Reason, err = d.sellCounted(ctx, r)
	if err != nil {
		return booking.Reservation{}, err
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = decidedAt
	}
	r.CreatedAt = r.CreatedAt.UTC().Truncate(time.Microsecond)
	r.DecidedAt = decidedAt
	if len(r.SeatIDs) == 0 {
		r.SeatIDs = nil
	}
	_, err = d.insert.ExecContext(ctx, r.ID, r.Visitor, r.ScheduleID, booking.EncodeSeatIDs(r.SeatIDs), r.Quantity,
		string(r.Status), r.Reason, micros(r.CreatedAt), micros(r.DecidedAt))
	return r, err
}

// sellCounted sells r (its seats or its stock) and, when it carries a
// buyer limit, counts its tickets to its visitor first, inside a savepoint
// rolled back unless r is confirmed.
func (d *decider) sellCounted(ctx context.Context, r booking.Reservation) (booking.ReservationStatus, string, error) {
	sell := d.sellAll
	if r.Quantity != 0 {
		sell = d.sellStock
	}
	n := booking.Tickets(r)
	if r.BuyerLimit <= 0 || n <= 0 {
		return sell(ctx, r)
	}
	if _, err := d.tx.ExecContext(ctx, `SAVEPOINT buyer`); err != nil {
		return "", "", err
	}
	status, reason, err := d.countAndSell(ctx, r, n, sell)
	if err != nil {
		return "", "", err
	}
	undo := `RELEASE buyer`
	if status != booking.Confirmed {
		undo = `ROLLBACK TO buyer; RELEASE buyer`
	}
	if _, err := d.tx.ExecContext(ctx, undo); err != nil {
		return "", "", err
	}
	return status, reason, nil
}

func (d *decider) countAndSell(ctx context.Context, r booking.Reservation, n int64,
	sell func(context.Context, booking.Reservation) (booking.ReservationStatus, string, error),
) (booking.ReservationStatus, string, error) {
	if _, err := d.ensure.ExecContext(ctx, r.ScheduleID, r.Visitor); err != nil {
		return "", "", err
	}
	res, err := d.buyer.ExecContext(ctx, n, r.ScheduleID, r.Visitor, r.BuyerLimit)
	if err != nil {
		return "", "", err
	}
	if counted, err := res.RowsAffected(); err != nil {
		return "", "", err
	} else if counted == 0 {
		return booking.Rejected, booking.ReasonBuyerLimit, nil
	}
	return sell(ctx, r)
}

// sellAll sells every seat of r or none.
func (d *decider) sellAll(ctx context.Context, r booking.Reservation) (booking.ReservationStatus, string, error) {
	if reason := booking.Malformed(r.SeatIDs); reason != "" {
		return booking.Rejected, reason, nil
	}
	if _, err := d.tx.ExecContext(ctx, `SAVEPOINT sell`); err != nil {
		return "", "", err
	}
	for _, seat := range r.SeatIDs {
		res, err := d.sell.ExecContext(ctx, r.ID, r.ScheduleID, seat)
		if err != nil {
			return "", "", err
		}
		if n, err := res.RowsAffected(); err != nil {
			return "", "", err
		} else if n == 0 {
			if _, err := d.tx.ExecContext(ctx, `ROLLBACK TO sell; RELEASE sell`); err != nil {
				return "", "", err
			}
			var known int
			if err := d.count.QueryRowContext(ctx, r.ScheduleID, booking.EncodeSeatIDs(r.SeatIDs)).Scan(&known); err != nil {
				return "", "", err
			}
			if known < len(r.SeatIDs) {
				return booking.Rejected, booking.ReasonSeatUnknown, nil
			}
			return booking.Rejected, booking.ReasonSeatTaken, nil
		}
	}
	if _, err := d.tx.ExecContext(ctx, `RELEASE sell`); err != nil {
		return "", "", err
	}
	return booking.Confirmed, "", nil
}

// sellStock sells r's quantity of its schedule's stock with one
// conditional UPDATE, or nothing.
func (d *decider) sellStock(ctx context.Context, r booking.Reservation) (booking.ReservationStatus, string, error) {
	if r.Quantity < 0 || len(r.SeatIDs) > 0 {
		return booking.Rejected, booking.ReasonSoldOut, nil
	}
	res, err := d.stock.ExecContext(ctx, r.Quantity, r.ScheduleID)
	if err != nil {
		return "", "", err
	}
	if n, err := res.RowsAffected(); err != nil {
		return "", "", err
	} else if n == 0 {
		return booking.Rejected, booking.ReasonSoldOut, nil
	}
	return booking.Confirmed, "", nil
}

// BuyerTickets returns the tickets counted to visitor for the schedule.
func (s *Store) BuyerTickets(ctx context.Context, scheduleID int64, visitor string) (int64, error) {
	var n int64
	err := s.r.QueryRowContext(ctx, `SELECT tickets FROM buyer_tickets WHERE schedule_id = ? AND buyer = ?`, scheduleID, visitor).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, wrap(fmt.Sprintf("tickets of %s in schedule %d", visitor, scheduleID), err)
	}
	return n, nil
}

// Reservation returns a decided reservation.
func (s *Store) Reservation(ctx context.Context, id string) (booking.Reservation, error) {
	r, err := scanReservation(id, s.r.QueryRowContext(ctx, selectReservation, id))
	if err != nil {
		return booking.Reservation{}, wrap("reservation "+id, err)
	}
	return r, nil
}

func scanReservation(id string, row *sql.Row) (booking.Reservation, error) {
	r := booking.Reservation{ID: id}
	var seats string
	var createdAt, decidedAt int64
	if err := row.Scan(&r.Visitor, &r.ScheduleID, &seats, &r.Quantity, &r.Status, &r.Reason, &createdAt, &decidedAt); err != nil {
		return booking.Reservation{}, err
	}
	var err error
	if r.SeatIDs, err = booking.DecodeSeatIDs(seats); err != nil {
		return booking.Reservation{}, err
	}
	r.CreatedAt, r.DecidedAt = fromMicros(createdAt), fromMicros(decidedAt)
	return r, nil
}
