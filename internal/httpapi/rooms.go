package httpapi

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"usher/internal/event"
	"usher/internal/queue"
	"usher/internal/token"
	"usher/internal/wire"
)

// applySettings sets on s each setting rs names, through the settings
// table; a name the table does not know is refused.
func applySettings(rs wire.RoomSettings, s queue.Settings) (queue.Settings, error) {
	for _, set := range rs {
		f, ok := queue.LookupField(set.Name)
		if !ok {
			return s, queue.ErrInvalid.Detail("%s: no such setting", set.Name)
		}
		if err := f.Set(&s, set.Value); err != nil {
			return s, err
		}
	}
	return s, nil
}

// settingsOf lists s by the settings table, as answers show them.
func settingsOf(s queue.Settings) wire.RoomSettings {
	out := make(wire.RoomSettings, 0, len(queue.SettingFields()))
	for _, f := range queue.SettingFields() {
		if v, omit := f.Get(s); !omit {
			raw, _ := json.Marshal(v) // numbers, strings and booleans
			out = append(out, wire.Setting{Name: f.JSON, Value: raw})
		}
	}
	return out
}

// settings answers the settings table: public, since it says only what a
// room may be set to, and the same for every room.
func (s *server) settings() http.Handler {
	out := wire.SettingList{}
	for _, f := range queue.SettingFields() {
		info := wire.SettingInfo{Name: f.JSON, Type: f.Type, Format: f.Format, Enum: f.Enum, Unit: f.Unit, Help: f.Help, Fixed: f.Fixed}
		if f.Ranged() {
			info.Minimum, info.Maximum = &f.Min, &f.Max
		}
		out.Settings = append(out.Settings, info)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		encode(w, http.StatusOK, out)
	})
}

// bypass lists the edge's bypass rules with their counts.
func (s *server) bypass() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		out := wire.BypassList{Rules: []wire.BypassRule{}}
		if s.Bypass != nil {
			out.Rules = append(out.Rules, s.Bypass()...)
		}
		encode(w, http.StatusOK, out)
	})
}

// roomResponse is the answer that shows room: its settings and stats.
func roomResponse(room string, v queue.View) wire.Room {
	s := v.Settings
	var inventory *int64 // omitted while unknown
	if v.Inventory.Known {
		inventory = &v.Inventory.Units
	}
	stats := wire.RoomStats{Waiting: v.Waiting, Lane: v.Lane, Active: v.Active, AdmittedTotal: v.AdmittedTotal, AdmitRateMeasured: v.Admitted(),
		AdmitRateCurrent: s.CurrentRate(v.Control), EffectiveState: string(v.EffectiveState()), Inventory: inventory}
	if s.Admission == queue.Adaptive && v.Control.P95 > 0 {
		p95, goal := msFloat(v.Control.P95), msFloat(s.Target(v.Control))
		stats.OriginP95MS, stats.TargetP95MS = &p95, &goal
	}
	out := wire.Room{Room: room, Settings: settingsOf(s), Stats: stats}
	out.OffForShards = v.Off
	return out
}

// msFloat is d in milliseconds, to the microsecond.
func msFloat(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (s *server) putRoom() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		room := r.PathValue("room")
		req, err := decode[wire.RoomSettings](w, r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		status := http.StatusOK
		current := queue.DefaultSettings()
		var before *queue.View
		switch v, err := s.Queue.Room(r.Context(), room); {
		case errors.Is(err, queue.ErrRoomNotFound):
			status = http.StatusCreated
		case err != nil:
			s.errs.Write(w, r, err)
			return
		default:
			current, before = v.Settings, &v
		}
		set, err := applySettings(req, current)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		if err := s.Queue.PutRoom(r.Context(), room, set); err != nil {
			s.errs.Write(w, r, err)
			return
		}
		v, err := s.Queue.Room(r.Context(), room)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		resp := roomResponse(room, v)
		s.settingsChanged(room, before, resp.Settings)
		encode(w, status, resp)
	})
}

// settingsChanged emits a room's settings_changed event: who changed them
// ("admin": the admin key is the only identity the API knows), the
// settings before (none for a new room) and after, as the API shows them.
func (s *server) settingsChanged(room string, before *queue.View, after wire.RoomSettings) {
	if s.Events == nil {
		return
	}
	d := event.Data{Who: "admin"}
	d.New, _ = json.Marshal(after)
	if before != nil {
		d.Old, _ = json.Marshal(settingsOf(before.Settings))
	}
	s.Events.Emit(event.New(event.SettingsChanged, room, "", s.Queue.Now(), d))
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

// draw answers a room's opening draw: public, so that anyone can record
// the commitment before the opening and check the seed after it. Once the
// draw is done its answer never changes: many ask at the opening, so it
// then answers from this instance's view, and clients may cache it.
func (s *server) draw() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		room := r.PathValue("room")
		v, ok := s.Queue.View(room)
		if !ok || !v.Draw.Done {
			var err error
			if v, err = s.Queue.Room(r.Context(), room); err != nil {
				s.errs.Write(w, r, err)
				return
			}
		}
		d := v.Draw
		if d.Seed == nil {
			s.errs.Write(w, r, queue.ErrNoDraw)
			return
		}
		out := wire.Draw{Room: room, OpensAt: v.Settings.OpensAt.UTC(), Commitment: queue.Commitment(d.Seed), Entrants: d.Entrants, Drawn: d.Done}
		w.Header().Set("Cache-Control", "no-store")
		if d.Done {
			out.Seed = hex.EncodeToString(d.Seed)
			w.Header().Set("Cache-Control", "public, max-age=300")
		}
		encode(w, http.StatusOK, out)
	})
}

func (s *server) listRooms() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rooms, err := s.Queue.Rooms(r.Context())
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		out := wire.RoomList{Rooms: make([]wire.Room, 0, len(rooms))}
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

// Invite limits: codes per request and their longest validity.
const (
	MaxInvites       = 10_000
	DefaultInviteTTL = 30 * 24 * time.Hour
	MaxInviteTTL     = 365 * 24 * time.Hour
)

// createInvites signs count invite codes for an existing room, or
// priority lane codes (lane: true) of uses places each.
func (s *server) createInvites() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		room := r.PathValue("room")
		req, err := decode[wire.InvitesRequest](w, r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		ttl := DefaultInviteTTL
		if req.ValidSeconds != 0 {
			ttl = time.Duration(req.ValidSeconds) * time.Second
		}
		switch {
		case req.Count < 1 || req.Count > MaxInvites:
			s.errs.Write(w, r, queue.ErrInvalid.Detail("count %d: want 1 to %d", req.Count, MaxInvites))
			return
		case req.ValidSeconds < 0 || req.ValidSeconds > int64(MaxInviteTTL/time.Second) || ttl < time.Minute:
			s.errs.Write(w, r, queue.ErrInvalid.Detail("valid_seconds %d: want 60 to %d", req.ValidSeconds, int64(MaxInviteTTL/time.Second)))
			return
		case req.Uses != 0 && !req.Lane:
			s.errs.Write(w, r, queue.ErrInvalid.Detail("uses: only for lane codes (lane: true)"))
			return
		case req.Uses < 0 || req.Uses > queue.MaxLaneUses:
			s.errs.Write(w, r, queue.ErrInvalid.Detail("uses %d: want 1 to %d", req.Uses, queue.MaxLaneUses))
			return
		}
		if _, err := s.Queue.Room(r.Context(), room); err != nil {
			s.errs.Write(w, r, err)
			return
		}
		exp := s.Queue.Now().Add(ttl).Truncate(time.Second).UTC()
		out := wire.Invites{Room: room, ExpiresAt: exp, Invites: make([]string, req.Count)}
		if req.Lane {
			out.Lane, out.Uses = true, max(1, req.Uses)
		}
		for i := range out.Invites {
			if out.Lane {
				out.Invites[i] = s.Keys.SignLaneCode(token.LaneCode{Room: room, ID: token.NewInviteID(), Uses: out.Uses, ExpiresAt: exp})
				continue
			}
			out.Invites[i] = s.Keys.SignInvite(token.Invite{Room: room, ID: token.NewInviteID(), ExpiresAt: exp})
		}
		encode(w, http.StatusCreated, out)
	})
}

// signals takes a site's report of its origin's latency and errors for the
// room's adaptive controller (the site gates with the API, so no usher
// component sees its requests).
func (s *server) signals() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		room := r.PathValue("room")
		req, err := decode[wire.Signals](w, r)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		sig, err := signalsFrom(req)
		if err != nil {
			s.errs.Write(w, r, err)
			return
		}
		if _, err := s.Queue.Room(r.Context(), room); err != nil {
			s.errs.Write(w, r, err)
			return
		}
		pooled := s.Queue.AddSignals(room, sig)
		encode(w, http.StatusAccepted, wire.SignalsAccepted{Room: room, Samples: len(req.LatencyMS), Errors: req.Errors, Pooled: pooled})
	})
}

// maxSignalErrors bounds the error count of one report.
const maxSignalErrors = 1_000_000

// signalsFrom checks a report: at most wire.MaxSignalSamples latencies,
// each finite, not negative and at most queue.MaxSignalLatency; errors from
// 0 to maxSignalErrors.
func signalsFrom(req wire.Signals) (queue.Signals, error) {
	var sig queue.Signals
	if len(req.LatencyMS) > wire.MaxSignalSamples {
		return sig, queue.ErrInvalid.Detail("latency_ms: %d values, want at most %d", len(req.LatencyMS), wire.MaxSignalSamples)
	}
	if req.Errors < 0 || req.Errors > maxSignalErrors {
		return sig, queue.ErrInvalid.Detail("errors %d: want 0 to %d", req.Errors, maxSignalErrors)
	}
	limit := float64(queue.MaxSignalLatency / time.Millisecond)
	for i, ms := range req.LatencyMS {
		if !(ms >= 0 && ms <= limit) { // NaN fails too
			return sig, queue.ErrInvalid.Detail("latency_ms[%d] %v: want 0 to %v", i, ms, limit)
		}
		sig.Add(time.Duration(ms*float64(time.Millisecond)), false)
	}
	sig.Errors = req.Errors
	return sig, nil
}
