// Package canon turns the path of a request as a stranger wrote it into the
// one canonical path that usher matches its rules against and forwards to the
// origin, and turns a "send me back here" target into a same-origin path.
//
// The contract is the one a gate needs: if Path accepts a request target,
// every common origin (one that percent-decodes once, resolves dot segments,
// collapses slashes, and may treat `\` as `/` or drop trailing dots and
// spaces) sees the resource the canonical path names. What could be read two
// ways is refused rather than guessed: encoded `/`, `\`, `.` and `%`, a raw
// `\`, `;` parameters, segments ending in a dot or a space, NTFS streams,
// `..` above the root, control characters, invalid escapes or UTF-8. Dot
// segments and repeated slashes are resolved, and Path reports that the
// target was not canonical so that the caller can redirect. Case is kept:
// matching case belongs to the rules. Every case:
// docs/security.md#canonical-paths-internalcanon-usher-proxy.
package canon

import (
	"errors"
	"net/url"
	"strings"
	"unicode/utf8"
)

// ErrRefused is returned for a request target that has no single meaning.
var ErrRefused = errors.New("canon: request path refused")

// MaxPath is the longest request path accepted, in bytes as sent.
const MaxPath = 8 << 10

// Path returns the canonical, decoded form of raw, the path part of a
// request target exactly as sent (the request URI up to any `?`, or the path
// of an absolute-form target; "" and "*" are not paths: the caller maps an
// absolute-form target without a path to "/"). changed reports that raw was
// not already canonical in structure (dot segments, repeated slashes), so a
// caller may redirect to the canonical form instead of serving it.
func Path(raw string) (path string, changed bool, err error) {
	if raw == "" || raw[0] != '/' || len(raw) > MaxPath {
		return "", false, ErrRefused
	}
	segs := make([]string, 0, strings.Count(raw, "/"))
	rawSegs := strings.Split(raw[1:], "/")
	for i, rs := range rawSegs {
		s, err := decodeSegment(rs)
		if err != nil {
			return "", false, err
		}
		last := i == len(rawSegs)-1
		switch s {
		case "":
			if !last { // a repeated slash
				changed = true
				continue
			}
			segs = append(segs, "") // a trailing slash is kept
		case ".":
			changed = true
			if last {
				segs = append(segs, "")
			}
		case "..":
			changed = true
			if len(segs) == 0 {
				return "", false, ErrRefused
			}
			segs = segs[:len(segs)-1]
			if last {
				segs = append(segs, "")
			}
		default:
			if strings.HasSuffix(s, ".") || strings.HasSuffix(s, " ") || strings.Contains(s, "::$") {
				return "", false, ErrRefused
			}
			segs = append(segs, s)
		}
	}
	path = "/" + strings.Join(segs, "/")
	return path, changed, nil
}

// Target is Path for a request target as it stood in the request line
// (http.Request.RequestURI): origin-form "/p?q" gives Path("/p"),
// absolute-form "http://host/p?q" gives Path("/p") and "http://host" gives
// "/"; the asterisk form and anything else is refused.
func Target(requestURI string) (path string, changed bool, err error) {
	p, _, _ := strings.Cut(requestURI, "?")
	if i := strings.Index(p, "://"); i > 0 && !strings.HasPrefix(p, "/") {
		scheme := strings.ToLower(p[:i])
		if scheme != "http" && scheme != "https" {
			return "", false, ErrRefused
		}
		rest := p[i+3:]
		j := strings.IndexByte(rest, '/')
		if j < 0 {
			return "/", false, nil
		}
		p = rest[j:]
	}
	return Path(p)
}

// decodeSegment percent-decodes one segment and refuses what Path refuses.
func decodeSegment(s string) (string, error) {
	if !strings.ContainsAny(s, "%;\\") {
		for i := 0; i < len(s); i++ {
			if s[i] < 0x20 || s[i] == 0x7f {
				return "", ErrRefused
			}
		}
		if !utf8.ValidString(s) {
			return "", ErrRefused
		}
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case ';', '\\':
			return "", ErrRefused
		case '%':
			if i+2 >= len(s) {
				return "", ErrRefused
			}
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if !ok1 || !ok2 {
				return "", ErrRefused
			}
			c = hi<<4 | lo
			switch c {
			case '/', '\\', '.', '%', ';':
				return "", ErrRefused
			}
			i += 2
		}
		if c < 0x20 || c == 0x7f {
			return "", ErrRefused
		}
		b.WriteByte(c)
	}
	d := b.String()
	if !utf8.ValidString(d) {
		return "", ErrRefused
	}
	return d, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Return turns target, a URL a visitor is to be sent back to (from a request
// or a query parameter), into a same-origin path with its query: scheme and
// host are dropped, leading slashes and backslashes collapse into one `/`,
// and anything that is not a canonical path (see Path) becomes "/". The
// result always starts with exactly one `/` followed by something other than
// `/` or `\`, so no browser reads it as another host.
func Return(target string) string {
	// An absolute URL or a scheme-relative one: keep only what follows the
	// authority.
	if i := strings.Index(target, "://"); i >= 0 && !strings.ContainsAny(target[:i], "/?#\\") {
		target = target[i+3:]
		j := strings.IndexAny(target, "/\\?#")
		if j < 0 {
			return "/"
		}
		target = target[j:]
	}
	if strings.HasPrefix(target, "//") || strings.HasPrefix(target, "/\\") || strings.HasPrefix(target, "\\") {
		// Scheme-relative (//host/x, /\host/x, \\host): the first segment is
		// a host; drop it.
		t := strings.TrimLeft(target, "/\\")
		j := strings.IndexAny(t, "/\\?#")
		if j < 0 {
			return "/"
		}
		target = t[j:]
	}
	if i := strings.IndexByte(target, '#'); i >= 0 {
		target = target[:i]
	}
	p, q, _ := strings.Cut(target, "?")
	canonical, _, err := Path(p)
	if err != nil {
		return "/"
	}
	p = (&url.URL{Path: canonical}).EscapedPath()
	for i := 0; i < len(q); i++ {
		if q[i] < 0x21 || q[i] == 0x7f || q[i] == '\\' {
			return p
		}
	}
	if q != "" {
		return p + "?" + q
	}
	return p
}
