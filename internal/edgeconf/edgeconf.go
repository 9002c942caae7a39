// Package edgeconf renders the configuration of a front proxy that gates a
// site with `usher auth` (forward auth) instead of `usher proxy`: a whole
// nginx.conf for nginx's auth_request (Nginx) and a whole Caddyfile (Caddy),
// each explaining its directives in comments. ParseRelease reads the
// datagram either sends when the origin releases a slot.
//
// A rendered file asks usher about every request outside /_usher/ but the
// targets Shortcut finds open, spread over every usher instance, lets
// through what usher passes, and otherwise gives the client usher's answer;
// headers follow wire.Headers. Both were established against nginx 1.22 and
// Caddy 2.6.2 (edgeconf_test.go runs them).
//
// Limits: a release datagram lost on the way leaves the slot to lapse by
// itself; nginx's own are on Nginx. The protocol: docs/edge.md#the-protocol
// and docs/architecture.md#forward-auth-at-the-edge.
package edgeconf

import (
	"bytes"
	"cmp"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"usher/internal/wire"
)

// Config is what both renderings need. Either rendering hands the origin
// the visitor and room usher names, bounds the request's headers (size and
// time), never reads a refused request's body, and marks any answer with
// usher's cookies or a pass private, no-store. When no usher answers, a
// gated request gets the edge's own 503 page (fail closed) or goes to the
// origin (FailOpen); while SwitchFile exists in Dir, usher is out of the
// path.
type Config struct {
	// Listen is where the edge serves visitors, plain HTTP: host:port, or
	// :port for every interface. The host is an IP address.
	Listen string
	// Origin is the site: host:port (HTTP), http://host:port or
	// https://host:port, without a path.
	Origin string
	// Usher is `usher auth`'s listener: host:port or http://host:port.
	// Ushers are more instances on the same store (Usher, if set, comes
	// first): the front proxy spreads its questions over all of them,
	// leaves out one that fails (for 10s) and asks the next instead.
	Usher  string
	Ushers []string
	// Open and Gate are usher auth's --open and --gate patterns: a target
	// that Shortcut finds open goes straight to the origin, usher unasked.
	Open, Gate []string
	// FailOpen sends a gated request to the origin unchecked when no usher
	// answers; otherwise (fail closed) the edge answers it 503 with a page
	// of its own (JSON for a client that asks for it) and Retry-After.
	FailOpen bool
	// Release is the host:port of usher's UDP listener for Usher-Release
	// events (see ParseRelease); "" sends none: the header is then only
	// hidden from the client and the slot is left to expire.
	Release string
	// Dir is an absolute directory the edge owns: nginx's pid file, access
	// log and temporary files, Caddy's storage. Required for nginx.
	Dir string
	// User is nginx's `user` directive (the workers' user when nginx starts
	// as root); "" leaves nginx's default (nobody). Ignored by Caddy.
	User string
	// Hosts are the site's public host names. When set, a request for any
	// other Host is answered 421 and the origin gets X-Forwarded-Host;
	// otherwise every Host is served and the origin gets no
	// X-Forwarded-Host (the client chose it), as usher proxy's PublicHosts.
	Hosts []string
	// InsecureCookies drops the Secure attribute of the cookie that clears
	// the pass on a release (plain HTTP on localhost), as usher's
	// --insecure-cookies.
	InsecureCookies bool
	// MaxHeaderBytes bounds a request's line and headers (default
	// DefaultMaxHeaderBytes, from 4 KiB to 1 MiB); HeaderTimeout bounds
	// reading them (default 10s), as usher's own servers do.
	MaxHeaderBytes int
	HeaderTimeout  time.Duration
}

// DefaultMaxHeaderBytes is MaxHeaderBytes' default, nginx's own.
const DefaultMaxHeaderBytes = 32 << 10

// PassCookie is the cookie that carries a pass.
const PassCookie = wire.PassCookie

// SwitchFile is the kill switch, a file in Dir: while it exists, the edge
// sends every request outside /_usher/ to the origin without asking usher.
// Both edges look for it on each request, so neither needs a reload.
const SwitchFile = "usher-off"

// UnavailableRetry is the Retry-After, in seconds, of the edge's own
// answer when no usher answers.
const UnavailableRetry = 5

// headerNames returns the named rows of wire.Headers from the client
// whose hop (to usher or to the origin) is one of hops, each name once.
func headerNames(toUsher bool, hops ...wire.Hop) []string {
	var names []string
	seen := map[string]bool{}
	for _, row := range wire.Headers {
		hop := row.Origin
		if toUsher {
			hop = row.Usher
		}
		if row.From != "client" || row.Pattern() || seen[strings.ToLower(row.Name)] || !slices.Contains(hops, hop) {
			continue
		}
		seen[strings.ToLower(row.Name)] = true
		names = append(names, row.Name)
	}
	return names
}

// Release is one Usher-Release event an edge reported.
type Release struct {
	// Edge is "nginx" or "caddy".
	Edge string
	// Pass is the value of the usher_pass cookie the released request
	// carried, Authorization its Authorization header ("" when absent):
	// usher verifies the pass in one of them before it ends the slot, since
	// anyone who can reach the UDP port can send a datagram.
	Pass, Authorization string
	// Visitor and Room are what usher's auth answer said (nginx only): an
	// unauthenticated hint.
	Visitor, Room string
	// Method, URI and Host are the released request's; Status the
	// origin's.
	Method, URI, Host string
	Status            int
}

// ParseRelease reads one datagram that a rendered configuration sends on a
// release: from nginx an RFC 3164 syslog line `<190>Mmm dd hh:mm:ss
// usher_release: {JSON}`, from Caddy one JSON access-log entry whose
// user_id is `pass=<cookie> authorization=<header>`.
func ParseRelease(b []byte) (Release, error) {
	const tag = "usher_release: "
	if i := bytes.Index(b, []byte(tag)); i >= 0 && len(b) > 0 && b[0] == '<' {
		var m struct {
			Pass          string `json:"pass"`
			Authorization string `json:"authorization"`
			Visitor       string `json:"visitor"`
			Room          string `json:"room"`
			Method        string `json:"method"`
			URI           string `json:"uri"`
			Host          string `json:"host"`
			Status        string `json:"status"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(b[i+len(tag):]), &m); err != nil {
			return Release{}, fmt.Errorf("nginx release line: %w", err)
		}
		status, _ := strconv.Atoi(m.Status)
		return Release{Edge: "nginx", Pass: m.Pass, Authorization: m.Authorization, Visitor: m.Visitor,
			Room: m.Room, Method: m.Method, URI: m.URI, Host: m.Host, Status: status}, nil
	}
	var m struct {
		Logger  string `json:"logger"`
		Request struct {
			Method string `json:"method"`
			URI    string `json:"uri"`
			Host   string `json:"host"`
		} `json:"request"`
		UserID string `json:"user_id"`
		Status int    `json:"status"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(b), &m); err != nil {
		return Release{}, fmt.Errorf("release datagram is neither nginx's syslog line nor Caddy's JSON: %w", err)
	}
	rest, ok := strings.CutPrefix(m.UserID, "pass=")
	if !ok {
		return Release{}, fmt.Errorf("caddy release entry: user_id %q is not the release's", m.UserID)
	}
	pass, auth, ok := strings.Cut(rest, " authorization=")
	if !ok {
		return Release{}, fmt.Errorf("caddy release entry: user_id %q is not the release's", m.UserID)
	}
	return Release{Edge: "caddy", Pass: pass, Authorization: auth, Method: m.Request.Method,
		URI: m.Request.URI, Host: m.Request.Host, Status: m.Status}, nil
}

// view is what the templates see: Config checked and taken apart.
type view struct {
	Listen         string // host:port or :port as given
	ListenHost     string // "" for every interface
	ListenPort     string
	Origin         string // scheme://host:port
	OriginTLS      bool
	OriginHostPort string   // host[:port], the Host header the origin gets
	OriginHost     string   // host, for TLS server name
	OriginAddr     string   // host:port to connect to
	Ushers         []string // host:port each
	Release        string
	Dir            string
	User           string
	Hosts          []string
	ClearCookie    string
	// The open-path shortcut and the methods it takes; the kill switch's
	// path and name ("" without Dir); what a gated request gets when no
	// usher answers.
	Shortcut                         []Rule
	OpenMethods                      []string
	Switch, SwitchName               string
	HealthHost                       string // the Host of Caddy's health checks; "" for none
	FailOpen                         bool
	UnavailableHTML, UnavailableJSON string
	RetryAfter                       int
	// OperatorPaths matches the paths of usher's operators' routes under
	// /_usher/; NotFoundJSON is usher's answer to them on its visitors'
	// listener, which the edge gives without asking.
	OperatorPaths, NotFoundJSON string
	// From wire.Headers: the client's headers usher must not get as sent
	// (nginx sets the Replaced ones itself), those the origin must not get
	// as sent, and those only usher may get.
	UsherDropped, UsherReplaced, OriginDropped, OriginReplaced, UsherOnly []string
	// ReleaseValues are the Usher-Release values that end a slot, every
	// case of them (Caddy's response matcher compares exactly).
	ReleaseValues []string
	// HeaderBuffer is nginx's large_client_header_buffers size (a quarter
	// of MaxHeaderBytes, in KiB); MaxHeaderBytes and HeaderTimeout as given
	// or defaulted.
	HeaderBuffer      string
	MaxHeaderBytes    int
	HeaderTimeoutSecs int
	CredentialCache   string
	CredentialQuery   string
}

// OperatorPaths matches the paths under /_usher/ that only operators use:
// the console, /metrics, and the admin API's paths that have no visitors'
// method (usher's visitors' listener answers 405 on the others). usher
// serves them on its admin listener only; the printed configs answer them
// 404 themselves, never forwarding them.
const OperatorPaths = `^/_usher/(console(/.*)?|metrics|api/v1/(bypass|rooms/?|rooms/[^/]+/?|rooms/[^/]+/(invites|signals|analytics|events)|concerts/[^/]+/schedules|schedules/[^/]+/(reservations|sales)))$`

var (
	dnsName  = regexp.MustCompile(`^(\*\.)?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)
	safePath = regexp.MustCompile(`^/[A-Za-z0-9._/+-]*$`)
	userName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,31}$`)
)

// hostPort checks a host:port whose host is an IP address or a DNS name
// (or, with emptyHost, nothing).
func hostPort(what, s string, emptyHost, ipOnly bool) (host, port string, err error) {
	host, port, err = net.SplitHostPort(s)
	if err != nil {
		return "", "", fmt.Errorf("%s %q: want host:port: %v", what, s, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != port {
		return "", "", fmt.Errorf("%s %q: port %q is not a number from 1 to 65535", what, s, port)
	}
	switch {
	case host == "":
		if !emptyHost {
			return "", "", fmt.Errorf("%s %q: a host is required", what, s)
		}
	case net.ParseIP(host) != nil:
		if strings.Contains(host, "%") {
			return "", "", fmt.Errorf("%s %q: zoned addresses are not supported", what, s)
		}
	case ipOnly:
		return "", "", fmt.Errorf("%s %q: the host must be an IP address", what, s)
	case !dnsName.MatchString(host) || strings.HasPrefix(host, "*."):
		return "", "", fmt.Errorf("%s %q: host %q is not an IP address or a DNS name", what, s, host)
	}
	return host, port, nil
}

// serviceURL checks host:port or scheme://host:port with one of schemes.
func serviceURL(what, s string, schemes ...string) (scheme, host, port string, err error) {
	scheme = "http"
	hp := s
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return "", "", "", fmt.Errorf("%s %q: %v", what, s, err)
		}
		if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
			return "", "", "", fmt.Errorf("%s %q: want scheme://host:port only (no path, query or user)", what, s)
		}
		scheme, hp = u.Scheme, u.Host
		ok := false
		for _, sc := range schemes {
			ok = ok || scheme == sc
		}
		if !ok {
			return "", "", "", fmt.Errorf("%s %q: scheme %q is not one of %s", what, s, scheme, strings.Join(schemes, ", "))
		}
		if u.Port() == "" {
			hp = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[scheme])
		}
	}
	host, port, err = hostPort(what, hp, false, false)
	return scheme, host, port, err
}

// everyCase returns every spelling of the words in upper and lower case.
func everyCase(words ...string) []string {
	var out []string
	for _, w := range words {
		spellings := []string{""}
		for _, r := range strings.ToLower(w) {
			var next []string
			for _, s := range spellings {
				next = append(next, s+string(r))
				if u := strings.ToUpper(string(r)); u != string(r) {
					next = append(next, s+u)
				}
			}
			spellings = next
		}
		out = append(out, spellings...)
	}
	return out
}

func (c Config) view(needDir bool) (*view, error) {
	var errs []error
	v := &view{User: c.User, Release: c.Release,
		UsherDropped: headerNames(true, wire.Dropped), UsherReplaced: headerNames(true, wire.Replaced),
		OriginDropped: headerNames(false, wire.Dropped), OriginReplaced: headerNames(false, wire.Replaced),
		ReleaseValues: everyCase("1", "true"), CredentialCache: wire.CredentialCacheControl}
	for _, row := range wire.Headers {
		if row.From == "client" && !row.Pattern() && row.Usher == wire.Passed && row.Origin != wire.Passed {
			v.UsherOnly = append(v.UsherOnly, row.Name)
		}
	}
	v.MaxHeaderBytes = cmp.Or(c.MaxHeaderBytes, DefaultMaxHeaderBytes)
	if v.MaxHeaderBytes < 4<<10 || v.MaxHeaderBytes > 1<<20 {
		errs = append(errs, fmt.Errorf("max header bytes %d: want 4 KiB to 1 MiB", v.MaxHeaderBytes))
	}
	v.HeaderBuffer = strconv.Itoa((v.MaxHeaderBytes/4+1023)/1024) + "k"
	v.HeaderTimeoutSecs = int(cmp.Or(c.HeaderTimeout, 10*time.Second) / time.Second)
	if v.HeaderTimeoutSecs < 1 {
		errs = append(errs, fmt.Errorf("header timeout %v: want a second or more", c.HeaderTimeout))
	}
	if strings.ContainsAny(c.Listen+c.Origin+c.Usher+strings.Join(c.Ushers, "")+c.Release+c.Dir+c.User+strings.Join(c.Hosts, ""), "\x00\r\n\t ;{}\"'\\$#`") {
		// Belt and braces: every field below is checked against a strict
		// form too; none of these may reach a configuration file.
		errs = append(errs, errors.New("a field contains whitespace, a quote or one of ;{}$#\\`"))
	}
	if h, p, err := hostPort("listen", c.Listen, true, true); err != nil {
		errs = append(errs, err)
	} else {
		v.Listen, v.ListenHost, v.ListenPort = c.Listen, h, p
	}
	if scheme, h, p, err := serviceURL("origin", c.Origin, "http", "https"); err != nil {
		errs = append(errs, err)
	} else {
		v.OriginTLS = scheme == "https"
		v.OriginAddr = net.JoinHostPort(h, p)
		v.OriginHost = h
		v.OriginHostPort = v.OriginAddr
		if (scheme == "http" && p == "80") || (scheme == "https" && p == "443") {
			v.OriginHostPort = h
			if strings.Contains(h, ":") {
				v.OriginHostPort = "[" + h + "]"
			}
		}
		v.Origin = scheme + "://" + v.OriginAddr
	}
	ushers := c.Ushers
	if c.Usher != "" || len(ushers) == 0 {
		ushers = append([]string{c.Usher}, ushers...)
	}
	for _, u := range ushers {
		if _, h, p, err := serviceURL("usher", u, "http"); err != nil {
			errs = append(errs, err)
		} else if hp := net.JoinHostPort(h, p); !slices.Contains(v.Ushers, hp) {
			v.Ushers = append(v.Ushers, hp)
		}
	}
	if rules, err := Shortcut(c.Open, c.Gate); err != nil {
		errs = append(errs, err)
	} else {
		v.Shortcut = rules
	}
	v.OpenMethods, v.FailOpen, v.RetryAfter, v.CredentialQuery = OpenMethods, c.FailOpen, UnavailableRetry, CredentialQuery
	v.UnavailableHTML, v.UnavailableJSON = unavailableHTML, unavailableJSON()
	v.OperatorPaths, v.NotFoundJSON = OperatorPaths, notFoundJSON()
	if c.Release != "" {
		if h, p, err := hostPort("release", c.Release, false, false); err != nil {
			errs = append(errs, err)
		} else {
			v.Release = net.JoinHostPort(h, p)
		}
	}
	switch {
	case c.Dir == "" && needDir:
		errs = append(errs, errors.New("dir is required: nginx keeps its pid file, logs and temporary files there"))
	case c.Dir != "" && (!safePath.MatchString(c.Dir) || filepath.Clean(c.Dir) != c.Dir):
		errs = append(errs, fmt.Errorf("dir %q: want a clean absolute path of letters, digits and ._/+-", c.Dir))
	default:
		v.Dir = c.Dir
		if c.Dir != "" {
			v.Switch, v.SwitchName = c.Dir+"/"+SwitchFile, SwitchFile
		}
	}
	if c.User != "" && !userName.MatchString(c.User) {
		errs = append(errs, fmt.Errorf("user %q is not a user name", c.User))
	}
	for _, h := range c.Hosts {
		if !dnsName.MatchString(h) && net.ParseIP(h) == nil {
			errs = append(errs, fmt.Errorf("host %q is not a DNS name or an IP address", h))
			continue
		}
		v.Hosts = append(v.Hosts, strings.ToLower(h))
	}
	v.HealthHost = "-" // any: the check's own
	if len(v.Hosts) > 0 {
		v.HealthHost = ""
		for _, h := range v.Hosts {
			if !strings.HasPrefix(h, "*.") {
				v.HealthHost = h
				break
			}
		}
	}
	v.ClearCookie = PassCookie + "=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax"
	if !c.InsecureCookies {
		v.ClearCookie += "; Secure"
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("edge config: %w", err)
	}
	return v, nil
}

func render(t *template.Template, v *view) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

// Nginx renders a whole nginx.conf for nginx 1.22 or later with the stock
// auth_request module (Debian's nginx has it), runnable as
// `nginx -p DIR -c FILE` without touching /etc or /var.
//
// Limits of nginx 1.22: $upstream_http_set_cookie holds only the first
// Set-Cookie of the auth answer, so usher's passing answer must carry the
// pass cookie first (or alone); Usher-* request headers are stripped by
// name (wire.Headers), not by prefix.
func Nginx(c Config) (string, error) {
	v, err := c.view(true)
	if err != nil {
		return "", err
	}
	return render(nginxTemplate, v)
}

// Caddy renders a whole Caddyfile for Caddy 2.6.2 or later, runnable as
// `caddy run --adapter caddyfile --config FILE` with no admin endpoint and
// no automatic HTTPS.
//
// Limits: with Release set, the site's access log is the release feed
// (only released requests are logged, and to usher); an operator who
// wants an access log too adds a logger of its own. Caddy's response
// matcher compares exactly, so every case of `true` is listed.
func Caddy(c Config) (string, error) {
	v, err := c.view(false)
	if err != nil {
		return "", err
	}
	return render(caddyTemplate, v)
}

// templates are the two configurations: nginx.conf.tmpl and Caddyfile.tmpl.
//
//go:embed nginx.conf.tmpl Caddyfile.tmpl
var templates embed.FS

var funcs = template.FuncMap{
	"join": strings.Join,
	"nq":   func(s string) string { return quote(s, true) },
	"cq":   func(s string) string { return quote(s, false) },
	// hostport joins a host (maybe empty) and a port for nginx's listen.
	"listen": func(host, port string) string {
		if host == "" {
			return port
		}
		return net.JoinHostPort(host, port)
	},
}

var nginxTemplate = template.Must(template.New("nginx.conf.tmpl").Funcs(funcs).ParseFS(templates, "nginx.conf.tmpl"))

var caddyTemplate = template.Must(template.New("Caddyfile.tmpl").Funcs(funcs).ParseFS(templates, "Caddyfile.tmpl"))

// HeaderTable renders wire.Headers as the Markdown table of docs/edge.md
// (TestHeaderTableDoc keeps the two equal).
func HeaderTable() string {
	hop := func(h wire.Hop) string {
		if h == wire.NoHop {
			return "–"
		}
		return string(h)
	}
	var b strings.Builder
	b.WriteString("| header | from | to usher | to the origin | to the client | why |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, row := range wire.Headers {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", row.Name, row.From, hop(row.Usher), hop(row.Origin), hop(row.Client), row.Note)
	}
	return b.String()
}
