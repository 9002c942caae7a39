package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"usher/internal/httpapi"
	"usher/internal/queue"
	"usher/internal/queue/memqueue"
	"usher/internal/token"
)

// TestVerifyDraw runs usher verify-draw against the API of a room before
// and after its opening, with a true and a false admission order, and
// against a server that publishes a seed that is not the committed one.
func TestVerifyDraw(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var clock atomic.Int64
	opens := time.Date(2026, 12, 24, 10, 0, 0, 0, time.UTC)
	clock.Store(opens.Add(-time.Hour).UnixNano())
	q := queue.New(memqueue.New(), queue.Options{Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	keys, err := token.LoadDir(t.TempDir(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	const admin = "verify-draw-test-admin-key-000"
	srv := httptest.NewServer(httpapi.NewServer(httpapi.Config{Queue: q, Keys: keys, AdminKey: admin, Registry: prometheus.NewRegistry()}))
	t.Cleanup(srv.Close)
	set := queue.DefaultSettings()
	set.OpensAt = opens
	set.PresenceTimeout = 0 // the drawn never poll here: presence would park them
	if err := q.PutRoom(ctx, "sale", set); err != nil {
		t.Fatal(err)
	}
	var visitors []string
	for i := range 20 {
		v := fmt.Sprintf("acct:%d", i)
		if _, _, err := q.Enter(ctx, "sale", v); err != nil {
			t.Fatal(err)
		}
		visitors = append(visitors, v)
	}
	verify := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"verify-draw", "--url", srv.URL, "--room", "sale"}, args...), func(string) string { return "" }, &out, io.Discard)
		return out.String(), err
	}
	out, err := verify()
	if err != nil || !strings.Contains(out, "not drawn yet") {
		t.Fatalf("before the opening: %v\n%s", err, out)
	}
	commitment := strings.Fields(out)[7] // "room sale: opening T, N entrants, commitment C"
	if _, err := verify("--commitment", strings.Repeat("0", 64)); err == nil {
		t.Error("a commitment other than the recorded one: no error")
	}

	clock.Store(opens.UnixNano())
	var admitted []string
	for step := 0; len(admitted) < len(visitors); step++ {
		if step == 1000 {
			t.Fatalf("1,000 steps admitted %d of %d", len(admitted), len(visitors))
		}
		res, err := q.Admit(ctx, "sale")
		if err != nil {
			t.Fatal(err)
		}
		admitted = append(admitted, res.Admitted...)
		clock.Add(int64(time.Second))
	}
	file := filepath.Join(t.TempDir(), "admitted.txt")
	write := func(lines []string) {
		if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(admitted)
	if out, err := verify("--commitment", commitment, "--visitors", file); err != nil || !strings.Contains(out, "seed matches the commitment") || !strings.Contains(out, "20 visitors in draw order") {
		t.Fatalf("after the opening: %v\n%s", err, out)
	}
	swapped := slices.Clone(admitted)
	swapped[3], swapped[11] = swapped[11], swapped[3]
	write(swapped)
	if _, err := verify("--visitors", file); err == nil {
		t.Error("an admission order that breaks the draw: no error")
	}

	// A server that publishes another seed than the one it committed to.
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"room":"sale","opens_at":"2026-12-24T10:00:00Z","commitment":%q,"entrants":20,"drawn":true,"seed":%q}`,
			commitment, strings.Repeat("ab", 32))
	}))
	t.Cleanup(liar.Close)
	err = run(ctx, []string{"verify-draw", "--url", liar.URL, "--room", "sale"}, func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "does not match the commitment") {
		t.Errorf("a seed that is not the committed one: %v", err)
	}
	for _, args := range [][]string{{"--room", "Bad Room"}, {"--room", "r", "--commitment", "xyz"}} {
		if err := run(ctx, append([]string{"verify-draw"}, args...), func(string) string { return "" }, io.Discard, io.Discard); err == nil {
			t.Errorf("verify-draw %v: no error", args)
		}
	}
}
