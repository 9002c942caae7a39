package redisqueue

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// lineage notices when the Redis behind a store may have lost acknowledged
// writes: its replication ID changed, as it does when Sentinel promotes a
// replica or a primary restarts without its data. The store then reports
// the time it noticed as Stats.Since, so that tickets issued before get
// exact answers (queue.Queue.Status): a visitor whose place was lost learns
// it at the next poll, not when the lost place would have reached the
// front. It checks at most once a second. A Cluster (whose nodes each
// have their own ID) is not followed: its Since stays zero.
type lineage struct {
	mu      sync.Mutex
	replID  string
	since   time.Time
	checked time.Time
}

// lineageEvery is how often the replication ID is read.
const lineageEvery = time.Second

// since returns when the store last noticed a new replication ID (zero:
// never), reading it anew when it is due at now.
func (s *Store) since(ctx context.Context, now time.Time) time.Time {
	l := &s.lineage
	l.mu.Lock()
	due := s.c.Mode() != rueidis.ClientModeCluster && (l.checked.IsZero() || now.Sub(l.checked) >= lineageEvery)
	if due {
		l.checked = now
	}
	since := l.since
	l.mu.Unlock()
	if !due {
		return since
	}
	text, err := s.c.Do(ctx, s.c.B().Info().Section("replication").Build()).ToString()
	if err != nil {
		return since // the next due read tries again
	}
	var id string
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "master_replid:"); ok {
			id = v
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if id != "" && l.replID != "" && id != l.replID {
		l.since = now
	}
	if id != "" {
		l.replID = id
	}
	return l.since
}
