package httpapi

import (
	"errors"
	"net/http"
	"time"

	"usher/internal/queue"
)

// RoomSettings is the JSON form of queue.Settings. In a PUT, omitted fields
// keep their current value (or the default, for a new room).
type RoomSettings struct {
	State              *string  `json:"state,omitempty"`
	MaxActive          *int64   `json:"max_active,omitempty"`
	AdmitRate          *float64 `json:"admit_rate,omitempty"`
	IntervalMS         *int64   `json:"interval_ms,omitempty"`
	ActiveTTLSeconds   *float64 `json:"active_ttl_seconds,omitempty"`
	ClaimWindowSeconds *float64 `json:"claim_window_seconds,omitempty"`
}

// RoomStats are a room's live counters.
type RoomStats struct {
	Waiting           int64   `json:"waiting"`
	Active            int64   `json:"active"`
	AdmittedTotal     int64   `json:"admitted_total"`
	AdmitRateMeasured float64 `json:"admit_rate_measured"`
}

// RoomResponse is a room's settings and stats.
type RoomResponse struct {
	Room string `json:"room"`
	RoomSettings
	Stats RoomStats `json:"stats"`
}

func (rs RoomSettings) apply(s queue.Settings) queue.Settings {
	if rs.State != nil {
		s.State = queue.RoomState(*rs.State)
	}
	if rs.MaxActive != nil {
		s.MaxActive = *rs.MaxActive
	}
	if rs.AdmitRate != nil {
		s.AdmitRate = *rs.AdmitRate
	}
	if rs.IntervalMS != nil {
		s.Interval = time.Duration(*rs.IntervalMS) * time.Millisecond
	}
	if rs.ActiveTTLSeconds != nil {
		s.ActiveTTL = seconds(*rs.ActiveTTLSeconds)
	}
	if rs.ClaimWindowSeconds != nil {
		s.ClaimWindow = seconds(*rs.ClaimWindowSeconds)
	}
	return s
}

// seconds converts, saturating instead of overflowing (Validate rejects it).
func seconds(f float64) time.Duration {
	if f > 1e9 || f < -1e9 {
		return time.Duration(1 << 62)
	}
	return time.Duration(f * float64(time.Second))
}

func roomResponse(room string, v queue.View) RoomResponse {
	s := v.Settings
	state := string(s.State)
	interval := s.Interval.Milliseconds()
	ttl, claim := s.ActiveTTL.Seconds(), s.ClaimWindow.Seconds()
	return RoomResponse{
		Room: room,
		RoomSettings: RoomSettings{
			State: &state, MaxActive: &s.MaxActive, AdmitRate: &s.AdmitRate, IntervalMS: &interval,
			ActiveTTLSeconds: &ttl, ClaimWindowSeconds: &claim,
		},
		Stats: RoomStats{Waiting: v.Waiting, Active: v.Active, AdmittedTotal: v.AdmittedTotal, AdmitRateMeasured: v.Rate},
	}
}

func (s *server) putRoom() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		room := r.PathValue("room")
		req, err := decode[RoomSettings](w, r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		status := http.StatusOK
		current := queue.DefaultSettings()
		switch v, err := s.Queue.Room(r.Context(), room); {
		case errors.Is(err, queue.ErrRoomNotFound):
			status = http.StatusCreated
		case err != nil:
			s.errs.Write(w, r, err)
			return
		default:
			current = v.Settings
		}
		if err := s.Queue.PutRoom(r.Context(), room, req.apply(current)); err != nil {
			s.errs.Write(w, r, err)
			return
		}
		v, err := s.Queue.Room(r.Context(), room)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		encode(w, status, roomResponse(room, v))
	})
}

func (s *server) getRoom() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		room := r.PathValue("room")
		v, err := s.Queue.Room(r.Context(), room)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		encode(w, http.StatusOK, roomResponse(room, v))
	})
}

func (s *server) listRooms() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rooms, err := s.Queue.Rooms(r.Context())
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		out := struct {
			Rooms []RoomResponse `json:"rooms"`
		}{Rooms: make([]RoomResponse, 0, len(rooms))}
		for _, room := range rooms {
			v, err := s.Queue.Room(r.Context(), room)
			if err != nil {
				s.errs.Write(w, r, err)
				return
			}
			out.Rooms = append(out.Rooms, roomResponse(room, v))
		}
		encode(w, http.StatusOK, out)
	})
}
