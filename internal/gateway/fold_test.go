package gateway

import (
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
	"golang.org/x/text/unicode/norm"
)

// TestGateCannotBeFolded sends, without a pass, spellings of gated paths
// that an origin which ignores case or compatibility forms serves as the
// gated page (Unicode upper case of ſ, ı, ß; Kelvin sign; ligatures;
// fullwidth letters, dots and slashes; İ), with and without FoldCase, and
// asserts that the origin never received a path that any such reading of
// it finds gated. Honest paths still reach the origin.
func TestGateCannotBeFolded(t *testing.T) {
	attacks := []string{
		"/%C5%BFhop/x",            // ſ: upper S
		"/%C5%BFHOP/x",            //
		"/v%C4%B1p/x",             // ı: upper I
		"/V%C4%B1P/x",             //
		"/cla%C3%9F/x",            // ß: upper SS, folded ss
		"/CLA%C3%9F/x",            //
		"/cla%E1%BA%9E/x",         // ẞ
		"/%E2%84%AAiosk/x",        // Kelvin sign: lower k
		"/o%EF%AC%80ers/x",        // ﬀ: NFKC ff
		"/%EF%BD%93hop/x",         // fullwidth ｓ
		"/%EF%BC%B3%EF%BC%A8op/x", // fullwidth ＳＨ
		"/%EF%BD%96%EF%BD%89%EF%BD%90/x",
		"/v%C4%B0p/x",     // İ: Go's ToLower gives i
		"/V%C4%B0P/x",     //
		"/shop%EF%BC%8Fx", // fullwidth slash
		"/static/%EF%BC%8E%EF%BC%8E%EF%BC%8Fshop/x", // fullwidth ../
		"/static/%EF%BC%8E%EF%BC%8E/shop/x",         // fullwidth ..
		"/static/%E2%80%A4%E2%80%A4/shop/x",         // one dot leaders
		"/static/%E2%80%A5/shop/x",                  // two dot leader
		"/SHOP/x",
		"/Shop/x",
		"/s%CC%81hop/x", // a combining mark
	}
	for _, fold := range []bool{false, true} {
		o := &recorder{}
		origin := newOrigin(t, o.ServeHTTP)
		rules := Rules{
			DefaultRoom: "sale",
			Gate:        []string{"/shop/", "/vip/", "/class/", "/kiosk/", "/offers/"},
			Open:        []string{"/static/"},
			FoldCase:    fold,
		}
		e := newEnv(t, origin, rules)
		for _, target := range attacks {
			res := raw(t, e.url, "GET "+target+" HTTP/1.1")
			for _, got := range o.take() {
				for _, r := range originReadings(t, got) {
					if _, gated := rules.Match(r); gated {
						t.Errorf("FoldCase=%v: GET %s (%d): the origin received %q, which reads as gated %q", fold, target, res.StatusCode, got, r)
						break
					}
				}
			}
		}

		honest := []string{"/static/app.css", "/%EA%B3%B5%EC%97%B0/%EC%A2%8C%EC%84%9D", "/caf%C3%A9", "/Stra%C3%9Fe", "/about"}
		if fold {
			honest = append(honest, "/STATIC/app.css")
		}
		for _, target := range honest {
			if res := raw(t, e.url, "GET "+target+" HTTP/1.1"); res.StatusCode != http.StatusOK {
				t.Errorf("FoldCase=%v: GET %s: %d, want 200 from the origin", fold, target, res.StatusCode)
			}
			o.take()
		}
	}
}

// originReadings are the paths a case-insensitive origin may serve for the
// request target it received: Go's simple lower case, lower of upper case
// (Java's equalsIgnoreCase), Unicode's full upper case folded (Python's
// upper() and casefold()), each also after NFKC, with dot segments
// resolved. All are lower case on ASCII, like the rules' patterns.
func originReadings(t *testing.T, target string) []string {
	t.Helper()
	p, _, _ := strings.Cut(target, "?")
	d, err := url.PathUnescape(p)
	if err != nil {
		t.Fatalf("the origin received an invalid target %q", target)
	}
	var out []string
	for _, c := range []func(string) string{
		strings.ToLower,
		func(s string) string { return strings.ToLower(strings.ToUpper(s)) },
		func(s string) string { return cases.Fold().String(cases.Upper(language.Und).String(s)) },
	} {
		for _, s := range []string{d, norm.NFKC.String(d)} {
			s = c(s)
			clean := path.Clean(s)
			if strings.HasSuffix(s, "/") && clean != "/" {
				clean += "/"
			}
			out = append(out, clean)
		}
	}
	return out
}
