package gateway

import (
	"net/http"

	"usher/internal/wire"
)

// noStore is the edge's ResponseWriter: an answer that carries usher's
// cookies or a pass (wire.CarriesCredentials) goes out with Cache-Control:
// private, no-store, whoever wrote it and whatever it said (usher's own
// answers and the origin's alike), so that no cache keeps one visitor's
// credentials or serves them to another.
type noStore struct {
	http.ResponseWriter
	wrote bool
}

func (w *noStore) WriteHeader(code int) {
	if !w.wrote && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.wrote = true
		if wire.CarriesCredentials(w.Header()) {
			w.Header().Set("Cache-Control", wire.CredentialCacheControl)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *noStore) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// deadlines, a websocket's hijack).
func (w *noStore) Unwrap() http.ResponseWriter { return w.ResponseWriter }
