package httpapi

import (
	"sync"

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
var ErrTooManyStreams = fault.New(fault.RateLimited, "too many open event streams; poll GET /api/v1/reservations/{id} instead")

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
