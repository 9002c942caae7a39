package loadgen

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"usher/internal/hist"
)

// callStats counts one kind of call (origin or queue).
type callStats struct {
	requests, successes atomic.Int64
	errs                counter
	lat                 *hist.Recorder
}

func newCallStats() *callStats { return &callStats{lat: hist.NewRecorder()} }

// counter counts by kind.
type counter struct {
	mu sync.Mutex
	m  map[string]int64
}

func (c *counter) add(kind string) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]int64{}
	}
	c.m[kind]++
	c.mu.Unlock()
}

func (c *counter) snapshot() (map[string]int64, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.m))
	var total int64
	for k, v := range c.m {
		out[k] = v
		total += v
	}
	return out, total
}

// result is what one call returned.
type result struct {
	status int
	header http.Header
	recv   time.Time
	// ok: a success; counted: it is in the statistics (false when the run's
	// end cut it off); retry: a failure worth retrying (transport, 5xx).
	ok, counted, retry bool
}

// call sends req and measures it from due, the time it was meant to go:
// a late sender (a scheduler behind, a starved goroutine) shows up as latency,
// so the open model has no coordinated omission. check, if set, reads the
// body of a successful answer and may turn it into a "bad answer" error.
func (r *runner) call(cs *callStats, req *http.Request, due time.Time, check func([]byte) bool, expect []int) result {
	status, header, body, err := r.conns.do(req, check != nil)
	recv := time.Now()
	if err != nil {
		if r.hard.Err() != nil {
			r.interrupted.Add(1)
			return result{recv: recv}
		}
		cs.requests.Add(1)
		cs.errs.add(classify(err))
		return result{recv: recv, counted: true, retry: true}
	}
	cs.requests.Add(1)
	out := result{status: status, header: header, recv: recv, counted: true}
	if status/100 == 2 || slices.Contains(expect, status) {
		if check != nil && !check(body) {
			cs.errs.add("bad answer")
			return out
		}
		cs.successes.Add(1)
		cs.lat.Record(recv.Sub(due))
		out.ok = true
		return out
	}
	cs.errs.add("http " + strconv.Itoa(status))
	out.retry = status >= 500 || status == http.StatusTooManyRequests
	return out
}

// classify names a transport error.
func classify(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return "connect"
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "connection closed"
	}
	return "transport"
}
