package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/httpapi"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/token"
	"usher/internal/wire"
)

const adminKey = "test-admin-key"

// flakyStore is a queue store (memqueue unless a test picks another) whose
// every call fails with ErrUnavailable while down is set: the store outage
// as the API sees it. (Outages of the real Redis are tested in redisqueue,
// deadline_test.go and cmd/usher.)
type flakyStore struct {
	queue.Store
	down atomic.Bool
}

func (f *flakyStore) fail() error {
	if f.down.Load() {
		return fmt.Errorf("flaky: %w", queue.ErrUnavailable)
	}
	return nil
}

// AddSignals and SetControl pass the controller's calls to the store.
func (f *flakyStore) AddSignals(ctx context.Context, room string, s queue.Signals) (queue.Signals, error) {
	return f.Store.(queue.ControlStore).AddSignals(ctx, room, s)
}

func (f *flakyStore) SetControl(ctx context.Context, room string, next queue.Control, used queue.Signals) (bool, error) {
	return f.Store.(queue.ControlStore).SetControl(ctx, room, next, used)
}

func (f *flakyStore) Enter(ctx context.Context, room, v string, now time.Time, o queue.EnterOptions) (queue.Entry, bool, error) {
	if err := f.fail(); err != nil {
		return queue.Entry{}, false, err
	}
	return f.Store.Enter(ctx, room, v, now, o)
}

func (f *flakyStore) Status(ctx context.Context, room, v string, now time.Time) (queue.Entry, error) {
	if err := f.fail(); err != nil {
		return queue.Entry{}, err
	}
	return f.Store.Status(ctx, room, v, now)
}

func (f *flakyStore) Rooms(ctx context.Context) ([]string, error) {
	if err := f.fail(); err != nil {
		return nil, err
	}
	return f.Store.Rooms(ctx)
}

type env struct {
	t     *testing.T
	srv   *httptest.Server
	store *flakyStore
	q     *queue.Queue
	keys  *token.Keyring
	reg   *prometheus.Registry
}

func newEnv(t *testing.T, failOpen bool) *env {
	t.Helper()
	return newEnvOn(t, memqueue.New(), failOpen)
}

// newEnvOn serves the waiting-room API on the queue store qs.
func newEnvOn(t *testing.T, qs queue.Store, failOpen bool) *env {
	t.Helper()
	return newEnvClock(t, qs, failOpen, time.Now)
}

// newEnvClock is newEnvOn with the queue's clock.
func newEnvClock(t *testing.T, qs queue.Store, failOpen bool, now func() time.Time) *env {
	t.Helper()
	keys, err := token.LoadDir(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return newEnvKeys(t, qs, failOpen, now, keys)
}

// newEnvKeys is newEnvClock with the keys: instances that share a store
// and keys are one usher deployment.
func newEnvKeys(t *testing.T, qs queue.Store, failOpen bool, now func() time.Time, keys *token.Keyring) *env {
	t.Helper()
	store := &flakyStore{Store: qs}
	reg := prometheus.NewRegistry()
	q := queue.New(store, queue.Options{Metrics: queue.NewMetrics(reg), Now: now})
	h := httpapi.NewServer(httpapi.Config{
		Queue: q, Keys: keys, AdminKey: adminKey, Registry: reg, FailOpen: failOpen,
	})
	srv := httptest.NewTLSServer(h) // cookies are Secure
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, store: store, q: q, keys: keys, reg: reg}
}

// client returns a browser-like client with its own cookie jar, whose
// requests and answers are checked against the OpenAPI document.
func (e *env) client() *http.Client {
	jar, _ := cookiejar.New(nil)
	c := e.srv.Client()
	return validated(e.t, &http.Client{Transport: c.Transport, Jar: jar})
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) entry(t *testing.T) wire.Entry {
	t.Helper()
	var e wire.Entry
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	return e
}

func (r resp) errorCode(t *testing.T) string {
	t.Helper()
	var b struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(r.body, &b); err != nil || b.Error.Code == "" {
		t.Fatalf("want a JSON error, got %d %s", r.status, r.body)
	}
	if leak := leaked(b.Error.Message); leak != "" {
		t.Errorf("error message %q shows internals (%s)", b.Error.Message, leak)
	}
	return b.Error.Code
}

func (e *env) do(c *http.Client, method, path, bearer, body string) resp {
	e.t.Helper()
	return e.doHeader(c, method, path, bearer, body, nil)
}

// doHeader is do with extra request headers. Every request and answer is
// checked against the OpenAPI document (openapi_test.go).
func (e *env) doHeader(c *http.Client, method, path, bearer, body string, header map[string]string) resp {
	e.t.Helper()
	if c == nil {
		c = e.srv.Client()
	}
	c = validated(e.t, c)
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

func (e *env) putRoom(room, body string) {
	e.t.Helper()
	if r := e.do(nil, "PUT", "/api/v1/rooms/"+room, adminKey, body); r.status != 201 && r.status != 200 {
		e.t.Fatalf("PUT room: %d %s", r.status, r.body)
	}
}

func TestEnterStatusAdmit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.putRoom("sale", `{"max_active":1,"admit_rate":10,"interval_ms":1000}`)
	alice, bob := e.client(), e.client()

	r := e.do(alice, "POST", "/api/v1/rooms/sale/entries", "", "")
	if got := r.entry(t); r.status != 201 || got.State != "admitted" || got.Pass == "" || got.PassExpiresAt == nil {
		t.Fatalf("first enter into an empty room: %d %s, want 201 admitted with a pass", r.status, r.body)
	}
	r = e.do(bob, "POST", "/api/v1/rooms/sale/entries", "", "")
	first := r.entry(t)
	if r.status != 201 || first.State != "waiting" || first.Position != 1 || first.Ahead != 0 || first.Ticket == "" {
		t.Fatalf("second enter: %d %s, want 201 waiting at 1", r.status, r.body)
	}
	// A new ticket's first poll comes at a random point of its interval.
	if first.PollAfterMS < 0 || first.PollAfterMS > 1800 {
		t.Errorf("poll_after_ms of an entry near the front = %d, want 0..1800", first.PollAfterMS)
	}
	if r := first.ETARangeSeconds; r[0] > first.ETASeconds || r[1] < first.ETASeconds || r[1] == 0 {
		t.Errorf("eta_seconds %d, eta_range_seconds %v; want a range around it", first.ETASeconds, r)
	}
	if tk, err := e.keys.ParseTicket(first.Ticket, "sale"); err != nil || tk.Wait == 0 || tk.WaitHigh < tk.Wait {
		t.Errorf("ticket %+v, %v; want it to carry the wait forecast", tk, err)
	}
	// A reload or a second tab: same visitor cookie, same place, 200.
	r = e.do(bob, "POST", "/api/v1/rooms/sale/entries", "", "")
	if again := r.entry(t); r.status != 200 || again.Position != 1 {
		t.Fatalf("re-enter: %d %s, want 200 at position 1", r.status, r.body)
	}
	// Status by cookie and by bearer ticket.
	if r := e.do(bob, "GET", "/api/v1/rooms/sale/entries/me", "", ""); r.status != 200 || r.entry(t).State != "waiting" {
		t.Fatalf("status by cookie: %d %s", r.status, r.body)
	}
	if r := e.do(nil, "GET", "/api/v1/rooms/sale/entries/me", first.Ticket, ""); r.status != 200 || r.entry(t).Position != 1 {
		t.Fatalf("status by bearer: %d %s", r.status, r.body)
	}
	// Alice finishes; the next step admits Bob, whose poll returns a pass.
	if r := e.do(alice, "DELETE", "/api/v1/rooms/sale/entries/me", "", ""); r.status != 204 {
		t.Fatalf("leave: %d %s", r.status, r.body)
	}
	if _, err := e.q.Admit(context.Background(), "sale"); err != nil {
		t.Fatal(err)
	}
	r = e.do(nil, "GET", "/api/v1/rooms/sale/entries/me", first.Ticket, "")
	got := r.entry(t)
	if got.State != "admitted" || got.Pass == "" {
		t.Fatalf("status after admission: %s, want admitted with a pass", r.body)
	}
	// That poll measured the forecast against the wait, once: polling
	// again is not another admission.
	e.do(nil, "GET", "/api/v1/rooms/sale/entries/me", first.Ticket, "")
	if m := e.do(nil, "GET", "/metrics", adminKey, ""); !strings.Contains(string(m.body), `usher_eta_error_ratio_count{room="sale"} 1`+"\n") {
		t.Errorf("metrics: want one usher_eta_error_ratio observation in\n%s", grepLines(string(m.body), "usher_eta_"))
	}
	pass, err := e.keys.ParsePass(got.Pass, "sale")
	if err != nil || !pass.ExpiresAt.Equal(got.PassExpiresAt.Truncate(time.Second)) {
		t.Errorf("pass %+v, %v; want it to expire at %v", pass, err, got.PassExpiresAt)
	}
	// The pass opens the gated pass check.
	r = e.do(nil, "GET", "/api/v1/rooms/sale/pass", got.Pass, "")
	var pr wire.Pass
	if json.Unmarshal(r.body, &pr); r.status != 200 || pr.Room != "sale" || pr.Visitor != pass.Visitor {
		t.Errorf("pass check: %d %s", r.status, r.body)
	}
}

func TestAdminRooms(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	r := e.do(nil, "PUT", "/api/v1/rooms/a", adminKey, `{"max_active":7,"state":"paused"}`)
	var room wire.Room
	if json.Unmarshal(r.body, &room); r.status != 201 || setting[int64](room.Settings, "max_active") != 7 || setting[string](room.Settings, "state") != "paused" || setting[float64](room.Settings, "admit_rate") != queue.DefaultSettings().AdmitRate {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	r = e.do(nil, "PUT", "/api/v1/rooms/a", adminKey, `{"admit_rate":2.5}`)
	if json.Unmarshal(r.body, &room); r.status != 200 || setting[int64](room.Settings, "max_active") != 7 || setting[float64](room.Settings, "admit_rate") != 2.5 {
		t.Fatalf("update keeps omitted fields: %d %s", r.status, r.body)
	}
	for i := range 3 {
		e.do(nil, "POST", "/api/v1/rooms/a/entries", adminKey, fmt.Sprintf(`{"visitor_id":"user-%d"}`, i))
	}
	r = e.do(nil, "GET", "/api/v1/rooms/a", adminKey, "")
	if json.Unmarshal(r.body, &room); r.status != 200 || room.Stats.Waiting != 3 {
		t.Fatalf("get: %d %s, want 3 waiting", r.status, r.body)
	}
	e.putRoom("b", "{}")
	r = e.do(nil, "GET", "/api/v1/rooms", adminKey, "")
	var list struct{ Rooms []wire.Room }
	if json.Unmarshal(r.body, &list); r.status != 200 || len(list.Rooms) != 2 || list.Rooms[1].Room != "b" {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	testErrors(t, newEnv(t, false))
}

// testErrors sends every error case of the waiting-room API to e; every
// answer passes errorCode's leak check.
func testErrors(t *testing.T, e *env) {
	e.putRoom("sale", `{"max_active":1}`)
	e.putRoom("other", `{}`)
	e.putRoom("shut", `{"state":"closed"}`)
	e.do(nil, "POST", "/api/v1/rooms/sale/entries", adminKey, `{"visitor_id":"first"}`) // takes the slot
	w := e.do(nil, "POST", "/api/v1/rooms/sale/entries", adminKey, `{"visitor_id":"waiter"}`).entry(t)
	otherTicket := e.do(nil, "POST", "/api/v1/rooms/other/entries", adminKey, `{"visitor_id":"x"}`).entry(t).Ticket
	forged := w.Ticket[:len(w.Ticket)-4] + "AAAA"
	big := `{"visitor_id":"` + strings.Repeat("a", 17<<10) + `"}`

	for _, tc := range []struct {
		name, method, path, bearer, body string
		status                           int
		code                             string
	}{
		{"bad room id", "POST", "/api/v1/rooms/Bad_Room/entries", "", "", 400, "invalid_request"},
		{"long visitor id", "POST", "/api/v1/rooms/sale/entries", adminKey, `{"visitor_id":"` + strings.Repeat("v", 129) + `"}`, 400, "invalid_request"},
		{"malformed JSON", "POST", "/api/v1/rooms/sale/entries", "", `{"visitor_id":`, 400, "bad_json"},
		{"unknown field", "POST", "/api/v1/rooms/sale/entries", "", `{"who":"me"}`, 400, "bad_json"},
		{"trailing data", "POST", "/api/v1/rooms/sale/entries", "", `{} {}`, 400, "bad_json"},
		{"body too large", "POST", "/api/v1/rooms/sale/entries", adminKey, big, 413, "body_too_large"},
		{"visitor id without admin key", "POST", "/api/v1/rooms/sale/entries", "", `{"visitor_id":"x"}`, 401, "admin_unauthorized"},
		{"unknown room", "POST", "/api/v1/rooms/nope/entries", "", "", 404, "room_not_found"},
		{"closed room", "POST", "/api/v1/rooms/shut/entries", "", "", 409, "room_closed"},
		{"no ticket", "GET", "/api/v1/rooms/sale/entries/me", "", "", 401, "token_missing"},
		{"forged ticket", "GET", "/api/v1/rooms/sale/entries/me", forged, "", 401, "token_invalid"},
		{"garbage ticket", "GET", "/api/v1/rooms/sale/entries/me", "%%%", "", 401, "token_invalid"},
		{"other room's ticket", "GET", "/api/v1/rooms/sale/entries/me", otherTicket, "", 401, "token_wrong_room"},
		{"ticket as a pass", "GET", "/api/v1/rooms/sale/pass", w.Ticket, "", 401, "token_invalid"},
		{"no pass", "GET", "/api/v1/rooms/sale/pass", "", "", 403, "not_admitted"},
		{"admin without key", "GET", "/api/v1/rooms", "", "", 401, "admin_unauthorized"},
		{"admin with wrong key", "PUT", "/api/v1/rooms/sale", "nope", "{}", 401, "admin_unauthorized"},
		{"bad settings", "PUT", "/api/v1/rooms/sale", adminKey, `{"max_active":0}`, 400, "invalid_request"},
		{"bad state", "PUT", "/api/v1/rooms/sale", adminKey, `{"state":"maybe"}`, 400, "invalid_request"},
		{"huge ttl", "PUT", "/api/v1/rooms/sale", adminKey, `{"active_ttl_seconds":1e300}`, 400, "invalid_request"},
		{"get unknown room", "GET", "/api/v1/rooms/nope", adminKey, "", 404, "room_not_found"},
		{"unknown route", "GET", "/nope", "", "", 404, "not_found"},
		{"wrong method", "PATCH", "/api/v1/rooms/sale/entries", "", "", 405, "method_not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(nil, tc.method, tc.path, tc.bearer, tc.body)
			if code := r.errorCode(t); r.status != tc.status || code != tc.code {
				t.Errorf("%s %s = %d %s, want %d %s", tc.method, tc.path, r.status, code, tc.status, tc.code)
			}
		})
	}
}

func TestGateNotAdmittedAfterLeave(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.putRoom("sale", `{}`)
	pass := e.do(nil, "POST", "/api/v1/rooms/sale/entries", adminKey, `{"visitor_id":"a"}`).entry(t).Pass
	if r := e.do(nil, "GET", "/api/v1/rooms/sale/pass", pass, ""); r.status != 200 {
		t.Fatalf("pass check while active: %d %s", r.status, r.body)
	}
	if r := e.do(nil, "DELETE", "/api/v1/rooms/sale/entries/me", pass, ""); r.status != 204 {
		t.Fatalf("finish with the pass: %d %s", r.status, r.body)
	}
	r := e.do(nil, "GET", "/api/v1/rooms/sale/pass", pass, "")
	if code := r.errorCode(t); r.status != 403 || code != "not_admitted" {
		t.Errorf("pass check after finishing = %d %s, want 403 not_admitted (signature alone is not enough)", r.status, code)
	}
}

func TestStoreOutage(t *testing.T) {
	t.Parallel()
	for _, failOpen := range []bool{false, true} {
		t.Run(fmt.Sprintf("failOpen=%v", failOpen), func(t *testing.T) {
			e := newEnv(t, failOpen)
			e.putRoom("sale", `{}`)
			pass := e.do(nil, "POST", "/api/v1/rooms/sale/entries", adminKey, `{"visitor_id":"a"}`).entry(t).Pass
			e.store.down.Store(true)
			for _, tc := range []struct{ method, path, bearer, body string }{
				{"POST", "/api/v1/rooms/sale/entries", "", ""},
				{"GET", "/readyz", "", ""},
			} {
				r := e.do(nil, tc.method, tc.path, tc.bearer, tc.body)
				if code := r.errorCode(t); r.status != 503 || code != "unavailable" || r.header.Get("Retry-After") == "" {
					t.Errorf("%s %s with the store down = %d %s (Retry-After %q), want 503 unavailable with Retry-After",
						tc.method, tc.path, r.status, code, r.header.Get("Retry-After"))
				}
			}
			r := e.do(nil, "GET", "/api/v1/rooms/sale/pass", pass, "")
			if failOpen {
				if r.status != 200 {
					t.Errorf("gate failing open = %d %s, want 200", r.status, r.body)
				}
			} else if r.status != 503 || r.header.Get("Retry-After") == "" {
				t.Errorf("gate failing closed = %d %s, want 503 with Retry-After", r.status, r.body)
			}
			if r := e.do(nil, "GET", "/api/v1/rooms/sale/pass", "forged", ""); r.status != 401 {
				t.Errorf("forged pass with the store down = %d, want 401 even when failing open", r.status)
			}
			e.store.down.Store(false)
			if r := e.do(nil, "GET", "/readyz", "", ""); r.status != 200 {
				t.Errorf("readyz after recovery = %d", r.status)
			}
		})
	}
}

// TestConcurrentEnterOneVisitor: 200 simultaneous enters of one browser
// (same visitor cookie) make one queue place.
func TestConcurrentEnterOneVisitor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.putRoom("sale", `{"max_active":1}`)
	e.do(nil, "POST", "/api/v1/rooms/sale/entries", adminKey, `{"visitor_id":"first"}`)
	c := e.client()
	e.do(c, "POST", "/api/v1/rooms/sale/entries", "", "") // sets the visitor cookie
	var wg sync.WaitGroup
	positions := make([]int64, 200)
	for i := range positions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			positions[i] = e.do(c, "POST", "/api/v1/rooms/sale/entries", "", "").entry(t).Position
		}()
	}
	wg.Wait()
	for i, p := range positions {
		if p != 1 {
			t.Fatalf("enter #%d position = %d, want 1", i, p)
		}
	}
	st, err := e.q.Room(context.Background(), "sale")
	if err != nil || st.Waiting != 1 {
		t.Errorf("waiting = %d, %v; want 1", st.Waiting, err)
	}
}

func TestJWKSAndMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	r := e.do(nil, "GET", "/.well-known/jwks.json", "", "")
	var jwks struct {
		Keys []struct{ Kty, Crv, Kid string }
	}
	if json.Unmarshal(r.body, &jwks); r.status != 200 || len(jwks.Keys) != 1 || jwks.Keys[0].Crv != "Ed25519" {
		t.Errorf("jwks: %d %s", r.status, r.body)
	}
	e.putRoom("sale", `{}`)
	e.do(nil, "POST", "/api/v1/rooms/sale/entries", "", "")
	e.do(nil, "GET", "/nope", "", "")
	if r := e.do(nil, "GET", "/metrics", "", ""); r.status != 401 || r.errorCode(t) != "admin_unauthorized" {
		t.Errorf("metrics without the admin key: %d %s, want 401 admin_unauthorized", r.status, r.body)
	}
	r = e.do(nil, "GET", "/metrics", adminKey, "")
	for _, want := range []string{
		`usher_enters_total{result="passthrough",room="sale"} 1`,
		`usher_http_errors_total{code="not_found"} 1`,
		`usher_http_errors_total{code="admin_unauthorized"} 1`,
		`usher_http_requests_total{route="POST /api/v1/rooms/{room}/entries",status="201"} 1`,
	} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func TestSoldOutRoom(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	e.putRoom("sale", `{"max_active":1}`)
	e.do(nil, "POST", "/api/v1/rooms/sale/entries", adminKey, `{"visitor_id":"first"}`) // takes the slot
	w := e.do(nil, "POST", "/api/v1/rooms/sale/entries", adminKey, `{"visitor_id":"waiter"}`).entry(t)
	e.putRoom("sale", `{"state":"sold_out"}`)
	if r := e.do(nil, "POST", "/api/v1/rooms/sale/entries", adminKey, `{"visitor_id":"late"}`); r.status != 409 || r.errorCode(t) != "sold_out" {
		t.Errorf("enter a sold-out room: %d %s, want 409 sold_out (the tickets are gone)", r.status, r.body)
	}
	if got := e.do(nil, "GET", "/api/v1/rooms/sale/entries/me", w.Ticket, "").entry(t); got.State != "sold_out" || got.RoomState != "sold_out" {
		t.Errorf("waiting visitor in a sold-out room: %+v, want state sold_out", got)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// setting returns the setting name of rs, or T's zero value when absent
// or of another type.
func setting[T any](rs wire.RoomSettings, name string) T {
	var v T
	rs.Get(name, &v)
	return v
}

// TestWrongAdminKey: a wrong admin key is told apart from none: both are
// 401 admin_unauthorized, and the message says which it was.
func TestWrongAdminKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	for _, tc := range []struct {
		name, bearer, path, want string
	}{
		{"no key", "", "/api/v1/rooms", "admin key required"},
		{"wrong key", "not-the-admin-key", "/api/v1/rooms", "wrong admin key"},
		{"wrong key on metrics", "not-the-admin-key", "/metrics", "wrong admin key"},
		{"no key on metrics", "", "/metrics", "admin key required"},
	} {
		r := e.do(nil, "GET", tc.path, tc.bearer, "")
		var b struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal(r.body, &b); err != nil || r.status != 401 || b.Error.Code != "admin_unauthorized" || !strings.HasPrefix(b.Error.Message, tc.want) {
			t.Errorf("%s: GET %s = %d %s, want 401 admin_unauthorized %q", tc.name, tc.path, r.status, r.body, tc.want)
		}
	}
}
