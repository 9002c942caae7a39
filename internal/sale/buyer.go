package sale

import (
	"context"
	"errors"
	"fmt"

	"usher/internal/booking"
	"usher/internal/hold"
)

// The limit per buyer per show (Config.BuyerLimit): at most K tickets,
// seats and units alike, per visitor per schedule. The visitor is the
// buyer: in a room that requires identities the visitor id is the
// account's ("acct:<sub>", package identity), the same on every device.
//
// SQL enforces it: every reservation carries the limit, and Decide counts
// its tickets to the visitor with a conditional UPDATE, rejecting one over
// the limit (buyer_limit). In front of it, requests fail early with
// ErrBuyerLimit: a hold when the visitor's tickets bought plus held would
// pass the limit (the hold store's per-holder limit, lowered to what is
// left, checks the held part atomically), and a reservation when its
// tickets plus those bought would. Tickets held but not yet decided are
// counted by the hold store until their holds end.

// holdLimit is the per-holder limit to give the hold store, and whether
// the buyer limit (not the hold limit) is what set it.
type holdLimit struct {
	n     int
	buyer bool
	// bought, of limit: for the message.
	bought, limit int64
}

// explain turns the hold store's ErrLimit into ErrBuyerLimit when the
// buyer limit set the bound.
func (l holdLimit) explain(err error) error {
	if l.buyer && errors.Is(err, hold.ErrLimit) {
		return fmt.Errorf("%w: %w", l.refusal(), err)
	}
	return err
}

func (l holdLimit) refusal() error {
	return ErrBuyerLimit.Detail("at most %d tickets per buyer for this schedule; %d bought", l.limit, l.bought)
}

// buyerHoldLimit returns the limit of a hold of n tickets by visitor, whose
// hold limit is max: max, or less when the buyer limit leaves less.
// ErrBuyerLimit when n alone passes what is left.
func (s *Service) buyerHoldLimit(ctx context.Context, scheduleID int64, visitor string, n int64, max int) (holdLimit, error) {
	l := holdLimit{n: max}
	if s.cfg.BuyerLimit <= 0 {
		return l, nil
	}
	bought, err := s.cfg.Catalog.BuyerTickets(ctx, scheduleID, visitor)
	switch {
	case errors.Is(err, booking.ErrUnavailable):
		// Holds go on while the database is down (the last seat map
		// serves them): count nothing bought; the hold store still bounds
		// what is held, and Decide what is bought.
		bought = 0
	case err != nil:
		return l, err
	}
	l.bought, l.limit = bought, int64(s.cfg.BuyerLimit)
	left := l.limit - bought
	if n > left {
		return l, l.refusal()
	}
	if left < int64(max) {
		l.n, l.buyer = int(left), true
	}
	return l, nil
}

// checkBuyer refuses a reservation of n tickets by visitor that would pass
// the buyer limit given the tickets already bought (Decide checks again).
func (s *Service) checkBuyer(ctx context.Context, scheduleID int64, visitor string, n int64) error {
	_, err := s.buyerHoldLimit(ctx, scheduleID, visitor, n, s.cfg.SeatLimit)
	return err
}
