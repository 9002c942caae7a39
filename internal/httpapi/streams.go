package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"usher/internal/fault"
)

// Stream limits: an open event stream holds a connection and two goroutines
// for as long as the client keeps it, so each visitor may hold a few, and
// one instance holds a bounded number in all.
const (
	// StreamsPerVisitor is the most event streams one visitor holds open.
	StreamsPerVisitor = 4
	// StreamsTotal is the most event streams one instance holds open.
	StreamsTotal = 10_000
)

// ErrTooManyStreams answers a stream over either limit.
var ErrTooManyStreams = fault.New(fault.RateLimited, "too many open event streams; poll instead")

// keepAliveEvery is how often an idle stream sends a comment line, so that
// proxies do not close it.
const keepAliveEvery = 15 * time.Second

// sse is one server-sent event: its type, its id (empty: none) and data
// (one line of JSON).
type sse struct {
	event, id string
	data      []byte
}

// serveEvents answers with the values from values, each made an event by
// toEvent, as a server-sent event stream until values closes or ctx (the
// request's, or shorter) ends. The stream outlives the server's
// WriteTimeout; a comment line comes every keepAliveEvery.
func serveEvents[T any](ctx context.Context, w http.ResponseWriter, values <-chan T, toEvent func(T) sse) {
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc.Flush()
	keepAlive := time.NewTicker(keepAliveEvery)
	defer keepAlive.Stop()
	for {
		select {
		case v, ok := <-values:
			if !ok {
				return
			}
			ev := toEvent(v)
			if ev.id != "" {
				fmt.Fprintf(w, "id: %s\n", ev.id)
			}
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.event, ev.data)
		case <-keepAlive.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		case <-ctx.Done():
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// streams counts the open event streams of one server.
type streams struct {
	mu              sync.Mutex
	total           int
	byVisitor       map[string]int
	perVisitor, max int
}

func newStreams(perVisitor, total int) *streams {
	return &streams{byVisitor: make(map[string]int), perVisitor: perVisitor, max: total}
}

// acquire counts a stream for visitor, or refuses it with ErrTooManyStreams.
// release must be called once the stream ends.
func (s *streams) acquire(visitor string) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.byVisitor[visitor]
	if n >= s.perVisitor {
		return nil, ErrTooManyStreams.Detail("at most %d event streams per visitor", s.perVisitor)
	}
	if s.total >= s.max {
		return nil, ErrTooManyStreams.Detail("this server holds the most event streams it allows")
	}
	s.byVisitor[visitor] = n + 1
	s.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.total--
			if s.byVisitor[visitor]--; s.byVisitor[visitor] == 0 {
				delete(s.byVisitor, visitor)
			}
		})
	}, nil
}
