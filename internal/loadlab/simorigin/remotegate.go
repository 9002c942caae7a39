package simorigin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"usher/internal/wire"
)

// RemoteGate asks an usher server whether a request's visitor is admitted:
// one GET /api/v1/rooms/{room}/pass per request, carrying the request's
// Authorization header and usher_pass cookie. usher's gate checks the pass,
// checks that the slot is still active and slides its expiry, exactly as its
// in-process middleware does; the origin stays a separate process that needs
// neither usher's store nor its keys. It fails closed: when usher does not
// answer, the request gets 503.
type RemoteGate struct {
	Client *http.Client
	// URL is usher's pass endpoint for the room.
	URL string
}

// NewRemoteGate returns a gate for room on the usher server at base.
func NewRemoteGate(client *http.Client, base, room string) *RemoteGate {
	return &RemoteGate{Client: client, URL: base + "/api/v1/rooms/" + url.PathEscape(room) + "/pass"}
}

// Check implements Gate.
func (g *RemoteGate) Check(ctx context.Context, r *http.Request) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.URL, nil)
	if err != nil {
		return "", err
	}
	if v := r.Header.Get("Authorization"); v != "" {
		req.Header.Set("Authorization", v)
	}
	if c, err := r.Cookie(wire.PassCookie); err == nil {
		req.AddCookie(c)
	}
	res, err := g.Client.Do(req)
	if err != nil {
		return "", fmt.Errorf("remote gate: %w", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("remote gate: %w", err)
	}
	switch {
	case res.StatusCode == http.StatusOK:
	case res.StatusCode >= 400 && res.StatusCode < 500:
		return "", &GateError{Status: res.StatusCode, Body: body}
	default:
		return "", fmt.Errorf("remote gate: usher answered %s", res.Status)
	}
	var pass wire.Pass
	if err := json.Unmarshal(body, &pass); err != nil {
		return "", fmt.Errorf("remote gate: %w", err)
	}
	if renewed := res.Header.Get(wire.PassHeader); renewed != "" {
		return renewed, nil
	}
	return "", nil
}
