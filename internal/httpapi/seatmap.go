package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"usher/internal/booking"
	"usher/internal/gate"
	"usher/internal/queue"
	"usher/internal/sale"
	"usher/internal/token"
)

// The seat map in two parts (package sale's seatmap.go): the layout,
// cacheable for good when addressed by its version, and the status, which
// a poller revalidates with If-None-Match (304 while it did not change) or
// follows with ?since=<version>. GET …/seats, the whole map in one JSON,
// stays for older clients.
//
// Both parts take the admin key or a pass for the schedule's room checked
// by its signature and expiry alone (signedPath): no store call and no
// slot renewal, and a pass verified once is remembered for a minute
// (token.Keyring.CheckPass), so that reading them costs less than a queue status poll.
// A pass whose slot has ended reads them until it expires; holds and
// reservations still go through the gate.

// Cache-Control of the seat map's parts.
const (
	// layoutCurrent: GET …/seats/layout, whose version may change.
	layoutCurrent = "public, no-cache"
	// layoutVersioned: GET …/seats/layout?version=<its version>.
	layoutVersioned = "public, max-age=31536000, immutable"
	// statusCache: the status, revalidated at every poll.
	statusCache = "no-cache"
)

func (s *server) seatLayout() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := s.signedPath(w, r)
		if !ok {
			return
		}
		l, err := s.Sale.SeatMapLayout(r.Context(), id)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		cc := layoutCurrent
		if r.URL.Query().Get("version") == l.Version {
			cc = layoutVersioned
		}
		serveEncoded(w, r, l, cc)
	})
}

func (s *server) seatStatus() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := s.signedPath(w, r)
		if !ok {
			return
		}
		if since := r.URL.Query().Get("since"); since != "" {
			st, err := s.Sale.SeatMapChanges(r.Context(), id, since)
			if err != nil {
				s.errs.Write(w, r, err)
				return
			}
			encode(w, http.StatusOK, st)
			return
		}
		st, err := s.Sale.SeatMapStatus(r.Context(), id)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		serveEncoded(w, r, st, statusCache)
	})
}

// seatEvents follows the status as server-sent events ("event: seats",
// "id:" and "data:" the status's version and JSON): first the status since
// ?since= (or the Last-Event-ID a reconnecting browser sends), then each
// change since the event before, until the pass expires. Streams count
// against the same bounds as the reservation streams, per visitor (the
// pass's) and per instance.
func (s *server) seatEvents() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := s.signedPath(w, r)
		if !ok {
			return
		}
		holder, until := adminStreams, time.Time{} // the admin key's streams share one count
		if !s.isAdmin(r) {
			sch, err := s.Sale.Schedule(r.Context(), id)
			var p token.Pass
			if err == nil {
				raw, _ := gate.PassFrom(r)
				p, err = s.Keys.ParsePass(raw, sch.Room)
			}
			if err != nil {
				s.errs.Write(w, r, err)
				return
			}
			holder, until = p.Visitor, p.ExpiresAt
		}
		release, err := s.streams.acquire(holder)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		defer release()
		since := r.URL.Query().Get("since")
		if since == "" {
			since = r.Header.Get("Last-Event-ID")
		}
		ctx, cancel := context.WithCancel(r.Context())
		if !until.IsZero() { // a pass's stream ends when the pass does
			ctx, cancel = context.WithDeadline(r.Context(), until)
		}
		defer cancel()
		changes, err := s.Sale.FollowSeatMap(ctx, id, since)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		serveEvents(ctx, w, changes, func(e *sale.Encoded) sse {
			return sse{event: "seats", id: e.Version, data: e.JSON}
		})
	})
}

// adminStreams is the stream count of the admin key: a space, which no
// visitor id has.
const adminStreams = " admin"

// signedPath resolves the {id} path value for the admin key or a pass to
// the schedule's room (signature, room and expiry); on false the response
// is written. Unlike readPath it neither reads the queue nor renews a slot.
func (s *server) signedPath(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := scheduleID(r)
	var sch booking.Schedule
	if err == nil {
		sch, err = s.Sale.Schedule(r.Context(), id)
	}
	if err == nil && !s.isAdmin(r) {
		if raw, _ := gate.PassFrom(r); raw == "" {
			err = queue.ErrNotAdmitted
		} else {
			err = s.Keys.CheckPass(raw, sch.Room)
		}
	}
	if err != nil {
		s.errs.Write(w, r, err)
		return 0, false
	}
	return id, true
}

// serveEncoded answers e with a strong ETag per encoding, 304 when
// If-None-Match names either encoding of its version, and the gzip body
// made once when the client accepts gzip.
func serveEncoded(w http.ResponseWriter, r *http.Request, e *sale.Encoded, cacheControl string) {
	gz := acceptsGzip(r)
	h := w.Header()
	if gz {
		h.Set("ETag", `"`+e.Version+`-gzip"`)
	} else {
		h.Set("ETag", `"`+e.Version+`"`)
	}
	h.Set("Cache-Control", cacheControl)
	if noneMatch(r.Header.Get("If-None-Match"), e.Version) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := e.JSON
	if gz {
		h.Set("Content-Encoding", "gzip")
		body = e.Gzip()
	}
	h["Content-Type"] = jsonContentType
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}

// noneMatch reports whether an If-None-Match header names version in any
// encoding (weak comparison, RFC 9110 13.1.2), or is "*".
func noneMatch(header, version string) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == "*" || strings.TrimSuffix(strings.Trim(tag, `"`), "-gzip") == version {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether the request's Accept-Encoding takes gzip
// (or any coding) with a weight above zero.
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			if coding != "gzip" && coding != "*" {
				continue
			}
			q := strings.ReplaceAll(strings.ToLower(params), " ", "")
			if q, ok := strings.CutPrefix(q, "q="); ok {
				if f, err := strconv.ParseFloat(q, 64); err == nil && f == 0 {
					continue
				}
			}
			return true
		}
	}
	return false
}
