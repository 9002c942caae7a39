package httpapi

import (
	"net/http"
	"strconv"

	"usher/internal/queue"
	"usher/internal/sale"
)

// deleteRoom removes a room (admin): 409 room_in_use while visitors wait
// or are active, unless ?force=true; 409 room_of_schedule, forced or not,
// for the waiting room of a schedule, which the sale service would create
// again within seconds with default settings (close it instead). 204 on
// success.
func (s *server) deleteRoom() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		room := r.PathValue("room")
		if !queue.ValidRoomID(room) {
			s.errs.Write(w, r, queue.ErrInvalid.Detail("room id %q: want [a-z0-9][a-z0-9-]{0,63}", room))
			return
		}
		var force bool
		if q := r.URL.Query(); q.Has("force") {
			var err error
			if force, err = strconv.ParseBool(q.Get("force")); err != nil {
				s.errs.Write(w, r, queue.ErrInvalid.Detail("force: want true or false"))
				return
			}
		}
		if s.Sale != nil {
			sch, ok, err := s.Sale.ScheduleOfRoom(r.Context(), room)
			if err != nil {
				s.errs.Write(w, r, err)
				return
			}
			if ok {
				s.errs.Write(w, r, sale.ErrRoomOfSchedule.Detail("room %s gates schedule %d: close it (PUT state closed) instead of deleting it", room, sch.ID))
				return
			}
		}
		if err := s.Queue.DeleteRoom(r.Context(), room, force); err != nil {
			s.errs.Write(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
