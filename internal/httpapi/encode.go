package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"usher/internal/apierror"
)

// maxBody is the largest request body accepted.
const maxBody = 16 << 10

// encode writes v as JSON with status.
func encode(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// decode reads a JSON object of at most maxBody bytes into a T. Unknown
// fields and trailing data are errors; an empty body is the zero T.
func decode[T any](w http.ResponseWriter, r *http.Request) (T, error) {
	var v T
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(&v)
	if err == nil {
		if extra := dec.Decode(new(json.RawMessage)); !errors.Is(extra, io.EOF) {
			err = errors.New("trailing data after the JSON value")
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil, errors.Is(err, io.EOF):
		return v, nil
	case errors.As(err, &tooLarge):
		return v, fmt.Errorf("%w: limit %d bytes", apierror.ErrBodyTooLarge, maxBody)
	default:
		return v, fmt.Errorf("%w: %v", apierror.ErrBadJSON, err)
	}
}
