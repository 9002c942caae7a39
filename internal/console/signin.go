package console

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"usher/internal/apierror"
)

// SessionInfo is the answer of GET and POST /console/session.
type SessionInfo struct {
	CSRF      string    `json:"csrf"`
	ExpiresAt time.Time `json:"expires_at"`
	// Booking says whether the schedules screen has a booking backbone
	// behind it.
	Booking bool `json:"booking"`
}

type signInRequest struct {
	Key string `json:"key"`
}

func contextWith(ctx context.Context, se session) context.Context {
	return context.WithValue(ctx, sessionKey{}, se)
}

func sessionOf(r *http.Request) session {
	se, _ := r.Context().Value(sessionKey{}).(session)
	return se
}

func encode(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (k *Console) info(se session) SessionInfo {
	return SessionInfo{CSRF: k.sessions.csrf(se), ExpiresAt: se.expires.UTC(), Booking: k.c.Booking}
}

func (k *Console) whoami() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		encode(w, http.StatusOK, k.info(sessionOf(r)))
	})
}

// signIn checks the admin key and sets the session cookie (HttpOnly,
// SameSite=Strict; see sessions). It counts the attempt before it looks at
// the key, so a stranger guessing keys is slowed down whatever they guess;
// attempts are limited per client only (SignInPerClient).
func (k *Console) signIn() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !sameOrigin(r) || !jsonBody(r) {
			k.errs.Write(w, r, ErrCSRF)
			return
		}
		if err := k.sessions.allowSignIn(r.Context(), k.c.Trusted.Key(r)); err != nil {
			w.Header().Set("Retry-After", "60")
			k.errs.Write(w, r, err)
			return
		}
		var req signInRequest
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<10))
		if err != nil {
			k.errs.Write(w, r, apierror.ErrBodyTooLarge.Detail("body larger than 4096 bytes"))
			return
		}
		if err := json.Unmarshal(body, &req); err != nil {
			k.errs.Write(w, r, apierror.ErrBadJSON.Detail(`want {"key":"<the admin key>"}`))
			return
		}
		if req.Key == "" || !rightKey(req.Key, k.c.AdminKey) {
			k.c.Logger.Warn("console sign-in refused", "client", k.c.Trusted.Key(r))
			k.errs.Write(w, r, ErrWrongKey)
			return
		}
		se, value := k.sessions.create()
		http.SetCookie(w, &http.Cookie{
			Name: CookieName, Value: value, Path: k.c.PublicPath, Expires: se.expires,
			HttpOnly: true, Secure: !k.c.InsecureCookies, SameSite: http.SameSiteStrictMode,
		})
		k.c.Logger.Info("console signed in", "client", k.c.Trusted.Key(r))
		encode(w, http.StatusOK, k.info(se))
	})
}

// signOut forgets the session here and clears the cookie.
func (k *Console) signOut() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.sessions.revoke(sessionOf(r))
		http.SetCookie(w, &http.Cookie{
			Name: CookieName, Value: "", Path: k.c.PublicPath, MaxAge: -1,
			HttpOnly: true, Secure: !k.c.InsecureCookies, SameSite: http.SameSiteStrictMode,
		})
		w.WriteHeader(http.StatusNoContent)
	})
}
