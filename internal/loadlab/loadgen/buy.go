package loadgen

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// buyAttempts is how many seats an admitted visitor tries to hold before it
// gives up: each attempt reads the seat map and holds one AVAILABLE seat
// chosen at random; a seat someone else held first (409) costs an attempt.
const buyAttempts = 3

// buy is what an admitted visitor does with Config.Buy set: it reads the
// schedule's seat map through usher's booking API, holds one AVAILABLE
// seat and reserves it. It returns the calls it made. A visitor who finds
// no AVAILABLE seat, or loses buyAttempts races, found nothing to buy
// (counted); one whose call fails otherwise is counted among the origin
// calls' errors only.
func (r *runner) buy(pass string) (calls int) {
	base := fmt.Sprintf("%s/api/v1/schedules/%d", r.cfg.Usher, r.cfg.Buy)
	for range buyAttempts {
		var m struct {
			Seats []struct {
				ID     int64  `json:"seat_id"`
				Status string `json:"status"`
			} `json:"seats"`
		}
		res := r.bookingCall(http.MethodGet, base+"/seats", pass, nil, func(b []byte) bool { return json.Unmarshal(b, &m) == nil })
		calls++
		if !res.ok {
			return calls
		}
		var free []int64
		for _, s := range m.Seats {
			if s.Status == "AVAILABLE" {
				free = append(free, s.ID)
			}
		}
		if len(free) == 0 {
			r.foundNothing.Add(1)
			return calls
		}
		seat := free[rand.IntN(len(free))]
		res = r.bookingCall(http.MethodPost, base+"/holds", pass, fmt.Appendf(nil, `{"seat_ids":[%d]}`, seat), nil)
		calls++
		if res.status == http.StatusConflict {
			continue // someone held it first, or the map was stale
		}
		if !res.ok {
			return calls
		}
		res = r.bookingCall(http.MethodPost, r.cfg.Usher+"/api/v1/reservations", pass,
			fmt.Appendf(nil, `{"schedule_id":%d,"seat_ids":[%d],"idempotency_key":%q}`, r.cfg.Buy, seat, newKey()), nil)
		calls++
		if res.status == http.StatusAccepted {
			r.bought.Add(1)
		}
		return calls
	}
	r.foundNothing.Add(1)
	return calls
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
