package simorigin

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// pool is a FIFO semaphore whose size can change while it is held (a
// phase of the run resizes it): a smaller pool lets in nobody new until
// enough holders left, a larger one lets the first waiters in at once.
type pool struct {
	mu      sync.Mutex
	size    int
	busy    int
	waiters list.List // of chan struct{}, closed when granted
	waiting *atomic.Int64
}

func newPool(size int, waiting *atomic.Int64) *pool {
	return &pool{size: size, waiting: waiting}
}

// acquire takes a slot, waiting in FIFO order until deadline or the
// request ends.
func (p *pool) acquire(ctx context.Context, deadline <-chan time.Time) (waited bool, err error) {
	p.mu.Lock()
	if p.busy < p.size && p.waiters.Len() == 0 {
		p.busy++
		p.mu.Unlock()
		return false, nil
	}
	granted := make(chan struct{})
	e := p.waiters.PushBack(granted)
	p.mu.Unlock()
	p.waiting.Add(1)
	defer p.waiting.Add(-1)
	select {
	case <-granted:
		return true, nil
	case <-deadline:
		err = errTimeout
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.mu.Lock()
	select {
	case <-granted: // granted meanwhile: hand the slot on
		p.mu.Unlock()
		p.release()
	default:
		p.waiters.Remove(e)
		p.mu.Unlock()
	}
	return true, err
}

// release returns a slot.
func (p *pool) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.busy--
	p.grant()
}

// resize sets the pool's size.
func (p *pool) resize(size int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.size = size
	p.grant()
}

// grant lets waiters in while slots are free; p.mu is held.
func (p *pool) grant() {
	for p.busy < p.size && p.waiters.Len() > 0 {
		close(p.waiters.Remove(p.waiters.Front()).(chan struct{}))
		p.busy++
	}
}
