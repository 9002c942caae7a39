package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// rawGet sends a GET with the given headers and returns the answer's body
// as sent on the wire: the client does not decode gzip for a request that
// names its own Accept-Encoding.
func rawGet(t *testing.T, e *env, path, bearer string, header map[string]string) resp {
	t.Helper()
	req, err := http.NewRequest("GET", e.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("gunzip: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gunzip: %v", err)
	}
	return out
}

// TestCompression: a JSON answer is gzipped when the client accepts gzip
// and is large enough to gain from it, sent as is otherwise; every answer
// says it varies by Accept-Encoding; an event stream is never buffered.
func TestCompression(t *testing.T) {
	t.Parallel()
	e := newBookingEnv(t)
	sch := e.newSchedule(t, "c", `{}`)
	e.do(nil, "POST", fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID), adminKey, `{"sections":["A","B"],"rows":5,"seats_per_row":10,"price":50000}`)
	seats := fmt.Sprintf("/api/v1/schedules/%d/seats", sch.ID)
	gz := map[string]string{"Accept-Encoding": "gzip"}
	none := map[string]string{"Accept-Encoding": "identity"}

	plain := rawGet(t, e, seats, adminKey, none)
	if plain.status != 200 || plain.header.Get("Content-Encoding") != "" || !json.Valid(plain.body) {
		t.Fatalf("seat map without gzip: %d %q %.80s", plain.status, plain.header.Get("Content-Encoding"), plain.body)
	}
	zipped := rawGet(t, e, seats, adminKey, gz)
	if zipped.status != 200 || zipped.header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("seat map with gzip: %d, Content-Encoding %q", zipped.status, zipped.header.Get("Content-Encoding"))
	}
	// The map is rebuilt between the two reads (built_at): compare seats.
	type seatMap struct{ Seats []map[string]any }
	var a, b seatMap
	if err := json.Unmarshal(gunzip(t, zipped.body), &a); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(plain.body, &b)
	if len(a.Seats) != 100 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("gunzipped seat map differs from the plain one:\n%.200v\n%.200v", a, b)
	}
	if len(zipped.body) >= len(plain.body)/2 {
		t.Errorf("gzipped seat map %d B, plain %d B: want less than half", len(zipped.body), len(plain.body))
	}
	for _, r := range []resp{plain, zipped} {
		if v := r.header.Values("Vary"); !containsFold(v, "Accept-Encoding") {
			t.Errorf("Vary = %q, want Accept-Encoding", v)
		}
	}
	// Small answers stay plain; so do errors and other routes' small bodies.
	if r := rawGet(t, e, "/healthz", "", gz); r.status != 200 || r.header.Get("Content-Encoding") != "" || !json.Valid(r.body) {
		t.Errorf("healthz with gzip accepted: %d %q %s, want plain JSON", r.status, r.header.Get("Content-Encoding"), r.body)
	}
	// Every JSON route, not only the seat map: the OpenAPI document.
	if r := rawGet(t, e, "/api/v1/openapi.json", "", gz); r.status != 200 || r.header.Get("Content-Encoding") != "gzip" || !json.Valid(gunzip(t, r.body)) {
		t.Errorf("openapi.json with gzip accepted: %d %q", r.status, r.header.Get("Content-Encoding"))
	}
}

func containsFold(vs []string, want string) bool {
	for _, v := range vs {
		for _, f := range bytes.Split([]byte(v), []byte(",")) {
			if string(bytes.TrimSpace(f)) == want {
				return true
			}
		}
	}
	return false
}
