package httpapi

import (
	"context"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"usher/internal/analytics"
	"usher/internal/event"
	"usher/internal/queue"
)

// The collector's reads (admin): a room's analytics over a range, and its
// recent events for the console's timeline. Without analytics (Config.
// Analytics nil) both answer 404 analytics_disabled: a stable code, so a
// console can say "this server collects nothing" rather than "no data".
// A room needs no longer exist to be read: a deleted room keeps its
// history until the retention drops it.

// analyticsTimeout bounds each read of the analytics database.
const analyticsTimeout = 10 * time.Second

// DefaultAnalyticsRange is the range of a report without from.
const DefaultAnalyticsRange = time.Hour

func (s *server) roomAnalytics() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		room, err := s.analyticsRoom(r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		q := r.URL.Query()
		// to is exclusive: by default the end of the current minute.
		to := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
		if q.Has("to") {
			if to, err = time.Parse(time.RFC3339, q.Get("to")); err != nil {
				s.errs.Write(w, r, analytics.ErrInvalid.Detail("to: want an RFC 3339 time such as 2026-12-01T20:00:00Z"))
				return
			}
		}
		from := to.Add(-DefaultAnalyticsRange)
		if q.Has("from") {
			if from, err = time.Parse(time.RFC3339, q.Get("from")); err != nil {
				s.errs.Write(w, r, analytics.ErrInvalid.Detail("from: want an RFC 3339 time such as 2026-12-01T19:00:00Z"))
				return
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), analyticsTimeout)
		defer cancel()
		rep, err := s.Analytics.Report(ctx, room, from, to)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		encode(w, http.StatusOK, rep)
	})
}

// eventsPage is the answer of GET …/events.
type eventsPage struct {
	Events []event.Event `json:"events"`
	Next   string        `json:"next,omitempty"`
}

const cursorEvents = "e"

func (s *server) roomEvents() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		room, err := s.analyticsRoom(r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		q := r.URL.Query()
		limit := analytics.DefaultEvents
		if q.Has("limit") {
			n, perr := strconv.Atoi(q.Get("limit"))
			if perr != nil || n < 1 || n > analytics.MaxEvents {
				s.errs.Write(w, r, analytics.ErrInvalid.Detail("limit: want 1 to %d", analytics.MaxEvents))
				return
			}
			limit = n
		}
		var before int64
		if q.Has("before") {
			b, derr := base64.RawURLEncoding.DecodeString(q.Get("before"))
			k, ok := strings.CutPrefix(string(b), cursorEvents+":")
			n, perr := strconv.ParseInt(k, 10, 64)
			if derr != nil || !ok || perr != nil || n < 1 {
				s.errs.Write(w, r, analytics.ErrInvalid.Detail("before: not a cursor of this list"))
				return
			}
			before = n
		}
		ctx, cancel := context.WithTimeout(r.Context(), analyticsTimeout)
		defer cancel()
		evs, next, err := s.Analytics.Events(ctx, room, before, limit)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		page := eventsPage{Events: evs}
		if page.Events == nil {
			page.Events = []event.Event{}
		}
		if next > 0 {
			page.Next = makeCursor(cursorEvents, strconv.FormatInt(next, 10))
		}
		encode(w, http.StatusOK, page)
	})
}

// analyticsRoom returns the request's room, or why it cannot be read.
func (s *server) analyticsRoom(r *http.Request) (string, error) {
	if s.Analytics == nil {
		return "", analytics.ErrDisabled
	}
	room := r.PathValue("room")
	if !queue.ValidRoomID(room) {
		return "", analytics.ErrInvalid.Detail("room: want [a-z0-9][a-z0-9-]{0,63}")
	}
	return room, nil
}
