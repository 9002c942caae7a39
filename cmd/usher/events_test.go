package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"usher/internal/event"
	"usher/internal/event/kafkaevent"
	"usher/internal/testenv"
)

// TestEventsCountedOnceAcrossRestart: usher serve on the embedded defaults
// (memory store, SQLite, NATS in-process) sells seats while its outbox
// relay and its collector run inside it; the server is stopped in the
// middle of the sale, with reservations submitted and not yet decided,
// relayed or counted, and started again on the same data directory. Once
// everything is decided, the analytics count every confirmed reservation
// exactly once: the same number as SQL holds, never more at any moment.
func TestEventsCountedOnceAcrossRestart(t *testing.T) {
	t.Parallel()
	testEventsCountedOnce(t, map[string]string{})
}

// TestEventsCountedOnceAcrossRestartKafka is the same sale with the events
// on Kafka (--events kafka://…, franz-go's in-process kfake cluster): the
// outbox relay produces to the topic and serve's collector consumes it
// with a consumer group.
func TestEventsCountedOnceAcrossRestartKafka(t *testing.T) {
	t.Parallel()
	u, _ := testenv.Kafka(t)
	testEventsCountedOnce(t, map[string]string{"USHER_EVENTS": u})
}

func testEventsCountedOnce(t *testing.T, env map[string]string) {
	dir := testenv.DataDir(t)
	env["USHER_DATA_DIR"] = dir
	var out bytes.Buffer
	if err := run(context.Background(), []string{"seed", "--seats", "100", "--json", "--data-dir", dir}, os.Getenv, &out, io.Discard); err != nil {
		t.Fatalf("seed: %v", err)
	}
	var seeded struct {
		ScheduleID int64 `json:"schedule_id"`
	}
	if err := json.Unmarshal(out.Bytes(), &seeded); err != nil || seeded.ScheduleID == 0 {
		t.Fatalf("seed printed %q: %v", out.String(), err)
	}
	room := fmt.Sprintf("schedule-%d", seeded.ScheduleID)
	from := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)

	// sell reserves one seat each for visitors first..last-1 and returns
	// without waiting for the decisions.
	sell := func(c client, admin string, first, last int) {
		for i := first; i < last; i++ {
			visitor := fmt.Sprintf("v%d", i)
			var pass string
			waitFor(t, visitor+" admitted", func() bool {
				_, _, body := c.do("POST", "/api/v1/rooms/"+room+"/entries", admin, fmt.Sprintf(`{"visitor_id":%q}`, visitor))
				pass, _ = body["pass"].(string)
				return pass != ""
			})
			seat := seatIDs(t, c, seeded.ScheduleID, pass)[i]
			if st, _, body := c.do("POST", fmt.Sprintf("/api/v1/schedules/%d/holds", seeded.ScheduleID), pass, fmt.Sprintf(`{"seat_ids":[%d]}`, seat)); st != 201 {
				t.Fatalf("hold %s: %d %v", visitor, st, body)
			}
			if st, _, body := c.do("POST", "/api/v1/reservations", pass, fmt.Sprintf(`{"schedule_id":%d,"seat_ids":[%d],"idempotency_key":"k"}`, seeded.ScheduleID, seat)); st != 202 {
				t.Fatalf("reserve %s: %d %v", visitor, st, body)
			}
		}
	}

	const half, all = 10, 20
	base, _, stop := serveUntilEnv(t, env)
	key, _ := os.ReadFile(filepath.Join(dir, "admin.key"))
	admin := strings.TrimSpace(string(key))
	waitFor(t, "serve to create the schedule's room", func() bool {
		st, _, _ := client{t, base}.admin().do("GET", "/api/v1/rooms/"+room, admin, "")
		return st == 200
	})
	sell(client{t, base}, admin, 0, half)
	stop() // mid-run: decisions, relaying and counting are still under way

	base, _, _ = serveUntilEnv(t, env)
	c := client{t, base}
	waitFor(t, "the room again", func() bool {
		st, _, _ := c.admin().do("GET", "/api/v1/rooms/"+room, admin, "")
		return st == 200
	})
	sell(c, admin, half, all)

	confirmed := func() int {
		_, _, body := c.admin().do("GET", fmt.Sprintf("/api/v1/schedules/%d/reservations?state=confirmed&limit=500", seeded.ScheduleID), admin, "")
		list, _ := body["reservations"].([]any)
		return len(list)
	}
	waitFor(t, "every reservation confirmed in SQL", func() bool { return confirmed() == all })
	counted := func() int {
		q := url.Values{"from": {from}, "to": {time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339)}}
		st, _, body := c.admin().do("GET", "/api/v1/rooms/"+room+"/analytics?"+q.Encode(), admin, "")
		if st != http.StatusOK {
			t.Fatalf("analytics: %d %v", st, body)
		}
		totals, _ := body["totals"].(map[string]any)
		n, _ := totals["reservations_confirmed"].(float64)
		return int(n)
	}
	waitFor(t, "the analytics to count every confirmation", func() bool {
		n := counted()
		if n > all {
			t.Fatalf("analytics count %d confirmations, SQL has %d", n, all)
		}
		return n == all
	})
	if u := env["USHER_EVENTS"]; u != "" {
		// The confirmations came through the Kafka topic.
		brokers, err := kafkaevent.ParseURL(u)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, r := range testenv.ReadTopic(t, brokers, event.Topic("usher")) {
			var e event.Event
			if err := json.Unmarshal(r.Value, &e); err != nil {
				t.Fatalf("record %s: %v", r.Value, err)
			}
			if e.Type == event.ReservationConfirmed && string(r.Key) == room {
				ids[e.ID] = true
			}
		}
		if len(ids) != all {
			t.Errorf("the topic holds %d confirmations of %s, want %d", len(ids), room, all)
		}
	}
}

// seatIDs is the schedule's seat ids in the seat map's order.
func seatIDs(t *testing.T, c client, schedule int64, pass string) []int64 {
	t.Helper()
	st, _, body := c.do("GET", fmt.Sprintf("/api/v1/schedules/%d/seats", schedule), pass, "")
	seats, _ := body["seats"].([]any)
	if st != 200 || len(seats) == 0 {
		t.Fatalf("seat map: %d %v", st, body)
	}
	ids := make([]int64, len(seats))
	for i, s := range seats {
		ids[i] = int64(s.(map[string]any)["seat_id"].(float64))
	}
	return ids
}
