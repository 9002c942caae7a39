package gateway

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"usher/internal/canon"
)

func TestRulesMatch(t *testing.T) {
	t.Parallel()
	rs := Rules{
		DefaultRoom: "sale",
		Gate:        []string{"/", "/static/private/"},
		Open:        []string{"/static/", "/healthz"},
		Routes:      []Route{{"/concert-a/", "room-a"}, {"/concert-a/vip/", "room-vip"}},
	}
	if err := rs.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path      string
		wantRoom  string
		wantGated bool
	}{
		{"/", "sale", true},
		{"/checkout", "sale", true},
		{"/static/app.css", "sale", false},
		{"/static/private/x", "sale", true}, // longer gate pattern beats /static/
		{"/healthz", "sale", false},
		{"/healthz/db", "sale", false},
		{"/healthzx", "sale", true}, // a pattern without / matches whole segments
		{"/concert-a/", "room-a", true},
		{"/concert-a/seats", "room-a", true},
		{"/concert-a/vip/1", "room-vip", true}, // longest route wins
		{"/concert-ab", "sale", true},
	} {
		room, gated := rs.Match(tc.path)
		if room != tc.wantRoom || gated != tc.wantGated {
			t.Errorf("Match(%q) = %q, %v; want %q, %v", tc.path, room, gated, tc.wantRoom, tc.wantGated)
		}
	}
}

func TestRulesDefaultsAndTies(t *testing.T) {
	t.Parallel()
	rs := Rules{DefaultRoom: "sale"}
	if _, gated := rs.Match("/anything"); !gated {
		t.Error("no gate patterns: want everything gated")
	}
	rs = Rules{DefaultRoom: "sale", Gate: []string{"/shop/"}, Open: []string{"/shop/"}}
	if _, gated := rs.Match("/shop/x"); gated {
		t.Error("same pattern gated and open: want open")
	}
	rs = Rules{DefaultRoom: "sale", Gate: []string{"/shop/"}}
	if _, gated := rs.Match("/about"); gated {
		t.Error("a path no pattern matches: want open")
	}
}

func TestRulesValidate(t *testing.T) {
	t.Parallel()
	for _, rs := range []Rules{
		{DefaultRoom: "Bad Room"},
		{DefaultRoom: "sale", Gate: []string{"shop"}},
		{DefaultRoom: "sale", Open: []string{"/_usher/x"}},
		{DefaultRoom: "sale", Routes: []Route{{"/a/", "BAD"}}},
	} {
		if err := rs.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", rs)
		}
	}
	if _, err := ParseRoute("/a/"); err == nil {
		t.Error(`ParseRoute("/a/") = nil error, want one`)
	}
	r, err := ParseRoute("/concert-a/=room-a")
	if err != nil || r != (Route{"/concert-a/", "room-a"}) {
		t.Errorf("ParseRoute = %+v, %v", r, err)
	}
}

func TestRulesResolveCase(t *testing.T) {
	rs := Rules{
		DefaultRoom: "main",
		Gate:        []string{"/shop"},
		Open:        []string{"/static/"},
		Routes:      []Route{{Prefix: "/concert-a/", Room: "room-a"}},
	}
	type want struct {
		room  string
		gated bool
		err   bool
	}
	for _, tc := range []struct {
		path        string
		exact, fold want
	}{
		{"/shop/x", want{"main", true, false}, want{"main", true, false}},
		{"/SHOP/x", want{err: true}, want{"main", true, false}},
		{"/Shop", want{err: true}, want{"main", true, false}},
		{"/static/app.css", want{"main", false, false}, want{"main", false, false}},
		{"/STATIC/app.css", want{"main", false, false}, want{"main", false, false}},
		{"/Concert-A/x", want{err: true}, want{"room-a", false, false}},
		{"/About", want{"main", false, false}, want{"main", false, false}},
	} {
		for _, fold := range []bool{false, true} {
			r := rs
			r.FoldCase = fold
			w := tc.exact
			if fold {
				w = tc.fold
			}
			room, gated, err := r.Resolve(tc.path)
			if err != nil && !errors.Is(err, ErrAmbiguous) || (err != nil) != w.err || room != w.room || gated != w.gated {
				t.Errorf("FoldCase=%v Resolve(%q) = %q, %v, %v; want %q, %v, err %v", fold, tc.path, room, gated, err, w.room, w.gated, w.err)
			}
		}
	}
}

func BenchmarkResolve(b *testing.B) {
	rs := Rules{
		DefaultRoom: "sale",
		Gate:        []string{"/", "/static/private/"},
		Open:        []string{"/static/", "/healthz"},
		Routes:      []Route{{"/concert-a/", "room-a"}, {"/concert-a/vip/", "room-vip"}},
	}
	for _, bc := range []struct{ name, path string }{
		{"ascii", "/concert-a/seats/12"},
		{"ascii-upper", "/Concert-A/Seats/12"},
		{"hangul", "/공연/좌석/12"},
		{"latin", "/café/crème/12"},
		{"cyrillic", "/концерт/места/12"},
		{"long-s", "/ſtatic/app.css"},  // refused early
		{"near", "/Concert-A/café/12"}, // a case away from a route: read every way
	} {
		for _, fold := range []bool{false, true} {
			r := rs
			r.FoldCase = fold
			b.Run(fmt.Sprintf("%s/fold=%v", bc.name, fold), func(b *testing.B) {
				for b.Loop() {
					r.Resolve(bc.path)
				}
			})
		}
	}
}

// unicodeRules gate words that other scripts' letters, compatibility forms
// and full case mappings spell in ASCII once an origin reads them loosely.
var unicodeRules = Rules{
	DefaultRoom: "sale",
	Gate:        []string{"/shop/", "/vip/", "/class/", "/kiosk/", "/offers/", "/café/", "/공연/", "/straße/"},
	Open:        []string{"/static/"},
	Routes:      []Route{{"/vip/", "room-vip"}},
}

// TestRulesResolveUnicode: every spelling of a gated path that some origin
// reads as the gated path (Go's strings.EqualFold and ToUpper, Python's
// upper() and casefold(), Java's equalsIgnoreCase, NFKC) is refused by
// default and gated with FoldCase, or refused where loose readings
// disagree; honest paths pass.
func TestRulesResolveUnicode(t *testing.T) {
	const refused = "refused"
	for _, tc := range []struct {
		path        string
		exact, fold string // "" open, "refused", or the gated room
	}{
		{"/ſhop/x", refused, "sale"},                     // ſ U+017F: upper S
		{"/SHOP/x", refused, "sale"},                     // ASCII case
		{"/ShOp", "", ""},                                // "/shop/" needs the slash
		{"/vıp/x", refused, "room-vip"},                  // dotless ı U+0131: upper I
		{"/VIP/x", refused, "room-vip"},                  // another room's case
		{"/claß/x", refused, "sale"},                     // ß: full upper SS
		{"/CLASS/x", refused, "sale"},                    // ASCII case
		{"/\u212Aiosk/x", refused, "sale"},               // Kelvin sign: lower k
		{"/o\uFB00ers/x", refused, "sale"},               // ligature ﬀ: NFKC ff
		{"/ｓｈｏｐ/x", refused, "sale"},                     // fullwidth letters: NFKC
		{"/ＳＨＯＰ/x", refused, "sale"},                     // and their case
		{"/v\u0130p/x", refused, refused},                // İ: Go lower i, Unicode i̇
		{"/V\u0130P/x", refused, refused},                // and in upper case
		{"/static/．．／shop/x", refused, "sale"},           // fullwidth dots and slash: NFKC ../
		{"/static/\u2024\u2024/shop/x", refused, "sale"}, // one dot leaders: NFKC ..
		{"/static/．．/shop/x", refused, "sale"},
		{"/static/x\uFF0E", refused, refused}, // NFKC ends the segment in a dot (IIS drops it)
		{"/shop\uFF1Bx/", refused, refused},   // fullwidth ; is a path parameter after NFKC
		{"/cafe\u0301/x", refused, "sale"},    // NFD é
		{"/CAFÉ/x", refused, "sale"},
		{"/STRASSE/x", refused, "sale"},
		{"/strasse/x", refused, "sale"},
		{"/STRAẞE/x", refused, "sale"}, // capital sharp ẞ
		// Honest paths.
		{"/shop/x", "sale", "sale"},
		{"/vip/seats", "room-vip", "room-vip"},
		{"/static/app.css", "", ""},
		{"/café/menu", "sale", "sale"},
		{"/공연/좌석", "sale", "sale"},
		{"/좌석/공연", "", ""},
		{"/café", "", ""},
		{"/Café", "", ""},
		{"/Crème/Brûlée", "", ""},
		{"/Straßen/x", "", ""},
		{"/концерт/места", "", ""},
		{"/ΑΣ/x", "", ""},
		{"/about", "", ""},
		{"/shopping", "", ""},
	} {
		for _, fold := range []bool{false, true} {
			rs := unicodeRules
			rs.FoldCase = fold
			want := tc.exact
			if fold {
				want = tc.fold
			}
			room, gated, err := rs.Resolve(tc.path)
			got := ""
			switch {
			case errors.Is(err, ErrAmbiguous):
				got = refused
			case err != nil:
				got = err.Error()
			case gated:
				got = room
			}
			if got != want {
				t.Errorf("FoldCase=%v Resolve(%q) = %q, want %q", fold, tc.path, got, want)
			}
		}
	}
}

// TestRulesResolvePatternCase: a pattern in upper case still gates the
// lower-case path an origin that ignores case serves from it.
func TestRulesResolvePatternCase(t *testing.T) {
	rs := Rules{DefaultRoom: "sale", Gate: []string{"/Shop/"}}
	if _, _, err := rs.Resolve("/shop/x"); !errors.Is(err, ErrAmbiguous) {
		t.Errorf(`Gate "/Shop/": Resolve("/shop/x") err = %v, want ErrAmbiguous`, err)
	}
	rs.FoldCase = true
	if _, gated, err := rs.Resolve("/shop/x"); !gated || err != nil {
		t.Errorf(`FoldCase, Gate "/Shop/": Resolve("/shop/x") = %v, %v; want gated`, gated, err)
	}
}

// components are the case mappings and normalizations readings compose,
// each with what it does to ASCII.
func components() map[string][2]func(string) string {
	id := func(s string) string { return s }
	m := map[string][2]func(string) string{"NFC": {norm.NFC.String, id}, "NFKC": {norm.NFKC.String, id}}
	for _, r := range readings[1:8] {
		m[r.name] = [2]func(string) string{r.f, r.ascii}
	}
	return m
}

// TestPlainAndSkeleton checks, rune by rune over all of Unicode, the two
// facts Resolve's fast paths rest on: every mapping leaves a plain rune as
// it is (ASCII as its ascii mapping says), and the skeleton of a rune is the
// skeleton of its every mapping. Readings compose these mappings, so both
// hold for readings too.
func TestPlainAndSkeleton(t *testing.T) {
	comps := components()
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) || !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Zs, unicode.Cf) {
			continue
		}
		s := string(r)
		k := skeleton(s)
		for name, f := range comps {
			m := f[0](s)
			if r < utf8.RuneSelf && m != f[1](s) || r >= utf8.RuneSelf && formOf(s) != other && m != s {
				t.Errorf("%U is plain, but %s maps it to %+q", r, name, m)
			}
			if km := skeleton(m); km != k {
				t.Errorf("skeleton(%U) = %+q, but skeleton(%s(%U) = %+q) = %+q", r, k, name, r, m, km)
			}
		}
		if r < utf8.RuneSelf && k != strings.ToUpper(s) {
			t.Errorf("skeleton(%q) = %q, want strings.ToUpper", s, k)
		}
	}
}

// FuzzResolve: for any canonical path, Resolve agrees with deciding by every
// reading (so the fast paths are exact), and when it accepts, an origin
// that matches with strings.EqualFold (not one of the readings) decides the
// same, or finds the path open under FoldCase.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{
		"/ſhop/x", "/vıp/x", "/claß/x", "/\u212Aiosk/", "/o\uFB00ers/", "/ｓｈｏｐ/x", "/v\u0130p/",
		"/static/．．／shop/x", "/static/\u2024\u2024/shop/", "/cafe\u0301/", "/공연/좌석", "/Straße/x",
		"/SHOP/x", "/static/app.css", "/ΑΣ/x", "/concert-a/Ϊ́", "/vip/\u0345",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	ascii := Rules{
		DefaultRoom: "sale",
		Gate:        []string{"/shop/", "/vip/", "/class/", "/kiosk", "/static/private/"},
		Open:        []string{"/static/", "/healthz"},
		Routes:      []Route{{"/vip/", "room-vip"}, {"/kiosk", "room-k"}},
	}
	gateAll := Rules{DefaultRoom: "sale", Open: []string{"/static/", "/ﬀ/"}, Routes: []Route{{"/Σ/", "room-s"}}}
	f.Fuzz(func(t *testing.T, s string, fold bool) {
		if len(s) > 200 { // longer paths only slow the search down
			return
		}
		path, changed, err := canon.Path((&url.URL{Path: s}).EscapedPath())
		if err != nil || changed {
			return
		}
		for _, rs := range []Rules{ascii, unicodeRules, gateAll} {
			rs.FoldCase = fold
			room, gated, err := rs.Resolve(path)
			r2, g2, err2 := rs.readAll(path)
			if room != r2 || gated != g2 || (err == nil) != (err2 == nil) {
				t.Fatalf("%+v: Resolve(%+q) = %q, %v, %v; by every reading %q, %v, %v", rs, path, room, gated, err, r2, g2, err2)
			}
			if err != nil {
				continue
			}
			fr, fg := rs.equalFold(path)
			if (fr != room || fg != gated) && (!fold || fg) {
				t.Fatalf("%+v: Resolve(%+q) = %q, %v; an EqualFold origin reads %q, %v", rs, path, room, gated, fr, fg)
			}
		}
	})
}

// equalFold decides path as an origin that compares with strings.EqualFold.
func (rs Rules) equalFold(path string) (room string, gated bool) {
	prefix := func(s, p string) bool {
		n := utf8.RuneCountInString(p)
		i := 0
		for ; n > 0 && i < len(s); n-- {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
		}
		return n == 0 && strings.EqualFold(s[:i], p)
	}
	matches := func(p string) (int, bool) {
		n := utf8.RuneCountInString(p)
		if strings.HasSuffix(p, "/") {
			return n, prefix(path, p)
		}
		return n, strings.EqualFold(path, p) || prefix(path, p+"/")
	}
	room, best := rs.DefaultRoom, -1
	for _, r := range rs.Routes {
		if n, ok := matches(r.Prefix); ok && n > best {
			room, best = r.Room, n
		}
	}
	gate := rs.Gate
	if len(gate) == 0 {
		gate = []string{"/"}
	}
	best = -1
	for _, p := range gate {
		if n, ok := matches(p); ok && n > best {
			gated, best = true, n
		}
	}
	for _, p := range rs.Open {
		if n, ok := matches(p); ok && n >= best {
			gated, best = false, n
		}
	}
	return room, gated
}
