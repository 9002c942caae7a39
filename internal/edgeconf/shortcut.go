package edgeconf

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
	"golang.org/x/text/unicode/norm"
)

// Rule is one line of an open-path shortcut: the first Rule whose Match
// (a regular expression that RE2, for Caddy, and PCRE, for nginx, read
// alike) matches the raw request target decides whether the front proxy
// sends the request straight to the origin (Open) or asks usher.
type Rule struct {
	Match string
	Open  bool
}

// OpenMethods are the methods a shortcut may send to the origin; CONNECT,
// TRACE and any other method always ask usher.
var OpenMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// pathChar is the class of bytes an open target's path may hold: ASCII
// letters, digits and the marks no origin reads as anything else. '%',
// ';', '\', ':' (NTFS streams), '~' (8.3 names), '$', '&' and non-ASCII
// bytes are out: such a target asks usher.
const pathChar = `[A-Za-z0-9._/!'()*+,=@-]`

// refusals ask usher whatever the rules: a target with an escape, a path
// parameter or a backslash; one that names a credential parameter (or
// anything "usher": /_usher/ and usher_invite alike); a path with an
// empty segment, a segment that starts with a dot (dot segments), or one
// that ends with a dot (Windows drops it).
var refusals = []string{`[%;\\]`, `(?i)usher`, `^[^?]*//`, `^[^?]*/\.`, `^[^?]*\.(/|\?|$)`}

// CredentialQuery matches a target whose query may name a credential
// parameter (wire.CredentialParams): a name holding "usher" in any case,
// or an escape. usher strips those before the origin sees them; an edge
// that sends a target on without usher (kill switch, fail open) answers
// such a one as if closed instead.
const CredentialQuery = `^[^?]*\?(.*[&;])?[^=&;]*(?i:usher|%)`

// Shortcut returns the ordered rules that send a target straight to the
// origin only when usher would pass it without a look at any pass: open
// (Rules.Resolve) in the exact reading and in every case and Unicode
// reading usher models, with nothing usher would refuse, redirect or
// strip. open and gate are usher's --open and --gate patterns (no gate is
// "/": everything gated).
//
// A target qualifies when its path is plain ASCII of pathChar, in a form
// no origin reads another way, and either some open pattern matches it
// exactly while no gate pattern longer than that one matches it in any
// case, or no gate pattern matches it in any case. Gate patterns are
// compared in every reading that makes them ASCII (NFC, NFKC; Go's and
// Unicode's upper, lower and folded case), so /ſhop/ gates /shop/ here
// as usher reads it. Anything else asks usher, as every target did.
//
// An open pattern that is not plain ASCII of pathChar gets no shortcut.
// A pattern holding a quote, a brace, a backslash or a control character
// is an error: it cannot be written into either configuration.
func Shortcut(open, gate []string) ([]Rule, error) {
	for _, p := range slices.Concat(open, gate) {
		if !strings.HasPrefix(p, "/") || strings.ContainsFunc(p, func(r rune) bool {
			return r <= ' ' || r == 0x7f || strings.ContainsRune(`"{}\`, r)
		}) {
			return nil, fmt.Errorf("path pattern %q: want a path without spaces, quotes, braces or backslashes", p)
		}
	}
	var rules []Rule
	for _, r := range refusals {
		rules = append(rules, Rule{Match: r})
	}
	var gates []string // every ASCII reading of every gate pattern, lower case
	for _, g := range gate {
		for _, r := range asciiReadings(g) {
			if !slices.Contains(gates, r) {
				gates = append(gates, r)
			}
		}
	}
	exclude := func(g string) Rule { return Rule{Match: `(?i)^` + regexp.QuoteMeta(g)} }
	plain := regexp.MustCompile(`^/` + pathChar + `*$`)
	opens := slices.Clone(open)
	slices.SortStableFunc(opens, func(a, b string) int { return len(b) - len(a) }) // longest first
	for _, o := range opens {
		if !plain.MatchString(o) {
			continue
		}
		for _, g := range gates {
			if len(g) > len(o) && strings.HasPrefix(g, strings.ToLower(o)) {
				rules = append(rules, exclude(g))
			}
		}
		rest := pathChar + `*`
		if !strings.HasSuffix(o, "/") {
			rest = `(/` + pathChar + `*)?`
		}
		rules = append(rules, Rule{Match: `^` + regexp.QuoteMeta(o) + rest + `(\?.*)?$`, Open: true})
	}
	if len(gate) > 0 && !slices.Contains(gates, "/") { // a path no pattern matches is open
		for _, g := range gates {
			rules = append(rules, exclude(g))
		}
		rules = append(rules, Rule{Match: `^/` + pathChar + `*(\?.*)?$`, Open: true})
	}
	return rules, nil
}

// asciiReadings returns p as each reading usher models could make it, in
// lower case, where that reading is ASCII (the only readings an ASCII
// path can match).
func asciiReadings(p string) []string {
	same := func(s string) string { return s }
	forms := []func(string) string{same, norm.NFC.String, norm.NFKC.String}
	folds := []func(string) string{same, strings.ToLower, strings.ToUpper, cases.Fold().String,
		cases.Upper(language.Und).String, cases.Lower(language.Und).String}
	var out []string
	for _, n := range forms {
		for _, c := range folds {
			for _, r := range []string{c(n(p)), n(c(p))} {
				if r = strings.ToLower(r); isASCII(r) && !slices.Contains(out, r) {
					out = append(out, r)
				}
			}
		}
	}
	return out
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
