package gate

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"usher/internal/queue"
	"usher/internal/token"
	"usher/internal/wire"
)

// IssueTicket signs the ticket for visitor's entry e in room (TicketFor)
// and returns it with the cookie that carries it, named name and scoped to
// path: the API and the proxy each name and scope it their own way.
func IssueTicket(q *queue.Queue, keys *token.Keyring, room, visitor string, e queue.Entry, name, path string, secure bool) (string, *http.Cookie) {
	ticket := keys.SignTicket(TicketFor(q, room, visitor, e))
	return ticket, &http.Cookie{
		Name: name, Value: ticket, Path: path,
		MaxAge: int(token.TicketTTL.Seconds()), HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode,
	}
}

// IssuePass returns a pass for visitor's slot in room, which ends at
// expires, with its expiry (whole seconds, as a pass's exp is) and the
// cookie that carries it: the one signed for an earlier answer while it
// has half of its life left (token.Keyring.ReusePass), else a new one.
func IssuePass(keys *token.Keyring, room, visitor string, expires time.Time, secure bool) (pass string, exp time.Time, cookie *http.Cookie, err error) {
	pass, exp, err = keys.ReusePass(token.Pass{Room: room, Visitor: visitor, ExpiresAt: expires.Truncate(time.Second).UTC()})
	if err != nil {
		return "", time.Time{}, nil, err
	}
	return pass, exp, PassCookieFor(pass, exp, secure), nil
}

// TicketFor is the ticket for visitor's entry e in room, issued at the
// queue's clock. A place in line carries the wait forecast for its
// position from this instance's view, so that when the visitor is found
// admitted the forecast can be measured against the wait (ObserveWait);
// the API and the proxy issue tickets through it.
func TicketFor(q *queue.Queue, room, visitor string, e queue.Entry) token.Ticket {
	t := token.Ticket{Room: room, Visitor: visitor, Seq: queue.TicketSeq(e), IssuedAt: q.Now()}
	if e.Status == queue.Waiting && e.Position > 0 {
		if v, ok := q.View(room); ok {
			f := v.Forecast(e.Position)
			t.Wait, t.WaitLow, t.WaitHigh = f.ETA, f.Low, f.High
		}
	}
	return t
}

// ObserveWait records, for the ticket of a visitor a poll just found
// admitted, its time in queue for the analytics (queue.Queue.Waited) and
// how its forecast compared with the wait (queue.Queue.Admitted; a ticket
// without a forecast records nothing there).
func ObserveWait(q *queue.Queue, t token.Ticket) {
	q.Waited(t.Room, t.Visitor, t.Seq, t.IssuedAt, t.Wait)
	q.Admitted(t.Room, t.Visitor, t.Seq, t.IssuedAt, queue.Forecast{ETA: t.Wait, Low: t.WaitLow, High: t.WaitHigh})
}

// Poll answers a visitor's status poll r on ticket t in room, as both
// edges do: its entry (Queue.Status), held until its turn when the poll
// asks (wire.WaitHeader, Queue.AwaitTurn), never further back than the
// place the client showed (wire.ShownHeader, Queue.HoldPlace); for a
// visitor found admitted, its wait is observed (ObserveWait). A malformed
// header is a queue.ErrInvalid.
func Poll(ctx context.Context, q *queue.Queue, r *http.Request, room string, t token.Ticket) (queue.Entry, error) {
	shown, err := Shown(r)
	if err != nil {
		return queue.Entry{}, err
	}
	wait, err := Wait(r)
	if err != nil {
		return queue.Entry{}, err
	}
	e, _, err := q.Status(ctx, room, t.Visitor, t.Seq, t.IssuedAt)
	if err == nil {
		e, err = q.AwaitTurn(ctx, room, t.Visitor, t.Seq, e, wait)
	}
	if err != nil {
		return queue.Entry{}, err
	}
	e = q.HoldPlace(room, e, t.Seq, shown)
	if e.Status == queue.Active {
		ObserveWait(q, t)
	}
	return e, nil
}

// Shown is the position the client of r last showed for its ticket, from
// its wire.ShownHeader: 0 without one, and a queue.ErrInvalid for a value
// that is not a decimal number of at most 12 digits.
func Shown(r *http.Request) (int64, error) {
	return wholeHeader(r, wire.ShownHeader, "the position shown, a whole number", math.MaxInt64)
}

// Wait returns how long a status poll asks to be held (wire.WaitHeader):
// 0 without the header; ErrInvalid unless it is a whole number of seconds
// from 0 to queue.MaxTurnWait.
func Wait(r *http.Request) (time.Duration, error) {
	most := int64(queue.MaxTurnWait / time.Second)
	n, err := wholeHeader(r, wire.WaitHeader, fmt.Sprintf("whole seconds from 0 to %d", most), most)
	return time.Duration(n) * time.Second, err
}

// wholeHeader reads header name as a whole number from 0 to most.
func wholeHeader(r *http.Request, name, want string, most int64) (int64, error) {
	v := r.Header.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if len(v) > 12 || strings.Trim(v, "0123456789") != "" || err != nil || n > most {
		return 0, queue.ErrInvalid.Detail("%s: want %s", name, want)
	}
	return n, nil
}
