// Package edgeconf renders the configuration of a front proxy that gates a
// site with `usher auth` (forward auth) instead of `usher proxy`: a whole
// nginx.conf for nginx's auth_request (Nginx) and a whole Caddyfile for Caddy
// (Caddy), each explaining its directives in comments. ParseRelease reads the
// datagram either sends when the origin releases a slot.
//
// A rendered file asks usher about every request outside /_usher/, lets
// through what usher passes, hands the origin the visitor and room usher
// names, and otherwise gives the client usher's answer. Targets Shortcut
// finds open go to the origin unasked. The questions are spread over every
// usher instance (Ushers), failing over between them; when none answers,
// a gated request gets the edge's own 503 page (fail closed) or goes to
// the origin (FailOpen), and while the file SwitchFile exists in Dir usher
// is out of the path. Both were established against nginx 1.22 and Caddy
// 2.6.2 (edgeconf_test.go runs them).
//
// Both follow wire.Headers (what reaches usher, the origin and the client),
// bound the request's headers (size and time), never read a refused
// request's body, and mark any answer with usher's cookies or a pass
// private, no-store.
//
// Limits: nginx 1.22 copies only the first Set-Cookie of an auth answer,
// and strips headers by name, so an Usher-* header the table does not name
// reaches the origin; a release datagram lost on the way leaves the slot to
// lapse by itself. The protocol: docs/edge.md#the-protocol and
// docs/architecture.md#forward-auth-at-the-edge.
package edgeconf

import (
	"bytes"
	"cmp"
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

// Config is what both renderings need.
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

var nginxTemplate = template.Must(template.New("nginx").Funcs(funcs).Parse(`# nginx in front of {{.Origin}}, gated by usher auth at {{join .Ushers ", "}}.
# Rendered by usher (internal/edgeconf) for nginx 1.22+ with the stock
# auth_request module. Run: nginx -p {{.Dir}} -c THIS_FILE
{{- if .User}}

# The workers' user when nginx starts as root.
user {{.User}};
{{- end}}

# Stay in the foreground (systemd, containers, tests).
daemon off;
worker_processes auto;
# Every file nginx writes is under {{.Dir}}: nothing in /etc, /var or /run.
pid {{.Dir}}/nginx.pid;
error_log stderr warn;

events {
	worker_connections 1024;
}

http {
	access_log {{.Dir}}/access.log combined;
	client_body_temp_path {{.Dir}}/client_body;
	proxy_temp_path {{.Dir}}/proxy;
	fastcgi_temp_path {{.Dir}}/fastcgi;
	uwsgi_temp_path {{.Dir}}/uwsgi;
	scgi_temp_path {{.Dir}}/scgi;
	# The request line and headers: at most {{.MaxHeaderBytes}} bytes in all, no
	# line longer than {{.HeaderBuffer}} (400 or 414 beyond), read within {{.HeaderTimeoutSecs}}s.
	client_header_buffer_size 1k;
	large_client_header_buffers 4 {{.HeaderBuffer}};
	client_header_timeout {{.HeaderTimeoutSecs}}s;
	# A header whose name has an underscore is dropped (nginx's default,
	# said here so that no edit turns it on): CGI, WSGI and Rack origins
	# would read X_Real_IP as X-Real-IP.
	underscores_in_headers off;
	ignore_invalid_headers on;
	# Like usher proxy, no limit on the bodies of admitted requests: set one
	# for the origin here if it wants one. A refused request's body is never
	# read past a byte (location = /_usher/auth/wait).
	client_max_body_size 0;
	# Room for the proxy_set_header names below: nginx 1.22 warns "could not
	# build optimal proxy_headers_hash" with its defaults on some machines.
	proxy_headers_hash_max_size 1024;
	proxy_headers_hash_bucket_size 128;

	# Forward the websocket upgrade only: any other Upgrade (h2c above all,
	# which would let a client speak HTTP/2 to the origin past the gate) is
	# dropped.
	map $http_upgrade $usher_upgrade {
		~*^websocket$ websocket;
		default "";
	}
	map $usher_upgrade $usher_connection {
		websocket upgrade;
		default "";
	}

	# Usher-Release: 1 (or true) on the origin's answer ends the visitor's
	# slot. The auth check ran before the origin answered, so the answer
	# clears the pass cookie instead of renewing it{{if .Release}}, and the
	# usher_release access log below tells usher{{end}}.
	map $upstream_http_usher_release $usher_released {
		~*^(1|true)$ 1;
		default "";
	}
	map $usher_released $usher_set_cookie {
		1 "{{.ClearCookie}}";
		default $usher_cookie;
	}
	map $usher_released $usher_set_pass {
		1 "";
		default $usher_pass;
	}
	# An answer that carries usher's cookies or a pass is for nobody else
	# and is stored by no cache: Cache-Control: {{.CredentialCache}}, whatever
	# the origin said. A gated answer (the auth answer named a visitor) is
	# for this visitor only: private unless the origin chose, and Vary:
	# Cookie, Authorization. The origin's own Cache-Control is hidden and
	# sent again from here.
	map "$usher_set_cookie$usher_set_pass" $usher_credentials {
		"" "";
		default 1;
	}
	map "$usher_credentials|$usher_visitor|$upstream_http_cache_control" $usher_cache_control {
		~^1\| "{{.CredentialCache}}";
		~^\|[^|]+\|$ private;
		default $upstream_http_cache_control;
	}
	map $usher_visitor $usher_vary {
		"" "";
		default "Cookie, Authorization";
	}
{{- if .Release}}

	# The release event: one JSON object per released request, sent as a
	# syslog datagram (tag usher_release) to usher's UDP listener. usher
	# verifies the pass (cookie or Authorization) before ending the slot.
	log_format usher_release escape=json '{"pass":"$cookie_usher_pass","authorization":"$http_authorization","visitor":"$usher_visitor","room":"$usher_room","method":"$request_method","uri":"$request_uri","host":"$host","status":"$status"}';
{{- end}}

	# Open paths never wait on usher: a target that every reading usher
	# makes of it finds open goes straight to the origin (Shortcut in
	# internal/edgeconf). The first line that matches the raw target
	# decides: an escape, a dot segment, a path some gate pattern covers in
	# any case, a credential in the query ask usher, as does any method
	# not listed.
	map $request_uri $usher_open_target {
{{- range .Shortcut}}
		{{nq (print "~" .Match)}} {{if .Open}}1{{else}}0{{end}};
{{- end}}
		default 0;
	}
	# A query that may carry a credential: usher strips it, so a target
	# sent on without usher (kill switch{{if .FailOpen}}, fail open{{end}}) gets the edge's
	# own 503 instead.
	map $request_uri $usher_credential {
		{{nq (print "~" .CredentialQuery)}} 1;
		default 0;
	}
	map $request_method $usher_open_method {
{{- range .OpenMethods}}
		{{.}} 1;
{{- end}}
		default 0;
	}
	map "$usher_open_method$usher_open_target" $usher_to_origin {
		11 1;
		default 0;
	}
	# JSON for a client whose Accept names application/json before
	# text/html, as usher reads it.
	map $http_accept $usher_reply {
		"~(?i)text/html.*application/json" html;
		"~(?i)application/json" json;
		default html;
	}

	# Every usher auth instance (all on one store). nginx spreads the
	# checks over them; one that fails a request is left out for 10s and
	# the request goes to the next (proxy_next_upstream). When none
	# answers, see "No usher answered" below.
	upstream usher {
{{- range .Ushers}}
		server {{.}} max_fails=1 fail_timeout=10s;
{{- end}}
		keepalive 16;
	}
	upstream usher_origin {
		server {{.OriginAddr}};
		keepalive 16;
	}
{{- if .Hosts}}

	# Only the site's own host names are served: any other Host is 421.
	server {
		listen {{listen .ListenHost .ListenPort}} default_server;
		return 421;
	}
{{- end}}

	server {
		listen {{listen .ListenHost .ListenPort}};
{{- if .Hosts}}
		server_name {{join .Hosts " "}};
{{- end}}

		# Only nginx asks usher's auth routes: a client that does is
		# answered 404.
		location = /_usher/auth {
			return 404;
		}
		location /_usher/auth/ {
			return 404;
		}

		# The check: every request outside /_usher/ first asks usher,
		# without its body. X-Original-URI is the raw request target
		# ($request_uri): nginx matches locations on a normalised path, but
		# the origin receives the raw one, and usher judges what the origin
		# sees.
		location = /_usher/auth/check {
			internal;
			proxy_pass http://usher;
			proxy_pass_request_body off;
			proxy_set_header Content-Length "";
			proxy_set_header X-Original-URI $request_uri;
			proxy_set_header X-Original-Method $request_method;
{{- template "usher_headers" .}}
			# The check changes nothing: asked again of the next usher
			# when one fails.
			proxy_next_upstream error timeout http_502 http_504;
			proxy_next_upstream_timeout 10s;
			proxy_connect_timeout 2s;
			proxy_read_timeout 30s;
		}

		# Not admitted (the check answered 401): the original request's
		# method, target and headers, never its body, go to usher's
		# /_usher/auth/wait, whose answer the client gets as is: the waiting
		# page or JSON (429 with Retry-After and the ticket cookies), or a
		# redirect. A body of more than a byte is neither read nor stored:
		# nginx refuses it here before reading (413, for a chunked body
		# after its first buffer), discards it, and @usher_wait asks usher
		# the same without it. error_page turned the method into GET:
		# $usher_method keeps it.
		location = /_usher/auth/wait {
			internal;
			client_max_body_size 1;
			error_page 413 = @usher_wait;
{{- template "usher_wait" .}}
		}
		location @usher_wait {
			rewrite ^ /_usher/auth/wait? break;
{{- template "usher_wait" .}}
		}

		# No usher answered (or a check answer auth_request does not take,
		# which nginx makes a 500): {{if .FailOpen}}fail open, the gated request goes to
		# the origin unchecked (@usher_origin); usher's own routes get the
		# JSON below.{{else}}fail closed, with the edge's own answer,
		# never the origin's: 503, Retry-After and this page, or usher's
		# error JSON to a client that asks for JSON.{{end}}
		location = /_usher/auth/unavailable.html {
			internal;
			default_type "text/html; charset=utf-8";
			add_header Retry-After {{.RetryAfter}} always;
			add_header Cache-Control no-store always;
			return 503 {{nq .UnavailableHTML}};
		}
		location = /_usher/auth/unavailable.json {
			internal;
			default_type application/json;
			add_header Retry-After {{.RetryAfter}} always;
			add_header Cache-Control no-store always;
			return 503 {{nq .UnavailableJSON}};
		}

		# Straight to the origin, usher unasked: an open target
		# ($usher_to_origin){{if .Switch}}, or any target while the kill switch is on{{end}}. The
		# origin gets the raw target, as on a passed check.
		location = /_usher/auth/origin {
			internal;
{{- template "nginx_direct" .}}
		}
{{- if .FailOpen}}
		location @usher_origin {
{{- template "nginx_direct" .}}
		}
{{- end}}

		# The operators' routes (console, /metrics, admin API) are on
		# usher's admin listener only: answered here as usher's visitors'
		# listener would, never forwarded.
		location ~ {{nq .OperatorPaths}} {
			default_type application/json;
			add_header Cache-Control no-store always;
			return 404 {{nq .NotFoundJSON}};
		}

		# usher's own routes (API, waiting page worker) go straight to
		# usher.
		location /_usher/ {
			proxy_pass http://usher;
			# usher serves its routes for the site's hosts only.
			proxy_set_header Host $host;
			proxy_set_header X-Original-URI "";
			proxy_set_header X-Original-Method "";
{{- template "usher_headers" .}}
			error_page 502 504 = /_usher/auth/unavailable.json;
		}

		location / {
{{- if .Switch}}
			# The kill switch: while {{.Switch}} exists, every request
			# goes to the origin without asking usher (touch it to take usher
			# out of the path, remove it to put usher back; no reload).
			if (-f {{.Switch}}) {
				rewrite ^ /_usher/auth/origin last;
			}
{{- end}}
			if ($usher_to_origin) {
				rewrite ^ /_usher/auth/origin last;
			}
			set $usher_method $request_method;
			auth_request /_usher/auth/check;
			auth_request_set $usher_cookie $upstream_http_set_cookie;
			auth_request_set $usher_pass $upstream_http_usher_pass;
			auth_request_set $usher_visitor $upstream_http_usher_visitor;
			auth_request_set $usher_room $upstream_http_usher_room;
			error_page 401 = /_usher/auth/wait;
			error_page 500 = {{template "usher_down" .}};
			# The wait location may hand its own refusal (413) on.
			recursive_error_pages on;

			# The renewed pass to the client (the cookie cleared instead on
			# a release); "always" adds them to error answers too.
			add_header Set-Cookie $usher_set_cookie always;
			add_header Usher-Pass $usher_set_pass always;
			proxy_hide_header Cache-Control;
			add_header Cache-Control $usher_cache_control always;
			add_header Vary $usher_vary always;

			proxy_pass {{if .OriginTLS}}https{{else}}http{{end}}://usher_origin;
{{- template "nginx_origin" .}}
			# Who the visitor is, from the check's answer (never from the
			# client: these replace any it sent).
			proxy_set_header Usher-Visitor $usher_visitor;
			proxy_set_header Usher-Room $usher_room;
			proxy_hide_header Usher-Release;

			access_log {{.Dir}}/access.log combined;
{{- if .Release}}
			access_log syslog:server={{.Release}},tag=usher_release,nohostname usher_release if=$usher_released;
{{- end}}
		}
	}
}
{{- define "nginx_origin"}}
			proxy_http_version 1.1;
			# An admitted request's body streams to the origin, unstored.
			proxy_request_buffering off;
			proxy_set_header Host {{.OriginHostPort}};
{{- if .OriginTLS}}
			proxy_ssl_server_name on;
			proxy_ssl_name {{.OriginHost}};
{{- end}}
			proxy_set_header Upgrade $usher_upgrade;
			proxy_set_header Connection $usher_connection;
			proxy_set_header HTTP2-Settings "";
			# What the client may not say to the origin (wire.Headers; a
			# header set to "" is not sent), then what the edge knows. nginx
			# matches header names, not prefixes: an Usher-* header the table
			# does not name reaches the origin (usher reads none).
{{- range .OriginDropped}}
			proxy_set_header {{.}} "";
{{- end}}
			proxy_set_header X-Forwarded-For $remote_addr;
			proxy_set_header X-Real-IP $remote_addr;
			proxy_set_header X-Forwarded-Proto $scheme;
			proxy_set_header X-Forwarded-Host {{if .Hosts}}$host{{else}}""{{end}};
{{- end}}
{{- define "nginx_direct"}}
			if ($usher_credential) {
				rewrite ^ /_usher/auth/unavailable.$usher_reply last;
			}
			proxy_pass {{if .OriginTLS}}https{{else}}http{{end}}://usher_origin$request_uri;
{{- template "nginx_origin" .}}
			proxy_set_header Usher-Visitor "";
			proxy_set_header Usher-Room "";
			proxy_hide_header Usher-Release;
			access_log {{.Dir}}/access.log combined;
{{- end}}
{{- define "usher_down"}}{{if .FailOpen}}@usher_origin{{else}}/_usher/auth/unavailable.$usher_reply{{end}}{{end}}
{{- define "usher_headers"}}
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_set_header Upgrade "";
			proxy_set_header HTTP2-Settings "";
			# usher reads the client from X-Forwarded-For (trust this edge's
			# address in usher); the rest of what names the client or the
			# public URL is the edge's to say (wire.Headers).
			proxy_set_header X-Forwarded-For $remote_addr;
			proxy_set_header X-Real-IP $remote_addr;
			proxy_set_header X-Forwarded-Proto $scheme;
			proxy_set_header X-Forwarded-Host $host;
			proxy_set_header X-Forwarded-Uri "";
			proxy_set_header X-Forwarded-Method "";
{{- range .UsherDropped}}
			proxy_set_header {{.}} "";
{{- end}}
{{- end}}
{{- define "usher_wait"}}
			proxy_pass http://usher;
			proxy_pass_request_body off;
			proxy_set_header Content-Length "";
			proxy_set_header X-Original-URI $request_uri;
			proxy_set_header X-Original-Method $usher_method;
{{- template "usher_headers" .}}
			# A usher that fails before answering: the next one (a known
			# visitor keeps its place there); none: as a failed check.
			proxy_next_upstream error timeout;
			proxy_connect_timeout 2s;
			proxy_read_timeout 30s;
			error_page 502 504 = {{template "usher_down" .}};
{{- end}}
`))

var caddyTemplate = template.Must(template.New("caddy").Funcs(funcs).Parse(`# Caddy in front of {{.Origin}}, gated by usher auth at {{join .Ushers ", "}}.
# Rendered by usher (internal/edgeconf) for Caddy 2.6.2+.
# Run: caddy run --adapter caddyfile --config THIS_FILE
{
	# No admin endpoint (the configuration is this file) and plain HTTP:
	# put TLS in front, or give the site an https:// address.
	admin off
	auto_https off
{{- if .Dir}}
	storage file_system {{.Dir}}/caddy
{{- end}}
	# The request line and headers: at most {{.MaxHeaderBytes}} bytes, read within
	# {{.HeaderTimeoutSecs}}s.
	servers {
		max_header_size {{.MaxHeaderBytes}}
		timeouts {
			read_header {{.HeaderTimeoutSecs}}s
		}
	}
}

http://:{{.ListenPort}} {
{{- if .ListenHost}}
	bind {{.ListenHost}}
{{- end}}
{{- if .Release}}

	# The release feed: Caddy can make no call after the origin answered,
	# but it logs then. Every request skips the log (skip_log) except a
	# released one, whose entry, without headers, goes as one UDP datagram
	# to usher, its user_id carrying the pass (cookie and Authorization,
	# which Caddy's log would redact).
	log {
		output net udp/{{.Release}}
		format filter {
			wrap json
			fields {
				request>headers delete
				resp_headers delete
			}
		}
	}
{{- end}}

	# A route runs its directives in the order written.
	route {
{{- if .Release}}
		skip_log
{{- end}}
		# What the client may not say to usher or the origin (wire.Headers).
		# Every header name with an underscore: CGI, WSGI and Rack origins
		# would read X_Real_IP as X-Real-IP. Caddy sets X-Forwarded-For,
		# -Proto and -Host itself, and X-Forwarded-Uri and -Method on the
		# check.
		request_header -*_*
{{- range .UsherDropped}}
		request_header -{{.}}
{{- end}}
{{- range .UsherReplaced}}
		request_header -{{.}}
{{- end}}
		# Forward the websocket upgrade only (never h2c), and let no
		# client-listed Connection header drop the edge's own headers.
		@upgrade_other {
			header Upgrade *
			not header_regexp Upgrade (?i)^websocket$
		}
		request_header @upgrade_other -Upgrade
		request_header -HTTP2-Settings
		request_header -Connection
		@websocket header_regexp Upgrade (?i)^websocket$
		request_header @websocket Connection Upgrade
{{- if .Hosts}}

		# Only the site's own host names are served.
		@other_host not host {{join .Hosts " "}}
		respond @other_host 421
{{- end}}

		# Only the edge asks these.
		@usher_internal path /_usher/auth /_usher/auth/*
		respond @usher_internal 404

		# The operators' routes (console, /metrics, admin API) are on
		# usher's admin listener only: answered here as usher's visitors'
		# listener would, never forwarded.
		@usher_operators path_regexp {{cq .OperatorPaths}}
		header @usher_operators Content-Type application/json
		header @usher_operators Cache-Control no-store
		respond @usher_operators {{cq .NotFoundJSON}} 404

		# Open paths never wait on usher: a target that every reading usher
		# makes of it finds open goes straight to the origin (Shortcut in
		# internal/edgeconf). The first line that matches the raw target
		# decides: an escape, a dot segment, a path some gate pattern covers
		# in any case, a credential in the query ask usher, as does any
		# method not listed.
		# A query that may carry a credential: usher strips it, so a target
		# sent on without usher (kill switch{{if .FailOpen}}, fail open{{end}}) gets the edge's
		# own 503 instead.
		map {http.request.uri} {usher_credential} {
			{{cq (print "~" .CredentialQuery)}} 1
			default 0
		}
		map {http.request.uri} {usher_open} {
{{- range .Shortcut}}
			{{cq (print "~" .Match)}} {{if .Open}}1{{else}}0{{end}}
{{- end}}
			default 0
		}

		# usher's own routes (API, waiting page worker).
		handle /_usher/* {
			vars usher_down api
			reverse_proxy {{join .Ushers " "}} {
{{- template "caddy_lb" .}}
			}
		}
{{- if .Switch}}

		# The kill switch: while {{.Switch}} exists, every request
		# goes to the origin without asking usher (touch it to take usher out
		# of the path, remove it to put usher back; no reload).
		@usher_off file {
			root {{.Dir}}
			try_files /{{.SwitchName}}
		}
		handle @usher_off {
			@usher_off_credential vars {usher_credential} 1
			vars @usher_off_credential usher_down closed
			error @usher_off_credential 503
{{- template "caddy_direct" .}}
		}
{{- end}}

		@usher_open {
			method {{join .OpenMethods " "}}
			vars {usher_open} 1
		}
		handle @usher_open {
{{- template "caddy_direct" .}}
		}

		handle {
			# The check (forward_auth, written out): a GET to usher's
			# /_usher/auth without the body (the trailing ? drops the
			# query) with the raw request target ({uri}) and method, and the
			# client's headers, its Usher-* ones included (usher reads
			# {{join .UsherOnly ", "}}). Spread over every usher, and asked
			# again of the next when one fails (it changes nothing).
			vars usher_down gate
			reverse_proxy {{join .Ushers " "}} {
{{- template "caddy_lb" .}}
				method GET
				rewrite /_usher/auth?
				header_up X-Forwarded-Method {method}
				header_up X-Forwarded-Uri {uri}
				header_up -Upgrade
				header_up -Connection

				# Passed: the client's Usher-* headers are dropped, and on a
				# gated path the origin gets the visitor and room usher
				# names; every Set-Cookie and Usher-Pass of the answer goes
				# to the client. An answer that carries them is stored by no
				# cache ({{.CredentialCache}}); a gated one is for this
				# visitor only. Then the route goes on to the origin. Any
				# non-2xx answer (the waiting page, 429 with Retry-After and
				# cookies, a redirect) goes to the client whole.
				@gated_pass {
					status 2xx
					header Usher-Visitor *
					header Usher-Pass *
				}
				handle_response @gated_pass {
{{- template "passed" .}}
					request_header Usher-Visitor {rp.header.Usher-Visitor}
					request_header Usher-Room {rp.header.Usher-Room}
					copy_response_headers {
						include Set-Cookie Usher-Pass
					}
					header Cache-Control "{{.CredentialCache}}" {
						defer
					}
					header +Vary Cookie
					header +Vary Authorization
				}
				@gated {
					status 2xx
					header Usher-Visitor *
				}
				handle_response @gated {
{{- template "passed" .}}
					request_header Usher-Visitor {rp.header.Usher-Visitor}
					request_header Usher-Room {rp.header.Usher-Room}
					header ?Cache-Control private
					header +Vary Cookie
					header +Vary Authorization
				}
				@pass {
					status 2xx
					header Usher-Pass *
				}
				handle_response @pass {
{{- template "passed" .}}
					copy_response_headers {
						include Set-Cookie Usher-Pass
					}
					header Cache-Control "{{.CredentialCache}}" {
						defer
					}
				}
				@passed status 2xx
				handle_response @passed {
{{- template "passed" .}}
				}
			}

			reverse_proxy {{.Origin}} {
				header_up Host {upstream_hostport}
{{- if not .Hosts}}
				header_up -X-Forwarded-Host
{{- end}}
				header_down -Usher-Release
				# Usher-Release: 1 or true (any case) ends the slot: the pass
				# cookie cleared instead of renewed{{if .Release}}, and this request logged to usher{{end}}.
				@release {
{{- range .ReleaseValues}}
					header Usher-Release {{.}}
{{- end}}
				}
				handle_response @release {
{{- if .Release}}
					vars skip_log false
					map {http.request.cookie.usher_pass} {http.auth.user.id} {
						default "pass={http.request.cookie.usher_pass} authorization={http.request.header.Authorization}"
					}
{{- end}}
					header Set-Cookie "{{.ClearCookie}}"
					header -Usher-Pass
					header Cache-Control "{{.CredentialCache}}" {
						defer
					}
					copy_response
				}
			}
		}
	}

	# No usher answered (every one failed or is out): usher's own routes
	# get usher's error JSON; a gated request {{if .FailOpen}}goes to the origin
	# unchecked (fail open){{else}}gets the edge's own answer, never the
	# origin's (fail closed): 503, Retry-After and a page, or the JSON to a
	# client whose Accept names application/json before text/html{{end}}.
	handle_errors {
		@usher_api_down vars usher_down api
		handle @usher_api_down {
{{- template "caddy_json" .}}
		}
{{- if .FailOpen}}
		@usher_open_down {
			vars usher_down gate
			not vars {usher_credential} 1
		}
		handle @usher_open_down {
{{- template "caddy_direct" .}}
		}
{{- end}}
		@usher_closed vars usher_down closed gate
		handle @usher_closed {
			@usher_json {
				header_regexp Accept (?i)application/json
				not header_regexp Accept (?i)text/html.*application/json
			}
			handle @usher_json {
{{- template "caddy_json" .}}
			}
			handle {
				header Retry-After {{.RetryAfter}}
				header Cache-Control no-store
				header Content-Type "text/html; charset=utf-8"
				respond {{cq .UnavailableHTML}} 503
			}
		}
	}
}
{{- define "caddy_json"}}
			header Retry-After {{.RetryAfter}}
			header Cache-Control no-store
			header Content-Type application/json
			respond {{cq .UnavailableJSON}} 503
{{- end}}
{{- define "caddy_lb"}}
				# Passive and active health: an usher that fails twice in
				# 10s, or whose /_usher/healthz does not answer 2xx within 1s
				# (asked every 2s{{if not .HealthHost}}; not here: no public host without a
				# wildcard to ask it for{{end}}), is left out; a failed request is
				# tried on the next for up to 1s.
				lb_policy round_robin
				lb_try_duration 1s
				lb_try_interval 100ms
				fail_duration 10s
				max_fails 2
{{- if .HealthHost}}
				health_uri /_usher/healthz
				health_interval 2s
				health_timeout 1s
{{- if .Hosts}}
				# usher serves its routes for the site's hosts only.
				health_headers {
					Host {{.HealthHost}}
				}
{{- end}}
{{- end}}
{{- end}}
{{- define "passed"}}
					vars usher_down origin
{{- template "to_origin" .}}
{{- end}}
{{- define "caddy_direct"}}
{{- template "to_origin" .}}
			reverse_proxy {{.Origin}} {
				header_up Host {upstream_hostport}
{{- if not .Hosts}}
				header_up -X-Forwarded-Host
{{- end}}
				header_down -Usher-Release
			}
{{- end}}
{{- define "to_origin"}}
					request_header -Usher-*
{{- range .UsherOnly}}
					request_header -{{.}}
{{- end}}
{{- end}}
`))

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
