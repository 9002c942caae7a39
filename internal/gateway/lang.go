package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The waiting page's language. Config.Lang is one of:
//
//   - "auto" (or ""): each visitor's Accept-Language picks a shipped text
//     set; English when it names none of them.
//   - "auto:ko" (auto:<lang>): the same, with another fallback.
//   - "en", "ko": that language for everyone, whatever the browser asks (the
//     one-language-per-proxy behaviour of earlier versions).
//
// Only the waiting page's own texts change; the plain error pages and the
// JSON answers are English.

// LangAuto is the prefix of the negotiated language settings.
const LangAuto = "auto"

// langPolicy is a parsed Config.Lang.
type langPolicy struct {
	forced   string // a language for everyone, or "" to negotiate
	fallback string // when negotiating: what a header naming no shipped language gets
}

// parseLang parses a Config.Lang value.
func parseLang(s string) (langPolicy, error) {
	bad := func() (langPolicy, error) {
		return langPolicy{}, fmt.Errorf("language %q: want %s, %s:<lang> or one of %s (lang: %s)",
			s, LangAuto, LangAuto, strings.Join(Languages, ", "), strings.Join(Languages, ", "))
	}
	switch rest, auto := strings.CutPrefix(s, LangAuto); {
	case s == "" || s == LangAuto:
		return langPolicy{fallback: "en"}, nil
	case auto && strings.HasPrefix(rest, ":"):
		if l := rest[1:]; slices.Contains(Languages, l) {
			return langPolicy{fallback: l}, nil
		}
		return bad()
	case slices.Contains(Languages, s):
		return langPolicy{forced: s}, nil
	}
	return bad()
}

// Bounds on what a stranger's Accept-Language costs: the bytes read (a
// cut-off entry at the end is dropped) and the entries looked at.
const (
	maxAcceptLanguage = 1024
	maxLangEntries    = 32
)

// textFor returns the texts of r's waiting page.
func (p *core) textFor(r *http.Request) Text { return p.texts[p.lang.pick(r)] }

// pick returns the language of r's page.
func (lp langPolicy) pick(r *http.Request) string {
	if lp.forced != "" {
		return lp.forced
	}
	return negotiate(r.Header.Values("Accept-Language"), Languages, lp.fallback)
}

// negotiate picks from supported the language that the Accept-Language
// header values prefer (RFC 9110 §12.5.4): the highest q-value, the
// earliest on a tie; a tag matches a language by its primary subtag (ko-KR
// is ko); "*" stands for fallback, or for the first supported language not
// refused when fallback has q=0. A language refused with q=0 is never
// picked by a wildcard. Malformed entries are skipped; no match is
// fallback.
func negotiate(values []string, supported []string, fallback string) string {
	header := strings.Join(values, ",")
	if len(header) > maxAcceptLanguage {
		header = header[:maxAcceptLanguage]
		if i := strings.LastIndexByte(header, ','); i >= 0 {
			header = header[:i] // the last entry may be cut short
		} else {
			return fallback
		}
	}
	best, bestQ := "", 0.0
	wildQ := -1.0
	refused := map[string]bool{}
	n := 0
	for entry := range strings.SplitSeq(header, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if n++; n > maxLangEntries {
			break
		}
		tag, q, ok := parseLangEntry(entry)
		if !ok {
			continue
		}
		if tag == "*" {
			wildQ = max(wildQ, q)
			continue
		}
		primary, _, _ := strings.Cut(tag, "-")
		if !slices.Contains(supported, primary) {
			continue
		}
		if q == 0 {
			refused[primary] = true
			continue
		}
		if q > bestQ {
			best, bestQ = primary, q
		}
	}
	if wildQ > bestQ {
		if !refused[fallback] {
			return fallback
		}
		for _, l := range supported {
			if !refused[l] {
				return l
			}
		}
	}
	if best == "" {
		return fallback
	}
	return best
}

// parseLangEntry parses one "tag;q=0.8" of Accept-Language. The tag is
// letters, digits and '-' (or "*"), at most 35 bytes, and comes back lower
// case; q is 1 when absent, and must be 0 to 1 with at most three decimals.
func parseLangEntry(entry string) (tag string, q float64, ok bool) {
	tag, params, _ := strings.Cut(entry, ";")
	tag = strings.ToLower(strings.TrimSpace(tag))
	if tag == "" || len(tag) > 35 || !validTag(tag) {
		return "", 0, false
	}
	q = 1
	for p := range strings.SplitSeq(params, ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		name, value, found := strings.Cut(p, "=")
		if !found || !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue // an extension parameter: ignored
		}
		if q, ok = parseQ(strings.TrimSpace(value)); !ok {
			return "", 0, false
		}
	}
	return tag, q, true
}

func validTag(tag string) bool {
	if tag == "*" {
		return true
	}
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return tag[0] != '-'
}

// parseQ parses a qvalue: "0", "0.5", "1", "1.000" (RFC 9110 §12.4.2).
func parseQ(s string) (float64, bool) {
	if s == "" || len(s) > 5 || (s[0] != '0' && s[0] != '1') {
		return 0, false
	}
	if len(s) > 1 && s[1] != '.' {
		return 0, false
	}
	for i := 2; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	q, err := strconv.ParseFloat(s, 64)
	if err != nil || q > 1 {
		return 0, false
	}
	return q, true
}
