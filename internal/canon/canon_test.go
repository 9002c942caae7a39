package canon

import (
	"net/url"
	"path"
	"strings"
	"testing"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
	"golang.org/x/text/unicode/norm"
)

func TestPath(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
		changed   bool
	}{
		{"/", "/", false},
		{"/shop", "/shop", false},
		{"/shop/", "/shop/", false},
		{"/shop/index.html", "/shop/index.html", false},
		{"/.well-known/jwks.json", "/.well-known/jwks.json", false},
		{"/caf%C3%A9", "/café", false},
		{"/a%20b", "/a b", false},
		{"/%41", "/A", false},
		{"/SHOP/x", "/SHOP/x", false}, // case is the rules' business
		{"//shop/x", "/shop/x", true},
		{"/x//y", "/x/y", true},
		{"/./shop/x", "/shop/x", true},
		{"/x/../shop/x", "/shop/x", true},
		{"/static/../shop/index.html", "/shop/index.html", true},
		{"/concert-a/../concert-b/", "/concert-b/", true},
		{"/a/.", "/a/", true},
		{"/a/..", "/", true},
		{"/a/b/../../c", "/c", true},
	} {
		got, changed, err := Path(tc.raw)
		if err != nil || got != tc.want || changed != tc.changed {
			t.Errorf("Path(%q) = %q, %v, %v; want %q, %v, nil", tc.raw, got, changed, err, tc.want, tc.changed)
		}
	}
}

// TestPathRefused lists every class of path that two parsers could read two
// ways; each must be refused.
func TestPathRefused(t *testing.T) {
	for _, raw := range []string{
		"", "*", "shop", "http://x/shop",
		"/..", "/../shop", "/a/../../shop", // above the root
		"/static/%2e%2e/shop/", "/static/%2E%2E/shop/", "/static/.%2e/shop", "/%2e/shop", // encoded dots
		"/static/..%2Fshop/", "/static/..%2fshop", "/shop%2Fx", // encoded slash
		"/static/..%5Cshop", "/static/..\\shop", "/\\evil", // backslash, raw or encoded
		"/static/%252e%252e/shop", "/a%25", // double encoding
		"/shop;x/", "/shop;jsessionid=1", "/shop%3bx", // path parameters
		"/shop./", "/shop.", "/shop%20/", "/shop%20", "/shop...", // trailing dot or space
		"/shop::$DATA", "/shop::$data/x", // NTFS streams
		"/a%00b", "/a%0d%0aSet-Cookie:x", "/a\x00", "/a\tb", "/a%7f", // control characters
		"/%", "/%4", "/%zz", "/%u002e%u002e/shop", // bad escapes
		"/%c0%ae%c0%ae/shop", "/%ff", // invalid UTF-8 (overlong dots)
		"/" + strings.Repeat("a", MaxPath),
	} {
		if got, _, err := Path(raw); err == nil {
			t.Errorf("Path(%q) = %q, want refused", raw, got)
		}
	}
}

func TestTarget(t *testing.T) {
	for _, tc := range []struct{ uri, want string }{
		{"/shop/x?a=1", "/shop/x"},
		{"http://x", "/"},
		{"http://x?a", "/"},
		{"HTTP://x/shop/../y?a", "/y"},
		{"https://x//shop", "/shop"},
	} {
		if got, _, err := Target(tc.uri); err != nil || got != tc.want {
			t.Errorf("Target(%q) = %q, %v; want %q", tc.uri, got, err, tc.want)
		}
	}
	for _, uri := range []string{"*", "", "ftp://x/y", "x:80", "http://x/%2e%2e/"} {
		if got, _, err := Target(uri); err == nil {
			t.Errorf("Target(%q) = %q, want refused", uri, got)
		}
	}
}

func TestReturn(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/shop/?a=1", "/shop/?a=1"},
		{"/", "/"},
		{"", "/"},
		{"//evil.example/phish", "/phish"},
		{"///evil.example/phish", "/phish"},
		{"/\\evil.example/phish", "/phish"},
		{"\\\\evil.example", "/"},
		{"\\/evil.example/x", "/x"},
		{"//evil.example", "/"},
		{"https://evil.example/phish?x=1", "/phish?x=1"},
		{"https://evil.example", "/"},
		{"HTTP://evil.example/", "/"},
		{"javascript:alert(1)", "/"},
		{"data:text/html,x", "/"},
		{"evil.example/x", "/"},
		{"/a/..//evil.example", "/evil.example"},
		{"/\t/evil.example", "/"},
		{"/%2F/evil.example", "/"},
		{"/%5Cevil.example", "/"},
		{"/x#//evil", "/x"},
		{"/x?y=\r\nSet-Cookie:a", "/x"},
		{"/caf%C3%A9?q=%C3%A9", "/caf%C3%A9?q=%C3%A9"},
	} {
		got := Return(tc.in)
		if got != tc.want {
			t.Errorf("Return(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if !sameOrigin(got) {
			t.Errorf("Return(%q) = %q: not a same-origin path", tc.in, got)
		}
	}
}

// sameOrigin reports whether a browser resolving target against
// https://site.example/ stays on that origin.
func sameOrigin(target string) bool {
	base, _ := url.Parse("https://site.example/base/")
	// Browsers strip tabs and newlines and read `\` as `/`.
	t := strings.NewReplacer("\t", "", "\n", "", "\r", "", "\\", "/").Replace(target)
	u, err := url.Parse(t)
	if err != nil {
		return false
	}
	r := base.ResolveReference(u)
	return r.Scheme == "https" && r.Host == "site.example" && !strings.HasPrefix(t, "//")
}

// origins model how common servers map the path they receive to a
// resource: each decodes once and resolves dot segments; some also read `\`
// as `/`, drop `;` parameters, drop trailing dots and spaces, or fold case.
var origins = map[string]func(string) string{
	"plain": func(p string) string { return clean(decode(p)) },
	"tomcat": func(p string) string {
		segs := strings.Split(p, "/")
		for i, s := range segs {
			s, _, _ = strings.Cut(s, ";")
			segs[i] = s
		}
		return clean(decode(strings.Join(segs, "/")))
	},
	"iis": func(p string) string {
		d := strings.ReplaceAll(decode(p), "\\", "/")
		segs := strings.Split(d, "/")
		for i, s := range segs {
			if s != "." && s != ".." {
				segs[i] = strings.TrimRight(s, ". ")
			}
		}
		return clean(strings.Join(segs, "/"))
	},
}

// looseOrigins map the decoded path before they resolve dot segments: one
// that ignores case as Unicode's full upper case and folding do (Python's
// upper() and casefold()), one that reads compatibility forms as NFKC does
// (fullwidth letters, ligatures, "．" as "."), and one that does both. Such
// an origin serves clean(m(c)) for the canonical c, another resource than
// c; the gateway's rules decide by that reading too.
var looseOrigins = map[string]func(string) string{
	"fold": func(s string) string { return cases.Fold().String(cases.Upper(language.Und).String(s)) },
	"nfkc": norm.NFKC.String,
	"nfkc+fold": func(s string) string {
		return norm.NFKC.String(cases.Fold().String(cases.Upper(language.Und).String(norm.NFKC.String(s))))
	},
}

func decode(p string) string {
	d, err := url.PathUnescape(p)
	if err != nil {
		return "\x00invalid"
	}
	return d
}

// clean resolves dot segments as RFC 3986 does: "/a/." and "/a/b/.." are
// "/a/".
func clean(p string) string {
	c := path.Clean(p)
	if (strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/..")) && c != "/" {
		c += "/"
	}
	return c
}

// FuzzPath checks the gate's contract: for any path, either it is refused,
// or the canonical path (which usher matches and forwards) names the same
// resource to every origin model, so the rule that matched is the rule of
// what the origin serves; and the canonical path is a fixed point.
func FuzzPath(f *testing.F) {
	for _, s := range []string{
		"/", "/shop/x", "//shop", "/static/../shop", "/a/%2e%2e/b", "/a;b", "/a./", "/%C3%A9/..",
		"/%C5%BFhop/x", "/cla%C3%9F/x", "/static/%EF%BC%8E%EF%BC%8E%EF%BC%8Fshop", "/%E2%80%A4%E2%80%A4/x", "/x%EF%BC%8E",
		"/00/%EF%BC%8E", // NFKC gives "/00/.", which is "/00/"
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, _, err := Path(raw)
		if err != nil {
			return
		}
		sent := (&url.URL{Path: c}).EscapedPath()
		for name, origin := range origins {
			if got := origin(sent); got != c {
				t.Fatalf("Path(%q) = %q, forwarded as %q, but a %s origin serves %q", raw, c, sent, name, got)
			}
		}
		for name, m := range looseOrigins {
			// The origin reads the forwarded target as its mapping of c;
			// Path of that mapping, if it accepts it, names what the
			// origin serves.
			served := clean(m(decode(sent)))
			if served != clean(m(c)) {
				t.Fatalf("Path(%q) = %q, but a %s origin serves %q, not clean(m(c)) = %q", raw, c, name, served, clean(m(c)))
			}
			mc, _, err := Path((&url.URL{Path: m(c)}).EscapedPath())
			if err == nil && mc != served {
				t.Fatalf("Path(%q) = %q; a %s origin serves %q, but Path of its reading %q is %q", raw, c, name, served, m(c), mc)
			}
		}
		again, changed, err := Path(sent)
		if err != nil || again != c || changed {
			t.Fatalf("Path(%q) = %q, but Path(%q) = %q, %v, %v", raw, c, sent, again, changed, err)
		}
		if r := Return(raw); !sameOrigin(r) {
			t.Fatalf("Return(%q) = %q: not same-origin", raw, r)
		}
	})
}

func FuzzReturn(f *testing.F) {
	for _, s := range []string{"//evil/x", "/\\evil", "https://evil/", "/ok?x=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		if r := Return(target); !sameOrigin(r) || !strings.HasPrefix(r, "/") {
			t.Fatalf("Return(%q) = %q: not a same-origin path", target, r)
		}
	})
}
