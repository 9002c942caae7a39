package redisshard

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"
)

// AdmitResult is what one admission step did.
type AdmitResult struct {
	// Admitted lists the visitors made active, in admission order: the
	// merge order (score, then shard) under Counter and Timestamp;
	// round-robin over the shards under Estimate.
	Admitted []string
	// Reserved is the slots and tokens the step reserved (at most the
	// bucket's Batch + 1, and the free slots).
	Reserved int64
	// Returned counts visitors taken from a shard that the commit did not
	// admit (another step's commit took the slots first) and put back in
	// line; Dropped those it found active already.
	Returned, Dropped int64
	// Turns are what a CountersOnly room's step released (Admitted is
	// empty there: the store does not know who holds a turn).
	Turns []Turns
}

// queued is a visitor taken from a shard, with its score.
type queued struct {
	visitor string
	score   string
	value   float64
	shard   int
}

// take is what a step takes from one shard: up to n, scores up to max.
type take struct {
	n   int64
	max string
}

// Admit runs one admission step (docs/architecture.md#redis-hot-room-sharding): reserve on the
// home shard, peek and pop on the line shards, commit on the home shard,
// acknowledge on the line shards. Several schedulers may run it at once
// for the same room: the cap and the rate hold for the room as a whole.
//
// An error before the commit leaves what the step took to its lease
// (taken visitors come back in line after it); the step still commits
// what the other shards gave, or nobody, which gives back the unused part
// of its reservation (an error from the reserve leaves that to the lease:
// the room admits less meanwhile). The commit and the acknowledgements
// run to the end whatever becomes of ctx (finish). An error from an
// acknowledgement comes with the result: the visitors in it are admitted,
// and what was to be put back comes back after the lease.
func (s *Store) Admit(ctx context.Context, room string, now time.Time) (AdmitResult, error) {
	l, err := s.layoutOf(ctx, "admit", room)
	if err != nil {
		return AdmitResult{}, err
	}
	if l.strategy == CountersOnly {
		return s.releaseTurns(ctx, room, l, now)
	}
	st, err := s.take(ctx, room, l, now)
	if st.res.Reserved == 0 {
		return st.res, err
	}
	// After a failed peek (err) the commit is of nobody: it gives the
	// reservation back (its tokens and slots) instead of leaving it to its
	// lease.
	res, ferr := s.finish(ctx, room, l, st, now)
	if err != nil {
		return res, err
	}
	return res, ferr
}

// finishTimeout bounds each of a step's last two phases (finish).
const finishTimeout = time.Second

// finish runs the step's commit and acknowledgements. They run to the end
// whatever happens to the caller's context (a request's deadline, a
// scheduler stopping), each within finishTimeout (or the lease, if
// shorter): a commit without its acknowledgements leaves the admitted in
// their shards' records, seen as being admitted, until the lease ends. A
// store that hangs makes Admit answer up to twice finishTimeout after the
// caller's deadline.
func (s *Store) finish(ctx context.Context, room string, l layout, st *step, now time.Time) (AdmitResult, error) {
	ctx = context.WithoutCancel(ctx)
	d := min(finishTimeout, s.lease)
	cctx, cancel := context.WithTimeout(ctx, d)
	err := s.commitStep(cctx, room, st, now)
	cancel()
	if err != nil {
		return st.res, err
	}
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return st.res, s.ackStep(actx, room, l, st, now)
}

// step is an admission step between its phases (Admit).
type step struct {
	id     string
	res    AdmitResult
	popped [][]queued // by shard
	errs   []error    // by shard: a failed pop or acknowledgement
	order  []queued   // admission order
	flags  []int64    // commit.lua's reply: expiry, then a flag per visitor
	held   []int64    // and the end of the slot of each visitor it dropped (flag 0)
}

// take runs a step's reserve, peek and pops. With nothing reserved, the
// step ends there (res.Reserved 0).
func (s *Store) take(ctx context.Context, room string, l layout, now time.Time) (*step, error) {
	st := &step{id: stepID()}
	r, err := s.exec(ctx, s.reserve, s.homeKeys(room), []string{ms(now), st.id, strconv.FormatInt(s.lease.Milliseconds(), 10)}).AsIntSlice()
	if err != nil || len(r) < 1 {
		return st, unavailable("admit: reserve", room, fmt.Errorf("reply %v: %v", r, err))
	}
	switch r[0] {
	case -1:
		return st, s.notFound("admit", room)
	case -2:
		return st, errStaleLimits
	}
	st.res.Reserved = r[0]
	if r[0] == 0 {
		return st, nil
	}
	turn := int(r[1])

	plan, err := s.plan(ctx, room, l, r[0], turn, now)
	if err != nil {
		return st, err // Admit commits nobody: the reservation goes back
	}
	leaseEnd := strconv.FormatInt(now.Add(s.lease).UnixMilli(), 10)
	st.popped = make([][]queued, l.shards)
	st.errs = make([]error, l.shards)
	each(l.shards, func(i int) {
		if plan[i].n == 0 {
			return
		}
		k := l.keys[i]
		arr, err := s.exec(ctx, s.pop, pick(k, kWait, kMeta, kLeases, kTaken, kGuard),
			[]string{ms(now), st.id, leaseEnd, strconv.FormatInt(plan[i].n, 10), plan[i].max}).AsStrSlice()
		if err != nil {
			st.errs[i] = err
			return
		}
		st.popped[i], st.errs[i] = pairs(arr, i)
	})
	// A shard whose pop failed may still have taken its visitors: they
	// come back after the lease. The others go on to the commit.
	st.order = admissionOrder(l, st.popped, turn)
	return st, nil
}

// commitStep runs commit.lua for what the step took and sorts its
// answer into st.res.
func (s *Store) commitStep(ctx context.Context, room string, st *step, now time.Time) error {
	args := make([]string, 0, 2+len(st.order))
	args = append(args, ms(now), st.id)
	for _, q := range st.order {
		args = append(args, q.visitor)
	}
	flags, err := s.exec(ctx, s.commit, s.homeKeys(room), args).AsIntSlice()
	if err == nil && len(flags) > 0 && flags[0] < 0 {
		return s.notFound("admit", room)
	}
	if err != nil || len(flags) < 1+len(st.order) {
		return unavailable("admit: commit", room, fmt.Errorf("reply of %d for %d visitors: %v", len(flags), len(st.order), err))
	}
	st.flags, st.held = flags[:1+len(st.order)], flags[1+len(st.order):]
	for j, q := range st.order {
		switch flags[1+j] {
		case 1:
			st.res.Admitted = append(st.res.Admitted, q.visitor)
		case 0:
			st.res.Dropped++
		default:
			st.res.Returned++
		}
	}
	if int64(len(st.held)) != st.res.Dropped {
		return unavailable("admit: commit", room, fmt.Errorf("%d expiries for %d dropped", len(st.held), st.res.Dropped))
	}
	return nil
}

// ackStep runs ack.lua on each shard the step took from: it puts back
// those the commit did not admit, and notes in the shard's copy those it
// admitted and those it found active already (a duplicate left by a step
// whose ack was lost), each with the end of its slot.
func (s *Store) ackStep(ctx context.Context, room string, l layout, st *step, now time.Time) error {
	back := make([][]string, l.shards)
	admitted := make([][]string, l.shards)
	exp := strconv.FormatInt(st.flags[0], 10)
	dropped := 0
	for j, q := range st.order {
		switch st.flags[1+j] {
		case 1:
			admitted[q.shard] = append(admitted[q.shard], exp, q.visitor)
		case 0:
			admitted[q.shard] = append(admitted[q.shard], strconv.FormatInt(st.held[dropped], 10), q.visitor)
			dropped++
		case 2:
			back[q.shard] = append(back[q.shard], q.score, q.visitor)
		}
	}
	each(l.shards, func(i int) {
		if i >= len(st.popped) || len(st.popped[i]) == 0 {
			return
		}
		k := l.keys[i]
		args := append([]string{st.id, ms(now), strconv.Itoa(len(back[i]) / 2)}, back[i]...)
		args = append(args, admitted[i]...)
		if err := s.exec(ctx, s.ack, k, args).Error(); err != nil && st.errs[i] == nil {
			st.errs[i] = err
		}
	})
	if err := errors.Join(st.errs...); err != nil {
		return unavailable("admit: shard", room, err)
	}
	return nil
}

// plan decides what the step takes from each shard. Estimate: n split
// round-robin, the remainder to the shards from turn on. Counter and
// Timestamp with several shards: the n lowest (score, shard) among the
// shards' heads (a K-way merge of what peek.lua reads), with the highest
// score taken from each shard as its bound, so that a visitor who
// entered after the peek is not taken in its place.
func (s *Store) plan(ctx context.Context, room string, l layout, n int64, turn int, now time.Time) ([]take, error) {
	plan := make([]take, l.shards)
	k := int64(l.shards)
	if l.strategy == Estimate || l.shards == 1 {
		for i := range plan {
			plan[i] = take{n: n / k, max: "+inf"}
			if int64((i-turn%l.shards+l.shards)%l.shards) < n%k {
				plan[i].n++
			}
		}
		return plan, nil
	}
	heads := make([][]queued, l.shards)
	errs := make([]error, l.shards)
	each(l.shards, func(i int) {
		arr, err := s.exec(ctx, s.peek, pick(l.keys[i], kWait, kMeta, kLeases, kTaken, kGuard),
			[]string{ms(now), strconv.FormatInt(n, 10)}).AsStrSlice()
		if err != nil {
			errs[i] = err
			return
		}
		heads[i], errs[i] = pairs(arr, i)
	})
	if err := errors.Join(errs...); err != nil {
		return nil, unavailable("admit: peek", room, err)
	}
	all := slices.Concat(heads...)
	slices.SortFunc(all, byScore)
	for _, q := range all[:min(int64(len(all)), n)] {
		plan[q.shard].n++
		plan[q.shard].max = q.score
	}
	return plan, nil
}

// admissionOrder lists what the shards gave: by (score, shard) under
// Counter and Timestamp, round-robin from the shard turn points at under
// Estimate.
func admissionOrder(l layout, popped [][]queued, turn int) []queued {
	if l.strategy != Estimate {
		all := slices.Concat(popped...)
		slices.SortFunc(all, byScore)
		return all
	}
	var out []queued
	for round := 0; ; round++ {
		more := false
		for j := range l.shards {
			i := (turn + j) % l.shards
			if round < len(popped[i]) {
				out = append(out, popped[i][round])
				more = true
			}
		}
		if !more {
			return out
		}
	}
}

func byScore(a, b queued) int {
	return cmp.Or(cmp.Compare(a.value, b.value), cmp.Compare(a.shard, b.shard))
}

// pairs reads a visitor, score, … reply.
func pairs(arr []string, shard int) ([]queued, error) {
	out := make([]queued, 0, len(arr)/2)
	for i := 0; i+1 < len(arr); i += 2 {
		v, err := strconv.ParseFloat(arr[i+1], 64)
		if err != nil {
			return nil, fmt.Errorf("score %q: %w", arr[i+1], err)
		}
		out = append(out, queued{visitor: arr[i], score: arr[i+1], value: v, shard: shard})
	}
	return out, nil
}

// each runs f for 0…n-1 concurrently and waits: the calls to different
// shards of one phase go out together.
func each(n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

// stepID names one admission step in the reservation and the shards'
// records.
func stepID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}
