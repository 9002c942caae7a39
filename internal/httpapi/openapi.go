package httpapi

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3.1 document of the whole JSON API: every route of
// routes.go, its parameters, bodies, answers and error codes. The tests
// validate every request and answer they make against it
// (openapi_test.go), so that it cannot drift from the handlers.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the OpenAPI document served at GET /api/v1/openapi.json.
func OpenAPI() []byte { return openAPI }

func (s *server) openAPI() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(openAPI)
	})
}
