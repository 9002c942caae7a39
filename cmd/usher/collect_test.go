package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kgo"

	"usher/internal/analytics"
	"usher/internal/analytics/sqliteanalytics"
	"usher/internal/event"
	"usher/internal/event/kafkaevent"
	"usher/internal/testenv"
)

// eventStream creates the event stream of deployment name on the external
// NATS as a producer would, deleted when the test ends, and returns a
// function that publishes n visitors entering room, each admitted 2 s
// later.
func eventStream(t *testing.T, name string) (publish func(room string, n int)) {
	t.Helper()
	nc, err := nats.Connect(testenv.URL(t, "USHER_TEST_NATS"))
	if err != nil {
		t.Fatalf("USHER_TEST_NATS is set but NATS does not answer: %v", err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: event.StreamName(name), Subjects: []string{event.SubjectFilter(name)}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { js.DeleteStream(context.Background(), event.StreamName(name)) })
	return func(room string, n int) {
		t0 := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Second)
		for i := range n {
			v := fmt.Sprintf("v%d", i)
			for _, e := range []event.Event{
				{ID: room + "-in-" + v, Type: event.Entered, Room: room, At: t0, Visitor: v},
				{ID: room + "-ad-" + v, Type: event.Admitted, Room: room, At: t0.Add(2 * time.Second), Visitor: v},
			} {
				body, _ := json.Marshal(e)
				if _, err := js.Publish(ctx, event.Subject(name, room, e.Type), body, jetstream.WithMsgID(e.ID)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func natsName(t *testing.T) string {
	b := make([]byte, 5)
	rand.Read(b)
	return "usher-cmd-" + hex.EncodeToString(b)
}

// TestCollectCommand: usher collect counts an external NATS's event stream
// into <data-dir>/analytics.db.
func TestCollectCommand(t *testing.T) {
	t.Parallel()
	name := natsName(t)
	publish := eventStream(t, name)
	dir := testenv.DataDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	stdout := &syncBuffer{}
	env := map[string]string{"USHER_DATA_DIR": dir, "USHER_COLLECT_NATS": testenv.URL(t, "USHER_TEST_NATS"), "USHER_COLLECT_NATS_NAME": name}
	go func() {
		done <- run(ctx, []string{"collect"}, func(k string) string { return env[k] }, stdout, &syncBuffer{})
	}()
	publish("sale", 30)
	s, err := sqliteanalytics.Open(context.Background(), filepath.Join(dir, "analytics.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := analytics.New(s, analytics.Options{})
	waitFor(t, "30 arrivals and admissions counted, 2 s each", func() bool {
		rep, err := a.Report(context.Background(), "sale", time.Now().Add(-time.Hour), time.Now().Add(time.Minute))
		return err == nil && rep.Totals.Arrivals == 30 && rep.Totals.Admissions == 30 && rep.Totals.WaitSumMS == 60_000
	})
	if !strings.Contains(stdout.String(), event.StreamName(name)) {
		t.Errorf("collect printed %q, want the stream's name", stdout)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("collect after cancel: %v, want nil", err)
	}
}

// TestServeCollects: usher serve counts its deployment's events (here on
// an external NATS, where the test can publish) and answers the analytics
// and the timeline; with --collect=false it still reads them.
func TestServeCollects(t *testing.T) {
	t.Parallel()
	name := natsName(t)
	publish := eventStream(t, name)
	dir := testenv.DataDir(t)
	const admin = "analytics-admin-key-0123456789"
	env := map[string]string{"USHER_DATA_DIR": dir, "USHER_NATS": testenv.URL(t, "USHER_TEST_NATS"), "USHER_NATS_NAME": name, "USHER_ADMIN_KEY": admin}
	c := client{t, startServe(t, env, "--addr", "127.0.0.1:0")}
	publish("sale", 12)
	q := url.Values{"from": {time.Now().UTC().Add(-time.Hour).Format(time.RFC3339)}}
	waitFor(t, "the analytics to count 12 admissions", func() bool {
		status, _, body := c.admin().do("GET", "/api/v1/rooms/sale/analytics?"+q.Encode(), admin, "")
		totals, _ := body["totals"].(map[string]any)
		return status == 200 && totals["admissions"] == 12.0 && totals["wait_p50_ms"] != 0.0
	})
	status, _, body := c.admin().do("GET", "/api/v1/rooms/sale/events?limit=5", admin, "")
	if evs, _ := body["events"].([]any); status != 200 || len(evs) != 5 || body["next"] == nil {
		t.Errorf("GET …/events?limit=5: %d %v", status, body)
	}

	off := map[string]string{"USHER_DATA_DIR": testenv.DataDir(t), "USHER_ADMIN_KEY": admin}
	c = client{t, startServe(t, off, "--addr", "127.0.0.1:0", "--collect=false")}
	if status, _, body := c.admin().do("GET", "/api/v1/rooms/sale/analytics", admin, ""); status != 200 || body["room"] != "sale" {
		t.Errorf("analytics without the collector: %d %v, want 200 (empty)", status, body)
	}
}

// TestCollectCommandKafka: usher collect --kafka counts a Kafka cluster's
// event topic (franz-go's kfake) into <data-dir>/analytics.db with the
// consumer group <name>.collector.
func TestCollectCommandKafka(t *testing.T) {
	t.Parallel()
	name := natsName(t)
	u, _ := testenv.Kafka(t)
	dir := testenv.DataDir(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	stdout := &syncBuffer{}
	env := map[string]string{"USHER_DATA_DIR": dir, "USHER_COLLECT_KAFKA": u, "USHER_COLLECT_NATS_NAME": name}
	go func() {
		done <- run(ctx, []string{"collect"}, func(k string) string { return env[k] }, stdout, &syncBuffer{})
	}()
	brokers, err := kafkaevent.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kafkaevent.Connect(ctx, brokers, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	t0 := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Second)
	var recs []*kgo.Record
	for i := range 30 {
		v := fmt.Sprintf("v%d", i)
		for _, e := range []event.Event{
			{ID: "in-" + v, Type: event.Entered, Room: "sale", At: t0, Visitor: v},
			{ID: "ad-" + v, Type: event.Admitted, Room: "sale", At: t0.Add(2 * time.Second), Visitor: v},
		} {
			body, _ := json.Marshal(e)
			recs = append(recs, &kgo.Record{Topic: event.Topic(name), Key: []byte(e.Room), Value: body})
		}
	}
	// The collector creates the topic if it is missing; the producer may
	// come first and find none: try until the topic takes the records.
	waitFor(t, "the events produced", func() bool { return pub.ProduceSync(ctx, recs...).FirstErr() == nil })
	s, err := sqliteanalytics.Open(context.Background(), filepath.Join(dir, "analytics.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := analytics.New(s, analytics.Options{})
	waitFor(t, "30 arrivals and admissions counted, 2 s each", func() bool {
		rep, err := a.Report(context.Background(), "sale", time.Now().Add(-time.Hour), time.Now().Add(time.Minute))
		return err == nil && rep.Totals.Arrivals == 30 && rep.Totals.Admissions == 30 && rep.Totals.WaitSumMS == 60_000
	})
	if want := event.Topic(name) + " (group " + name + ".collector)"; !strings.Contains(stdout.String(), want) {
		t.Errorf("collect printed %q, want %q", stdout, want)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("collect after cancel: %v, want nil", err)
	}
}
