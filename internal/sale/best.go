package sale

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"

	"usher/internal/booking"
	"usher/internal/hold"
)

// Best available: the service picks the seats. The best seats are those of
// the front-most row (a row's place in its section's layout: row 1 of every
// section before row 2 of any), sections in layout order, and within a row
// the block of adjacent seats (consecutive numbers) whose middle is nearest
// the row's middle. Candidates come from the seat map snapshot; the hold
// store holds the block all or none, and a block it refuses (held since the
// snapshot) is left out and the next best tried, so two requests never get
// one seat and a request never gets seats that are not adjacent. Seats
// this instance held since the snapshot are left out from the start, and
// one instance's requests pick and hold one at a time, so that a crowd
// does not race for one block; requests of other instances can still
// collide, and cost a try each. Limit: a hold store slow to answer slows
// every best-available request of the schedule on this instance.

// BestRequest asks for the best Count adjacent seats, in Section when it is
// set, each priced within [MinPrice, MaxPrice] when they are set (0: no
// bound).
type BestRequest struct {
	Count              int
	Section            string
	MinPrice, MaxPrice int64
}

// maxBestTries bounds the holds one request tries.
const maxBestTries = 16

// seatRow is one row of the layout: its seats' indexes in SeatMap.Seats,
// by number, and its rank (its place in its section).
type seatRow struct {
	section string
	rank    int
	seats   []int
	middle  float64
}

// buildRows returns the rows of seats, best first (SeatMap.rows: made
// once per layout).
func buildRows(seats []booking.Seat) []seatRow {
	type key struct{ section, row string }
	at := map[key]int{}
	ranks := map[string]int{}
	var rows []seatRow
	for i, s := range seats {
		k := key{s.Section, s.Row}
		j, ok := at[k]
		if !ok {
			j = len(rows)
			at[k] = j
			rows = append(rows, seatRow{section: s.Section, rank: ranks[s.Section]})
			ranks[s.Section]++
		}
		rows[j].seats = append(rows[j].seats, i)
	}
	for i := range rows {
		r := &rows[i]
		slices.SortFunc(r.seats, func(a, b int) int { return seats[a].Number - seats[b].Number })
		r.middle = float64(seats[r.seats[0]].Number+seats[r.seats[len(r.seats)-1]].Number) / 2
	}
	slices.SortStableFunc(rows, func(a, b seatRow) int { return a.rank - b.rank })
	return rows
}

// bestBlock returns the best block of want.Count adjacent seats free in m
// and not in skip, and the most adjacent free seats any row of the request
// has (when no block is found).
func (s *Service) bestBlock(m *SeatMap, want BestRequest, skip map[int64]bool) (block []int64, most int) {
	taken := s.markedSeats(m.ScheduleID)
	free := func(i int) bool {
		seat := m.Seats[i]
		return seat.Status == booking.Available && !skip[seat.ID] && !taken[seat.ID] &&
			(want.MinPrice == 0 || seat.Price >= want.MinPrice) && (want.MaxPrice == 0 || seat.Price <= want.MaxPrice)
	}
	for _, row := range m.rows() {
		if want.Section != "" && row.section != want.Section {
			continue
		}
		best, bestDist := -1, 0.0
		run := 0 // free adjacent seats ending at k
		for k, i := range row.seats {
			switch {
			case !free(i):
				run = 0
				continue
			case run > 0 && m.Seats[row.seats[k-1]].Number+1 == m.Seats[i].Number:
				run++
			default:
				run = 1
			}
			most = max(most, run)
			if run < want.Count {
				continue
			}
			start := k - want.Count + 1
			mid := float64(m.Seats[row.seats[start]].Number+m.Seats[i].Number) / 2
			if d := math.Abs(mid - row.middle); best < 0 || d < bestDist {
				best, bestDist = start, d
			}
		}
		if best >= 0 {
			for _, i := range row.seats[best : best+want.Count] {
				block = append(block, m.Seats[i].ID)
			}
			return block, want.Count
		}
	}
	return nil, most
}

// HoldBest holds the best want.Count adjacent seats free now for visitor
// (see above): the hold and its seats. When no row of the request has
// that many adjacent seats free it is ErrNoAdjacent, saying how many it
// has.
func (s *Service) HoldBest(ctx context.Context, scheduleID int64, visitor string, want BestRequest) (hold.Hold, []int64, error) {
	switch {
	case want.Count < 1 || want.Count > s.cfg.SeatLimit:
		return hold.Hold{}, nil, ErrInvalid.Detail("count: want 1 to %d", s.cfg.SeatLimit)
	case want.MinPrice < 0 || want.MaxPrice < 0 || (want.MaxPrice > 0 && want.MaxPrice < want.MinPrice):
		return hold.Hold{}, nil, ErrInvalid.Detail("min_price, max_price: want 0 or more, min at most max")
	}
	m, err := s.SeatMap(ctx, scheduleID)
	if err != nil {
		return hold.Hold{}, nil, err
	}
	limit, err := s.buyerHoldLimit(ctx, scheduleID, visitor, int64(want.Count), s.cfg.SeatLimit)
	if err != nil {
		s.metrics.held(kindSeats, err)
		return hold.Hold{}, nil, err
	}
	skip := map[int64]bool{}
	for range maxBestTries {
		m.slot.best.Lock()
		block, most := s.bestBlock(m, want, skip)
		if block == nil {
			m.slot.best.Unlock()
			err := ErrNoAdjacent.Detail("count: at most %d adjacent seats are free here now", most)
			s.metrics.held(kindSeats, err)
			return hold.Hold{}, nil, err
		}
		h, err := s.holdSeats(ctx, m, scheduleID, visitor, block, limit)
		m.slot.best.Unlock()
		taken, ok := errors.AsType[*hold.TakenError](err)
		if !ok {
			s.metrics.held(kindSeats, err)
			return h, block, err
		}
		for _, id := range taken.Seats {
			n, _ := strconv.ParseInt(id, 10, 64)
			skip[n] = true
		}
		if m, err = s.SeatMap(ctx, scheduleID); err != nil { // a newer one, if due
			return hold.Hold{}, nil, err
		}
	}
	err = hold.ErrTaken // every block tried was taken meanwhile
	s.metrics.held(kindSeats, err)
	return hold.Hold{}, nil, err
}
