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

// buyAttempts is how many holds an admitted visitor tries before it gives
// up: a seat someone else held first (409) costs an attempt.
const buyAttempts = 3

// Buy modes: how admitted visitors choose their seat (Config.BuyMode).
const (
	// BuyRandom holds an available seat chosen at random from the whole
	// status (the default).
	BuyRandom = "random"
	// BuyStage holds one of the nearStage front-most available seats (in
	// layout order): everyone wants the stage.
	BuyStage = "stage"
	// BuyBest asks for the best available seat (POST holds with a count):
	// the server picks it, without the seat map.
	BuyBest = "best"
	// BuyMixed makes each visitor choose BuyStage or BuyBest at random.
	BuyMixed = "mixed"
)

// BuyModes lists the modes.
var BuyModes = []string{BuyRandom, BuyStage, BuyBest, BuyMixed}

// nearStage is how many front-most available seats a BuyStage visitor
// chooses among.
const nearStage = 100

// A reservation's status is polled first confirmFirst after it was
// accepted, then twice as long after each poll, at most confirmMax, for
// confirmFor in all: a buy still pending then counts as unconfirmed. A
// crowd polling fast would weigh on the instance as much as its buying.
const (
	confirmFirst = 250 * time.Millisecond
	confirmMax   = 2 * time.Second
	confirmFor   = time.Minute
)

// buy is what an admitted visitor does with Config.Buy set: it holds a
// seat of the schedule through usher's booking API as Config.BuyMode says
// (reading the compact status, and the layout the first time a run meets
// its version, unless the server picks), reserves it and polls the
// reservation until it is decided. It returns the calls it made and
// whether it bought: a reservation confirmed. A visitor who finds no
// available seat, or loses buyAttempts races, found nothing to buy
// (counted); one whose call fails otherwise is counted among the origin
// calls' errors only.
func (r *runner) buy(pass string, admitted time.Time) (calls int, bought bool) {
	base := fmt.Sprintf("%s/api/v1/schedules/%d", r.cfg.Usher, r.cfg.Buy)
	mode := r.cfg.BuyMode
	if mode == BuyMixed {
		mode = []string{BuyStage, BuyBest}[rand.IntN(2)]
	}
	for range buyAttempts {
		var body []byte
		if mode == BuyBest {
			body = []byte(`{"count":1}`)
		} else {
			seat, n, ok := r.chooseSeat(base, pass, mode)
			calls += n
			if !ok {
				return calls, false
			}
			body = fmt.Appendf(nil, `{"seat_ids":[%d]}`, seat)
		}
		var h wire.Hold
		sent := time.Now()
		res := r.bookingCall(http.MethodPost, base+"/holds", pass, body, func(b []byte) bool { return json.Unmarshal(b, &h) == nil })
		calls++
		if res.counted {
			r.holdLat.Record(res.recv.Sub(sent))
		}
		r.holdsTried.Add(1)
		switch {
		case res.status == http.StatusConflict && mode == BuyBest:
			r.foundNothing.Add(1) // no seat left: the server looked at them all
			return calls, false
		case res.status == http.StatusConflict:
			r.holdsFailed.Add(1)
			continue // someone held it first, or the status was stale
		case !res.ok || len(h.SeatIDs) == 0:
			return calls, false
		}
		var rv wire.Reservation
		res = r.bookingCall(http.MethodPost, r.cfg.Usher+"/api/v1/reservations", pass,
			fmt.Appendf(nil, `{"schedule_id":%d,"seat_ids":%s,"idempotency_key":%q}`, r.cfg.Buy, ids(h.SeatIDs), newKey()),
			func(b []byte) bool { return json.Unmarshal(b, &rv) == nil })
		calls++
		if res.status != http.StatusAccepted {
			return calls, false
		}
		n, ok := r.confirm(pass, rv.ReservationID)
		calls += n
		if ok {
			r.bought.Add(1)
			r.toConfirmed.Record(time.Since(admitted))
			r.sold.add(h.SeatIDs)
		}
		return calls, ok
	}
	r.foundNothing.Add(1)
	return calls, false
}

// chooseSeat reads the status (and the layout, once per version) and
// returns an available seat as mode says; ok is false when there is none
// (counted) or a call failed.
func (r *runner) chooseSeat(base, pass, mode string) (seat int64, calls int, ok bool) {
	var st wire.SeatMapStatus
	res := r.bookingCall(http.MethodGet, base+"/seats/status", pass, nil, func(b []byte) bool { return json.Unmarshal(b, &st) == nil })
	calls++
	if !res.ok {
		return 0, calls, false
	}
	seatIDs := r.layouts.ids(st.Layout)
	if seatIDs == nil {
		var l wire.SeatMapLayout
		res = r.bookingCall(http.MethodGet, base+"/seats/layout?version="+url.QueryEscape(st.Layout), pass, nil,
			func(b []byte) bool { return json.Unmarshal(b, &l) == nil })
		calls++
		if !res.ok {
			return 0, calls, false
		}
		seatIDs = r.layouts.put(l)
	}
	states, err := wire.UnpackSeatStates(st.Status, len(seatIDs))
	if err != nil || st.Layout == "" {
		r.origin.errs.add("bad answer")
		return 0, calls, false
	}
	var free []int64
	for i, s := range states {
		if s == wire.SeatAvailable {
			free = append(free, seatIDs[i])
			if mode == BuyStage && len(free) == nearStage {
				break
			}
		}
	}
	if len(free) == 0 {
		r.foundNothing.Add(1)
		return 0, calls, false
	}
	return free[rand.IntN(len(free))], calls, true
}

// confirm polls the reservation until it is decided: true when confirmed.
func (r *runner) confirm(pass, id string) (calls int, confirmed bool) {
	wait, end := confirmFirst, time.Now().Add(confirmFor)
	for time.Now().Before(end) {
		if !r.sleepUntil(time.Now().Add(wait)) {
			return calls, false
		}
		wait = min(2*wait, confirmMax)
		var rv wire.Reservation
		res := r.bookingCall(http.MethodGet, r.cfg.Usher+"/api/v1/reservations/"+url.PathEscape(id), pass, nil,
			func(b []byte) bool { return json.Unmarshal(b, &rv) == nil })
		calls++
		switch {
		case !res.ok:
			return calls, false
		case rv.Status == "confirmed":
			return calls, true
		case rv.Status != "pending":
			r.rejected.Add(1)
			return calls, false
		}
	}
	return calls, false
}

// ids is seat ids as a JSON array.
func ids(seats []int64) string {
	b, _ := json.Marshal(seats)
	return string(b)
}

// soldSeats counts the seats each confirmed reservation of a run bought:
// a seat bought twice is oversold.
type soldSeats struct {
	mu   sync.Mutex
	m    map[int64]int
	over int64
}

func (s *soldSeats) add(seats []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[int64]int{}
	}
	for _, id := range seats {
		if s.m[id]++; s.m[id] == 2 {
			s.over++
		}
	}
}

func (s *soldSeats) oversold() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.over
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
	counted := func(b []byte) bool { // every answer's body is read and counted
		r.buyBytes.Add(int64(len(b)))
		return check == nil || check(b)
	}
	return r.call(r.origin, req, time.Now(), counted, []int{http.StatusConflict})
}

// newKey is an idempotency key (keys are per visitor, and every visit is
// a new visitor).
func newKey() string { return strconv.FormatUint(rand.Uint64(), 36) }
