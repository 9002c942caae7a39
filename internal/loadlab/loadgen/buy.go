package loadgen

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"usher/internal/wire"
)

// buyAttempts is how many seats an admitted visitor tries to hold before it
// gives up: each attempt reads the seat map's status and holds one
// available seat chosen at random; a seat someone else held first (409)
// costs an attempt.
const buyAttempts = 3

// buy is what an admitted visitor does with Config.Buy set: it reads the
// schedule's seat map through usher's booking API (the compact status,
// and the layout the first time a run meets its version), holds one
// available seat and reserves it. It returns the calls it made and
// whether it bought. A visitor who finds no available seat, or loses
// buyAttempts races, found nothing to buy (counted); one whose call fails
// otherwise is counted among the origin calls' errors only.
func (r *runner) buy(pass string) (calls int, bought bool) {
	base := fmt.Sprintf("%s/api/v1/schedules/%d", r.cfg.Usher, r.cfg.Buy)
	for range buyAttempts {
		var st wire.SeatMapStatus
		res := r.bookingCall(http.MethodGet, base+"/seats/status", pass, nil, func(b []byte) bool { return json.Unmarshal(b, &st) == nil })
		calls++
		if !res.ok {
			return calls, false
		}
		ids := r.layouts.ids(st.Layout)
		if ids == nil {
			var l wire.SeatMapLayout
			res = r.bookingCall(http.MethodGet, base+"/seats/layout?version="+url.QueryEscape(st.Layout), pass, nil,
				func(b []byte) bool { return json.Unmarshal(b, &l) == nil })
			calls++
			if !res.ok {
				return calls, false
			}
			ids = r.layouts.put(l)
		}
		states, err := wire.UnpackSeatStates(st.Status, len(ids))
		if err != nil || st.Layout == "" {
			r.origin.errs.add("bad answer")
			return calls, false
		}
		var free []int64
		for i, s := range states {
			if s == wire.SeatAvailable {
				free = append(free, ids[i])
			}
		}
		if len(free) == 0 {
			r.foundNothing.Add(1)
			return calls, false
		}
		seat := free[rand.IntN(len(free))]
		res = r.bookingCall(http.MethodPost, base+"/holds", pass, fmt.Appendf(nil, `{"seat_ids":[%d]}`, seat), nil)
		calls++
		if res.status == http.StatusConflict {
			continue // someone held it first, or the status was stale
		}
		if !res.ok {
			return calls, false
		}
		res = r.bookingCall(http.MethodPost, r.cfg.Usher+"/api/v1/reservations", pass,
			fmt.Appendf(nil, `{"schedule_id":%d,"seat_ids":[%d],"idempotency_key":%q}`, r.cfg.Buy, seat, newKey()), nil)
		calls++
		if res.status == http.StatusAccepted {
			r.bought.Add(1)
			return calls, true
		}
		return calls, false
	}
	r.foundNothing.Add(1)
	return calls, false
}

// layouts are the seat-map layouts a run has read: each version's seat
// ids in layout order.
type layouts struct {
	mu sync.Mutex
	m  map[string][]int64
}

func (l *layouts) ids(version string) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[version]
}

func (l *layouts) put(layout wire.SeatMapLayout) []int64 {
	ids := make([]int64, 0, layout.Seats)
	for _, run := range layout.Runs {
		for i := range run.Count {
			ids = append(ids, run.SeatID+int64(i))
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string][]int64{}
	}
	l.m[layout.Version] = ids
	return ids
}

// bookingCall is an origin call to usher's booking API with the pass; a
// 409 counts as a success (a seat taken, as seed 002's checks count it).
func (r *runner) bookingCall(method, url, pass string, body []byte, check func([]byte) bool) result {
	req, err := http.NewRequest(method, url, bodyReader(body))
	if err != nil {
		panic(err) // validated
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+pass)
	return r.call(r.origin, req, time.Now(), check, []int{http.StatusConflict})
}

// newKey is an idempotency key (keys are per visitor, and every visit is
// a new visitor).
func newKey() string { return strconv.FormatUint(rand.Uint64(), 36) }
