package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"usher/internal/testenv"
)

func noEnv(string) string { return "" }

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var stdout strings.Builder
		if err := run(context.Background(), args, noEnv, &stdout, &strings.Builder{}); err != nil {
			t.Fatalf("usher %v: %v", args, err)
		}
		got := strings.TrimSpace(stdout.String())
		if !strings.HasPrefix(got, "usher ") || !strings.HasSuffix(got, " "+runtime.Version()) {
			t.Errorf("usher %v = %q, want usher <version> … %s", args, got, runtime.Version())
		}
	}
}

func TestDescribeBuild(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "usher dev go1.26.8"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"},
			Settings: vcs("vcs.revision", "47809e2a06c5b1f2c3d4", "vcs.time", "2026-12-01T04:30:23Z", "vcs.modified", "false")},
			"usher v1.2.0 revision 47809e2a06c5 2026-12-01T04:30:23Z go1.26.8"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-x+dirty"},
			Settings: vcs("vcs.revision", "47809e2", "vcs.modified", "true")},
			"usher v0.0.0-x+dirty revision 47809e2 modified go1.26.8"},
	} {
		if got := describeBuild(tc.bi, true); got != tc.want {
			t.Errorf("describeBuild(%+v) = %q, want %q", tc.bi, got, tc.want)
		}
	}
}

func TestKeysHelp(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		ok             bool
		want, dontWant string
	}{
		{[]string{"keys", "--help"}, true, "rotate", ""},
		{[]string{"keys", "-h"}, true, "rotate", ""},
		{[]string{"keys", "list", "--help"}, true, "-keys-dir", "activate-in"},
		{[]string{"keys", "rotate", "-h"}, true, "-activate-in", ""},
		{[]string{"keys"}, false, "list|rotate", ""},
		{[]string{"keys", "list", "--activate-in", "1m"}, false, "activate-in", ""},
	} {
		var out strings.Builder
		err := run(context.Background(), tc.args, noEnv, &out, &out)
		if (err == nil) != tc.ok {
			t.Errorf("usher %v: err = %v, want success %v", tc.args, err, tc.ok)
		}
		text := out.String()
		if err != nil {
			text += err.Error()
		}
		if !strings.Contains(text, tc.want) || (tc.dontWant != "" && strings.Contains(text, tc.dontWant)) {
			t.Errorf("usher %v printed %q; want it to name %q and not %q", tc.args, text, tc.want, tc.dontWant)
		}
	}
}

// sharedEnv are the variables several subcommands read, each with one
// meaning; docs/configuration.md's table lists them (and every other
// variable).
var sharedEnv = []string{
	"USHER_ADDR", "USHER_STORE", "USHER_DATA_DIR", "USHER_KEYS_DIR", "USHER_ADMIN_KEY", "USHER_REDIS_PREFIX",
	"USHER_FAIL_OPEN", "USHER_INSECURE_COOKIES", "USHER_DB", "USHER_LOG_FORMAT", "USHER_LOG_LEVEL", "USHER_ACCESS_LOG",
	"USHER_STORE_TIMEOUT", "USHER_TRUSTED_PROXIES", "USHER_METRICS_ADDR", "USHER_IDENTITY_SECRET", "USHER_IDENTITY_PUBLIC_KEY",
	"USHER_CONSOLE", "USHER_QUEUE_STORE", "USHER_HOLD_STORE", "USHER_LIMIT_STORE",
}

var (
	flagLineRE = regexp.MustCompile(`^  -(\S+)`)
	envRE      = regexp.MustCompile(`\$(USHER_[A-Z0-9_]+)`)
	defaultRE  = regexp.MustCompile(`\(default (.*)\)$`)
)

// setting is one flag of a subcommand as its help shows it: the name, the
// variable it reads ("" for none) and the default ("" for none).
type setting struct{ flag, env, def string }

// helpSettings reads the settings of usher cmd from its -h.
func helpSettings(t *testing.T, cmd ...string) []setting {
	t.Helper()
	var help strings.Builder
	if err := run(context.Background(), append(cmd, "-h"), noEnv, &help, &help); err != nil {
		t.Fatalf("usher %v -h: %v", cmd, err)
	}
	var out []setting
	sc := bufio.NewScanner(strings.NewReader(help.String()))
	for sc.Scan() {
		line := sc.Text()
		if m := flagLineRE.FindStringSubmatch(line); m != nil {
			out = append(out, setting{flag: m[1]})
			continue
		}
		if len(out) == 0 {
			continue
		}
		cur := &out[len(out)-1]
		if m := envRE.FindStringSubmatch(line); m != nil {
			cur.env = m[1]
		}
		if m := defaultRE.FindStringSubmatch(line); m != nil {
			cur.def = m[1]
		}
	}
	return out
}

// TestEnvironmentVariables reads every subcommand's help: a variable read
// by two subcommands is a shared one, for the same flag with the same
// default (USHER_ADDR no longer makes serve and origin fight for a port);
// a subcommand's own variables carry its prefix; docs/configuration.md
// lists them all.
func TestEnvironmentVariables(t *testing.T) {
	readme, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	type use struct{ cmd, flag, def string }
	uses := map[string][]use{}
	for _, cmd := range [][]string{{"serve"}, {"proxy"}, {"auth"}, {"seed"}, {"keys", "list"}, {"keys", "rotate"}, {"plan"}, {"origin"}, {"loadtest"}, {"invites"}, {"verify-draw"}, {"collect"}, {"page", "check"}} {
		for _, s := range helpSettings(t, cmd...) {
			if s.env != "" {
				uses[s.env] = append(uses[s.env], use{cmd: strings.Join(cmd, " "), flag: s.flag, def: s.def})
			}
		}
	}
	if len(uses) < 40 {
		t.Fatalf("found %d variables in the help texts; the help format changed?", len(uses))
	}
	own := map[string]string{"proxy": "USHER_PROXY_", "auth": "USHER_AUTH_", "plan": "USHER_PLAN_", "origin": "USHER_ORIGIN_", "loadtest": "USHER_LOADTEST_", "invites": "USHER_INVITES_", "collect": "USHER_COLLECT_", "page check": "USHER_PAGE_"}
	for _, p := range own {
		if !strings.Contains(string(readme), "`"+p+"`") {
			t.Errorf("docs/configuration.md does not name the prefix %s", p)
		}
	}
	for env, us := range uses {
		for _, u := range us {
			p := own[u.cmd]
			if p == "" || slices.Contains(sharedEnv, env) {
				if !regexp.MustCompile("`" + env + "`").Match(readme) {
					t.Errorf("%s (usher %s --%s) is not in docs/configuration.md", env, u.cmd, u.flag)
				}
			} else if want := p + strings.ToUpper(strings.ReplaceAll(u.flag, "-", "_")); env != want {
				t.Errorf("usher %s --%s reads %s, want %s (its prefix and its name) or a shared variable", u.cmd, u.flag, env, want)
			}
		}
		cmds := map[string]bool{}
		for _, u := range us {
			cmds[strings.Fields(u.cmd)[0]] = true
		}
		if len(cmds) < 2 {
			continue
		}
		if !slices.Contains(sharedEnv, env) {
			t.Errorf("%s is read by %v, but it is not a shared variable", env, us)
		}
		for _, u := range us[1:] {
			if u.flag != us[0].flag || u.def != us[0].def {
				t.Errorf("%s means two things: %+v and %+v", env, us[0], u)
			}
		}
	}
}

// TestSettingsCheckedBeforeWriting: a bad setting stops serve (or seed)
// before it writes the admin key, the signing keys or the database into
// the data dir.
func TestSettingsCheckedBeforeWriting(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		env  map[string]string
		want string
	}{
		{"serve", map[string]string{"USHER_NATS_REPLICAS": "2"}, "USHER_NATS_REPLICAS"},
		{"serve", map[string]string{"USHER_NATS_REPLICAS": "3"}, "embedded"},
		{"serve", map[string]string{"USHER_DB": "oracle://db/usher"}, "USHER_DB"},
		{"serve", map[string]string{"USHER_NATS": "amqp://x"}, "USHER_NATS"},
		{"serve", map[string]string{"USHER_LOG_LEVEL": "loud"}, "USHER_LOG_LEVEL"},
		{"serve", map[string]string{"USHER_LOG_FORMAT": "xml"}, "USHER_LOG_FORMAT"},
		{"serve", map[string]string{"USHER_STORE": "mem"}, "USHER_STORE"},
		{"proxy", map[string]string{"USHER_LOG_LEVEL": "loud", "USHER_PROXY_ORIGIN": "http://127.0.0.1:1"}, "USHER_LOG_LEVEL"},
		{"proxy", map[string]string{"USHER_PROXY_PAGE_DIR": "/nonexistent/pages", "USHER_PROXY_ORIGIN": "http://127.0.0.1:1"}, "USHER_PROXY_PAGE_DIR"},
		{"auth", map[string]string{"USHER_AUTH_PAGE_DIR": "/nonexistent/pages"}, "USHER_AUTH_PAGE_DIR"},
		{"seed", map[string]string{"USHER_DB": "oracle://db/usher"}, "USHER_DB"},
		{"seed", map[string]string{"USHER_STORE": "mem"}, "USHER_STORE"},
		{"serve", map[string]string{"USHER_EVENTS": "nats"}, "USHER_EVENTS"},
		{"serve", map[string]string{"USHER_EVENTS": "kafka://"}, "USHER_EVENTS"},
		{"collect", map[string]string{}, "USHER_COLLECT_NATS"},
		{"collect", map[string]string{"USHER_COLLECT_NATS": "nats://127.0.0.1:1", "USHER_COLLECT_KAFKA": "kafka://127.0.0.1:1"}, "USHER_COLLECT_KAFKA"},
		{"collect", map[string]string{"USHER_COLLECT_KAFKA": "kafka://a@b"}, "USHER_COLLECT_KAFKA"},
		{"collect", map[string]string{"USHER_COLLECT_NATS": "embedded"}, "USHER_COLLECT_NATS"},
		{"collect", map[string]string{"USHER_COLLECT_NATS": "nats://127.0.0.1:1", "USHER_DB": "oracle://db/usher"}, "USHER_DB"},
		{"collect", map[string]string{"USHER_COLLECT_NATS": "nats://127.0.0.1:1", "USHER_COLLECT_RETENTION": "0s"}, "USHER_COLLECT_RETENTION"},
		{"collect", map[string]string{"USHER_COLLECT_NATS": "nats://127.0.0.1:1", "USHER_COLLECT_NATS_NAME": "a.b"}, "USHER_COLLECT_NATS_NAME"},
	} {
		dir := testenv.DataDir(t)
		tc.env["USHER_DATA_DIR"] = dir
		args := []string{tc.cmd, "--addr", "127.0.0.1:0"}
		switch tc.cmd {
		case "seed":
			args = []string{tc.cmd, "--seats", "10"}
		case "collect":
			args = []string{tc.cmd}
		}
		err := run(context.Background(), args, func(k string) string { return tc.env[k] }, &strings.Builder{}, &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s with %v: err = %v, want one naming %s", tc.cmd, tc.env, err, tc.want)
		}
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Errorf("%s with %v wrote %d entries into the data dir before refusing, e.g. %s", tc.cmd, tc.env, len(entries), entries[0].Name())
		}
	}
}

func TestBaseURL(t *testing.T) {
	for addr, want := range map[string]string{
		"[::]:8080":      "http://127.0.0.1:8080",
		"0.0.0.0:9000":   "http://127.0.0.1:9000",
		"127.0.0.1:8080": "http://127.0.0.1:8080",
		"[::1]:8080":     "http://[::1]:8080",
		"10.1.2.3:80":    "http://10.1.2.3:80",
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := baseURL(a); got != want {
			t.Errorf("baseURL(%s) = %s, want %s", addr, got, want)
		}
	}
}

// TestServeLogs runs serve with JSON logs at debug: every line is JSON
// and stdout holds none, the start records name each listener's URL (one a
// person can click) and what it binds, each request gets a line, the
// embedded NATS server's banner is there (at debug only), and the shutdown
// is logged.
func TestServeLogs(t *testing.T) {
	for _, level := range []string{"debug", "info"} {
		t.Run(level, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stdout, stderr := &syncBuffer{}, &syncBuffer{}
			dir := testenv.DataDir(t)
			env := map[string]string{"USHER_DATA_DIR": dir, "USHER_LOG_FORMAT": "json", "USHER_LOG_LEVEL": level}
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"serve", "--addr", ":0", "--admin-addr", "127.0.0.1:0"}, func(k string) string { return env[k] }, stdout, stderr)
			}()
			serving := map[string]map[string]any{} // by listener
			waitFor(t, "the serving records", func() bool {
				for line := range strings.Lines(stderr.String()) {
					var rec map[string]any
					if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "serving" {
						serving[fmt.Sprint(rec["listener"])] = rec
					}
				}
				return len(serving) == 2
			})
			visitors, admin := serving["visitors"], serving["admin"]
			base, _ := visitors["url"].(string)
			if !strings.HasPrefix(base, "http://127.0.0.1:") {
				t.Errorf("serving on %s, want http://127.0.0.1:<port> for --addr :0", base)
			}
			if l, _ := visitors["listen"].(string); !strings.HasPrefix(l, "[::]:") || visitors["interfaces"] != "every interface" {
				t.Errorf("visitors' listener record %v, want it bound to [::] on every interface", visitors)
			}
			if l, _ := admin["listen"].(string); !strings.HasPrefix(l, "127.0.0.1:") || admin["interfaces"] != "loopback only" ||
				!strings.HasSuffix(fmt.Sprint(admin["url"]), strings.TrimPrefix(l, "127.0.0.1")) {
				t.Errorf("admin listener record %v, want it bound to 127.0.0.1, loopback only, its URL on that port", admin)
			}
			res, err := http.Get(base + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if out := stdout.String(); out != "" {
				t.Errorf("stdout in JSON mode: %q, want nothing (every line a JSON record on stderr)", out)
			}
			var requests, banner, stopped int
			for line := range strings.Lines(stderr.String()) {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("log line is not JSON: %v: %q", err, line)
				}
				switch {
				case rec["msg"] == "request" && rec["path"] == "/healthz":
					requests++
				case rec["component"] == "nats-server" && rec["level"] == "DEBUG":
					banner++
				case rec["msg"] == "stopped":
					stopped++
				}
			}
			wantRequests, wantBanner := 1, level == "debug"
			if level != "debug" {
				wantRequests = 0
			}
			if requests != wantRequests || (banner > 0) != wantBanner || stopped != 1 {
				t.Errorf("at %s: %d request lines (want %d), %d NATS banner lines (want some: %v), %d stopped lines (want 1):\n%s",
					level, requests, wantRequests, banner, wantBanner, stopped, stderr)
			}
		})
	}
}

// TestLoadtestFailsOnErrors runs loadtest against a port nothing listens
// on and against a server that never answers: the run fails (above
// --max-error-rate), each user backs off instead of retrying in a tight
// loop, and the progress line never shows more than the run's duration.
func TestLoadtestFailsOnErrors(t *testing.T) {
	for name, target := range map[string]string{"closed": testenv.ClosedAddr(t), "silent": testenv.SilentServer(t)} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			const users = 4
			err := run(context.Background(), []string{"loadtest", "--json", "--target", "http://" + target + "/seats",
				"--users", strconv.Itoa(users), "--duration", "1s", "--grace", "1s", "--tick", "100ms", "--timeout", "10s",
				"--origin-stats", "none"}, noEnv, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), "--max-error-rate") {
				t.Errorf("err = %v, want the run refused above --max-error-rate", err)
			}
			var reports []struct {
				Origin struct{ Requests int64 } `json:"origin"`
			}
			if err := json.Unmarshal([]byte(stdout.String()), &reports); err != nil || len(reports) != 1 {
				t.Fatalf("report: %v, %d reports\n%s", err, len(reports), stdout.String())
			}
			// With back-off a user makes at most about log2(1s/10ms)+2 calls
			// in 1 s, however fast the machine; without it, thousands.
			if got := reports[0].Origin.Requests; got > users*12 {
				t.Errorf("%d calls by %d users against a dead target, want at most %d (back-off)", got, users, users*12)
			}
			progress := regexp.MustCompile(`(\d+)s/(\d+)s`).FindAllStringSubmatch(stderr.String(), -1)
			if len(progress) == 0 {
				t.Fatalf("no progress line on stderr:\n%s", stderr.String())
			}
			for _, m := range progress {
				shown, length := atoi(t, m[1]), atoi(t, m[2])
				if shown > length {
					t.Errorf("progress shows %ss of a %ss run", m[1], m[2])
				}
			}
		})
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPlanCommandIsComplete: the commands usher plan prints set every
// shell variable they use, so that they run after the quick start as
// printed.
func TestPlanCommandIsComplete(t *testing.T) {
	out := runPlan(t, "--pool", "10", "--service-time", "76ms", "--batch", "35")
	set := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*([A-Z_]+)=`).FindAllStringSubmatch(out, -1) {
		set[m[1]] = true
	}
	used := regexp.MustCompile(`\$([A-Z_]+)`).FindAllStringSubmatch(out, -1)
	if len(used) == 0 {
		t.Fatalf("no command with a variable in the plan:\n%s", out)
	}
	for _, m := range used {
		if !set[m[1]] {
			t.Errorf("the plan's command uses $%s, which it never sets:\n%s", m[1], out)
		}
	}
}

// serveUntil runs usher serve on dir until the returned stop is called;
// it returns the base URL and the log.
func serveUntil(t *testing.T, dir string) (base string, log *syncBuffer, stop func()) {
	t.Helper()
	return serveUntilEnv(t, map[string]string{"USHER_DATA_DIR": dir})
}

// serveUntilEnv is serveUntil with the variables of env.
func serveUntilEnv(t *testing.T, env map[string]string) (base string, log *syncBuffer, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, func(k string) string { return env[k] }, stdout, stderr)
	}()
	var once bool
	stop = func() {
		if once {
			return
		}
		once = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
	t.Cleanup(stop)
	waitFor(t, "serve to start", func() bool {
		m := servingRE.FindStringSubmatch(stdout.String())
		if m != nil {
			base = m[1]
			noteAdmin(base, stdout.String())
		}
		return m != nil
	})
	return base, stderr, stop
}

// TestServeRebuildsStockAfterRestart: general-admission stock on the
// memory hold store survives a restart of usher serve, from SQL.
func TestServeRebuildsStockAfterRestart(t *testing.T) {
	dir := testenv.DataDir(t)
	getenv := func(k string) string { return map[string]string{"USHER_DATA_DIR": dir}[k] }
	if err := run(context.Background(), []string{"seed", "--seats", "1"}, getenv, &strings.Builder{}, &strings.Builder{}); err != nil {
		t.Fatal(err)
	}
	available := func(c client, admin string) float64 {
		t.Helper()
		waitFor(t, "the schedule's room", func() bool {
			st, _, _ := c.admin().do("GET", "/api/v1/rooms/schedule-1", admin, "")
			return st == 200
		})
		_, _, body := c.do("POST", "/api/v1/rooms/schedule-1/entries", admin, `{"visitor_id":"v"}`)
		pass, _ := body["pass"].(string)
		st, _, body := c.do("GET", "/api/v1/schedules/1/stock", pass, "")
		if st != 200 {
			t.Fatalf("GET stock: %d %v", st, body)
		}
		n, _ := body["available"].(float64)
		return n
	}

	base, _, stop := serveUntil(t, dir)
	key, _ := os.ReadFile(filepath.Join(dir, "admin.key"))
	admin := strings.TrimSpace(string(key))
	c := client{t, base}
	if st, _, body := c.admin().do("PUT", "/api/v1/schedules/1/stock", admin, `{"total":8}`); st != 200 {
		t.Fatalf("PUT stock: %d %v", st, body)
	}
	if got := available(c, admin); got != 8 {
		t.Fatalf("available before the restart = %v, want 8", got)
	}
	stop()

	base, log, _ := serveUntil(t, dir)
	if got := available(client{t, base}, admin); got != 8 {
		t.Errorf("available after the restart = %v, want 8 (SQL's unsold units)", got)
	}
	if !strings.Contains(log.String(), "rebuilt general-admission stock") {
		t.Errorf("no rebuild logged:\n%s", log)
	}
}

// TestAccessLogKeepsStreaming: the access log's wrapper lets handlers
// flush (server-sent events) and hijack (websockets through the proxy)
// through http.ResponseController, and logs one line per request.
func TestAccessLogKeepsStreaming(t *testing.T) {
	var logs syncBuffer
	on := true
	l := logFlags{format: new(string), level: new(string), access: &on}
	*l.format, *l.level = "text", "info"
	mux := http.NewServeMux()
	mux.HandleFunc("/flush", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("a"))
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("flush: %v", err)
		}
	})
	mux.HandleFunc("/hijack", func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		brw.Flush()
	})
	srv := httptest.NewServer(l.accessLog(l.logger(&logs), mux))
	defer srv.Close()
	for _, path := range []string{"/flush", "/hijack"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("GET %s: %d", path, res.StatusCode)
		}
	}
	// A request's line is written when its handler returns, which may be
	// after the client has read the whole answer.
	testenv.Eventually(t, time.Minute, "a request line for each request", func() bool {
		return strings.Count(logs.String(), "msg=request") == 2
	})
}

// TestCommandLineMistakes: a newcomer's slips are answered with what usher
// takes instead, before anything starts.
func TestCommandLineMistakes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"server"}, `unknown command "server": did you mean "serve"?`},
		{[]string{"serve", "--port", "8080"}, "unknown flag --port: usher serve takes --addr host:port (such as --addr :8080)"},
		{[]string{"proxy", "--listen=:8080"}, "unknown flag --listen: usher proxy takes --addr host:port"},
		{[]string{"serve", "--hold-ttl", "5"}, `bad setting: --hold-ttl/USHER_HOLD_TTL="5": want a duration with its unit, such as 500ms or 5m (default 5m0s)`},
		{[]string{"serve", "--stroe", "memory"}, "unknown flag --stroe: did you mean --store?"},
		{[]string{"plan", "--pool", "ten"}, `bad setting: --pool/USHER_PLAN_POOL="ten": want a whole number`},
	} {
		var stdout, stderr strings.Builder
		err := run(context.Background(), tc.args, noEnv, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("usher %v: err = %v, want %q", tc.args, err, tc.want)
		}
		if len(tc.args) > 1 && strings.Contains(stderr.String(), "Usage of") {
			t.Errorf("usher %v printed every flag's usage after its error:\n%.300s", tc.args, stderr.String())
		}
	}
}
