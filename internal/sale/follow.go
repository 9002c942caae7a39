package sale

import (
	"context"
	"sync"
	"time"
)

// Following a schedule's seat status (an event stream at the edge). Each
// instance runs one watcher per followed schedule, started by its first
// follower and stopped with its last: it reads the seat map snapshot (the
// one the pollers read, so followers add no query) as soon as it is due
// for a rebuild and, when the status changed, makes the change event once
// and wakes every follower. A follower that fell behind (a slow reader)
// gets one event from its own version instead, made from the statuses kept
// for ?since=. A change shows within 1.2 SnapshotEvery and one rebuild of
// being made.

// minFollowEvery bounds how often a watcher reads the snapshot, whatever
// SnapshotEvery says.
const minFollowEvery = 10 * time.Millisecond

// followTimeout bounds one read of the snapshot by a watcher.
const followTimeout = 10 * time.Second

// watcher follows one schedule's status for its followers. Membership
// (followers, and the watcher's place in Service.watchers) is guarded by
// Service.mu; the state by mu, written by the watch loop alone.
type watcher struct {
	followers map[chan struct{}]struct{}
	stop      context.CancelFunc

	mu sync.Mutex
	// cur is the newest snapshot seen; step the event from the status
	// named stepSince to cur's, made once for every follower.
	cur       *SeatMap
	step      *Encoded
	stepSince string
}

// FollowSeatMap follows the schedule's seat status: the first event is the
// status since the version since (SeatMapChanges), each next one the change
// since the event before it (Since is the previous event's Version), sent
// when the status changes. The channel closes when ctx ends.
func (s *Service) FollowSeatMap(ctx context.Context, scheduleID int64, since string) (<-chan *Encoded, error) {
	m, err := s.SeatMap(ctx, scheduleID)
	if err != nil {
		return nil, err
	}
	first := m.changesSince(since)
	w, wake := s.follow(scheduleID, m)
	out := make(chan *Encoded)
	go func() {
		defer close(out)
		defer s.unfollow(scheduleID, w, wake)
		ev := newEncoded(first.Version, first)
		for {
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
			var next *Encoded
			for next == nil {
				select {
				case <-wake:
					next = w.next(ev.Version)
				case <-ctx.Done():
					return
				}
			}
			ev = next
		}
	}()
	return out, nil
}

// follow adds a follower of the schedule, starting its watcher (from m,
// the follower's snapshot) if it has none. A follower whose snapshot is
// newer than the watcher's waits for the watcher to read it: then its own
// version is current and it is sent nothing.
func (s *Service) follow(scheduleID int64, m *SeatMap) (*watcher, chan struct{}) {
	wake := make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.watchers[scheduleID]
	if w == nil {
		ctx, stop := context.WithCancel(context.Background())
		w = &watcher{followers: map[chan struct{}]struct{}{}, stop: stop, cur: m}
		s.watchers[scheduleID] = w
		go s.watch(ctx, scheduleID, w)
	}
	w.followers[wake] = struct{}{}
	return w, wake
}

// unfollow removes a follower; the last one stops the watcher.
func (s *Service) unfollow(scheduleID int64, w *watcher, wake chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(w.followers, wake)
	if len(w.followers) == 0 {
		w.stop()
		delete(s.watchers, scheduleID)
	}
}

// watchTicks is how many times per SnapshotEvery a watcher asks for the
// snapshot: a rebuild comes at most SnapshotEvery/watchTicks after it is
// due, so a change shows within SnapshotEvery × (1 + 1/watchTicks) and one
// rebuild. Asking between rebuilds costs a lock.
const watchTicks = 5

// watch reads the snapshot until ctx ends, and wakes the followers when
// its status changed.
func (s *Service) watch(ctx context.Context, scheduleID int64, w *watcher) {
	t := time.NewTicker(max(s.cfg.SnapshotEvery/watchTicks, minFollowEvery))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, followTimeout)
		m, err := s.SeatMap(rctx, scheduleID)
		cancel()
		if err != nil || !w.advance(m) {
			continue // a failed read keeps the last status; SeatMap logs it
		}
		s.mu.Lock()
		for wake := range w.followers {
			select {
			case wake <- struct{}{}:
			default: // already woken
			}
		}
		s.mu.Unlock()
	}
}

// advance makes m the watcher's snapshot and its change event when m is
// newer and its status differs; it reports whether it did. Only the watch
// loop calls it.
func (w *watcher) advance(m *SeatMap) bool {
	st := m.status()
	w.mu.Lock()
	prev := w.cur
	w.mu.Unlock()
	if !m.BuiltAt.After(prev.BuiltAt) {
		return false
	}
	was := prev.status().Version
	if st.Version == was {
		return false
	}
	ch := m.changesSince(was)
	step := newEncoded(ch.Version, ch)
	w.mu.Lock()
	w.cur, w.step, w.stepSince = m, step, was
	w.mu.Unlock()
	return true
}

// next returns the event that takes a follower at version to the watcher's
// status: the shared step when the follower is one behind, one of its own
// otherwise; nil when it is current.
func (w *watcher) next(version string) *Encoded {
	w.mu.Lock()
	cur, step, since := w.cur, w.step, w.stepSince
	w.mu.Unlock()
	switch {
	case cur.status().Version == version:
		return nil
	case step != nil && since == version:
		return step
	}
	ch := cur.changesSince(version)
	return newEncoded(ch.Version, ch)
}
