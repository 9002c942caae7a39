package gateway

import (
	"errors"
	"fmt"
	"strings"

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
	// FoldCase matches patterns without regard to case, for origins that
	// ignore case (IIS, most Windows servers): "/SHOP/x" is gated by
	// "/shop/". Without it patterns match case-sensitively and Resolve
	// refuses a path whose case changes the decision (see Resolve).
	FoldCase bool
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

// Match returns the room for path and whether the path is gated.
func (rs Rules) Match(path string) (room string, gated bool) {
	return rs.match(path, false)
}

// match is Match; with fold, every pattern is lower-cased before it is
// compared (path is expected lower-cased already).
func (rs Rules) match(path string, fold bool) (room string, gated bool) {
	matches := func(pattern, path string) bool {
		if fold {
			pattern = strings.ToLower(pattern)
		}
		return matches(pattern, path)
	}
	room, best := rs.DefaultRoom, -1
	for _, r := range rs.Routes {
		if matches(r.Prefix, path) && len(r.Prefix) > best {
			room, best = r.Room, len(r.Prefix)
		}
	}
	gate := rs.Gate
	if len(gate) == 0 {
		gate = []string{"/"}
	}
	best = -1
	for _, p := range gate {
		if matches(p, path) && len(p) > best {
			gated, best = true, len(p)
		}
	}
	for _, p := range rs.Open {
		if matches(p, path) && len(p) >= best {
			gated, best = false, len(p)
		}
	}
	return room, gated
}

// ErrCaseAmbiguous is Resolve's answer for a path that the rules would gate
// differently, or give to another room, if its case were folded.
var ErrCaseAmbiguous = errors.New("path case changes the rule that applies")

// Resolve is Match for a canonical path (canon.Path) as the proxy uses it.
// With FoldCase it matches the lower-cased path against lower-cased
// patterns. Without it, it matches exactly, and refuses with
// ErrCaseAmbiguous a path that would be decided differently with its case
// folded: "/SHOP/x" under Gate "/shop" reaches an origin that ignores case
// as "/shop/x", so it may neither pass ungated nor be served as another
// room's page, whichever way the origin treats case. Honest links use the
// rules' own case and never meet the refusal.
func (rs Rules) Resolve(path string) (room string, gated bool, err error) {
	lower := strings.ToLower(path)
	if rs.FoldCase {
		room, gated = rs.match(lower, true)
		return room, gated, nil
	}
	room, gated = rs.match(path, false)
	if lower == path {
		return room, gated, nil
	}
	if r2, g2 := rs.match(lower, true); g2 != gated || r2 != room {
		return "", false, ErrCaseAmbiguous
	}
	return room, gated, nil
}

func matches(pattern, path string) bool {
	if strings.HasSuffix(pattern, "/") {
		return strings.HasPrefix(path, pattern)
	}
	return path == pattern || strings.HasPrefix(path, pattern+"/")
}
