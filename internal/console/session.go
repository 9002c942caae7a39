package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"usher/internal/apierror"
	"usher/internal/fault"
	"usher/internal/limit"
	"usher/internal/limit/memlimit"
)

// Session and sign-in limits.
const (
	// DefaultSessionTTL is how long a sign-in lasts: a night's shift.
	DefaultSessionTTL = 12 * time.Hour
	// CookieName is the session cookie's name.
	CookieName = "usher_console"
	// CSRFHeader carries the session's CSRF token on every state-changing
	// request.
	CSRFHeader = "X-Usher-CSRF"
	// maxRevoked bounds the signed-out sessions remembered until they
	// expire (signing out needs a valid session, so only holders of the
	// admin key add to it).
	maxRevoked = 10_000
)

// SignInPerClient bounds sign-in attempts, counted whatever their outcome,
// per client (clientip: an IPv4 address, an IPv6 /64, the client a trusted
// proxy names). There is no limit over all clients: a stranger guessing
// from many addresses would hold it and keep the operators out, and the
// admin key (144 bits at least) is not guessed at any rate a limit allows.
var SignInPerClient = limit.Rate{Events: 5, Per: time.Minute}

var (
	// ErrWrongKey answers a sign-in with another key than the admin key.
	ErrWrongKey = apierror.ErrAdminOnly.Detail("wrong admin key")
	// ErrSignedOut answers a console request without a valid session.
	ErrSignedOut = apierror.ErrAdminOnly.Detail("sign in to the console first")
	// ErrCSRF answers a state-changing request without the session's CSRF
	// token, or from another site.
	ErrCSRF = fault.New(fault.CSRFRefused, "cross-site request refused")
	// ErrSignInLimited answers a sign-in over its client's limit.
	ErrSignInLimited = fault.New(fault.RateLimited, "too many sign-in attempts; wait a minute")
)

// session is a signed-in console: a random id and when it ends.
type session struct {
	id      string // 32 hex digits
	expires time.Time
}

// sessions signs and checks session cookies. A cookie is
// "<expiry unix seconds>.<id>.<HMAC-SHA256>" under a key derived from the
// admin key, so every instance with the same admin key accepts it, and a
// new admin key ends every session. Signing out is remembered by the
// instance that signed out (until the session would have expired).
type sessions struct {
	key []byte
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	revoked map[string]time.Time // session id → its expiry

	limits *memlimit.Store
}

func newSessions(adminKey string, ttl time.Duration, now func() time.Time) *sessions {
	k := sha256.Sum256([]byte("usher console session v1\x00" + adminKey))
	return &sessions{key: k[:], ttl: ttl, now: now, revoked: make(map[string]time.Time), limits: memlimit.New()}
}

func (s *sessions) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, s.key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// create starts a session and returns it with its cookie value.
func (s *sessions) create() (session, string) {
	var b [16]byte
	rand.Read(b[:])
	se := session{id: hex.EncodeToString(b[:]), expires: s.now().Add(s.ttl).Truncate(time.Second)}
	exp := strconv.FormatInt(se.expires.Unix(), 10)
	return se, exp + "." + se.id + "." + base64.RawURLEncoding.EncodeToString(s.mac("session", exp, se.id))
}

// parse checks a cookie value: well formed, signed, unexpired, not signed
// out here.
func (s *sessions) parse(v string) (session, bool) {
	exp, rest, ok1 := strings.Cut(v, ".")
	id, sig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || len(id) != 32 || len(v) > 128 {
		return session{}, false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac("session", exp, id)) {
		return session{}, false
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return session{}, false
	}
	se := session{id: id, expires: time.Unix(unix, 0)}
	if !s.now().Before(se.expires) {
		return session{}, false
	}
	s.mu.Lock()
	_, out := s.revoked[id]
	s.mu.Unlock()
	return se, !out
}

// csrf is the session's CSRF token: derived from its id, so it needs no
// storage, and unknowable without the cookie (which scripts cannot read).
func (s *sessions) csrf(se session) string {
	return base64.RawURLEncoding.EncodeToString(s.mac("csrf", se.id))
}

// revoke remembers that se signed out, forgetting expired entries; at the
// bound it forgets the oldest-expiring ones first.
func (s *sessions) revoke(se session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for id, exp := range s.revoked {
		if !now.Before(exp) {
			delete(s.revoked, id)
		}
	}
	for len(s.revoked) >= maxRevoked {
		var first string
		for id, exp := range s.revoked {
			if first == "" || exp.Before(s.revoked[first]) {
				first = id
			}
		}
		delete(s.revoked, first)
	}
	s.revoked[se.id] = se.expires
}

// allowSignIn counts one attempt from client.
func (s *sessions) allowSignIn(ctx context.Context, client string) error {
	ok, _, err := s.limits.Allow(ctx, "signin:"+client, SignInPerClient, s.now())
	if err != nil {
		return err
	}
	if !ok {
		return ErrSignInLimited
	}
	return nil
}

// rightKey compares in constant time.
func rightKey(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// sameOrigin refuses a request that a browser says comes from another
// site: Sec-Fetch-Site other than same-origin, or an Origin whose host is
// not the request's. A request with neither (curl) passes: the CSRF token
// or the admin key then decides.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return false
		}
	}
	return true
}

// jsonBody reports whether the request declares a JSON body: a form that
// another site posts cannot, without a preflight the console never allows.
func jsonBody(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.EqualFold(strings.TrimSpace(ct), "application/json")
}
