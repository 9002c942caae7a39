package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/admission"
	"usher/internal/booking/sqlitebooking"
	"usher/internal/console"
	"usher/internal/hold/memhold"
	"usher/internal/httpapi"
	"usher/internal/mq/natsmq"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/sale"
	"usher/internal/testenv"
	"usher/internal/token"
)

const adminKey = "console-test-admin-key-0123456789"

// env is usher's API with the console mounted, on a store of its own, with
// the room views' refresher, the admission scheduler and the console's
// history sampler running.
type env struct {
	t   testing.TB
	srv *httptest.Server
	q   *queue.Queue
	con *console.Console
}

type envOptions struct {
	tls     bool        // serve TLS (cookies Secure) instead of plain HTTP
	booking bool        // serve the booking backbone: SQLite, memory holds, in-process NATS
	store   queue.Store // default memqueue
	mod     func(*console.Config)
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	if o.store == nil {
		o.store = memqueue.New()
	}
	reg := prometheus.NewRegistry()
	metrics := queue.NewMetrics(reg)
	q := queue.New(o.store, queue.Options{Metrics: metrics})
	keys, err := token.LoadDir(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var svc *sale.Service
	if o.booking {
		svc = newSale(t, ctx, q)
		wg.Go(func() { svc.Run(ctx) })
	}
	api := httpapi.NewServer(httpapi.Config{Queue: q, Keys: keys, AdminKey: adminKey, Registry: reg, InsecureCookies: !o.tls, Sale: svc})
	eta := prometheus.NewRegistry() // as usher wires it: the ETA error alone (cmd/usher core.go)
	eta.MustRegister(metrics.ETAErrors())
	c := console.Config{Queue: q, API: api, AdminKey: adminKey, InsecureCookies: !o.tls, Gatherer: eta, Booking: svc != nil}
	if o.mod != nil {
		o.mod(&c)
	}
	con := console.New(c)
	h := con.Mount(api)
	srv := httptest.NewUnstartedServer(h)
	if o.tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	wg.Go(func() { q.Run(ctx) })
	wg.Go(func() { admission.New(q, slog.New(slog.DiscardHandler)).Run(ctx) })
	wg.Go(func() { con.Run(ctx) })
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close(); cancel(); wg.Wait() })
	return &env{t: t, srv: srv, q: q, con: con}
}

// newSale is the booking backbone on SQLite, memory holds and an
// in-process NATS server, all the test's own; Run is the caller's.
func newSale(t testing.TB, ctx context.Context, q *queue.Queue) *sale.Service {
	t.Helper()
	catalog, err := sqlitebooking.Open(ctx, filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := natsmq.StartEmbedded(testenv.DataDir(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := natsmq.ConnectEmbedded(srv)
	if err != nil {
		t.Fatal(err)
	}
	broker, err := natsmq.Open(ctx, nc, natsmq.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close(); srv.Shutdown(); srv.WaitForShutdown(); catalog.Close() })
	return sale.New(sale.Config{Catalog: catalog, Holds: memhold.New(), Broker: broker, Queue: q, Workers: 2})
}

// room creates a room with the settings s.
func (e *env) room(name string, s queue.Settings) {
	e.t.Helper()
	if err := e.q.PutRoom(context.Background(), name, s); err != nil {
		e.t.Fatal(err)
	}
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

// code is the JSON error code of the answer, or "".
func (r resp) code() string {
	var b struct{ Error struct{ Code string } }
	json.Unmarshal(r.body, &b)
	return b.Error.Code
}

// do sends one request with the headers given as "Name: value" strings.
func (e *env) do(method, path, body string, headers ...string) resp {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Add(k, v)
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, b}
}

// signIn signs in with the admin key and returns the cookie header and the
// CSRF token.
func (e *env) signIn() (cookie, csrf string) {
	e.t.Helper()
	r := e.do("POST", "/console/session", `{"key":"`+adminKey+`"}`, "Content-Type: application/json", "Origin: "+e.srv.URL)
	if r.status != 200 {
		e.t.Fatalf("sign in = %d %s", r.status, r.body)
	}
	var info console.SessionInfo
	if err := json.Unmarshal(r.body, &info); err != nil || info.CSRF == "" {
		e.t.Fatalf("sign in answer %s: %v", r.body, err)
	}
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == console.CookieName {
			return "Cookie: " + c.Name + "=" + c.Value, info.CSRF
		}
	}
	e.t.Fatalf("sign in set no %s cookie: %v", console.CookieName, r.header)
	return "", ""
}

// enter puts n visitors in the room through the API (as the admin key,
// with visitor ids of its own).
func (e *env) enter(room, prefix string, n int) {
	e.t.Helper()
	for i := range n {
		body, _ := json.Marshal(map[string]string{"visitor_id": prefix + "-" + strconv.Itoa(i)})
		r := e.do("POST", "/api/v1/rooms/"+room+"/entries", string(body), "Authorization: Bearer "+adminKey, "Content-Type: application/json")
		if r.status != 201 && r.status != 200 {
			e.t.Fatalf("enter = %d %s", r.status, bytes.TrimSpace(r.body))
		}
	}
}
