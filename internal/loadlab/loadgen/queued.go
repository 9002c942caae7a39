package loadgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"usher/internal/wire"
)

// visit is one visitor's journey, kept for the order and ETA analyses.
type visit struct {
	enterSend, enterRecv time.Time
	// lastWaiting is when the last request answered "waiting" was sent;
	// admittedAt when the first "admitted" answer arrived (zero if never).
	lastWaiting, admittedAt time.Time
	etaSeconds              int64
	// etaRange is the entry's eta_range_seconds (zero from an usher
	// without one).
	etaRange      [2]int64
	waitedAtEntry bool
	// rose is whether a poll ever answered a place further back than the
	// one before.
	rose bool
}

// visit runs one visitor: enter, poll until admitted, call the origin, leave.
// It returns false when the visitor could not enter.
func (r *runner) visit(due time.Time) bool {
	n := r.started.Add(1)
	v := visit{enterSend: time.Now()}
	var xff string
	if r.cfg.ForwardedFor {
		xff = fmt.Sprintf("198.18.%d.%d", (n>>8)&0xff, n&0xff)
	}
	res, e := r.queueCall(http.MethodPost, r.entriesURL, "", xff, 0, []byte("{}"), due)
	if res.ok && res.status == http.StatusConflict {
		r.failed.add("entry refused: room closed or sold out") // a right answer, not a failed call
		r.record(v)
		return true
	}
	if !res.ok {
		r.failed.add("enter " + describe(res))
		return false
	}
	v.enterRecv = res.recv
	v.etaSeconds, v.etaRange, v.waitedAtEntry = e.ETASeconds, e.ETARangeSeconds, e.State == wire.StateWaiting
	ticket := e.Ticket
	if v.waitedAtEntry {
		r.waiting.Add(1)
	}
	var giveUpAt time.Time // zero: this visitor stays
	if v.waitedAtEntry && r.cfg.GiveUp > 0 && rand.Float64() < r.cfg.GiveUp {
		giveUpAt = v.enterRecv.Add(time.Duration(rand.Float64() * float64(time.Duration(e.ETASeconds)*time.Second)))
	}
	send := v.enterSend
	for e.State == wire.StateWaiting {
		v.lastWaiting = send
		wait := time.Duration(e.PollAfterMS) * time.Millisecond
		if wait <= 0 {
			wait = time.Second
		}
		due = res.recv.Add(wait)
		if !giveUpAt.IsZero() && due.After(giveUpAt) {
			r.sleepUntil(giveUpAt)
			r.waiting.Add(-1)
			r.gaveUp.Add(1)
			return true
		}
		if !r.sleepUntil(due) {
			r.waiting.Add(-1)
			r.abandoned.Add(1)
			r.record(v)
			return true
		}
		send = time.Now()
		var next wire.Entry
		r.polls.Add(1)
		// As the waiting page does: the place last shown goes with the
		// poll, so that a rise shows here only if usher lets one through.
		res, next = r.queueCall(http.MethodGet, r.meURL, ticket, "", e.Position, nil, due)
		switch {
		case res.ok:
			r.pollLat.Record(res.recv.Sub(due))
			if e.Position > 0 && next.State == wire.StateWaiting && next.Position > e.Position {
				r.rises.Add(1) // moved back
				if !v.rose {
					v.rose = true
					r.roseVisitors.Add(1)
				}
			}
			if next.Ticket != "" {
				ticket = next.Ticket // a changed place (the opening draw)
			}
			e = next
		case res.retry || !res.counted:
			// usher unavailable (or the run ended): try again, as a browser would.
			res.recv = time.Now()
		default:
			r.waiting.Add(-1)
			r.failed.add("poll " + describe(res))
			r.record(v)
			return true
		}
	}
	if v.waitedAtEntry {
		r.waiting.Add(-1)
	}
	if e.State != wire.StateAdmitted {
		r.failed.add(e.State) // expired or closed
		r.record(v)
		return true
	}
	v.admittedAt = res.recv
	r.admitted.Add(1)
	if !v.waitedAtEntry {
		r.passthrough.Add(1)
	}
	r.inQueue.Record(v.admittedAt.Sub(v.enterRecv))
	r.record(v)

	r.active.Add(1)
	pass, calls, done := e.Pass, 0, true
	due = time.Now()
	if r.cfg.Buy > 0 {
		calls, done = r.buy(pass, v.admittedAt) // a buy that bought nothing is not completed
	}
	for i := 0; r.cfg.Buy == 0 && (r.cfg.Calls == 0 || i < r.cfg.Calls); i++ {
		if i > 0 {
			due = time.Now().Add(r.cfg.Think.Sample())
		}
		if !r.sleepUntil(due) {
			done = r.cfg.Calls == 0 // "until the run ends" ends so
			break
		}
		res := r.originCall(due, pass)
		if res.counted {
			calls++
		}
		if renewed := res.header.Get(wire.PassHeader); renewed != "" {
			pass = renewed
		}
	}
	r.active.Add(-1)
	if calls > 0 {
		r.calledOrigin.Add(1)
	}
	switch {
	case done:
		r.completed.Add(1)
	case r.cfg.Buy == 0:
		r.cutOff.Add(1)
	}
	if r.cfg.Leave && r.hard.Err() == nil {
		r.queueCall(http.MethodDelete, r.meURL, ticket, "", 0, nil, time.Now())
	}
	return true
}

// queueCall calls usher and decodes the entry it answers; xff, if set, is
// sent as X-Forwarded-For.
func (r *runner) queueCall(method, url, token, xff string, shown int64, body []byte, due time.Time) (result, wire.Entry) {
	req, err := http.NewRequest(method, url, bodyReader(body))
	if err != nil {
		panic(err) // validated
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	if shown > 0 {
		req.Header.Set(wire.ShownHeader, strconv.FormatInt(shown, 10))
	}
	var e wire.Entry
	check := func(b []byte) bool { return json.Unmarshal(b, &e) == nil && e.State != "" }
	var expect []int
	switch method {
	case http.MethodDelete:
		check = func([]byte) bool { return true }
	case http.MethodPost:
		// 409 room_closed or sold_out: the room is closed or sold out (by
		// its state or its inventory), usher's right answer to a newcomer.
		expect = []int{http.StatusConflict}
		entry := check
		check = func(b []byte) bool {
			return entry(b) || bytes.Contains(b, []byte(`"room_closed"`)) || bytes.Contains(b, []byte(`"sold_out"`))
		}
	}
	res := r.call(r.queue, req, due, check, expect)
	return res, e
}

func (r *runner) record(v visit) {
	r.mu.Lock()
	r.visits = append(r.visits, v)
	r.mu.Unlock()
}

func describe(res result) string {
	switch {
	case !res.counted:
		return "interrupted"
	case res.status == 0:
		return "transport"
	default:
		return "http " + strconv.Itoa(res.status)
	}
}

func bodyReader(b []byte) io.Reader {
	if b == nil {
		return http.NoBody
	}
	return bytes.NewReader(b)
}
