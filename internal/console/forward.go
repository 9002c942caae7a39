package console

import (
	"net/http"
	"strings"

	"usher/internal/apierror"
)

// apiPrefix is where the console's forwarded API routes live: the browser
// asks /console/api/v1/rooms and the API handler answers /api/v1/rooms.
const apiPrefix = "/console/api/"

// forwarded are the API routes the console uses, and only they: the
// settings table (the form is built from it), the edge's bypass rules,
// the rooms (list, read, settings: PUT validates them, as for any
// client), the event timeline, the schedules and their sales.
var forwarded = []string{
	"GET /api/v1/settings",
	"GET /api/v1/bypass",
	"GET /api/v1/rooms",
	"GET /api/v1/rooms/{room}",
	"PUT /api/v1/rooms/{room}",
	"GET /api/v1/rooms/{room}/events",
	"GET /api/v1/concerts",
	"GET /api/v1/schedules",
	"GET /api/v1/schedules/{id}",
	"GET /api/v1/schedules/{id}/sales",
}

func (k *Console) forwardRoutes(m *http.ServeMux) {
	for _, route := range forwarded {
		method, path, _ := strings.Cut(route, " ")
		m.Handle(method+" /console"+path, k.signedIn(k.forward()))
	}
}

// forward hands the request to the API as an admin request: the path
// without /console, the body, the query, Content-Type and Accept, and the
// admin key; not the browser's cookies or other headers. The API's answer
// goes back as it is.
func (k *Console) forward() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawPath != "" {
			// An escaped character (%2F) would let a path the allow-list
			// matched as one segment reach the API as two: no route the
			// console uses needs one.
			k.errs.Write(w, r, apierror.ErrNotFound)
			return
		}
		out := r.Clone(r.Context())
		out.URL.Path = strings.TrimPrefix(r.URL.Path, "/console")
		out.URL.RawPath = ""
		out.RequestURI = ""
		out.Header = http.Header{}
		for _, h := range []string{"Content-Type", "Accept"} {
			if v := r.Header.Get(h); v != "" {
				out.Header.Set(h, v)
			}
		}
		out.Header.Set("Authorization", "Bearer "+k.c.AdminKey)
		k.c.API.ServeHTTP(w, out)
	})
}
