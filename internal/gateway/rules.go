package gateway

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
	"golang.org/x/text/unicode/norm"

	"usher/internal/canon"
	"usher/internal/queue"
)

// Prefix is the reserved path prefix under which the proxy serves usher's
// own API; requests under it never reach the origin.
const Prefix = "/_usher/"

// Route maps a path prefix to a room.
type Route struct {
	Prefix, Room string
}

// ParseRoute parses "PREFIX=ROOM", as in "/concert-a/=room-a".
func ParseRoute(s string) (Route, error) {
	prefix, room, ok := strings.Cut(s, "=")
	if !ok {
		return Route{}, fmt.Errorf("route %q: want PREFIX=ROOM, as in /concert-a/=room-a", s)
	}
	return Route{Prefix: prefix, Room: room}, nil
}

// Rules decide, by path, whether a request is gated and for which room.
//
// A pattern ending in "/" matches every path that starts with it ("/static/"
// matches "/static/app.css"); any other pattern matches that exact path and
// the paths below it ("/healthz" matches "/healthz" and "/healthz/db", not
// "/healthzx"). Of all Gate and Open patterns that match, the longest wins;
// on a tie Open wins; a path no pattern matches is open. Of all Routes that
// match, the longest prefix names the room; otherwise DefaultRoom.
type Rules struct {
	DefaultRoom string
	// Gate lists gated patterns; empty means "/" (everything gated).
	Gate []string
	// Open lists patterns that always pass without a pass.
	Open   []string
	Routes []Route
	// FoldCase matches patterns without regard to case or compatibility
	// form, for origins that ignore case (IIS, most Windows servers):
	// "/SHOP/x" and "/ſhop/x" are gated by "/shop/". Without it patterns
	// match exactly and Resolve refuses a path whose case or form changes
	// the decision (see Resolve).
	FoldCase bool
	// Bypass lets a request through a gated path without a place, by
	// client address or secret (BypassRule), counted in usher_bypass_total.
	Bypass []*BypassRule
}

// Validate reports the first bad pattern or room id.
func (rs Rules) Validate() error {
	if !queue.ValidRoomID(rs.DefaultRoom) {
		return fmt.Errorf("room %q: want [a-z0-9][a-z0-9-]{0,63}", rs.DefaultRoom)
	}
	check := func(kind, p string) error {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("%s pattern %q: want a path starting with /", kind, p)
		}
		if p == strings.TrimSuffix(Prefix, "/") || strings.HasPrefix(p, Prefix) {
			return fmt.Errorf("%s pattern %q: %s is reserved for usher", kind, p, Prefix)
		}
		return nil
	}
	for _, p := range rs.Gate {
		if err := check("gate", p); err != nil {
			return err
		}
	}
	for _, p := range rs.Open {
		if err := check("open", p); err != nil {
			return err
		}
	}
	for _, r := range rs.Routes {
		if err := check("route", r.Prefix); err != nil {
			return err
		}
		if !queue.ValidRoomID(r.Room) {
			return fmt.Errorf("route %s=%s: room id: want [a-z0-9][a-z0-9-]{0,63}", r.Prefix, r.Room)
		}
	}
	return nil
}

// Rooms lists the default room and every routed room, without repeats.
func (rs Rules) Rooms() []string {
	rooms := []string{rs.DefaultRoom}
	for _, r := range rs.Routes {
		dup := false
		for _, have := range rooms {
			dup = dup || have == r.Room
		}
		if !dup {
			rooms = append(rooms, r.Room)
		}
	}
	return rooms
}

// Match returns the room for path and whether the path is gated, matching
// patterns exactly.
func (rs Rules) Match(path string) (room string, gated bool) {
	d := rs.decide(path, nil)
	return d.room, d.gated
}

// decision is what the rules say of one reading of a path.
type decision struct {
	room  string
	gated bool
}

// decide matches path against the patterns as m maps them (nil: as
// written). Lengths are compared within that one mapping.
func (rs Rules) decide(path string, m func(string) string) decision {
	mapped := func(p string) string {
		if m == nil {
			return p
		}
		return m(p)
	}
	d, best := decision{room: rs.DefaultRoom}, -1
	for _, r := range rs.Routes {
		if p := mapped(r.Prefix); matches(p, path) && len(p) > best {
			d.room, best = r.Room, len(p)
		}
	}
	best = -1
	if len(rs.Gate) == 0 {
		d.gated, best = true, 1 // "/"
	}
	for _, p := range rs.Gate {
		if p := mapped(p); matches(p, path) && len(p) > best {
			d.gated, best = true, len(p)
		}
	}
	for _, p := range rs.Open {
		if p := mapped(p); matches(p, path) && len(p) >= best {
			d.gated, best = false, len(p)
		}
	}
	return d
}

func matches(pattern, path string) bool {
	if strings.HasSuffix(pattern, "/") {
		return strings.HasPrefix(path, pattern)
	}
	return strings.HasPrefix(path, pattern) && (len(path) == len(pattern) || path[len(pattern)] == '/')
}

// ErrAmbiguous is Resolve's answer for a path that some origin would read as
// a resource the rules decide otherwise.
var ErrAmbiguous = errors.New("path case or form changes the rule that applies")

// Resolve is Match for a canonical path (canon.Path) as the proxy uses it,
// safe for origins that compare paths loosely. It reads the path and the
// patterns as each of a set of origins would (see readings: Go's, Java's and
// Unicode's upper, lower and folded case, each alone or after NFC or NFKC,
// with dot segments resolved again), then:
//
//   - without FoldCase it decides by the exact reading and refuses with
//     ErrAmbiguous a path that any reading decides otherwise: under Gate
//     "/shop/", "/SHOP/x", "/ſhop/x" and "/ｓｈｏｐ/x" are refused;
//   - with FoldCase it decides by the widest reading (NFKC, full upper case,
//     then case folding), so "/SHOP/x", "/ſhop/x" and "/claß/" are gated by
//     "/shop/" and "/class/", and refuses a path that a case-insensitive
//     reading gates otherwise (open, or for another room). A reading that
//     finds the path open needs nothing: it serves an open resource.
//
// A reading that no longer is a canonical path ("/static/．．／shop" under
// NFKC) refuses too. Honest links, in the rules' own case and form, are
// never refused. Readings outside the set (Turkish case, say) are not
// modelled.
func (rs Rules) Resolve(path string) (room string, gated bool, err error) {
	switch rs.form(path) {
	case lowerPlain: // every reading is the exact one
		d := rs.decide(path, nil)
		return d.room, d.gated, nil
	case plain:
		// Every reading is the exact one or ASCII lower case (upper case
		// decides as lower case does on plain strings).
		exact, lower := rs.decide(path, nil), rs.decide(strings.ToLower(path), strings.ToLower)
		switch {
		case rs.FoldCase:
			return lower.room, lower.gated, nil
		case exact != lower:
			return "", false, ErrAmbiguous
		}
		return exact.room, exact.gated, nil
	}
	if d, ok := rs.loose(path); ok {
		return d.room, d.gated, nil
	}
	return rs.readAll(path)
}

// readAll is Resolve by every reading.
func (rs Rules) readAll(path string) (room string, gated bool, err error) {
	want := readings[0]
	if rs.FoldCase {
		want = readings[len(readings)-1]
	}
	d, ok := rs.read(path, want)
	if !ok {
		return "", false, ErrAmbiguous
	}
	for _, r := range readings {
		if rs.FoldCase && !r.fold {
			continue
		}
		got, ok := rs.read(path, r)
		if !ok || (!rs.FoldCase || got.gated) && got != d {
			return "", false, ErrAmbiguous
		}
	}
	return d.room, d.gated, nil
}

// loose decides path when no reading can change the decision: every
// pattern matches path exactly as it matches the loosest key of path (see
// skeleton), and that key needs no resolving of dot segments. Every
// reading's key is the same key, so each matches between the two.
func (rs Rules) loose(path string) (decision, bool) {
	key := skeleton(path)
	if _, changed, err := canon.Path((&url.URL{Path: key}).EscapedPath()); err != nil || changed {
		return decision{}, false
	}
	same := func(p string) bool {
		k := strings.ToUpper(p)
		if !isASCII(p) {
			k = skeleton(p)
		}
		return matches(p, path) == matches(k, key)
	}
	for _, p := range rs.Gate {
		if !same(p) {
			return decision{}, false
		}
	}
	if len(rs.Gate) == 0 && !same("/") {
		return decision{}, false
	}
	for _, p := range rs.Open {
		if !same(p) {
			return decision{}, false
		}
	}
	for _, r := range rs.Routes {
		if !same(r.Prefix) {
			return decision{}, false
		}
	}
	return rs.decide(path, nil), true
}

// skeleton is a key coarser than every reading: skeleton(r(s)) ==
// skeleton(s) for each reading r. It is NFKD, full case folding and NFKD
// again, without marks, with dotless ı as i and each rune as the least of
// its simple case orbit (x/text's Fold swaps Cherokee's two cases). On
// ASCII it is strings.ToUpper.
func skeleton(s string) string {
	s = norm.NFKD.String(cases.Fold().String(norm.NFKD.String(s)))
	return strings.Map(func(r rune) rune {
		switch {
		case unicode.Is(unicode.M, r):
			return -1
		case r == 'ı':
			r = 'i'
		}
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, s)
}

// read decides path as an origin that reads it by r would; ok is false if
// that reading is no canonical path.
func (rs Rules) read(path string, r reading) (d decision, ok bool) {
	if r.f == nil {
		return rs.decide(path, nil), true
	}
	mapped := r.f(path)
	if mapped != path {
		c, _, err := canon.Path((&url.URL{Path: mapped}).EscapedPath())
		if err != nil {
			return decision{}, false
		}
		mapped = c
	}
	return rs.decide(mapped, func(p string) string {
		if isASCII(p) {
			return r.ascii(p)
		}
		return r.f(p)
	}), true
}

// form is what the fast paths of Resolve need to know of a string.
type form int

const (
	other      form = iota // anything
	plain                  // see Rules.form
	lowerPlain             // plain without ASCII upper case
)

// form is the least form of path and the patterns. Every reading maps a
// plain string as the exact reading or ASCII lower or upper case does. A
// plain string is in NFKC and has no rune, but ASCII, that has a case or
// combines with the rune before it (Hangul, CJK, most Arabic, Hebrew).
func (rs Rules) form(path string) form {
	f := formOf(path)
	for _, p := range rs.Gate {
		f = min(f, formOf(p))
	}
	for _, p := range rs.Open {
		f = min(f, formOf(p))
	}
	for _, r := range rs.Routes {
		f = min(f, formOf(r.Prefix))
	}
	return f
}

func formOf(s string) form {
	f, quick := lowerPlain, true
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c-'A' < 26 {
				f = plain
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case 0xAC00 <= r && r <= 0xD7A3, 0x4E00 <= r && r <= 0x9FFF:
			// Hangul syllables and CJK ideographs: plain, and in NFKC
			// whatever their neighbours.
		case plainRune(r, s[i:]):
			quick = false
		default:
			return other
		}
		i += n
	}
	if !quick && !norm.NFKC.IsNormalString(s) {
		return other
	}
	return f
}

// plainRune reports whether r, the first rune of s, has no case and cannot
// combine with a rune before it.
func plainRune(r rune, s string) bool {
	return unicode.SimpleFold(r) == r && unicode.ToUpper(r) == r && unicode.ToLower(r) == r &&
		!unicode.In(r, unicode.Lu, unicode.Ll, unicode.Lt) && norm.NFKC.PropertiesString(s).BoundaryBefore()
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// reading is one way an origin may read a path; Resolve applies it to the
// path and to the patterns alike.
type reading struct {
	name  string
	fold  bool                // ignores case
	f     func(string) string // nil: the exact reading
	ascii func(string) string // f on ASCII: exact, strings.ToLower or ToUpper
}

// readings are the ways of reading Resolve checks: every case mapping (exact;
// Go's simple lower, upper and lower-of-upper as in Java's
// equalsIgnoreCase; Unicode's full lower, upper, folding and folding of
// upper) alone, and between two passes of NFC or of NFKC. The first is the
// exact reading, the last the widest.
var readings = func() []reading {
	id := func(s string) string { return s }
	upper := func(s string) string { return cases.Upper(language.Und).String(s) }
	fold := func(s string) string { return cases.Fold().String(s) }
	caseMaps := []reading{
		{name: "exact", f: id, ascii: id},
		{name: "ToLower", fold: true, f: strings.ToLower, ascii: strings.ToLower},
		{name: "ToUpper", fold: true, f: strings.ToUpper, ascii: strings.ToUpper},
		{name: "ToLower(ToUpper)", fold: true, f: func(s string) string { return strings.ToLower(strings.ToUpper(s)) }, ascii: strings.ToLower},
		{name: "Lower", fold: true, f: func(s string) string { return cases.Lower(language.Und).String(s) }, ascii: strings.ToLower},
		{name: "Upper", fold: true, f: upper, ascii: strings.ToUpper},
		{name: "Fold", fold: true, f: fold, ascii: strings.ToLower},
		{name: "Fold(Upper)", fold: true, f: func(s string) string { return fold(upper(s)) }, ascii: strings.ToLower},
	}
	var all []reading
	for _, n := range []struct {
		name string
		f    func(string) string
	}{{"", nil}, {"NFC", norm.NFC.String}, {"NFKC", norm.NFKC.String}} {
		for _, c := range caseMaps {
			r := c
			if n.f != nil {
				r.name = n.name + "+" + c.name
				r.f = func(s string) string { return n.f(c.f(n.f(s))) }
			}
			all = append(all, r)
		}
	}
	all[0].f = nil
	return all
}()
