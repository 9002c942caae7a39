package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"usher/internal/event"
	"usher/internal/testenv"
)

// syncBuffer is an io.Writer the test can read while run writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var (
	servingRE = regexp.MustCompile(`serving on (http://\S+)`)
	adminRE   = regexp.MustCompile(`admin on (http://\S+)`)
)

// adminURLs maps the base URL of a command a test started to the URL of
// its operators' listener (--admin-addr).
var adminURLs sync.Map

// adminOf returns the URL of the operators' listener of the command that
// serves visitors at base.
func adminOf(t testing.TB, base string) string {
	t.Helper()
	u, ok := adminURLs.Load(base)
	if !ok {
		t.Fatalf("no admin listener known for %s", base)
	}
	return u.(string)
}

// withAdminAddr adds --admin-addr 127.0.0.1:0 to the args of serve, proxy
// or auth unless they or env set it: tests run in parallel, and the
// default port is fixed.
func withAdminAddr(command string, args []string, env map[string]string) []string {
	if !slices.Contains([]string{"serve", "proxy", "auth"}, command) ||
		env["USHER_ADMIN_ADDR"] != "" && command == "serve" || env["USHER_"+strings.ToUpper(command)+"_ADMIN_ADDR"] != "" {
		return args
	}
	for _, a := range args {
		if a == "--admin-addr" || a == "-admin-addr" || strings.HasPrefix(a, "--admin-addr=") || strings.HasPrefix(a, "-admin-addr=") {
			return args
		}
	}
	return append(slices.Clip(args), "--admin-addr", "127.0.0.1:0")
}

// aliasAdmin makes the admin listener of the command at usher that of
// base too: a front proxy's address, for the tests that set up rooms
// "through the edge".
func aliasAdmin(t testing.TB, base, usher string) { adminURLs.Store(base, adminOf(t, usher)) }

// noteAdmin records the admin URL that stdout announces for base.
func noteAdmin(base, stdout string) {
	if m := adminRE.FindStringSubmatch(stdout); m != nil {
		adminURLs.Store(base, m[1])
	}
}

// startCommand runs `usher <command> args…` (through run) until the test
// ends and returns its base URL once healthPath answers 200.
func startCommand(t *testing.T, command, healthPath string, env map[string]string, args ...string) string {
	t.Helper()
	base, _, _ := startCommandOutput(t, command, healthPath, env, args...)
	return base
}

// startCommandOutput is startCommand that also returns what the command
// writes to stdout and stderr, as it writes it.
func startCommandOutput(t *testing.T, command, healthPath string, env map[string]string, args ...string) (base string, stdout, stderr *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	getenv := func(k string) string { return env[k] }
	args = withAdminAddr(command, args, env)
	go func() { done <- run(ctx, append([]string{command}, args...), getenv, stdout, stderr) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("usher %s returned %v after shutdown, want nil", command, err)
		}
	})
	testenv.Eventually(t, time.Minute, "usher "+command+" to answer "+healthPath, func() bool {
		select {
		case err := <-done:
			done <- nil // for the cleanup
			t.Fatalf("usher %s exited early: %v\n%s", command, err, stderr)
		default:
		}
		m := servingRE.FindStringSubmatch(stdout.String())
		if m == nil {
			return false
		}
		res, err := http.Get(m[1] + healthPath)
		if err != nil {
			return false
		}
		res.Body.Close()
		base = m[1]
		noteAdmin(base, stdout.String())
		return res.StatusCode == 200
	})
	return base, stdout, stderr
}

// startServe runs `usher serve` until the test ends.
func startServe(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	return startCommand(t, "serve", "/healthz", env, args...)
}

type client struct {
	t    *testing.T
	base string
}

// admin is the client of the admin listener of the command at c.base.
func (c client) admin() client { return client{c.t, adminOf(c.t, c.base)} }

func (c client) do(method, path, bearer, body string) (int, http.Header, map[string]any) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var m map[string]any
	json.Unmarshal(b, &m)
	return res.StatusCode, res.Header, m
}

// waitFor polls cond until it holds (the scheduler runs in real time).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, time.Minute, what, cond)
}

func TestServeEmbeddedDefaults(t *testing.T) {
	t.Parallel()
	dir := testenv.DataDir(t)
	base := startServe(t, map[string]string{"USHER_DATA_DIR": dir}, "--addr", "127.0.0.1:0")
	key, err := os.ReadFile(filepath.Join(dir, "admin.key"))
	if err != nil {
		t.Fatalf("admin key not generated: %v", err)
	}
	admin := strings.TrimSpace(string(key))
	c := client{t, base}
	if st, _, body := c.admin().do("PUT", "/api/v1/rooms/sale", admin, `{"max_active":2,"admit_rate":20,"interval_ms":50}`); st != 201 {
		t.Fatalf("create room: %d %v", st, body)
	}
	tickets := make([]string, 5)
	for i := range tickets {
		st, _, body := c.do("POST", "/api/v1/rooms/sale/entries", admin, fmt.Sprintf(`{"visitor_id":"u%d"}`, i))
		if st != 201 {
			t.Fatalf("enter u%d: %d %v", i, st, body)
		}
		tickets[i] = body["ticket"].(string)
	}
	// The scheduler admits u0 and u1 (cap 2); u2 waits until u0 finishes.
	var pass string
	waitFor(t, "u0 admitted", func() bool {
		_, _, body := c.do("GET", "/api/v1/rooms/sale/entries/me", tickets[0], "")
		pass, _ = body["pass"].(string)
		return body["state"] == "admitted"
	})
	if st, _, _ := c.do("GET", "/api/v1/rooms/sale/pass", pass, ""); st != 200 {
		t.Fatalf("pass check: %d", st)
	}
	if _, _, body := c.do("GET", "/api/v1/rooms/sale/entries/me", tickets[2], ""); body["state"] != "waiting" {
		t.Fatalf("u2 = %v, want waiting behind the cap", body)
	}
	if st, _, _ := c.do("DELETE", "/api/v1/rooms/sale/entries/me", pass, ""); st != 204 {
		t.Fatalf("finish: %d", st)
	}
	waitFor(t, "u2 admitted after u0 finished", func() bool {
		_, _, body := c.do("GET", "/api/v1/rooms/sale/entries/me", tickets[2], "")
		return body["state"] == "admitted"
	})
}

func TestServeBadSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--store", "postgres://x"}, nil, "--store"},
		{nil, map[string]string{"USHER_STORE": "mem"}, "USHER_STORE"},
		{nil, map[string]string{"USHER_FAIL_OPEN": "sometimes"}, "USHER_FAIL_OPEN"},
		{nil, map[string]string{"USHER_STORE_TIMEOUT": "soon"}, "USHER_STORE_TIMEOUT"},
		{[]string{"--addr", "nonsense"}, nil, "--addr"},
		{[]string{"--bogus"}, nil, "bogus"},
	} {
		env := map[string]string{"USHER_DATA_DIR": testenv.DataDir(t)}
		for k, v := range tc.env {
			env[k] = v
		}
		var stderr bytes.Buffer
		err := run(context.Background(), append([]string{"serve"}, tc.args...), func(k string) string { return env[k] }, io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error()+stderr.String(), tc.want) {
			t.Errorf("serve %v %v: err = %v, want an error naming %s", tc.args, tc.env, err, tc.want)
		}
	}
	if err := run(context.Background(), []string{"frobnicate"}, os.Getenv, io.Discard, io.Discard); err == nil {
		t.Error("unknown command: want an error")
	}
}

func TestKeysRotate(t *testing.T) {
	t.Parallel()
	dir := testenv.DataDir(t)
	env := func(k string) string { return map[string]string{"USHER_DATA_DIR": dir}[k] }
	var out bytes.Buffer
	if err := run(context.Background(), []string{"keys", "rotate", "--activate-in", "10m"}, env, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(context.Background(), []string{"keys", "list"}, env, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(strings.TrimSpace(out.String()), "\n"); lines != 1 {
		t.Errorf("keys list after one rotate into an empty dir:\n%s\nwant a header and 1 key", out.String())
	}
}

// redisServer returns a function that starts a redis-server of its own on a
// free port (the same port each time), without persistence, and that port.
// It skips without redis-server, but fails under CI.
func redisServer(t *testing.T) (start func() *exec.Cmd, port string) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Skip(t, "redis-server", "install redis-server (apt-get install redis-server)")
	}
	port = freePort(t)
	return func() *exec.Cmd {
		cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "redis-server up", func() bool {
			c, err := net.Dial("tcp", "127.0.0.1:"+port)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
		return cmd
	}, port
}

// TestServeRedisOutage runs usher against a Redis server of its own, stops
// that server, and checks that usher fails closed with 503 + Retry-After,
// then recovers when Redis is back. It needs redis-server; under CI it must
// run.
func TestServeRedisOutage(t *testing.T) {
	t.Parallel()
	startRedis, port := redisServer(t)
	redis := startRedis()
	t.Cleanup(func() { redis.Process.Kill(); redis.Wait() })

	dir := testenv.DataDir(t)
	base := startServe(t, map[string]string{"USHER_DATA_DIR": dir},
		"--addr", "127.0.0.1:0", "--store", "redis://127.0.0.1:"+port+"/0")
	key, _ := os.ReadFile(filepath.Join(dir, "admin.key"))
	admin := strings.TrimSpace(string(key))
	c := client{t, base}
	pass, ticket := c.oneSlotSale(admin)

	redis.Process.Kill()
	redis.Wait()
	for _, tc := range []struct{ method, path, bearer, body string }{
		{"POST", "/api/v1/rooms/sale/entries", admin, `{"visitor_id":"c"}`},
		{"GET", "/api/v1/rooms/sale/entries/me", ticket, ""}, // b is near the front: exact answer needed
		{"GET", "/api/v1/rooms/sale/pass", pass, ""},         // the gate fails closed
		{"GET", "/readyz", "", ""},
	} {
		st, h, body := c.do(tc.method, tc.path, tc.bearer, tc.body)
		code, _ := body["error"].(map[string]any)["code"].(string)
		if st != 503 || code != "unavailable" || h.Get("Retry-After") == "" {
			t.Errorf("%s %s with Redis down = %d %v (Retry-After %q), want 503 unavailable with Retry-After",
				tc.method, tc.path, st, body, h.Get("Retry-After"))
		}
	}

	redis = startRedis() // empty: a Redis without persistence lost the room
	waitFor(t, "readyz after Redis is back", func() bool {
		st, _, _ := c.do("GET", "/readyz", "", "")
		return st == 200
	})
	if st, _, body := c.do("POST", "/api/v1/rooms/sale/entries", admin, `{"visitor_id":"c"}`); st != 404 {
		t.Errorf("enter after Redis lost its data = %d %v, want 404 room_not_found (the operator re-creates rooms)", st, body)
	}
}

// oneSlotSale creates the room sale with one slot, admits visitor a and
// queues visitor b; it returns a's pass and b's ticket.
func (c client) oneSlotSale(admin string) (pass, ticket string) {
	c.t.Helper()
	if st, _, body := c.admin().do("PUT", "/api/v1/rooms/sale", admin, `{"max_active":1}`); st != 201 {
		c.t.Fatalf("create room: %d %v", st, body)
	}
	_, _, body := c.do("POST", "/api/v1/rooms/sale/entries", admin, `{"visitor_id":"a"}`)
	pass, _ = body["pass"].(string)
	_, _, body = c.do("POST", "/api/v1/rooms/sale/entries", admin, `{"visitor_id":"b"}`)
	ticket, _ = body["ticket"].(string)
	if pass == "" || ticket == "" {
		c.t.Fatalf("setup: pass %q ticket %q", pass, ticket)
	}
	return pass, ticket
}

func freePort(t *testing.T) string {
	t.Helper()
	_, port, _ := net.SplitHostPort(testenv.ClosedAddr(t))
	return port
}

// TestProductionStack runs `usher seed` and `usher serve` on the real
// services (Redis, PostgreSQL, NATS) and books seats end to end.
func TestProductionStack(t *testing.T) {
	t.Parallel()
	redisURL := testenv.URL(t, "USHER_TEST_REDIS")
	natsURL := testenv.URL(t, "USHER_TEST_NATS")
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	dbURL := testenv.PostgresSchema(t)
	dir := testenv.DataDir(t)
	prefix := testenv.RedisPrefix(t, testenv.Redis(t))
	flags := []string{"--store", redisURL, "--redis-prefix", prefix, "--db", dbURL, "--data-dir", dir}
	var out bytes.Buffer
	if err := run(context.Background(), append([]string{"seed", "--seats", "200", "--json"}, flags...), os.Getenv, &out, io.Discard); err != nil {
		t.Fatalf("seed: %v", err)
	}
	var seeded struct {
		ScheduleID int64 `json:"schedule_id"`
	}
	if err := json.Unmarshal(out.Bytes(), &seeded); err != nil || seeded.ScheduleID == 0 {
		t.Fatalf("seed printed %q: %v", out.String(), err)
	}
	natsName := "e2e" + suffix
	t.Cleanup(func() { deleteNATS(t, natsURL, natsName) }) // after serve stopped
	base := startServe(t, map[string]string{}, append(flags, "--addr", "127.0.0.1:0", "--nats", natsURL, "--nats-name", natsName)...)
	key, _ := os.ReadFile(filepath.Join(dir, "admin.key"))
	admin := strings.TrimSpace(string(key))
	c := client{t, base}
	room := fmt.Sprintf("schedule-%d", seeded.ScheduleID)
	if st, _, body := c.admin().do("GET", "/api/v1/rooms/"+room, admin, ""); st != 200 {
		t.Fatalf("seed did not create the room in Redis: %d %v", st, body)
	}
	_, _, body := c.do("POST", "/api/v1/rooms/"+room+"/entries", admin, `{"visitor_id":"alice"}`)
	pass, _ := body["pass"].(string)
	ticket, _ := body["ticket"].(string)
	if pass == "" {
		t.Fatalf("not admitted: %v", body)
	}
	id := holdAndReserve(t, c, seeded.ScheduleID, pass, 200, 7)
	waitFor(t, "the reservation confirmed in PostgreSQL", func() bool {
		_, _, body := c.do("GET", "/api/v1/reservations/"+id, ticket, "")
		return body["status"] == "confirmed"
	})
	// The event stream: alice's queue counts from the instance (a new
	// place admitted at once; left_active: the sale freed her slot), in one
	// counted event or more, her hold, and the decision from PostgreSQL's
	// outbox through the relay, in either order.
	want := []string{"counted arrivals=1 admissions=1 left_active=1", "hold_placed alice", "reservation_confirmed alice", "reservation_submitted alice"}
	var got []string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		got = streamEvents(t, natsURL, natsName, room)
		slices.Sort(got)
		if slices.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events of %s: %q, want %q", room, got, want)
		}
	}
}

// streamEvents reads the events of room from the event stream of the
// deployment name, as "type visitor", and the sum of its counted events
// as one "counted …" line.
func streamEvents(t *testing.T, natsURL, name, room string) []string {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, event.StreamName(name))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var sum event.Data
	counted := false
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		var e event.Event
		if err := json.Unmarshal(m.Data, &e); err != nil {
			t.Fatal(err)
		}
		switch {
		case e.Room != room || e.Type == event.SettingsChanged:
		case e.Type == event.Counted:
			var d event.Data
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			sum.Arrivals += d.Arrivals
			sum.Admissions += d.Admissions
			sum.Abandons += d.Abandons
			sum.LeftActive += d.LeftActive
			counted = true
		default:
			out = append(out, string(e.Type)+" "+e.Visitor)
		}
	}
	if counted {
		out = append(out, fmt.Sprintf("counted arrivals=%d admissions=%d left_active=%d", sum.Arrivals, sum.Admissions, sum.LeftActive))
		if sum.Abandons != 0 {
			out = append(out, fmt.Sprintf("abandons=%d", sum.Abandons))
		}
	}
	return out
}

// deleteNATS removes the stream and the bucket serve made under name.
func deleteNATS(t *testing.T, natsURL, name string) {
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Errorf("clean up NATS: %v", err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Errorf("clean up NATS: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, strings.ToUpper(name)+"_RESERVATIONS"); err != nil {
		t.Errorf("delete stream: %v", err)
	}
	if err := js.DeleteKeyValue(ctx, name+"_reservations"); err != nil {
		t.Errorf("delete bucket: %v", err)
	}
	if err := js.DeleteStream(ctx, event.StreamName(name)); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("delete event stream: %v", err)
	}
}

// TestSeedThenServeEmbedded is the newcomer's path: `usher seed` and then
// `usher serve` on the embedded defaults; the schedule's room appears in the
// server's memory store and the seats can be browsed.
func TestSeedThenServeEmbedded(t *testing.T) {
	t.Parallel()
	dir := testenv.DataDir(t)
	env := map[string]string{"USHER_DATA_DIR": dir}
	getenv := func(k string) string { return env[k] }
	var out bytes.Buffer
	if err := run(context.Background(), []string{"seed", "--seats", "120"}, getenv, &out, io.Discard); err != nil {
		t.Fatalf("seed: %v", err)
	}
	if !strings.Contains(out.String(), "schedule 1 ") {
		t.Fatalf("seed printed %q", out.String())
	}
	base := startServe(t, env, "--addr", "127.0.0.1:0")
	key, _ := os.ReadFile(filepath.Join(dir, "admin.key"))
	admin := strings.TrimSpace(string(key))
	c := client{t, base}
	waitFor(t, "the schedule's room", func() bool {
		st, _, _ := c.admin().do("GET", "/api/v1/rooms/schedule-1", admin, "")
		return st == 200
	})
	_, _, body := c.do("POST", "/api/v1/rooms/schedule-1/entries", admin, `{"visitor_id":"v"}`)
	pass, _ := body["pass"].(string)
	st, _, body := c.do("GET", "/api/v1/schedules/1/seats", pass, "")
	if seats, _ := body["seats"].([]any); st != 200 || len(seats) != 120 {
		t.Fatalf("seat map: %d with %d seats, want 200 with 120", st, len(seats))
	}
}

// holdAndReserve reads the schedule's seat map with pass (want seats
// seats), holds the pick-th seat and reserves it; it returns the
// reservation id.
func holdAndReserve(t *testing.T, c client, schedule int64, pass string, want, pick int) string {
	t.Helper()
	st, _, body := c.do("GET", fmt.Sprintf("/api/v1/schedules/%d/seats", schedule), pass, "")
	seats, _ := body["seats"].([]any)
	if st != 200 || len(seats) != want {
		t.Fatalf("seat map: %d, %d seats, want %d", st, len(seats), want)
	}
	seat := int64(seats[pick].(map[string]any)["seat_id"].(float64))
	if st, _, body := c.do("POST", fmt.Sprintf("/api/v1/schedules/%d/holds", schedule), pass, fmt.Sprintf(`{"seat_ids":[%d]}`, seat)); st != 201 {
		t.Fatalf("hold: %d %v", st, body)
	}
	st, _, body = c.do("POST", "/api/v1/reservations", pass, fmt.Sprintf(`{"schedule_id":%d,"seat_ids":[%d],"idempotency_key":"k"}`, schedule, seat))
	id, _ := body["reservation_id"].(string)
	if st != 202 || id == "" {
		t.Fatalf("reserve: %d %v", st, body)
	}
	return id
}
