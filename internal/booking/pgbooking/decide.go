package pgbooking

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"usher/internal/booking"
)

// How Decide batches. One call is one transaction on one connection,
// BEGIN … COMMIT around one pipelined round trip (pgx.Batch), so a batch
// of reservations costs one WAL flush and three round trips:
//
//   - Set path, for the usual batch (the hold layer in front already kept
//     reservations apart): no seat wanted by two of its reservations, no
//     id twice, every seat list well formed. One statement, decideSetStmt,
//     decides the whole batch: the contract's conditional UPDATE joined to
//     the list of wanted seats, then one INSERT of every decision.
//   - Pipeline path, when the batch's order matters between its
//     reservations (two want one seat: the first wins; one id twice: the
//     second is a redelivery of the first): one decideStmt per
//     reservation, in order, each the conditional UPDATE of its seats and
//     the INSERT of its decision in one statement.
//
// Both first run lockStmt, in the same round trip: it locks the batch's
// seats that are still for sale in seat id order, so concurrent Decide
// calls take their row locks in one global order and overlapping batches
// wait for each other but never deadlock, whatever join order the planner
// picks. It decides nothing: the UPDATE's row count does (confirmed if it
// touched every seat of the reservation, else rejected). A reservation
// already stored is not updated (NOT EXISTS) and its INSERT does nothing
// (ON CONFLICT): a redelivery, answered by one more SELECT of the stored
// decisions.
//
// A reservation whose UPDATE touched some of its seats but not all (a
// multi-seat reservation that lost one seat), or touched seats while a
// concurrent call stored the same id, cannot be undone inside one
// statement, so Decide rolls the whole transaction back and decides the
// batch again carefully: each reservation inside its own SAVEPOINT, rolled
// back when it is partial (about three round trips per reservation). A
// stream of one-seat reservations never takes that path. A transaction
// that PostgreSQL aborts as a deadlock victim or serialization failure
// (rare: two calls redelivering the same ids in opposite orders, or
// writers other than Decide) is retried; it left nothing behind.

// Stock reservations (a Quantity) always take the pipeline path, one
// decideStockStmt each: the contract's conditional UPDATE of the schedule's
// stock row and the INSERT of the decision in one statement. A batch with
// stock reservations of several schedules first locks those stock rows in
// schedule id order (lockStockStmt, after the seats), for the same reason
// as lockStmt.

// Reservations with a buyer limit first count their tickets to their
// buyer (countBuyers: buyerStmt, one round trip, in (schedule, buyer)
// order, before the seats are locked); one over the limit is rejected
// (rejectStmt) on the pipeline or careful path, and the counts of those
// not confirmed are taken back before COMMIT (uncount).

// lockStmt locks the seats still for sale, in seat id order.
const lockStmt = `
	SELECT seat_id FROM seat
	 WHERE seat_id = ANY ($1::bigint[]) AND status IN ('AVAILABLE', 'HELD')
	 ORDER BY seat_id
	   FOR NO KEY UPDATE`

// lockStockStmt locks stock rows, in schedule id order.
const lockStockStmt = `
	SELECT schedule_id FROM stock
	 WHERE schedule_id = ANY ($1::bigint[])
	 ORDER BY schedule_id
	   FOR NO KEY UPDATE`

// decideStockStmt sells and records one stock reservation: $1 to $6 as in
// decideStmt ($4 is empty for a well-formed one), $7 the quantity. Result:
// 1 if it sold, and the stored status and reason as decideStmt's. A
// negative quantity, or seats with it, sells nothing: rejected as sold out.
const decideStockStmt = `
	WITH sold AS (
		UPDATE stock SET sold = sold + $7::bigint
		 WHERE schedule_id = $3::bigint AND sold + $7::bigint <= total
		   AND $7::bigint > 0 AND cardinality($4::bigint[]) = 0
		   AND NOT EXISTS (SELECT 1 FROM reservation WHERE reservation_id = $1::text)
		RETURNING 1
	), n AS (
		SELECT count(*) AS sold FROM sold
	), decided AS (
		INSERT INTO reservation (reservation_id, visitor, schedule_id, seat_ids, quantity, status, reason, created_at, decided_at)
		SELECT $1::text, $2::text, $3::bigint, $4::bigint[], $7::bigint,
		       CASE WHEN n.sold = 1 THEN 'confirmed' ELSE 'rejected' END,
		       CASE WHEN n.sold = 1 THEN '' ELSE 'sold_out' END,
		       $5::timestamptz, $6::timestamptz
		  FROM n
		ON CONFLICT (reservation_id) DO NOTHING
		RETURNING status, reason
	)
	SELECT n.sold, decided.status, decided.reason FROM n LEFT JOIN decided ON true`

// decideStmt sells and records one reservation. Parameters: $1 id, $2
// visitor, $3 schedule, $4 seat ids, $5 created at, $6 decided at. Result:
// how many seats it sold, and the stored status and reason if it inserted
// the decision (NULL if the reservation was already stored).
const decideStmt = `
	WITH sold AS (
		UPDATE seat SET status = 'SOLD', reservation_id = $1::text
		 WHERE schedule_id = $3::bigint AND seat_id = ANY ($4::bigint[]) AND status IN ('AVAILABLE', 'HELD')
		   AND NOT EXISTS (SELECT 1 FROM reservation WHERE reservation_id = $1::text)
		RETURNING 1
	), n AS (
		SELECT count(*) AS sold FROM sold
	), decided AS (
		INSERT INTO reservation (reservation_id, visitor, schedule_id, seat_ids, status, reason, created_at, decided_at)
		SELECT $1::text, $2::text, $3::bigint, $4::bigint[],
		       CASE WHEN n.sold = cardinality($4::bigint[]) THEN 'confirmed' ELSE 'rejected' END,
		       CASE WHEN n.sold = cardinality($4::bigint[]) THEN ''
		            WHEN (SELECT count(*) FROM seat WHERE schedule_id = $3::bigint AND seat_id = ANY ($4::bigint[]))
		                 < cardinality($4::bigint[]) THEN 'seat_unknown'
		            ELSE 'seat_taken' END,
		       $5::timestamptz, $6::timestamptz
		  FROM n
		ON CONFLICT (reservation_id) DO NOTHING
		RETURNING status, reason
	)
	SELECT n.sold, decided.status, decided.reason FROM n LEFT JOIN decided ON true`

// rejectStmt records a rejection without selling anything: $7 is the
// reason, or the empty string to find it (seat_unknown if a seat is not in the
// schedule, else seat_taken); $8 the quantity. Same parameters and result
// as decideStmt.
const rejectStmt = `
	WITH decided AS (
		INSERT INTO reservation (reservation_id, visitor, schedule_id, seat_ids, quantity, status, reason, created_at, decided_at)
		SELECT $1::text, $2::text, $3::bigint, $4::bigint[], $8::bigint, 'rejected',
		       CASE WHEN $7::text <> '' THEN $7::text
		            WHEN (SELECT count(*) FROM seat WHERE schedule_id = $3::bigint AND seat_id = ANY ($4::bigint[]))
		                 < cardinality($4::bigint[]) THEN 'seat_unknown'
		            ELSE 'seat_taken' END,
		       $5::timestamptz, $6::timestamptz
		ON CONFLICT (reservation_id) DO NOTHING
		RETURNING status, reason
	)
	SELECT 0::bigint, decided.status, decided.reason FROM (SELECT) one LEFT JOIN decided ON true`

const selectReservations = `
	SELECT reservation_id, visitor, schedule_id, seat_ids, quantity, status, reason, created_at, decided_at
	  FROM reservation WHERE reservation_id = ANY ($1::text[])`

// decideSetStmt decides a whole batch in one statement when no seat and no
// reservation id appears twice in it (see setEligible). $1, $2, $3: one
// element per seat wanted (reservation id, schedule, seat), sorted by seat
// id; $4 to $8: one element
// per reservation (id, visitor, schedule, seat ids as an array literal,
// created at), in the batch's order; $9 decided at. The UPDATE is the
// contract's conditional UPDATE, joined to the wanted seats; one result
// row per reservation, in order, shaped like decideStmt's.
const decideSetStmt = `
	WITH want AS (
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS w (reservation_id, schedule_id, seat_id)
	), sold AS (
		UPDATE seat SET status = 'SOLD', reservation_id = want.reservation_id
		  FROM want
		 WHERE seat.schedule_id = want.schedule_id AND seat.seat_id = want.seat_id
		   AND seat.status IN ('AVAILABLE', 'HELD')
		   AND NOT EXISTS (SELECT 1 FROM reservation r WHERE r.reservation_id = want.reservation_id)
		RETURNING want.reservation_id
	), counts AS (
		SELECT reservation_id, count(*) AS sold FROM sold GROUP BY reservation_id
	), req AS (
		SELECT reservation_id, visitor, schedule_id, seat_ids::bigint[] AS seat_ids, created_at, ord
		  FROM unnest($4::text[], $5::text[], $6::bigint[], $7::text[], $8::timestamptz[]) WITH ORDINALITY
		       AS q (reservation_id, visitor, schedule_id, seat_ids, created_at, ord)
	), decided AS (
		INSERT INTO reservation (reservation_id, visitor, schedule_id, seat_ids, status, reason, created_at, decided_at)
		SELECT req.reservation_id, req.visitor, req.schedule_id, req.seat_ids,
		       CASE WHEN COALESCE(counts.sold, 0) = cardinality(req.seat_ids) THEN 'confirmed' ELSE 'rejected' END,
		       CASE WHEN COALESCE(counts.sold, 0) = cardinality(req.seat_ids) THEN ''
		            WHEN (SELECT count(*) FROM seat WHERE seat.schedule_id = req.schedule_id AND seat.seat_id = ANY (req.seat_ids))
		                 < cardinality(req.seat_ids) THEN 'seat_unknown'
		            ELSE 'seat_taken' END,
		       req.created_at, $9::timestamptz
		  FROM req LEFT JOIN counts USING (reservation_id)
		 ORDER BY req.ord
		ON CONFLICT (reservation_id) DO NOTHING
		RETURNING reservation_id, status, reason
	)
	SELECT COALESCE(counts.sold, 0), decided.status, decided.reason
	  FROM req LEFT JOIN counts USING (reservation_id) LEFT JOIN decided USING (reservation_id)
	 ORDER BY req.ord`

// errPartial reports a statement that sold part of a
// reservation: the transaction must be rolled back and decided carefully.
var errPartial = errors.New("partial sale")

// maxAttempts bounds retries of a transaction that PostgreSQL aborted as a
// deadlock victim or serialization failure (both leave nothing behind).
const maxAttempts = 3

// Decide decides rs in order in one transaction; see the comment above.
func (s *Store) Decide(ctx context.Context, rs []booking.Reservation) ([]booking.Reservation, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	decidedAt := now()
	reqs := make([]booking.Reservation, len(rs))
	for i, r := range rs {
		if r.ID == "" {
			return nil, fmt.Errorf("pgbooking: decide: reservation %d has no id: %w", i, booking.ErrInvalid)
		}
		if r.CreatedAt.IsZero() {
			r.CreatedAt = decidedAt
		}
		r.CreatedAt = r.CreatedAt.UTC().Truncate(time.Microsecond)
		r.DecidedAt = decidedAt
		if len(r.SeatIDs) == 0 {
			r.SeatIDs = nil
		}
		reqs[i] = r
	}
	op := fmt.Sprintf("decide %d reservations", len(rs))
	careful := false
	for attempt := 1; ; attempt++ {
		var out []booking.Reservation
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
			out, err = decide(ctx, tx, reqs, careful, !s.pipelineOnly)
			return err
		})
		switch {
		case err == nil:
			return out, nil
		case errors.Is(err, errPartial) && !careful:
			careful = true
		case retryable(err) && attempt < maxAttempts:
		default:
			return nil, wrap(op, err)
		}
	}
}

func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// outcome is what one reservation's statement reported.
type outcome struct {
	sold   int64
	status *string // nil: already stored, not inserted by this statement
	reason *string
}

// decide runs one attempt in tx: pipelined, or careful (savepoints).
func decide(ctx context.Context, tx pgx.Tx, reqs []booking.Reservation, careful, set bool) ([]booking.Reservation, error) {
	var seats []int64
	for _, r := range reqs {
		seats = append(seats, r.SeatIDs...)
	}
	slices.Sort(seats)
	seats = slices.Compact(seats)
	stocks := stockSchedules(reqs)
	buyers, err := countBuyers(ctx, tx, reqs)
	if err != nil {
		return nil, err
	}

	outs := make([]outcome, len(reqs))
	switch {
	case !careful && set && len(stocks) == 0 && len(buyers.over) == 0 && setEligible(reqs, len(seats)):
		if err := decideSet(ctx, tx, reqs, outs); err != nil {
			return nil, err
		}
	case careful:
		if len(seats) > 1 {
			if _, err := tx.Exec(ctx, lockStmt, seats); err != nil {
				return nil, err
			}
		}
		if len(stocks) > 1 {
			if _, err := tx.Exec(ctx, lockStockStmt, stocks); err != nil {
				return nil, err
			}
		}
		for i, r := range reqs {
			var err error
			if buyers.over[r.ID] {
				outs[i], err = reject(ctx, tx, r, booking.ReasonBuyerLimit)
			} else {
				outs[i], err = decideCarefully(ctx, tx, r)
			}
			if err != nil {
				return nil, err
			}
		}
	default:
		b := &pgx.Batch{}
		if len(seats) > 1 {
			b.Queue(lockStmt, seats)
		}
		if len(stocks) > 1 {
			b.Queue(lockStockStmt, stocks)
		}
		for _, r := range reqs {
			queueDecide(b, r, buyers.over[r.ID])
		}
		br := tx.SendBatch(ctx, b)
		for _, locks := range []int{len(seats), len(stocks)} {
			if locks > 1 {
				if _, err := br.Exec(); err != nil {
					br.Close()
					return nil, err
				}
			}
		}
		for i := range reqs {
			if err := br.QueryRow().Scan(&outs[i].sold, &outs[i].status, &outs[i].reason); err != nil {
				br.Close()
				return nil, err
			}
		}
		if err := br.Close(); err != nil {
			return nil, err
		}
	}
	for i, r := range reqs {
		if partial(outs[i], r) {
			return nil, fmt.Errorf("%s: %w", r.ID, errPartial) // never when careful
		}
		// Sold here although its decision was stored meanwhile: the same
		// reservation decided by a concurrent call (a redelivery racing the
		// first delivery). Roll back; the redelivery then finds the decision.
		if outs[i].status == nil && outs[i].sold > 0 {
			return nil, fmt.Errorf("pgbooking: decide %s: decided concurrently; retry", r.ID)
		}
	}
	if err := buyers.uncount(ctx, tx, reqs, outs); err != nil {
		return nil, err
	}

	out := make([]booking.Reservation, len(reqs))
	var stored []string
	for i, r := range reqs {
		if outs[i].status == nil {
			stored = append(stored, r.ID)
			continue
		}
		r.Status, r.Reason = booking.ReservationStatus(*outs[i].status), *outs[i].reason
		out[i] = r
	}
	if len(stored) > 0 { // redeliveries: answer with the stored decisions
		rows, err := tx.Query(ctx, selectReservations, stored)
		if err != nil {
			return nil, err
		}
		found, err := pgx.CollectRows(rows, scanReservation)
		if err != nil {
			return nil, err
		}
		byID := make(map[string]booking.Reservation, len(found))
		for _, r := range found {
			byID[r.ID] = r
		}
		for i, r := range reqs {
			if outs[i].status == nil {
				d, ok := byID[r.ID]
				if !ok {
					return nil, fmt.Errorf("%s: stored decision vanished", r.ID)
				}
				out[i] = d
			}
		}
	}
	return out, nil
}

// buyerStmt counts one reservation's tickets ($4) to its buyer ($3) for
// its schedule ($2), with the contract's conditional UPDATE (an upsert, so
// that a buyer's first reservation makes the row) unless the reservation
// ($1) is stored already. Result: whether it was not stored, and 1 if it
// counted (0: over the limit $5).
const buyerStmt = `
	WITH fresh AS (
		SELECT NOT EXISTS (SELECT 1 FROM reservation WHERE reservation_id = $1::text) AS yes
	), counted AS (
		INSERT INTO buyer_tickets AS b (schedule_id, buyer, tickets)
		SELECT $2::bigint, $3::text, $4::bigint FROM fresh WHERE fresh.yes AND $4::bigint <= $5::bigint
		ON CONFLICT (schedule_id, buyer) DO UPDATE SET tickets = b.tickets + EXCLUDED.tickets
		 WHERE b.tickets + EXCLUDED.tickets <= $5::bigint
		RETURNING 1
	)
	SELECT fresh.yes, (SELECT count(*) FROM counted) FROM fresh`

// uncountStmt takes back tickets buyerStmt counted.
const uncountStmt = `UPDATE buyer_tickets SET tickets = tickets - $3::bigint WHERE schedule_id = $1::bigint AND buyer = $2::text`

// buyers is what countBuyers did: the reservations (by id) whose tickets
// it counted, and those over their buyer's limit.
type buyers struct{ counted, over map[string]bool }

// countBuyers counts the tickets of reqs' new reservations that carry a
// buyer limit, in one round trip, before any seat is locked, buyers in
// (schedule, buyer) order so that concurrent calls lock the rows in one
// order. Each reservation counts once, at its first place in the batch.
func countBuyers(ctx context.Context, tx pgx.Tx, reqs []booking.Reservation) (buyers, error) {
	bs := buyers{counted: map[string]bool{}, over: map[string]bool{}}
	var limited []booking.Reservation
	seen := map[string]bool{}
	for _, r := range reqs {
		if r.BuyerLimit > 0 && booking.Tickets(r) > 0 && !seen[r.ID] {
			limited = append(limited, r)
		}
		seen[r.ID] = true
	}
	if len(limited) == 0 {
		return bs, nil
	}
	slices.SortStableFunc(limited, func(a, b booking.Reservation) int {
		return cmp.Or(cmp.Compare(a.ScheduleID, b.ScheduleID), cmp.Compare(a.Visitor, b.Visitor))
	})
	b := &pgx.Batch{}
	for _, r := range limited {
		b.Queue(buyerStmt, r.ID, r.ScheduleID, r.Visitor, booking.Tickets(r), r.BuyerLimit)
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	for _, r := range limited {
		var fresh bool
		var n int64
		if err := br.QueryRow().Scan(&fresh, &n); err != nil {
			return bs, err
		}
		switch {
		case n == 1:
			bs.counted[r.ID] = true
		case fresh:
			bs.over[r.ID] = true
		}
	}
	return bs, br.Close()
}

// uncount takes back the tickets of the counted reservations that this
// call did not confirm (rejected, or stored meanwhile by another call).
func (bs buyers) uncount(ctx context.Context, tx pgx.Tx, reqs []booking.Reservation, outs []outcome) error {
	b := &pgx.Batch{}
	done := map[string]bool{}
	for i, r := range reqs {
		if !bs.counted[r.ID] || done[r.ID] {
			continue
		}
		done[r.ID] = true
		if outs[i].status == nil || *outs[i].status != string(booking.Confirmed) {
			b.Queue(uncountStmt, r.ScheduleID, r.Visitor, booking.Tickets(r))
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, b).Close()
}

// stockSchedules returns the schedules of reqs' stock reservations, sorted,
// each once.
func stockSchedules(reqs []booking.Reservation) []int64 {
	var ids []int64
	for _, r := range reqs {
		if r.Quantity != 0 {
			ids = append(ids, r.ScheduleID)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// setEligible reports whether decideSetStmt may decide reqs: every
// reservation well formed, no id twice, no seat wanted twice (seats is the
// number of distinct seats wanted). Otherwise the batch's order matters
// between its reservations and the pipeline keeps it.
func setEligible(reqs []booking.Reservation, seats int) bool {
	n := 0
	ids := make(map[string]bool, len(reqs))
	for _, r := range reqs {
		if ids[r.ID] || booking.Malformed(r.SeatIDs) != "" {
			return false
		}
		ids[r.ID] = true
		n += len(r.SeatIDs)
	}
	return n == seats
}

// decideSet decides reqs with decideSetStmt.
func decideSet(ctx context.Context, tx pgx.Tx, reqs []booking.Reservation, outs []outcome) error {
	type want struct {
		id       string
		schedule int64
		seat     int64
	}
	var wants []want
	ids, visitors, seatLists := make([]string, len(reqs)), make([]string, len(reqs)), make([]string, len(reqs))
	schedules, created := make([]int64, len(reqs)), make([]time.Time, len(reqs))
	for i, r := range reqs {
		for _, seat := range r.SeatIDs {
			wants = append(wants, want{r.ID, r.ScheduleID, seat})
		}
		ids[i], visitors[i], schedules[i], created[i] = r.ID, r.Visitor, r.ScheduleID, r.CreatedAt
		seatLists[i] = arrayLiteral(r.SeatIDs)
	}
	slices.SortFunc(wants, func(a, b want) int { return cmp.Compare(a.seat, b.seat) })
	wantIDs, wantSchedules, wantSeats := make([]string, len(wants)), make([]int64, len(wants)), make([]int64, len(wants))
	for i, w := range wants {
		wantIDs[i], wantSchedules[i], wantSeats[i] = w.id, w.schedule, w.seat
	}
	// The lock statement first, in the same round trip: whatever join
	// order the planner picks, the rows are already locked in seat order.
	b := &pgx.Batch{}
	if len(wantSeats) > 1 {
		b.Queue(lockStmt, wantSeats)
	}
	b.Queue(decideSetStmt, wantIDs, wantSchedules, wantSeats,
		ids, visitors, schedules, seatLists, created, reqs[0].DecidedAt)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if len(wantSeats) > 1 {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		if i == len(outs) {
			return fmt.Errorf("decide set: more than %d result rows", len(outs))
		}
		if err := rows.Scan(&outs[i].sold, &outs[i].status, &outs[i].reason); err != nil {
			return err
		}
		i++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if i != len(outs) {
		return fmt.Errorf("decide set: %d result rows for %d reservations", i, len(outs))
	}
	return br.Close()
}

// arrayLiteral formats ids as a PostgreSQL array literal, {1,2,3}.
func arrayLiteral(ids []int64) string {
	b := append(make([]byte, 0, 8*len(ids)+2), '{')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, '}'))
}

// queueDecide queues r's statement: a sale, or a rejection if its seat
// list cannot be sold as such or its buyer is over the limit (over).
func queueDecide(b *pgx.Batch, r booking.Reservation, over bool) {
	if over {
		b.Queue(rejectStmt, r.ID, r.Visitor, r.ScheduleID, seatArray(r.SeatIDs), r.CreatedAt, r.DecidedAt, booking.ReasonBuyerLimit, r.Quantity)
		return
	}
	if r.Quantity != 0 {
		b.Queue(decideStockStmt, r.ID, r.Visitor, r.ScheduleID, seatArray(r.SeatIDs), r.CreatedAt, r.DecidedAt, r.Quantity)
		return
	}
	if reason := booking.Malformed(r.SeatIDs); reason != "" {
		b.Queue(rejectStmt, r.ID, r.Visitor, r.ScheduleID, seatArray(r.SeatIDs), r.CreatedAt, r.DecidedAt, reason, r.Quantity)
		return
	}
	b.Queue(decideStmt, r.ID, r.Visitor, r.ScheduleID, r.SeatIDs, r.CreatedAt, r.DecidedAt)
}

// partial reports an outcome that sold seats (or stock) without recording
// r as confirmed by this statement.
func partial(o outcome, r booking.Reservation) bool {
	want := int64(len(r.SeatIDs))
	if r.Quantity != 0 {
		want = 1 // the stock row
	}
	return o.sold > 0 && (o.status == nil || o.sold != want)
}

// decideCarefully decides r inside a savepoint: a partial sale is rolled
// back and recorded as a rejection.
func decideCarefully(ctx context.Context, tx pgx.Tx, r booking.Reservation) (outcome, error) {
	var o outcome
	stmt, args := decideStmt, []any{r.ID, r.Visitor, r.ScheduleID, r.SeatIDs, r.CreatedAt, r.DecidedAt}
	if r.Quantity != 0 {
		stmt, args = decideStockStmt, []any{r.ID, r.Visitor, r.ScheduleID, seatArray(r.SeatIDs), r.CreatedAt, r.DecidedAt, r.Quantity}
	} else if reason := booking.Malformed(r.SeatIDs); reason != "" {
		return reject(ctx, tx, r, reason)
	}
	if _, err := tx.Exec(ctx, `SAVEPOINT sell`); err != nil {
		return o, err
	}
	err := tx.QueryRow(ctx, stmt, args...).Scan(&o.sold, &o.status, &o.reason)
	if err != nil {
		return o, err
	}
	if !partial(o, r) {
		_, err := tx.Exec(ctx, `RELEASE SAVEPOINT sell`)
		return o, err
	}
	if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT sell; RELEASE SAVEPOINT sell`); err != nil {
		return o, err
	}
	if r.Quantity != 0 {
		return reject(ctx, tx, r, booking.ReasonSoldOut) // stored already: answered from storage
	}
	return reject(ctx, tx, r, "")
}

// reject records r as rejected for reason (empty: find it) unless it is
// already stored.
func reject(ctx context.Context, tx pgx.Tx, r booking.Reservation, reason string) (outcome, error) {
	var o outcome
	err := tx.QueryRow(ctx, rejectStmt, r.ID, r.Visitor, r.ScheduleID, seatArray(r.SeatIDs), r.CreatedAt, r.DecidedAt, reason, r.Quantity).
		Scan(&o.sold, &o.status, &o.reason)
	return o, err
}

// seatArray is ids as a non-NULL array.
func seatArray(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}

// BuyerTickets returns the tickets counted to visitor for the schedule.
func (s *Store) BuyerTickets(ctx context.Context, scheduleID int64, visitor string) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT tickets FROM buyer_tickets WHERE schedule_id = $1 AND buyer = $2`, scheduleID, visitor).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, wrap(fmt.Sprintf("tickets of %s in schedule %d", visitor, scheduleID), err)
	}
	return n, nil
}

// Reservation returns a decided reservation.
func (s *Store) Reservation(ctx context.Context, id string) (booking.Reservation, error) {
	rows, err := s.pool.Query(ctx, selectReservations, []string{id})
	if err != nil {
		return booking.Reservation{}, wrap("reservation "+id, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanReservation)
	if err != nil {
		return booking.Reservation{}, wrap("reservation "+id, err)
	}
	return r, nil
}

func scanReservation(row pgx.CollectableRow) (booking.Reservation, error) {
	var r booking.Reservation
	err := row.Scan(&r.ID, &r.Visitor, &r.ScheduleID, &r.SeatIDs, &r.Quantity, &r.Status, &r.Reason, &r.CreatedAt, &r.DecidedAt)
	if len(r.SeatIDs) == 0 {
		r.SeatIDs = nil
	}
	r.CreatedAt, r.DecidedAt = r.CreatedAt.UTC(), r.DecidedAt.UTC()
	return r, err
}
