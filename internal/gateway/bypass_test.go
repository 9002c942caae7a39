package gateway

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/clientip"
	"usher/internal/httpapi"
	"usher/internal/wire"
)

const probeSecret = "pr0be-s3cret-0123456789abcdefghijkl"

func bypassRules(t *testing.T, cidrs ...string) []*BypassRule {
	t.Helper()
	var rules []*BypassRule
	for _, c := range cidrs {
		b, err := ParseBypassCIDR(c)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, b)
	}
	file := filepath.Join(t.TempDir(), "secrets")
	if err := os.WriteFile(file, []byte("# probes\npingdom "+probeSecret+"\n\npartner "+strings.Repeat("x", 40)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secrets, err := LoadBypassSecrets(file)
	if err != nil {
		t.Fatal(err)
	}
	return append(rules, secrets...)
}

// TestBypassThroughProxy (issue 21 §5): with the room's one slot taken, a
// monitoring probe passes a gated path by its address or its secret, and
// nothing else does: not a wrong secret, not a probe's User-Agent, not a
// forged X-Forwarded-For from an untrusted peer. Each rule is counted in
// metrics and listed by the API (the console's source), the secret never.
func TestBypassThroughProxy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cidrs  []string
		header map[string]string
		passes bool
	}{
		{"no rule matches", []string{"10.0.0.0/8"}, nil, false},
		{"its address", []string{"10.0.0.0/8", "127.0.0.1"}, nil, true},
		{"its secret", nil, map[string]string{wire.BypassHeader: probeSecret}, true},
		{"a wrong secret", nil, map[string]string{wire.BypassHeader: probeSecret + "x"}, false},
		{"a probe's User-Agent", nil, map[string]string{"User-Agent": "Pingdom.com_bot_version_1.4"}, false},
		{"a forged X-Forwarded-For", []string{"10.0.0.0/8"}, map[string]string{"X-Forwarded-For": "10.1.2.3"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules := Rules{Bypass: bypassRules(t, tc.cidrs...)}
			e := newEnv(t, newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get(wire.BypassHeader) != "" {
					t.Errorf("the origin got %s", wire.BypassHeader)
				}
				helloOrigin(w, r)
			}), rules, func(c *Config) {
				c.Trusted = clientip.Trusted{} // no proxy is trusted
				c.API = httpapi.NewServer(httpapi.Config{Queue: c.Queue, Keys: c.Keys, AdminKey: "admin", Registry: prometheus.NewRegistry(), Bypass: c.Rules.BypassList})
			})
			e.admit("sale", "first", time.Time{}) // takes the only slot
			req, _ := http.NewRequest("GET", e.url+"/cart", nil)
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if passed := res.StatusCode == 200 && string(body) == "origin /cart"; passed != tc.passes {
				t.Fatalf("GET /cart: %d %.80q; want passed %v", res.StatusCode, body, tc.passes)
			}
			var counted float64
			for _, b := range rules.Bypass {
				counted += e.counter("usher_bypass_total", map[string]string{"rule": b.Name, "kind": b.Kind()})
			}
			if want := map[bool]float64{true: 1, false: 0}[tc.passes]; counted != want {
				t.Errorf("usher_bypass_total sums to %v, want %v", counted, want)
			}
			req, _ = http.NewRequest("GET", e.url+Prefix+"api/v1/bypass", nil)
			req.Header.Set("Authorization", "Bearer admin")
			res, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			list, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || !strings.Contains(string(list), `"name":"pingdom","kind":"secret"`) || strings.Contains(string(list), probeSecret) {
				t.Errorf("GET api/v1/bypass: %d %s, want the rules by name, never a secret", res.StatusCode, list)
			}
		})
	}
}

// TestBypassThroughAuth: usher auth passes a front proxy's check for
// a probe's secret, which the front proxy hands on with the request.
func TestBypassThroughAuth(t *testing.T) {
	e := newAuthEnv(t, Rules{Bypass: bypassRules(t)})
	e.pass("sale", "first", time.Time{}) // takes the only slot
	if res, _ := e.ask(AuthPath, "caddy", "GET", "/cart", nil); res.StatusCode != http.StatusFound && res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a visitor without a pass in a full room: %d, want sent to wait", res.StatusCode)
	}
	if res, body := e.ask(AuthPath, "caddy", "GET", "/cart", map[string]string{wire.BypassHeader: probeSecret}); res.StatusCode/100 != 2 {
		t.Errorf("a probe's check: %d %s, want it passed (2xx)", res.StatusCode, body)
	}
}

func TestBypassRulesBadInput(t *testing.T) {
	for _, s := range []string{"", "10.0.0.0/33", "example.com", "10.0.0.0/8/8"} {
		if _, err := ParseBypassCIDR(s); err == nil {
			t.Errorf("ParseBypassCIDR(%q) accepted", s)
		}
	}
	if b, err := ParseBypassCIDR("10.1.2.3/16"); err != nil || b.Name != "10.1.0.0/16" {
		t.Errorf("ParseBypassCIDR(10.1.2.3/16) = %v, %v; want the masked prefix", b, err)
	}
	for name, content := range map[string]string{
		"short":     "pingdom tooshort\n",
		"no secret": "pingdom\n",
		"twice":     "a " + probeSecret + "\na " + probeSecret + "x\n",
		"spaces":    "a " + probeSecret + " more\n",
	} {
		file := filepath.Join(t.TempDir(), "secrets")
		os.WriteFile(file, []byte(content), 0o600)
		if _, err := LoadBypassSecrets(file); err == nil {
			t.Errorf("%s: LoadBypassSecrets accepted %q", name, content)
		}
	}
}
