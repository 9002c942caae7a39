package wire

import (
	"net/url"
	"strings"
)

// ChallengeHeader carries a proof-of-work solution (`<token>:<nonce>`,
// package pow) on a newcomer's request.
const ChallengeHeader = "Usher-Challenge"

// Hop is what an edge (usher proxy, or nginx or Caddy with usher auth) does
// with a header on one hop.
type Hop string

const (
	// Passed: sent on as it came.
	Passed Hop = "passed"
	// Dropped: never sent on.
	Dropped Hop = "dropped"
	// Replaced: the edge sends its own value, or none; never the sender's.
	Replaced Hop = "set by the edge"
	// NoHop: the header does not travel this way.
	NoHop Hop = ""
)

// EdgeHeader is one row of Headers: a header, who sends it, and what each
// edge passes on to usher (auth's checks), to the origin and to the client.
type EdgeHeader struct {
	// Name is a header name, or a class: "Usher-*" (every other name with
	// the prefix) or "*_*" (every name containing an underscore).
	Name string
	// From is "client" (a request header), "usher" (usher's answer, or
	// usher auth's passed check) or "origin" (the origin's answer).
	From string
	// Usher, Origin and Client are the hops; Usher is the front proxy's
	// request to usher auth (usher proxy reads the request itself).
	Usher, Origin, Client Hop
	// Note says what the header is for, or when the edge sets it.
	Note string
}

// Pattern reports whether h names a class of headers rather than one.
func (h EdgeHeader) Pattern() bool { return strings.Contains(h.Name, "*") }

// Matches reports whether the header name is h's (or in h's class).
func (h EdgeHeader) Matches(name string) bool {
	switch h.Name {
	case "Usher-*":
		return len(name) > len(HeaderPrefix) && strings.EqualFold(name[:len(HeaderPrefix)], HeaderPrefix)
	case "*_*":
		return strings.Contains(name, "_")
	}
	return strings.EqualFold(name, h.Name)
}

// Headers is the one table of the headers usher reads, sets or guards at
// the edge. usher proxy (gateway), the nginx and Caddy configurations
// (edgeconf) and docs/edge.md follow it; cmd/usher's TestEdgeHeaderTable
// walks it through all three edges. A request header not listed (and not
// in a class) is the client's to send to the origin.
var Headers = []EdgeHeader{
	{BypassHeader, "client", Passed, Dropped, NoHop, "a bypass secret: passes gated paths without a place"},
	{ChallengeHeader, "client", Passed, Dropped, NoHop, "a proof-of-work solution"},
	{WaitHeader, "client", Passed, Dropped, NoHop, "a status poll asks to be held"},
	{ShownHeader, "client", Passed, Dropped, NoHop, "the position a poll last showed"},
	{VisitorHeader, "client", Dropped, Replaced, NoHop, "behind nginx and Caddy the origin gets usher's, on a gated request"},
	{RoomHeader, "client", Dropped, Replaced, NoHop, "behind nginx and Caddy the origin gets usher's, on a gated request"},
	{PassHeader, "client", Dropped, Dropped, NoHop, "a response header; passes travel in the cookie or Authorization"},
	{PassTTLHeader, "client", Dropped, Dropped, NoHop, "a response header"},
	{ReleaseHeader, "client", Dropped, Dropped, NoHop, "only the origin's answer releases"},
	{"Usher-*", "client", Passed, Dropped, NoHop, "any other: usher reads none (nginx strips by name only, so it passes these on)"},
	{"*_*", "client", Dropped, Dropped, NoHop, "CGI, WSGI and Rack read X_Real_IP as X-Real-IP"},
	{"X-Original-URI", "client", Replaced, Dropped, NoHop, "the target usher judges (nginx)"},
	{"X-Original-Method", "client", Replaced, Dropped, NoHop, "the method usher judges (nginx)"},
	{"X-Forwarded-Uri", "client", Replaced, Dropped, NoHop, "the target usher judges (Caddy)"},
	{"X-Forwarded-Method", "client", Replaced, Dropped, NoHop, "the method usher judges (Caddy)"},
	{"X-Forwarded-For", "client", Replaced, Replaced, NoHop, "the peer address"},
	{"X-Real-IP", "client", Replaced, Replaced, NoHop, "the peer address"},
	{"X-Forwarded-Proto", "client", Replaced, Replaced, NoHop, "the connection's scheme"},
	{"X-Forwarded-Host", "client", Replaced, Replaced, NoHop, "the Host; to the origin only with public hosts set"},
	{"Forwarded", "client", Dropped, Dropped, NoHop, "names the client"},
	{"True-Client-IP", "client", Dropped, Dropped, NoHop, "names the client"},
	{"X-Client-IP", "client", Dropped, Dropped, NoHop, "names the client"},
	{"CF-Connecting-IP", "client", Dropped, Dropped, NoHop, "names the client"},
	{"Fastly-Client-IP", "client", Dropped, Dropped, NoHop, "names the client"},
	{"X-Cluster-Client-IP", "client", Dropped, Dropped, NoHop, "names the client"},
	{"X-ProxyUser-IP", "client", Dropped, Dropped, NoHop, "names the client"},
	{"X-Forwarded-Prefix", "client", Dropped, Dropped, NoHop, "names the public URL"},
	{"X-Forwarded-Port", "client", Dropped, Dropped, NoHop, "names the public URL"},
	{"X-Forwarded-Scheme", "client", Dropped, Dropped, NoHop, "names the public URL"},
	{"X-Forwarded-Server", "client", Dropped, Dropped, NoHop, "names the public URL"},
	{"X-Forwarded-Ssl", "client", Dropped, Dropped, NoHop, "names the public URL"},
	{"X-Url-Scheme", "client", Dropped, Dropped, NoHop, "names the public URL"},
	{"Front-End-Https", "client", Dropped, Dropped, NoHop, "names the public URL"},
	{"X-Original-URL", "client", Dropped, Dropped, NoHop, "some origins route by it"},
	{"X-Rewrite-URL", "client", Dropped, Dropped, NoHop, "some origins route by it"},
	{"X-Override-URL", "client", Dropped, Dropped, NoHop, "some origins route by it"},
	{"X-HTTP-Method-Override", "client", Dropped, Dropped, NoHop, "some origins route by it"},
	{"X-HTTP-Method", "client", Dropped, Dropped, NoHop, "some origins route by it"},
	{"X-Method-Override", "client", Dropped, Dropped, NoHop, "some origins route by it"},
	{PassHeader, "usher", NoHop, NoHop, Passed, "the renewed pass (or the first, to an admitted JSON client)"},
	{PassTTLHeader, "usher", NoHop, NoHop, Passed, "the pass's seconds (usher proxy, to an admitted JSON client)"},
	{"Set-Cookie", "usher", NoHop, NoHop, Passed, "usher's cookies: usher_vid, usher_ticket_<room>, usher_pass"},
	{VisitorHeader, "usher", NoHop, Replaced, Dropped, "a passed check's visitor: to the origin as a request header"},
	{RoomHeader, "usher", NoHop, Replaced, Dropped, "a passed check's room: to the origin as a request header"},
	{ReleaseHeader, "origin", NoHop, NoHop, Dropped, "1 or true ends the visitor's slot; the pass cookie is cleared"},
	{"Cache-Control", "origin", NoHop, NoHop, Replaced, "private, no-store on an answer with usher's cookies or Usher-Pass; private on a gated one without its own"},
}

// Releases reports whether an origin's Usher-Release value ends the slot:
// 1 or true, in any case.
func Releases(v string) bool { return v == "1" || strings.EqualFold(v, "true") }

// CredentialCacheControl is the Cache-Control of any answer that carries
// usher's cookies or Usher-Pass, whatever the origin said: no cache keeps
// or shares it.
const CredentialCacheControl = "private, no-store"

// CarriesCredentials reports whether a response with header h hands the
// client usher's cookies (any named usher_*) or a pass.
func CarriesCredentials(h map[string][]string) bool {
	if len(h[PassHeader]) > 0 {
		return true
	}
	for _, c := range h["Set-Cookie"] {
		if strings.HasPrefix(strings.TrimSpace(c), "usher_") {
			return true
		}
	}
	return false
}

// Query parameters that carry a visitor's credential to the edge (a link
// to /shop/?usher_invite=<code>). usher reads them on entry; they never
// reach the origin.
const (
	InviteParam   = "usher_invite"
	IdentityParam = "usher_identity"
	LaneParam     = "usher_lane"
)

// CredentialParams are those parameters.
var CredentialParams = []string{InviteParam, IdentityParam, LaneParam}

// StripCredentials returns rawQuery without the pairs that name a
// credential parameter (decoded as url.ParseQuery decodes names; a pair
// with a ';' is dropped when any part of it names one), every other byte as
// it was, and whether it dropped any.
func StripCredentials(rawQuery string) (string, bool) {
	if !strings.Contains(rawQuery, "_") && !strings.Contains(rawQuery, "%") {
		return rawQuery, false
	}
	var kept []string
	dropped := false
	for _, pair := range strings.Split(rawQuery, "&") {
		if namesCredential(pair) {
			dropped = true
			continue
		}
		kept = append(kept, pair)
	}
	if !dropped {
		return rawQuery, false
	}
	return strings.Join(kept, "&"), true
}

func namesCredential(pair string) bool {
	for _, part := range strings.Split(pair, ";") {
		name, _, _ := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		for _, c := range CredentialParams {
			if name == c {
				return true
			}
		}
	}
	return false
}
