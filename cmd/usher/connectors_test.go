package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"usher/internal/gate"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/testenv"
	"usher/internal/token"
)

// nodeBin returns the path of node, version 20 or later (the connector's
// own crypto and test runner). It skips without one, and fails under CI.
func nodeBin(tb testing.TB) string {
	tb.Helper()
	const enable = "install Node.js 20 or later (nodesource's nodejs package)"
	bin, err := exec.LookPath("node")
	if err != nil {
		testenv.Skip(tb, "node", enable)
	}
	out, err := exec.Command(bin, "--version").Output()
	m := regexp.MustCompile(`^v(\d+)\.`).FindSubmatch(out)
	if err != nil || m == nil {
		tb.Fatalf("node --version: %q, %v", out, err)
	}
	if major, _ := strconv.Atoi(string(m[1])); major < 20 {
		testenv.Skip(tb, "node", enable+" (found "+string(bytes.TrimSpace(out))+")")
	}
	return bin
}

// connectorsDir is the connectors' directory, from this package's.
var connectorsDir = filepath.Join("..", "..", "connectors")

// TestConnectorNode runs the Node connector's tests (node --test
// connectors/node: the conformance vectors, and test/usher.test.js
// against a live usher) with a usher auth built from this tree
// (liveConnector).
func TestConnectorNode(t *testing.T) {
	t.Parallel()
	node := nodeBin(t)
	out := liveConnector(t, "node --test connectors/node", func(ctx context.Context) *exec.Cmd {
		return exec.CommandContext(ctx, node, "--test", "--test-reporter=tap", filepath.Join(connectorsDir, "node"))
	})
	for _, want := range []string{"# fail 0", "# skipped 0", "# cancelled 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("node --test connectors/node: no %q in its report:\n%s", want, out)
		}
	}
}

// javaBins returns the paths of java and javac, JDK 17 or later (its own
// Ed25519, records, pattern matching). It skips without them, and fails
// under CI.
func javaBins(tb testing.TB) (java, javac string) {
	tb.Helper()
	const enable = "install JDK 17 or later (Debian's openjdk-17-jdk-headless)"
	java, err := exec.LookPath("java")
	if err != nil {
		testenv.Skip(tb, "java", enable)
	}
	javac, err = exec.LookPath("javac")
	if err != nil {
		testenv.Skip(tb, "javac", enable)
	}
	out, err := exec.Command(javac, "-version").CombinedOutput()
	m := regexp.MustCompile(`javac (\d+)`).FindSubmatch(out)
	if err != nil || m == nil {
		tb.Fatalf("javac -version: %q, %v", out, err)
	}
	if major, _ := strconv.Atoi(string(m[1])); major < 17 {
		testenv.Skip(tb, "javac", enable+" (found "+string(bytes.TrimSpace(out))+")")
	}
	return java, javac
}

// tomcatJars is the class path of Debian's embedded Tomcat 10.1 (Jakarta
// Servlet 6), which the Java connector's servlet filter is compiled
// against and tested in, and of the Jakarta annotations it loads. It skips
// without them, and fails under CI.
func tomcatJars(tb testing.TB) string {
	tb.Helper()
	jars := []string{"/usr/share/java/tomcat10-embed-core.jar", "/usr/share/java/jakarta-annotation-api.jar"}
	for _, jar := range jars {
		if _, err := os.Stat(jar); err != nil {
			testenv.Skip(tb, "tomcat10-embed", "apt-get install libtomcat10-embed-java libjakarta-annotation-api-java")
		}
	}
	return strings.Join(jars, string(os.PathListSeparator))
}

// buildJava compiles the Java connector, its servlet filter and its tests
// with javac into a directory of the test's, and returns the class path
// to run them with.
func buildJava(tb testing.TB, javac, tomcat string) string {
	tb.Helper()
	dir := filepath.Join(connectorsDir, "java")
	var sources []string
	filepath.WalkDir(filepath.Join(dir, "src"), func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".java") {
			sources = append(sources, path)
		}
		return nil
	})
	if len(sources) < 10 {
		tb.Fatalf("connectors/java: %d sources", len(sources))
	}
	classes := tb.TempDir()
	cmd := exec.Command(javac, append([]string{"-Xlint:all", "-Werror", "-d", classes, "-cp", tomcat}, sources...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("javac connectors/java: %v\n%s", err, out)
	}
	return classes + string(os.PathListSeparator) + tomcat
}

// TestConnectorJava compiles the Java connector with javac and runs its
// tests (usher.connector.Tests: the conformance vectors, the pure parts,
// and LiveTests, the servlet filter in an embedded Tomcat against a live
// usher) with a usher auth built from this tree (liveConnector).
func TestConnectorJava(t *testing.T) {
	t.Parallel()
	java, javac := javaBins(t)
	cp := buildJava(t, javac, tomcatJars(t))
	vectors := filepath.Join(connectorsDir, "testdata", "vectors.json")
	out := liveConnector(t, "java usher.connector.Tests", func(ctx context.Context) *exec.Cmd {
		return exec.CommandContext(ctx, java, "-cp", cp, "usher.connector.Tests", vectors)
	})
	m := regexp.MustCompile(`(?m)^(\d+) passed, 0 failed, 0 skipped$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("java usher.connector.Tests: no \"N passed, 0 failed, 0 skipped\" in its report:\n%s", out)
	}
	// The vectors (44), the pure parts and the live tests.
	if n, _ := strconv.Atoi(m[1]); n < 70 {
		t.Errorf("java usher.connector.Tests: %d passed; want every vector and live test:\n%s", n, out)
	}
}

// phpBin returns the path of php, 8.1 or later, with ext-sodium (the
// connector's Ed25519), and the PSR interfaces and Nyholm's PSR-7 the
// PSR-15 middleware is tested with, as Debian packages them. It skips
// without them, and fails under CI.
func phpBin(tb testing.TB) string {
	tb.Helper()
	const enable = "apt-get install php-cli php-psr php-nyholm-psr7"
	bin, err := exec.LookPath("php")
	if err != nil {
		testenv.Skip(tb, "php", enable)
	}
	out, err := exec.Command(bin, "-r", `echo PHP_VERSION_ID, " ", extension_loaded("sodium") ? 1 : 0, " ",
		interface_exists("Psr\\Http\\Server\\MiddlewareInterface") ? 1 : 0, " ", is_file("/usr/share/php/Nyholm/Psr7/autoload.php") ? 1 : 0;`).Output()
	var version, sodium, psr, nyholm int
	if _, serr := fmt.Sscan(string(out), &version, &sodium, &psr, &nyholm); err != nil || serr != nil {
		tb.Fatalf("php -r: %q, %v, %v", out, err, serr)
	}
	if version < 80100 || sodium == 0 || psr == 0 || nyholm == 0 {
		testenv.Skip(tb, "php", fmt.Sprintf("%s (found PHP %d, sodium %d, PSR-15 %d, Nyholm %d)", enable, version, sodium, psr, nyholm))
	}
	return bin
}

// TestConnectorPHP runs the PHP connector's tests (php tests/run.php: the
// conformance vectors, the pure parts, and the PSR-15 middleware and the
// plain-PHP gate in front of a site under php -S) with a usher auth built
// from this tree (liveConnector).
func TestConnectorPHP(t *testing.T) {
	t.Parallel()
	php := phpBin(t)
	out := liveConnector(t, "php connectors/php/tests/run.php", func(ctx context.Context) *exec.Cmd {
		return exec.CommandContext(ctx, php, filepath.Join(connectorsDir, "php", "tests", "run.php"))
	})
	m := regexp.MustCompile(`(?m)^(\d+) passed, 0 failed, 0 skipped$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("php tests/run.php: no \"N passed, 0 failed, 0 skipped\" in its report:\n%s", out)
	}
	// The vectors (44), the pure parts and the live tests.
	if n, _ := strconv.Atoi(m[1]); n < 70 {
		t.Errorf("php tests/run.php: %d passed; want every vector and live test:\n%s", n, out)
	}
}

// workerdBin returns the path of workerd, the Workers runtime, from npm's
// workerd package: USHER_TEST_WORKERD, else where .ci/run installs it (a
// cache outside the repository, as axe-core). It skips without it, and
// fails under CI.
func workerdBin(tb testing.TB) string {
	tb.Helper()
	bin := os.Getenv("USHER_TEST_WORKERD")
	if bin == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache")
		}
		bin = filepath.Join(cache, "usher-workerd", "node_modules", "workerd", "bin", "workerd")
	}
	if out, err := exec.Command(bin, "--version").Output(); err != nil || !strings.HasPrefix(string(out), "workerd ") {
		testenv.Skip(tb, "workerd", "npm install --prefix ~/.cache/usher-workerd workerd@1, or set USHER_TEST_WORKERD")
	}
	return bin
}

// TestConnectorCloudflare runs the Cloudflare Worker connector's tests
// (node --test connectors/cloudflare: the conformance vectors inside
// workerd, and the worker in workerd on loopback in front of a site)
// with a usher auth built from this tree (liveConnector).
func TestConnectorCloudflare(t *testing.T) {
	t.Parallel()
	node, workerd := nodeBin(t), workerdBin(t)
	out := liveConnector(t, "node --test connectors/cloudflare", func(ctx context.Context) *exec.Cmd {
		cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=tap", filepath.Join(connectorsDir, "cloudflare"))
		cmd.Env = append(os.Environ(), "USHER_TEST_WORKERD="+workerd)
		return cmd
	})
	for _, want := range []string{"# fail 0", "# skipped 0", "# cancelled 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("node --test connectors/cloudflare: no %q in its report:\n%s", want, out)
		}
	}
	// Every vector ran, inside workerd.
	if n := strings.Count(out, "ok ") - strings.Count(out, "not ok "); n < 50 {
		t.Errorf("node --test connectors/cloudflare: %d cases passed; want every vector and live test:\n%s", n, out)
	}
}

// liveConnector runs a connector's tests, made by mk, with a usher auth
// built from this tree, and returns their output; it fails the test when
// they exit non-zero. The tests find usher auth in USHER_TEST_URL, its
// admin listener in USHER_TEST_ADMIN_URL and USHER_TEST_ADMIN_KEY, and ask
// for a key rotation at USHER_TEST_CONTROL: POST /rotate stages a new key
// (usher keys rotate, active at once) and restarts usher auth on the same
// addresses, as an operator does, and answers 204 once it serves again.
func liveConnector(t *testing.T, name string, mk func(ctx context.Context) *exec.Cmd) string {
	t.Helper()
	dir := testenv.DataDir(t)
	const adminKey = "connector-test-admin-key-0123456789"
	addr, adminAddr := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
	args := []string{"--data-dir", dir, "--addr", addr, "--admin-addr", adminAddr, "--admin-key", adminKey,
		"--insecure-cookies", "--room", "sale", "--route", "/brief/=brief"}
	in := startAuth(t, args...)

	rotations := make(chan chan error)
	control := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/rotate" {
			http.NotFound(w, r)
			return
		}
		done := make(chan error, 1)
		rotations <- done
		if err := <-done; err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer control.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := mk(ctx)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env,
		"USHER_TEST_URL="+in.base,
		"USHER_TEST_ADMIN_URL=http://"+adminAddr,
		"USHER_TEST_ADMIN_KEY="+adminKey,
		"USHER_TEST_CONTROL="+control.URL,
	)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		select {
		case done := <-rotations:
			// On the test's goroutine: startAuth may fail the test.
			var buf bytes.Buffer
			err := run(ctx, []string{"keys", "rotate", "--data-dir", dir}, func(string) string { return "" }, &buf, io.Discard)
			if err == nil {
				t.Logf("rotate: %s", bytes.TrimSpace(buf.Bytes()))
				in.stop()
				in = startAuth(t, args...)
			}
			done <- err
		case err := <-exited:
			if err != nil {
				t.Fatalf("%s: %v\n%s", name, err, out.String())
			}
			if testing.Verbose() {
				t.Log(out.String())
			}
			return out.String()
		}
	}
}

// BenchmarkConnector measures passes checked per second on one core by the
// Go gate and by the Node, Java, PHP and Cloudflare Worker connectors, on
// the same pass and key:
//
//   - verify: the signature and claims alone (token.Keyring.ParsePass;
//     Node's verifyPass; Java's Pass.verify; PHP's Pass::verify; the
//     worker's verifyPass in workerd);
//   - middleware: a request carrying the pass through the gate to a
//     handler (gate.Middleware, which also slides the slot in the memory
//     store; the connector's gate.handle on a Node request, which asks
//     nobody while the pass is in the first half of its life and checks a
//     pass's signature once: middleware-uncached checks it every time;
//     Java's Gate.check, what its servlet filter decides with, likewise;
//     PHP's middleware is one PHP request: a new Gate, the JWKS read from
//     the workers' shared file, Gate::check, every signature checked; the
//     worker's gate.handle in workerd, with and without its cache).
//
// The node sub-benchmarks run connectors/node/bench/verify.js, the java
// ones usher.connector.Bench, the php ones connectors/php/bench/verify.php,
// the workerd ones connectors/cloudflare/bench/verify.js (timing workerd
// from outside: its clock stands still during a request), warmed up, for
// b.N passes at a time and report their own timing as ns/op.
//
//	go test ./cmd/usher -run '^$' -bench Connector -count 5
func BenchmarkConnector(b *testing.B) {
	ctx := context.Background()
	keys, err := token.LoadDir(b.TempDir(), time.Now)
	if err != nil {
		b.Fatal(err)
	}
	q := queue.New(memqueue.New(), queue.Options{})
	if err := q.PutRoom(ctx, "sale", queue.DefaultSettings()); err != nil {
		b.Fatal(err)
	}
	const visitor = "0BCAJptp8EyRb1qUcaVThg"
	if e, _, err := q.Enter(ctx, "sale", visitor); err != nil || e.Status != queue.Active {
		b.Fatalf("enter: %+v, %v; want active at once", e, err)
	}
	pass, err := keys.SignPass(token.Pass{Room: "sale", Visitor: visitor, ExpiresAt: time.Now().Add(5 * time.Minute)})
	if err != nil {
		b.Fatal(err)
	}
	input := filepath.Join(b.TempDir(), "pass.json")
	data, _ := json.Marshal(map[string]any{"jwks": json.RawMessage(keys.JWKS()), "token": pass, "room": "sale"})
	if err := os.WriteFile(input, data, 0o600); err != nil {
		b.Fatal(err)
	}
	// loop runs one pass through b.Loop and reports, besides ns/op, the
	// process's CPU time per pass (less noisy on a busy machine) and passes
	// per second.
	loop := func(b *testing.B, one func()) {
		cpu := cpuTime()
		for b.Loop() {
			one()
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "verifications/s")
	}

	b.Run("verify/go", func(b *testing.B) {
		loop(b, func() {
			if _, err := keys.ParsePass(pass, "sale"); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("verify/node", nodeBench(b, "verify", input))
	var javaCP string // compiled on the first Java sub-benchmark
	b.Run("verify/java", javaBench(b, &javaCP, "verify", input))
	b.Run("verify/php", phpBench(b, "verify", input))
	b.Run("verify/workerd", cloudflareBench(b, "verify", input))
	b.Run("middleware/go", func(b *testing.B) {
		g := gate.New(q, keys, gate.Options{Room: func(*http.Request) string { return "sale" }})
		h := g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if a, _ := gate.FromContext(r.Context()); a.Visitor != visitor {
				b.Errorf("behind the gate: visitor %q, want %q", a.Visitor, visitor)
			}
		}))
		loop(b, func() {
			r := httptest.NewRequest("GET", "/shop/", nil)
			r.Header.Set("Authorization", "Bearer "+pass)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				b.Fatalf("gate: %d %s", w.Code, w.Body)
			}
		})
	})
	b.Run("middleware/node", nodeBench(b, "middleware", input))
	b.Run("middleware-uncached/node", nodeBench(b, "middleware-uncached", input))
	b.Run("middleware/java", javaBench(b, &javaCP, "middleware", input))
	b.Run("middleware-uncached/java", javaBench(b, &javaCP, "middleware-uncached", input))
	b.Run("middleware/php", phpBench(b, "middleware", input))
	b.Run("middleware/workerd", cloudflareBench(b, "middleware", input))
	b.Run("middleware-uncached/workerd", cloudflareBench(b, "middleware-uncached", input))
}

// nodeBench returns the sub-benchmark of the Node connector's benchmark
// script in mode (childBench).
func nodeBench(parent *testing.B, mode, input string) func(*testing.B) {
	script := filepath.Join(connectorsDir, "node", "bench", "verify.js")
	return childBench(parent, script, func(b *testing.B) []string {
		return []string{nodeBin(b), script, "--serve", "--mode", mode, "--input", input}
	})
}

// javaBench returns the sub-benchmark of the Java connector's benchmark
// (usher.connector.Bench, compiled once for the run) in mode (childBench).
func javaBench(parent *testing.B, cp *string, mode, input string) func(*testing.B) {
	return childBench(parent, "usher.connector.Bench", func(b *testing.B) []string {
		java, javac := javaBins(b)
		if *cp == "" {
			*cp = buildJava(parent, javac, tomcatJars(b))
		}
		return []string{java, "-cp", *cp, "usher.connector.Bench", "--serve", "--mode", mode, "--input", input}
	})
}

// phpBench returns the sub-benchmark of the PHP connector's benchmark
// script in mode (childBench).
func phpBench(parent *testing.B, mode, input string) func(*testing.B) {
	script := filepath.Join(connectorsDir, "php", "bench", "verify.php")
	return childBench(parent, script, func(b *testing.B) []string {
		return []string{phpBin(b), script, "--serve", "--mode", mode, "--input", input}
	})
}

// cloudflareBench returns the sub-benchmark of the Cloudflare connector's
// benchmark script, which runs the passes in workerd, in mode (childBench).
func cloudflareBench(parent *testing.B, mode, input string) func(*testing.B) {
	script := filepath.Join(connectorsDir, "cloudflare", "bench", "verify.js")
	return childBench(parent, script, func(b *testing.B) []string {
		return []string{nodeBin(b), script, "--serve", "--mode", mode, "--input", input, "--workerd", workerdBin(b)}
	})
}

// childBench returns the sub-benchmark of a connector's benchmark program,
// run as argv gives it: started once (warmed up, off the clock) on the
// first call, then asked for b.N passes per call; it reports the
// program's own timing of them as ns/op.
func childBench(parent *testing.B, name string, argv func(*testing.B) []string) func(*testing.B) {
	var next func(n int) ([]byte, error)
	return func(b *testing.B) {
		if next == nil {
			b.StopTimer()
			args := argv(b)
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Stderr = os.Stderr
			in, err := cmd.StdinPipe()
			if err != nil {
				b.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			parent.Cleanup(func() { in.Close(); cmd.Wait() })
			lines := bufio.NewScanner(out)
			next = func(n int) ([]byte, error) {
				if n > 0 {
					if _, err := fmt.Fprintln(in, n); err != nil {
						return nil, err
					}
				}
				if !lines.Scan() {
					return nil, fmt.Errorf("%s exited: %v", name, lines.Err())
				}
				return lines.Bytes(), nil
			}
			if ready, err := next(0); err != nil || string(ready) != `{"ready":true}` {
				b.Fatalf("%s: %q, %v; want it ready", name, ready, err)
			}
			b.StartTimer()
		}
		line, err := next(b.N)
		if err != nil {
			b.Fatal(err)
		}
		var r struct {
			NsPerOp    float64 `json:"ns_per_op"`
			CPUNsPerOp float64 `json:"cpu_ns_per_op"`
		}
		if err := json.Unmarshal(line, &r); err != nil || r.NsPerOp <= 0 {
			b.Fatalf("%s: %q: want {\"ns_per_op\": …}", name, line)
		}
		b.ReportMetric(r.NsPerOp, "ns/op")
		b.ReportMetric(r.CPUNsPerOp, "cpu-ns/op")
		b.ReportMetric(1e9/r.NsPerOp, "verifications/s")
	}
}

// cpuTime is the CPU time the process has used, user and system, in
// nanoseconds (0 if it cannot be read).
func cpuTime() int64 {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return u.Utime.Nano() + u.Stime.Nano()
}
