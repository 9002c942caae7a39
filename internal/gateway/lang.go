package gateway

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/feature/plural"
	"golang.org/x/text/language"

	"usher/internal/canon"
	"usher/internal/wire"
)

// The waiting page's language. Config.Lang is one of:
//
//   - "auto" (or ""): each visitor's choice (the LangCookie set by the
//     page's language links), else its Accept-Language, picks a shipped
//     text set; English when neither names one.
//   - "auto:ko" (auto:<lang>): the same, with another fallback.
//   - "en", "ko", …: that language for everyone, whatever the browser asks;
//     the page then shows no language links.
//
// The waiting page's texts and the JSON answers' eta_text and ahead_text
// change; the plain error pages are English.

// LangAuto is the prefix of the negotiated language settings.
const LangAuto = "auto"

// LangPath is where the waiting page's language links go: GET
// ?lang=<language>&to=<path> sets the LangCookie and sends the browser back
// to the path (same-origin only).
const LangPath = Prefix + "lang"

// langCookieAge is how long a browser keeps its chosen language.
const langCookieAge = 365 * 24 * time.Hour

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

// textFor returns the texts of r's waiting page in room.
func (p *core) textFor(r *http.Request, room string) Text {
	return p.pages.current().forRoom(room).texts[p.lang.pick(r)]
}

// pick returns the language of r's page: the forced one, else the
// visitor's choice (a LangCookie naming a shipped language; any other
// value is ignored), else Accept-Language's.
func (lp langPolicy) pick(r *http.Request) string {
	if lp.forced != "" {
		return lp.forced
	}
	if c, err := r.Cookie(wire.LangCookie); err == nil && slices.Contains(Languages, c.Value) {
		return c.Value
	}
	return negotiate(r.Header.Values("Accept-Language"), Languages, lp.fallback)
}

// langChoices are the page's language links, back to back (the page's
// own language marked), or none when the language is forced.
func (p *core) langChoices(set *pageSet, current, back string) []LangChoice {
	if p.lang.forced != "" {
		return nil
	}
	cs := make([]LangChoice, len(Languages))
	for i, l := range Languages {
		q := url.Values{"lang": {l}, "to": {back}}
		cs[i] = LangChoice{Lang: l, Name: set.texts[l].Name, URL: LangPath + "?" + q.Encode(), Current: l == current}
	}
	return cs
}

// LangChoice is one of the waiting page's language links.
type LangChoice struct {
	Lang, Name string // the language and its own name for itself ("日本語")
	URL        string // LangPath with the language and the way back
	Current    bool   // the page's language
}

// serveLang serves LangPath: a shipped language sets the LangCookie and
// sends the browser back (303) to the same-origin path in "to"; anything
// else is refused (400), with no cookie.
func (p *core) serveLang(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		p.plainPage(w, http.StatusMethodNotAllowed, "Only GET chooses a language.")
		return
	}
	q := r.URL.Query()
	l := q.Get("lang")
	if !slices.Contains(Languages, l) {
		p.plainPage(w, http.StatusBadRequest, "Unknown language; choose one of "+strings.Join(Languages, ", ")+".")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: wire.LangCookie, Value: l, Path: "/", MaxAge: int(langCookieAge.Seconds()),
		HttpOnly: true, Secure: p.secure, SameSite: http.SameSiteLaxMode,
	})
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", canon.Return(q.Get("to")))
	w.WriteHeader(http.StatusSeeOther)
}

// negotiate picks from supported the language that the Accept-Language
// header values prefer (RFC 9110 §12.5.4): the highest q-value, the
// earliest on a tie; a tag matches a language as shippedFor says (ko-KR is
// ko, zh-TW is zh-Hant); "*" stands for fallback, or for the first
// supported language not refused when fallback has q=0. A language refused
// with q=0 is never picked by a wildcard. Malformed entries are skipped; no
// match is fallback.
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
		l := shippedFor(tag, supported)
		if l == "" {
			continue
		}
		if q == 0 {
			refused[l] = true
			continue
		}
		if q > bestQ {
			best, bestQ = l, q
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

// shippedFor returns the language of supported that a lower-case tag
// reads, or "": the one it names whole (zh-hans), else by its primary
// subtag (pt-br is pt, and "in", Indonesian's old code, is id). Chinese
// goes by script: zh-Hant for a Hant script subtag or the regions that
// write it (TW, HK, MO) and for Cantonese (yue), zh-Hans otherwise
// (zh, zh-CN, zh-SG).
func shippedFor(tag string, supported []string) string {
	find := func(l string) string {
		for _, s := range supported {
			if strings.EqualFold(s, l) {
				return s
			}
		}
		return ""
	}
	if l := find(tag); l != "" {
		return l
	}
	primary, rest, _ := strings.Cut(tag, "-")
	switch primary {
	case "in":
		primary = "id"
	case "yue":
		return find("zh-Hant")
	case "zh":
		for sub := range strings.SplitSeq(rest, "-") {
			switch sub {
			case "hant", "tw", "hk", "mo":
				return find("zh-Hant")
			case "hans":
				return find("zh-Hans")
			}
		}
		return find("zh-Hans")
	}
	return find(primary)
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

// Plural is a text with a count, in the plural forms of its language
// (CLDR cardinal rules, golang.org/x/text/feature/plural): a text set gives
// exactly the forms its language uses for the counts the text can show
// (English "one" and "other"; Korean only "other").
type Plural struct {
	Zero  string `json:"zero,omitempty"`
	One   string `json:"one,omitempty"`
	Two   string `json:"two,omitempty"`
	Few   string `json:"few,omitempty"`
	Many  string `json:"many,omitempty"`
	Other string `json:"other,omitempty"`
}

// form returns the text of form f ("" when not given).
func (p Plural) form(f plural.Form) string {
	switch f {
	case plural.Zero:
		return p.Zero
	case plural.One:
		return p.One
	case plural.Two:
		return p.Two
	case plural.Few:
		return p.Few
	case plural.Many:
		return p.Many
	}
	return p.Other
}

var pluralForms = []struct {
	form plural.Form
	name string
}{
	{plural.Zero, "zero"}, {plural.One, "one"}, {plural.Two, "two"},
	{plural.Few, "few"}, {plural.Many, "many"}, {plural.Other, "other"},
}

// count returns p's text for the count n in t's language, formatted with
// args (n itself when none are given).
func (t Text) count(p Plural, n int64, args ...any) string {
	f := p.form(pluralForm(t.tag, n))
	if f == "" {
		f = p.Other
	}
	if len(args) == 0 {
		args = []any{n}
	}
	return fmt.Sprintf(f, args...)
}

// pluralForm is the CLDR cardinal form of the whole number n in lang.
func pluralForm(lang language.Tag, n int64) plural.Form {
	if n < 0 {
		n = -n
	}
	return plural.Cardinal.MatchPlural(lang, int(n), 0, 0, 0, 0)
}

// formsUsed lists the plural forms lang uses for whole counts from min on:
// those a text set must give for a count that is never below min.
func formsUsed(lang language.Tag, min int64) []string {
	seen := map[plural.Form]bool{}
	probe := func(n int64) {
		if n >= min {
			seen[pluralForm(lang, n)] = true
		}
	}
	for n := int64(0); n <= 1100; n++ {
		probe(n)
	}
	for k := int64(1); k <= 20; k++ {
		probe(k * 1_000_000)
		probe(k*1_000_000 + 1)
	}
	var names []string
	for _, f := range pluralForms {
		if seen[f.form] {
			names = append(names, f.name)
		}
	}
	return names
}

// formsGiven lists the forms p gives.
func (p Plural) formsGiven() []string {
	var names []string
	for _, f := range pluralForms {
		if p.form(f.form) != "" {
			names = append(names, f.name)
		}
	}
	return names
}
