package gateway

// Browser tests of the proof of work: the waiting page's worker in
// chromium, checked against package pow and crypto/sha256. Like the other
// browser tests they run when chromium is installed.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/limit/memlimit"
	"usher/internal/pow"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/token"
)

// httpServer serves h until the test ends.
func httpServer(tb testing.TB, h http.Handler) string {
	tb.Helper()
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return srv.URL
}

// workerSite is a proxy whose every path is open, in front of a blank
// page: a page of the proxy's origin, from which a test starts the worker.
func workerSite(tb testing.TB) string {
	tb.Helper()
	origin := httpServer(tb, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(`<!doctype html><title>blank</title>`))
	}))
	keys, err := token.LoadDir(tb.TempDir(), time.Now)
	if err != nil {
		tb.Fatal(err)
	}
	u, _ := url.Parse(origin)
	p, err := New(Config{
		Origin: u, Queue: queue.New(memqueue.New(), queue.Options{}), Keys: keys,
		Rules: Rules{DefaultRoom: "sale", Open: []string{"/"}}, Registry: prometheus.NewRegistry(),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return httpServer(tb, p)
}

// workerResult is the worker's last message, and the time from starting
// the worker to receiving it, measured in the page.
type workerResult struct {
	Nonce   string   `json:"nonce"`
	Tried   int64    `json:"tried"`
	Impl    string   `json:"impl"`
	Digests []string `json:"digests"`
	Error   string   `json:"error"`
	MS      float64  `json:"ms"`
}

// inWorker starts a worker from WorkerPath in the page of ctx, posts msg
// to it, and returns its last message (progress messages are skipped). A
// new worker each time, as the waiting page does.
func inWorker(tb testing.TB, ctx context.Context, msg any) workerResult {
	tb.Helper()
	m, err := json.Marshal(msg)
	if err != nil {
		tb.Fatal(err)
	}
	js := `new Promise((resolve, reject) => {
		const t0 = performance.now();
		const w = new Worker("` + WorkerPath + `");
		w.onerror = e => reject(new Error("worker: " + e.message));
		w.onmessage = ev => {
			const m = ev.data;
			if (m.nonce === undefined && m.digests === undefined && m.error === undefined) return;
			w.terminate();
			resolve(Object.assign({ ms: performance.now() - t0 }, m));
		};
		w.postMessage(` + string(m) + `);
	})`
	r, err := chromedp.Run(ctx, chromedp.Evaluate[workerResult](js, chromedp.EvalAwaitPromise))
	if err != nil || r.Error != "" {
		tb.Fatalf("worker with %s: %v %s", m, err, r.Error)
	}
	return r
}

// TestBrowserFallbackSHA256: the worker's own SHA-256, used where
// crypto.subtle is missing, gives crypto/sha256's digests, across the
// padding's block boundaries and for text that is not ASCII.
func TestBrowserFallbackSHA256(t *testing.T) {
	site := workerSite(t)
	ctx := newBrowser(t)
	navigate(t, ctx, site+"/")
	inputs := []string{"", "abc", "c1.token:0", strings.Repeat("a", 55), strings.Repeat("b", 56),
		strings.Repeat("c", 63), strings.Repeat("d", 64), strings.Repeat("e", 119), strings.Repeat("f", 1000),
		"대기열 ✓ é"}
	got := inWorker(t, ctx, map[string]any{"sha256": inputs}).Digests
	if len(got) != len(inputs) {
		t.Fatalf("%d digests for %d inputs", len(got), len(inputs))
	}
	for i, in := range inputs {
		sum := sha256.Sum256([]byte(in))
		if want := hex.EncodeToString(sum[:]); got[i] != want {
			t.Errorf("sha256(%.20q…) in the worker = %s, want %s", in, got[i], want)
		}
	}
}

// TestBrowserWorkerSolves: the worker's nonces solve pow's challenges, with
// WebCrypto (http://127.0.0.1 is a secure context) and with its own
// SHA-256, and both try the nonces in Go's order.
func TestBrowserWorkerSolves(t *testing.T) {
	site := workerSite(t)
	ctx := newBrowser(t)
	navigate(t, ctx, site+"/")
	keys, err := token.LoadDir(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	guard := pow.New(keys, memlimit.New(), time.Now)
	for _, impl := range []string{"webcrypto", "js"} {
		c := guard.Issue("sale", 10)
		r := inWorker(t, ctx, map[string]any{"token": c.Token, "bits": c.Bits, "impl": impl})
		if r.Impl != impl || !pow.Solves(c.Token, r.Nonce, c.Bits) || r.Nonce != pow.Solve(c) {
			t.Errorf("%s: nonce %q (impl %s), want %q, which solves %d bits", impl, r.Nonce, r.Impl, pow.Solve(c), c.Bits)
		}
	}
}

// TestBrowserProofOfWork: a newcomer's browser, in a room with pow_bits 12,
// solves the challenge in the worker by itself, takes exactly one place,
// waits, and reaches the origin page once the room admits it.
func TestBrowserProofOfWork(t *testing.T) {
	e := browserEnv(t, withFlood)
	v, err := e.q.Room(t.Context(), "sale")
	if err != nil {
		t.Fatal(err)
	}
	s := v.Settings
	s.PowBits = 12
	if err := e.q.PutRoom(t.Context(), "sale", s); err != nil {
		t.Fatal(err)
	}
	if res := do(t, http.DefaultClient, "GET", e.url+"/shop", nil); res.status != http.StatusPreconditionRequired {
		t.Fatalf("newcomer: %d, want 428: is the proof of work on?", res.status)
	}
	ctx := newBrowser(t)
	navigate(t, ctx, e.url+"/shop?item=7")
	waitText(t, ctx, "position", "1") // solved, entered, and shown the waiting page
	waitText(t, ctx, "title", "The sale has not started yet")
	if n := e.waiting("sale"); n != 1 {
		t.Errorf("%d waiting, want the browser's one place", n)
	}
	setState(t, e.q, "sale", queue.Open)
	waitText(t, ctx, "origin", "Welcome to the shop")
	waitText(t, ctx, "uri", "/shop?item=7")
	v, err = e.q.Room(t.Context(), "sale")
	if err != nil || v.Waiting+v.Active != 1 || v.AdmittedTotal != 1 {
		t.Errorf("after admission: waiting %d, active %d, admitted %d (%v); want one place, admitted", v.Waiting, v.Active, v.AdmittedTotal, err)
	}
}

// TestBrowserInsecureOrigin: on plain HTTP under a name other than
// localhost the page is not a secure context and has no crypto.subtle; the
// worker solves with its own SHA-256 instead of getting stuck.
func TestBrowserInsecureOrigin(t *testing.T) {
	site, err := url.Parse(workerSite(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t, chromedp.Flag("host-resolver-rules", "MAP usher.test "+site.Hostname()))
	navigate(t, ctx, "http://usher.test:"+site.Port()+"/")
	if secure, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.isSecureContext || !!(window.crypto && crypto.subtle)`)); err != nil || secure {
		t.Fatalf("http://usher.test is a secure context with crypto.subtle (%v, %v): the test proves nothing", secure, err)
	}
	keys, err := token.LoadDir(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	c := pow.New(keys, memlimit.New(), time.Now).Issue("sale", 10)
	if r := inWorker(t, ctx, map[string]any{"token": c.Token, "bits": c.Bits}); r.Impl != "js" || !pow.Solves(c.Token, r.Nonce, c.Bits) {
		t.Errorf("insecure origin: nonce %q by %s, want a solution by js", r.Nonce, r.Impl)
	}
}
