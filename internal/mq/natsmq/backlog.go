package natsmq

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"usher/internal/mq"
)

// Backlog implements mq.Broker with two calls to the server: the stream's
// state (its messages are exactly the undecided reservations, work-queue
// retention, and the first one's time is the oldest) and the consumer's
// (delivered and not acknowledged). Before any Consume created the
// consumer, every message is waiting.
func (b *Broker) Backlog(ctx context.Context) (mq.Backlog, error) {
	if err := b.ready(); err != nil {
		return mq.Backlog{}, b.unavailable("backlog", err)
	}
	ctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	defer cancel()
	s, err := b.js.Stream(ctx, b.stream)
	if err != nil {
		return mq.Backlog{}, b.unavailable("backlog: stream "+b.stream, err)
	}
	st := s.CachedInfo().State
	var bl mq.Backlog
	if st.Msgs > 0 {
		bl.Oldest = st.FirstTime
	}
	c, err := s.Consumer(ctx, consumerName)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		bl.Waiting = int64(st.Msgs)
		return bl, nil
	case err != nil:
		return mq.Backlog{}, b.unavailable("backlog: consumer "+consumerName, err)
	}
	ci := c.CachedInfo()
	bl.Waiting, bl.InFlight = int64(ci.NumPending), int64(ci.NumAckPending)
	if bl.Waiting+bl.InFlight == 0 {
		bl.Oldest = time.Time{} // acknowledged between the two reads
	}
	return bl, nil
}
