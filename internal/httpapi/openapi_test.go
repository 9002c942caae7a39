package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/apierror"
	"usher/internal/httpapi"
	"usher/internal/sale"
)

// spec is the API's OpenAPI document, loaded and checked once.
type spec struct {
	doc    *openapi3.T
	router routers.Router
}

var loadSpec = sync.OnceValues(func() (*spec, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(httpapi.OpenAPI())
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	return &spec{doc: doc, router: router}, nil
})

func mustSpec(tb testing.TB) *spec {
	tb.Helper()
	s, err := loadSpec()
	if err != nil {
		tb.Fatalf("openapi.json: %v", err)
	}
	return s
}

// validator is an http.RoundTripper that checks every request and answer
// against the OpenAPI document: a request the document accepts must get
// an answer the document describes (its status among the operation's, its
// body and headers matching the schema); a request the document refuses
// (a test of a wrong input) must be refused by the server too, with a
// described 4xx. Requests to no route must get the JSON 404 or 405.
// Failures are test errors, not transport errors, so that a test sees
// every one.
type validator struct {
	tb   testing.TB
	next http.RoundTripper
}

// validated returns c with its transport wrapped in a validator.
func validated(tb testing.TB, c *http.Client) *http.Client {
	if _, ok := c.Transport.(*validator); ok {
		return c
	}
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	v := *c
	v.Transport = &validator{tb: tb, next: next}
	return &v
}

// options: OpenAPI 3.1 schemas are JSON Schema 2020-12.
func options() *openapi3filter.Options {
	return &openapi3filter.Options{
		MultiError:              true,
		IncludeResponseStatus:   true,
		AuthenticationFunc:      authenticate,
		SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.EnableJSONSchema2020()},
	}
}

// authenticate checks that a request carries the credential a security
// scheme names (a bearer token, a cookie); whether it is valid is the
// server's business.
func authenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	r, s := in.RequestValidationInput.Request, in.SecurityScheme
	switch {
	case s.Type == "http" && s.Scheme == "bearer":
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && tok != "" {
			return nil
		}
		return errors.New("no bearer token")
	case s.Type == "apiKey" && s.In == "cookie":
		if _, err := r.Cookie(s.Name); err == nil {
			return nil
		}
		return fmt.Errorf("no %s cookie", s.Name)
	}
	return fmt.Errorf("security scheme %s %s: not understood by the test", s.Type, s.Scheme)
}

func (v *validator) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	s, err := loadSpec()
	if err != nil {
		v.tb.Errorf("openapi.json: %v", err)
		return v.next.RoundTrip(req)
	}
	// The server decodes any body as JSON, whatever its Content-Type; the
	// document says application/json.
	check := req.Clone(req.Context())
	check.Body = io.NopCloser(bytes.NewReader(body))
	if len(body) > 0 && check.Header.Get("Content-Type") == "" {
		check.Header.Set("Content-Type", "application/json")
	}
	route, params, routeErr := s.router.FindRoute(check)
	var in *openapi3filter.RequestValidationInput
	var reqErr error
	if routeErr == nil {
		in = &openapi3filter.RequestValidationInput{Request: check, PathParams: params, Route: route, Options: options()}
		reqErr = openapi3filter.ValidateRequest(req.Context(), in)
	}

	res, err := v.next.RoundTrip(req)
	if err != nil {
		return res, err
	}
	what := req.Method + " " + req.URL.RequestURI()
	stream := strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream")
	var resBody []byte
	if !stream {
		resBody, err = io.ReadAll(res.Body)
		res.Body.Close()
		res.Body = io.NopCloser(bytes.NewReader(resBody))
		if err != nil {
			return res, err
		}
	}
	switch {
	case routeErr != nil:
		// No route in the document: the server must not have one either.
		if res.StatusCode != http.StatusNotFound && res.StatusCode != http.StatusMethodNotAllowed {
			v.tb.Errorf("openapi: %s has no route in the document (%v), but the server answered %d %s", what, routeErr, res.StatusCode, resBody)
		}
		if err := s.errorBody(resBody); err != nil {
			v.tb.Errorf("openapi: %s: %d answer is not the error body: %v\n%s", what, res.StatusCode, err, resBody)
		}
		return res, nil
	case reqErr != nil && (res.StatusCode < 400 || res.StatusCode >= 500):
		v.tb.Errorf("openapi: %s: the document refuses the request (%v), but the server answered %d %s", what, reqErr, res.StatusCode, resBody)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: res.StatusCode, Header: res.Header,
		Body: io.NopCloser(bytes.NewReader(resBody)), Options: options(),
	}
	if stream {
		out.Options.ExcludeResponseBody = true
	}
	if err := openapi3filter.ValidateResponse(req.Context(), out); err != nil {
		v.tb.Errorf("openapi: %s: the answer %d does not match the document: %v\n%s", what, res.StatusCode, err, resBody)
	}
	return res, nil
}

// errorBody checks b against the document's Error schema.
func (s *spec) errorBody(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return s.doc.Components.Schemas["Error"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020())
}

// TestOpenAPIRoutes: every route of routes.go is an operation of the
// document and every operation a route; the operators' routes are exactly
// the operations that take the admin key alone.
func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	s := mustSpec(t)
	var routes, adminRoutes []string
	for _, r := range httpapi.Routes(httpapi.Config{Registry: prometheus.NewRegistry(), Sale: new(sale.Service)}) {
		routes = append(routes, r.Pattern)
		if r.Audience == httpapi.Operators {
			adminRoutes = append(adminRoutes, r.Pattern)
		}
	}
	if len(routes) < 30 {
		t.Fatalf("found %d routes; did routes.go change?", len(routes))
	}
	var ops, adminOps []string
	for path, item := range s.doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops = append(ops, method+" "+path)
			if sec := op.Security; sec != nil && len(*sec) == 1 && len((*sec)[0]) == 1 && (*sec)[0]["adminKey"] != nil {
				adminOps = append(adminOps, method+" "+path)
			}
		}
	}
	for _, l := range [][]string{routes, ops, adminRoutes, adminOps} {
		slices.Sort(l)
	}
	if !slices.Equal(routes, ops) {
		t.Errorf("routes.go and openapi.json differ:\nonly in routes.go: %v\nonly in openapi.json: %v", minus(routes, ops), minus(ops, routes))
	}
	if !slices.Equal(adminRoutes, adminOps) {
		t.Errorf("operators' routes and the admin key's operations differ:\nonly operators' routes: %v\nonly the admin key's: %v",
			minus(adminRoutes, adminOps), minus(adminOps, adminRoutes))
	}
}

// minus returns the elements of a not in b.
func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// TestOpenAPIErrorCodes: the error responses E<status> list exactly the
// codes that apierror's one table maps to that status, and the Error
// schema every code.
func TestOpenAPIErrorCodes(t *testing.T) {
	t.Parallel()
	s := mustSpec(t)
	want := map[int][]string{}
	for code, status := range apierror.Codes() {
		want[status] = append(want[status], code)
	}
	got := map[int][]string{}
	for name, r := range s.doc.Components.Responses {
		status, err := strconv.Atoi(strings.TrimPrefix(name, "E"))
		if err != nil {
			t.Errorf("response %s: want E<status>", name)
			continue
		}
		schema := r.Value.Content.Get("application/json").Schema.Value
		code := schema.AllOf[1].Value.Properties["error"].Value.Properties["code"].Value
		for _, c := range code.Enum {
			got[status] = append(got[status], c.(string))
		}
	}
	for _, m := range []map[int][]string{want, got} {
		for _, codes := range m {
			slices.Sort(codes)
		}
	}
	for _, status := range slices.Sorted(maps.Keys(want)) {
		if !slices.Equal(got[status], want[status]) {
			t.Errorf("E%d lists %v; apierror maps %v to %d", status, got[status], want[status], status)
		}
	}
	for status := range got {
		if _, ok := want[status]; !ok {
			t.Errorf("E%d: apierror maps no code to %d", status, status)
		}
	}
	var all []string
	for _, c := range s.doc.Components.Schemas["Error"].Value.Properties["error"].Value.Properties["code"].Value.Enum {
		all = append(all, c.(string))
	}
	if codes := slices.Sorted(maps.Keys(apierror.Codes())); !slices.Equal(all, codes) {
		t.Errorf("the Error schema's codes %v; apierror's %v", all, codes)
	}
}

// TestOpenAPIServed: GET /api/v1/openapi.json serves the document. (It
// also asks /healthz, the one operation no other httpapi test calls, so
// that every operation's answer is checked against the document.)
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	if r := e.do(nil, "GET", "/healthz", "", ""); r.status != 200 {
		t.Errorf("GET /healthz = %d %s", r.status, r.body)
	}
	r := e.do(nil, "GET", "/api/v1/openapi.json", "", "")
	if r.status != 200 || !bytes.Equal(r.body, httpapi.OpenAPI()) {
		t.Fatalf("GET /api/v1/openapi.json = %d (%d bytes), want 200 and the document", r.status, len(r.body))
	}
	var doc struct{ OpenAPI string }
	if err := json.Unmarshal(r.body, &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, %v; want 3.1.0", doc.OpenAPI, err)
	}
}
