package edgeconf_test

import (
	"regexp"
	"strings"
	"testing"

	"usher/internal/canon"
	"usher/internal/edgeconf"
	"usher/internal/gateway"
	"usher/internal/wire"
)

// shortcutRules are the path rules FuzzShortcut and TestShortcut try.
var shortcutRules = []gateway.Rules{
	{Open: []string{"/static/"}},
	{Open: []string{"/static/", "/healthz"}, Gate: []string{"/", "/static/private/", "/static/ſecret/", "/static/claß/"}},
	{Open: []string{"/static/img/pub/", "/static/"}, Gate: []string{"/shop/", "/static/img/", "/STATIC/Upper/"}},
	{Open: []string{"/a.b/", "/café/"}, Gate: []string{"/shop"}},
}

// shortcutTargets are spellings an attacker would try, and honest ones.
var shortcutTargets = []string{
	"/static/app.js", "/static/app.js?v=1", "/healthz", "/healthz/db", "/healthzx", "/static/private/x",
	"/static/PRIVATE/x", "/Static/private/x", "/static/secret/x", "/static/class/x", "/static/img/x",
	"/static/img/pub/x", "/static/upper/x", "/shop", "/shop/x", "/SHOP/x", "/shopping", "/a.b/x", "/",
	"/static/../shop", "/static/%2e%2e/shop", "/static%2f..%2fshop", "/static/..%2fshop", "//shop", "/static//x",
	"/static/./../shop", "/shop;/x", "/static/..;/shop", "/static/private./x", "/static/private::$DATA/x",
	"/static/PRIVAT~1/x", "/static/x?usher_invite=1", "/static/x?a=1&usher%5Finvite=1", "/static/x?USHER_lane=1",
	"/static/%C5%BFecret/x", "/static\\..\\shop", "/_usher/api/v1/rooms", "/static/.env", "/static/x.", "/static/x?y=..",
	"/caf%C3%A9/x", "/x?y=%2F", "*", "http://evil/static/x",
}

// firstMatch is what nginx's and Caddy's maps do with the rules.
func firstMatch(t testing.TB, rules []edgeconf.Rule, target string) bool {
	for _, r := range rules {
		re, err := regexp.Compile(r.Match)
		if err != nil {
			t.Fatalf("rule %q: %v", r.Match, err)
		}
		if re.MatchString(target) {
			return r.Open
		}
	}
	return false
}

// checkShortcut fails when the shortcut sends target straight to the
// origin though usher would not pass it as it is: usher reads it
// canonical and open (exactly and with --fold-case), and strips nothing.
func checkShortcut(t testing.TB, rs gateway.Rules, target string) bool {
	rules, err := edgeconf.Shortcut(rs.Open, rs.Gate)
	if err != nil {
		t.Fatal(err)
	}
	if !firstMatch(t, rules, target) {
		return false
	}
	path, changed, err := canon.Target(target)
	if err != nil || changed {
		t.Errorf("rules %v: %q goes to the origin, but usher reads it %q (changed %v, %v)", rs, target, path, changed, err)
		return true
	}
	for _, fold := range []bool{false, true} {
		rs.FoldCase, rs.DefaultRoom = fold, "sale"
		if _, gated, err := rs.Resolve(path); gated || err != nil {
			t.Errorf("rules %v: %q goes to the origin, but usher finds it gated %v (%v)", rs, target, gated, err)
		}
	}
	_, query, _ := strings.Cut(target, "?")
	if _, stripped := wire.StripCredentials(query); stripped {
		t.Errorf("rules %v: %q goes to the origin with a credential in its query", rs, target)
	}
	return true
}

// TestShortcut: the honest open targets go straight to the origin, and
// no spelling of a gated one does.
func TestShortcut(t *testing.T) {
	t.Parallel()
	open := map[string]bool{}
	for i, rs := range shortcutRules {
		for _, target := range shortcutTargets {
			if checkShortcut(t, rs, target) {
				open[strings.Join([]string{string(rune('0' + i)), target}, " ")] = true
			}
		}
	}
	for _, want := range []string{"0 /static/app.js", "0 /static/app.js?v=1", "1 /healthz/db", "1 /static/x?y=..",
		"2 /static/img/pub/x", "2 /", "2 /shopping", "3 /a.b/x", "3 /"} {
		if !open[want] {
			t.Errorf("rules %s: want it straight to the origin", want)
		}
	}
	for _, no := range []string{"1 /static/secret/x", "1 /static/class/x", "2 /static/upper/x", "2 /SHOP/x", "3 /shop/x"} {
		if open[no] {
			t.Errorf("rules %s: goes straight to the origin, want usher asked", no)
		}
	}
}

func FuzzShortcut(f *testing.F) {
	for _, target := range shortcutTargets {
		f.Add(target)
	}
	credential := regexp.MustCompile(edgeconf.CredentialQuery)
	f.Fuzz(func(t *testing.T, target string) {
		for _, rs := range shortcutRules {
			checkShortcut(t, rs, target)
		}
		// What the edge sends on without usher never carries a
		// credential usher would strip.
		_, query, _ := strings.Cut(target, "?")
		if _, stripped := wire.StripCredentials(query); stripped && !credential.MatchString(target) {
			t.Errorf("%q carries a credential, CredentialQuery does not see it", target)
		}
	})
}
