package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/clientip"
	"usher/internal/flood"
	"usher/internal/httpapi"
	"usher/internal/identity"
	"usher/internal/limit/memlimit"
	"usher/internal/pow"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/token"
	"usher/internal/wire"
)

var identitySecret = []byte("the site's identity secret, 32+ bytes")

// newFloodEnv serves the API with the flood guard and identity assertions
// (HS256 with identitySecret) on.
func newFloodEnv(t *testing.T) *env {
	t.Helper()
	reg := prometheus.NewRegistry()
	store := &flakyStore{Store: memqueue.New()}
	q := queue.New(store, queue.Options{Metrics: queue.NewMetrics(reg)})
	keys, err := token.LoadDir(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	limits := memlimit.New()
	guard := flood.New(limits, pow.New(keys, limits, time.Now), clientip.Trusted{}, time.Now)
	ids, err := identity.New(identitySecret, nil, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(httpapi.NewServer(httpapi.Config{
		Queue: q, Keys: keys, AdminKey: adminKey, Registry: reg, Flood: guard, Identity: ids,
	}))
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, store: store, q: q, keys: keys}
}

// places counts the room's waiting and active visitors.
func (e *env) places(room string) int64 {
	e.t.Helper()
	v, err := e.q.Room(e.t.Context(), room)
	if err != nil {
		e.t.Fatal(err)
	}
	return v.Waiting + v.Active
}

// TestClientEntersPerMinute: one client without cookies takes at most the
// room's limit of new places; over it, 429 rate_limited with Retry-After
// and no place. A visitor named with the admin key is not counted.
func TestClientEntersPerMinute(t *testing.T) {
	e := newFloodEnv(t)
	e.putRoom("sale", `{"max_active":1,"admit_rate":0.001,"client_enters_per_minute":3}`)
	for i := range 6 {
		r := e.do(nil, "POST", "/api/v1/rooms/sale/entries", "", "")
		want := http.StatusCreated
		if i >= 3 {
			want = http.StatusTooManyRequests
		}
		if r.status != want {
			t.Fatalf("cookie-less entry %d: %d %s, want %d", i+1, r.status, r.body, want)
		}
		if want == http.StatusTooManyRequests {
			if code := r.errorCode(t); code != "rate_limited" || r.header.Get("Retry-After") == "" {
				t.Fatalf("over the limit: code %q, Retry-After %q", code, r.header.Get("Retry-After"))
			}
		}
	}
	if n := e.places("sale"); n != 3 {
		t.Fatalf("%d places, want the limit 3", n)
	}
	if r := e.do(nil, "POST", "/api/v1/rooms/sale/entries", adminKey, `{"visitor_id":"trusted"}`); r.status != http.StatusCreated {
		t.Errorf("admin-named visitor over the client limit: %d %s", r.status, r.body)
	}
}

// TestProofOfWork: an anonymous entry to a room with pow_bits gets 428 and
// a challenge; the solved challenge enters once; a replay, another room's
// challenge and a wrong nonce are 401 challenge_invalid; no place is made
// without a valid solution.
func TestProofOfWork(t *testing.T) {
	e := newFloodEnv(t)
	e.putRoom("sale", `{"max_active":1,"admit_rate":0.001,"pow_bits":8,"client_enters_per_minute":0}`)
	e.putRoom("other", `{"pow_bits":8}`)
	challenge := func(room string) pow.Challenge {
		r := e.do(nil, "POST", "/api/v1/rooms/"+room+"/entries", "", "")
		var body struct {
			Error     struct{ Code string }
			Challenge pow.Challenge
		}
		if err := json.Unmarshal(r.body, &body); err != nil || r.status != http.StatusPreconditionRequired ||
			body.Error.Code != "challenge_required" || body.Challenge.Bits != 8 || body.Challenge.Token == "" {
			t.Fatalf("entry without a solution: %d %s, want 428 challenge_required with a challenge of 8 bits", r.status, r.body)
		}
		return body.Challenge
	}
	enter := func(room, solution string) resp {
		return e.doHeader(nil, "POST", "/api/v1/rooms/"+room+"/entries", "", "", map[string]string{pow.Header: solution})
	}
	c := challenge("sale")
	sol := c.Token + ":" + pow.Solve(c)
	if r := enter("sale", sol); r.status != http.StatusCreated && r.status != http.StatusOK {
		t.Fatalf("solved entry: %d %s", r.status, r.body)
	}
	if r := enter("sale", sol); r.status != http.StatusUnauthorized || r.errorCode(t) != "challenge_invalid" {
		t.Errorf("replayed solution: %d %s, want 401 challenge_invalid", r.status, r.body)
	}
	o := challenge("other")
	if r := enter("sale", o.Token+":"+pow.Solve(o)); r.status != http.StatusUnauthorized {
		t.Errorf("other room's solution: %d %s, want 401", r.status, r.body)
	}
	c2 := challenge("sale")
	wrong := "x"
	for pow.Solves(c2.Token, wrong, 8) {
		wrong += "x"
	}
	if r := enter("sale", c2.Token+":"+wrong); r.status != http.StatusUnauthorized {
		t.Errorf("wrong nonce: %d %s, want 401", r.status, r.body)
	}
	if n := e.places("sale"); n != 1 {
		t.Errorf("%d places, want exactly the one solved entry", n)
	}
}

// TestIdentity: a room with require_identity refuses anonymous entries; an
// assertion signed by the site makes the account the visitor, so the same
// account on two devices (two cookie jars) holds one place; a forged or
// expired assertion is refused and makes no place.
func TestIdentity(t *testing.T) {
	e := newFloodEnv(t)
	e.putRoom("sale", `{"max_active":1,"admit_rate":0.001,"require_identity":true}`)
	e.do(nil, "POST", "/api/v1/rooms/sale/entries", adminKey, `{"visitor_id":"first"}`) // takes the slot
	assert := func(secret []byte, sub string, exp time.Time) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "exp": exp.Unix()}).SignedString(secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if r := e.do(nil, "POST", "/api/v1/rooms/sale/entries", "", ""); r.status != 401 || r.errorCode(t) != "identity_required" {
		t.Errorf("anonymous entry: %d %s, want 401 identity_required", r.status, r.body)
	}
	good := assert(identitySecret, "alice", time.Now().Add(time.Minute))
	body := `{"identity":"` + good + `"}`
	phone, laptop := e.client(), e.client()
	first := e.do(phone, "POST", "/api/v1/rooms/sale/entries", "", body)
	second := e.do(laptop, "POST", "/api/v1/rooms/sale/entries", "", body)
	if first.status != 201 || second.status != 200 {
		t.Fatalf("alice on two devices: %d then %d, want 201 then 200 (one place)", first.status, second.status)
	}
	if a, b := first.entry(t), second.entry(t); a.Position != b.Position || a.Position != 1 {
		t.Errorf("positions %d and %d, want the same place 1", a.Position, b.Position)
	}
	for name, tok := range map[string]string{
		"forged":  assert([]byte("not the site's secret, but 32+ bytes"), "mallory", time.Now().Add(time.Minute)),
		"expired": assert(identitySecret, "bob", time.Now().Add(-time.Minute)),
	} {
		if r := e.do(nil, "POST", "/api/v1/rooms/sale/entries", "", `{"identity":"`+tok+`"}`); r.status != 401 || r.errorCode(t) != "identity_invalid" {
			t.Errorf("%s assertion: %d %s, want 401 identity_invalid", name, r.status, r.body)
		}
	}
	if n := e.places("sale"); n != 2 {
		t.Errorf("%d places, want first and alice", n)
	}
}

// TestInvites: a presale room refuses entries without an invite; an invite
// from the admin endpoint is one place, from any device; another room's
// invite is refused; an admin-named visitor still enters.
func TestInvites(t *testing.T) {
	e := newFloodEnv(t)
	e.putRoom("presale", `{"max_active":1,"admit_rate":0.001,"require_invite":true}`)
	e.putRoom("other", `{}`)
	if r := e.do(nil, "POST", "/api/v1/rooms/presale/invites", "", `{"count":2}`); r.status != 401 {
		t.Errorf("invites without the admin key: %d, want 401", r.status)
	}
	for _, body := range []string{`{"count":0}`, `{"count":10001}`, `{"count":1,"valid_seconds":5}`} {
		if r := e.do(nil, "POST", "/api/v1/rooms/presale/invites", adminKey, body); r.status != 400 {
			t.Errorf("invites %s: %d %s, want 400", body, r.status, r.body)
		}
	}
	r := e.do(nil, "POST", "/api/v1/rooms/presale/invites", adminKey, `{"count":2}`)
	var inv struct{ Invites []string }
	if err := json.Unmarshal(r.body, &inv); err != nil || r.status != 201 || len(inv.Invites) != 2 {
		t.Fatalf("invites: %d %s", r.status, r.body)
	}
	otherInv := e.do(nil, "POST", "/api/v1/rooms/other/invites", adminKey, `{"count":1}`)
	var oi struct{ Invites []string }
	json.Unmarshal(otherInv.body, &oi)

	if r := e.do(nil, "POST", "/api/v1/rooms/presale/entries", "", ""); r.status != 403 || r.errorCode(t) != "invite_required" {
		t.Errorf("entry without an invite: %d %s, want 403 invite_required", r.status, r.body)
	}
	account, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Minute).Unix()}).SignedString(identitySecret)
	if err != nil {
		t.Fatal(err)
	}
	if r := e.do(nil, "POST", "/api/v1/rooms/presale/entries", "", `{"identity":"`+account+`"}`); r.status != 403 || r.errorCode(t) != "invite_required" {
		t.Errorf("a signed-in account without an invite: %d %s, want 403 invite_required", r.status, r.body)
	}
	if r := e.do(nil, "POST", "/api/v1/rooms/presale/entries", "", `{"invite":"`+oi.Invites[0]+`"}`); r.status != 401 || r.errorCode(t) != "token_wrong_room" {
		t.Errorf("another room's invite: %d %s, want 401 token_wrong_room", r.status, r.body)
	}
	body := `{"invite":"` + inv.Invites[0] + `"}`
	first := e.do(e.client(), "POST", "/api/v1/rooms/presale/entries", "", body)
	again := e.do(e.client(), "POST", "/api/v1/rooms/presale/entries", "", body)
	if first.status != 201 || again.status != 200 {
		t.Errorf("one invite on two devices: %d then %d, want 201 then 200 (one place)", first.status, again.status)
	}
	if r := e.do(nil, "POST", "/api/v1/rooms/presale/entries", "", `{"invite":"`+inv.Invites[1]+`"}`); r.status != 201 {
		t.Errorf("second invite: %d %s, want 201", r.status, r.body)
	}
	if r := e.do(nil, "POST", "/api/v1/rooms/presale/entries", adminKey, `{"visitor_id":"vip"}`); r.status != 201 {
		t.Errorf("admin-named visitor in a presale room: %d %s, want 201", r.status, r.body)
	}
	if r := e.do(nil, "POST", "/api/v1/rooms/presale/entries", "", `{"invite":"`+inv.Invites[0]+`","identity":"x"}`); r.status != 400 {
		t.Errorf("invite and identity together: %d, want 400", r.status)
	}
	if n := e.places("presale"); n != 3 {
		t.Errorf("%d places, want the two invites and the admin's visitor", n)
	}
}

// TestOnePlacePerDefence (issue 30 §1): a visitor cookie is minted only by
// an entry that took a place, and a cookie skips no room's defences: each
// new place in a room with pow_bits costs a solution and counts toward its
// client_enters_per_minute, whatever usher_vid the request carries (minted
// by a refused entry, or by a room without defences). Only a visitor that
// shows its own ticket re-enters without them.
func TestOnePlacePerDefence(t *testing.T) {
	e := newFloodEnv(t)
	e.putRoom("sale", `{"max_active":1,"admit_rate":0.001,"pow_bits":8,"client_enters_per_minute":5}`)
	e.putRoom("free", `{"max_active":1,"admit_rate":0.001,"pow_bits":0,"client_enters_per_minute":0}`)
	vid := func(r resp) string {
		for _, c := range (&http.Response{Header: r.header}).Cookies() {
			if c.Name == wire.VisitorCookie {
				return c.Value
			}
		}
		return ""
	}
	for _, path := range []string{"/api/v1/rooms/no-such-room/entries", "/api/v1/rooms/sale/entries"} {
		if r := e.do(nil, "POST", path, "", ""); r.status < 400 || vid(r) != "" {
			t.Errorf("POST %s: %d with usher_vid %q; want a refusal and no cookie", path, r.status, vid(r))
		}
	}
	enter := func(cookie, solution string) resp {
		h := map[string]string{}
		if cookie != "" {
			h["Cookie"] = wire.VisitorCookie + "=" + cookie
		}
		if solution != "" {
			h[pow.Header] = solution
		}
		return e.doHeader(nil, "POST", "/api/v1/rooms/sale/entries", "", "", h)
	}
	solve := func() string {
		r := enter("", "")
		var body struct{ Challenge pow.Challenge }
		if err := json.Unmarshal(r.body, &body); err != nil || r.status != http.StatusPreconditionRequired {
			t.Fatalf("challenge: %d %s", r.status, r.body)
		}
		return body.Challenge.Token + ":" + pow.Solve(body.Challenge)
	}
	minted := func() string {
		r := e.do(nil, "POST", "/api/v1/rooms/free/entries", "", "")
		if r.status != http.StatusCreated || vid(r) == "" {
			t.Fatalf("entry into the room without defences: %d, usher_vid %q", r.status, vid(r))
		}
		return vid(r)
	}

	// A cookie from another room buys no place without a solution.
	for range 6 {
		if r := enter(minted(), ""); r.status != http.StatusPreconditionRequired {
			t.Fatalf("cookie from another room, no solution: %d %s, want 428", r.status, r.body)
		}
	}
	// The visitor's own place: a browser that solved once polls and
	// re-enters with its ticket, without solving again.
	browser := e.client()
	first := e.doHeader(browser, "POST", "/api/v1/rooms/sale/entries", "", "", map[string]string{pow.Header: solve()})
	again := e.do(browser, "POST", "/api/v1/rooms/sale/entries", "", "")
	if first.status != http.StatusCreated || again.status != http.StatusOK || again.entry(t).Position != first.entry(t).Position {
		t.Fatalf("own place: %d then %d, want 201 then 200 at the same place", first.status, again.status)
	}
	// Fresh cookies with a solution each: places up to the client's limit.
	limited := 0
	for range 8 {
		switch r := enter(minted(), solve()); r.status {
		case http.StatusCreated:
		case http.StatusTooManyRequests:
			limited++
		default:
			t.Fatalf("solved entry with a fresh cookie: %d %s", r.status, r.body)
		}
	}
	if n := e.places("sale"); n != 5 || limited != 4 {
		t.Errorf("%d places in sale, %d refused 429; want the limit 5 (the browser's and 4 more)", n, limited)
	}
}
