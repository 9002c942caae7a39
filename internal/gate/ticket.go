package gate

import (
	"usher/internal/queue"
	"usher/internal/token"
)

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
// admitted, how its forecast compared with the wait (queue.Queue.Admitted).
// A ticket without a forecast records nothing.
func ObserveWait(q *queue.Queue, t token.Ticket) {
	q.Admitted(t.Room, t.Visitor, t.Seq, t.IssuedAt, queue.Forecast{ETA: t.Wait, Low: t.WaitLow, High: t.WaitHigh})
}
