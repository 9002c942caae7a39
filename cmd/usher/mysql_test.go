package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"usher/internal/testenv"
)

// TestMySQLStack runs `usher seed` and `usher serve` with --db mysql://…
// (memory store, embedded NATS) and books a seat end to end: the decision
// comes back from MySQL, and the collector counts it into the analytics
// tables of the same database.
func TestMySQLStack(t *testing.T) {
	t.Parallel()
	dbURL := testenv.MySQLDatabase(t)
	dir := testenv.DataDir(t)
	flags := []string{"--db", dbURL, "--data-dir", dir}
	var out bytes.Buffer
	if err := run(context.Background(), append([]string{"seed", "--seats", "50", "--json"}, flags...), os.Getenv, &out, io.Discard); err != nil {
		t.Fatalf("seed: %v", err)
	}
	var seeded struct {
		ScheduleID int64 `json:"schedule_id"`
	}
	if err := json.Unmarshal(out.Bytes(), &seeded); err != nil || seeded.ScheduleID == 0 {
		t.Fatalf("seed printed %q: %v", out.String(), err)
	}
	base := startServe(t, map[string]string{}, append(flags, "--addr", "127.0.0.1:0")...)
	key, _ := os.ReadFile(filepath.Join(dir, "admin.key"))
	admin := strings.TrimSpace(string(key))
	c := client{t, base}
	room := fmt.Sprintf("schedule-%d", seeded.ScheduleID)
	var pass, ticket string
	waitFor(t, "alice admitted (serve creates the room from the catalog)", func() bool {
		_, _, body := c.do("POST", "/api/v1/rooms/"+room+"/entries", admin, `{"visitor_id":"alice"}`)
		pass, _ = body["pass"].(string)
		ticket, _ = body["ticket"].(string)
		return pass != ""
	})
	id := holdAndReserve(t, c, seeded.ScheduleID, pass, 50, 3)
	waitFor(t, "the reservation confirmed in MySQL", func() bool {
		_, _, body := c.do("GET", "/api/v1/reservations/"+id, ticket, "")
		return body["status"] == "confirmed"
	})
	waitFor(t, "the confirmation counted in MySQL's analytics tables", func() bool {
		_, _, body := c.admin().do("GET", "/api/v1/rooms/"+room+"/analytics", admin, "")
		totals, _ := body["totals"].(map[string]any)
		return totals["reservations_confirmed"] == 1.0
	})
}
