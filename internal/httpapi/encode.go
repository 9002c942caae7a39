package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

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
// fields and trailing data are errors; an empty body is the zero T. The
// client message names the field or byte offset at fault, never Go types.
func decode[T any](w http.ResponseWriter, r *http.Request) (T, error) {
	var v T
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(&v)
	if err == nil {
		if extra := dec.Decode(new(json.RawMessage)); !errors.Is(extra, io.EOF) {
			return v, apierror.ErrBadJSON.Detail("trailing data after the JSON value")
		}
	}
	const unknownField = "json: unknown field " // encoding/json has no type for it
	var (
		tooLarge  *http.MaxBytesError
		wrongType *json.UnmarshalTypeError
		syntax    *json.SyntaxError
	)
	switch {
	case err == nil, errors.Is(err, io.EOF):
		return v, nil
	case errors.As(err, &tooLarge):
		return v, apierror.ErrBodyTooLarge.Detail("body larger than %d bytes", maxBody)
	case errors.As(err, &wrongType) && wrongType.Field != "":
		return v, apierror.ErrBadJSON.Detail("%s: a JSON %s is the wrong type", wrongType.Field, wrongType.Value)
	case errors.As(err, &syntax):
		return v, apierror.ErrBadJSON.Detail("malformed JSON at byte %d", syntax.Offset)
	case strings.HasPrefix(err.Error(), unknownField):
		return v, apierror.ErrBadJSON.Detail("unknown field %s", strings.TrimPrefix(err.Error(), unknownField))
	default:
		return v, fmt.Errorf("%w: %w", apierror.ErrBadJSON, err)
	}
}
