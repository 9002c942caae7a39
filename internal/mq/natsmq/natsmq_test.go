package natsmq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"usher/internal/booking"
	"usher/internal/mq"
	"usher/internal/mq/mqtest"
	"usher/internal/mq/natsmq"
	"usher/internal/testenv"
)

// testOptions returns options with a unique name and the short timeouts
// the conformance suite needs.
func testOptions() natsmq.Options {
	b := make([]byte, 6)
	rand.Read(b)
	return natsmq.Options{
		Name:      "usher-test-" + hex.EncodeToString(b),
		AckWait:   300 * time.Millisecond,
		FetchWait: 100 * time.Millisecond,
	}
}

// startEmbedded starts an embedded server on dir, stopped when tb ends.
func startEmbedded(tb testing.TB, dir string) *server.Server {
	tb.Helper()
	s, err := natsmq.StartEmbedded(dir, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stopServer(s) })
	return s
}

func stopServer(s *server.Server) {
	s.Shutdown()
	s.WaitForShutdown()
}

// connectEmbedded opens an in-process connection, closed when tb ends.
func connectEmbedded(tb testing.TB, s *server.Server) *nats.Conn {
	tb.Helper()
	nc, err := natsmq.ConnectEmbedded(s)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

func open(tb testing.TB, nc *nats.Conn, o natsmq.Options) *natsmq.Broker {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := natsmq.Open(ctx, nc, o)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	return b
}

// TestEmbedded runs the suite against a server of its own per broker, in a
// temporary directory.
func TestEmbedded(t *testing.T) {
	mqtest.Run(t, func(tb testing.TB) mq.Broker {
		nc := connectEmbedded(tb, startEmbedded(tb, testenv.DataDir(tb)))
		return open(tb, nc, testOptions())
	})
}

// natsURL returns the external server's URL from USHER_TEST_NATS; it skips
// when unset, but fails under CI.
func natsURL(tb testing.TB) string {
	tb.Helper()
	return testenv.URL(tb, "USHER_TEST_NATS")
}

// connectExternal connects to the external server. A set but unreachable
// server fails the test: it never skips.
func connectExternal(tb testing.TB) *nats.Conn {
	tb.Helper()
	u := natsURL(tb)
	nc, err := nats.Connect(u, nats.Timeout(5*time.Second), nats.Name("usher natsmq test"))
	if err != nil {
		tb.Fatalf("USHER_TEST_NATS is set but NATS at %s does not answer: %v", u, err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// TestExternal runs the suite against USHER_TEST_NATS, each broker under a
// unique name, deleted when its test ends.
func TestExternal(t *testing.T) {
	nc := connectExternal(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	mqtest.Run(t, func(tb testing.TB) mq.Broker {
		o := testOptions()
		b := open(tb, nc, o)
		tb.Cleanup(func() { deleteAll(tb, js, o.Name) })
		return b
	})
}

// deleteAll removes the stream and the bucket of the broker named name.
func deleteAll(tb testing.TB, js jetstream.JetStream, name string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, streamName(name)); err != nil {
		tb.Errorf("delete stream: %v", err)
	}
	if err := js.DeleteKeyValue(ctx, name+"_reservations"); err != nil {
		tb.Errorf("delete bucket: %v", err)
	}
}

func streamName(name string) string {
	b := []byte(name)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b) + "_RESERVATIONS"
}

func reservation(id, visitor string) booking.Reservation {
	return booking.Reservation{
		ID: id, Visitor: visitor, ScheduleID: 3, SeatIDs: []int64{1},
		Status: booking.Pending, CreatedAt: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC),
	}
}

// confirm is a handler that confirms every reservation.
func confirm(_ context.Context, batch []booking.Reservation) ([]booking.Reservation, error) {
	out := make([]booking.Reservation, len(batch))
	for i, r := range batch {
		r.Status, r.DecidedAt = booking.Confirmed, r.CreatedAt.Add(time.Minute)
		out[i] = r
	}
	return out, nil
}

// run runs Consume until the test ends.
func run(t *testing.T, b *natsmq.Broker, h mq.Handler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.Consume(ctx, mq.ConsumeOptions{Workers: 2, MaxBatch: 10, RetryAfter: 100 * time.Millisecond}, h)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Consume: %v", err)
		}
	})
}

// waitStatus polls Get until id has status want.
func waitStatus(t *testing.T, b *natsmq.Broker, id string, want booking.ReservationStatus) booking.Reservation {
	t.Helper()
	var r booking.Reservation
	testenv.Eventually(t, time.Minute, fmt.Sprintf("Get(%s).Status = %s", id, want), func() bool {
		var err error
		if r, err = b.Get(context.Background(), id); err != nil {
			t.Fatalf("Get(%s): %v", id, err)
		}
		return r.Status == want
	})
	return r
}

// TestRestart: the embedded server's file storage keeps the backlog, the
// states and the idempotency keys across a restart.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	dir := testenv.DataDir(t)
	o := testOptions()

	s1, err := natsmq.StartEmbedded(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	nc1, err := natsmq.ConnectEmbedded(s1)
	if err != nil {
		stopServer(s1)
		t.Fatal(err)
	}
	b1 := open(t, nc1, o)
	r := reservation("r1", "alice")
	if _, created, err := b1.Submit(ctx, r, "k"); err != nil || !created {
		t.Fatalf("Submit = %v, %v", created, err)
	}
	nc1.Close()
	stopServer(s1)

	nc2 := connectEmbedded(t, startEmbedded(t, dir))
	b2 := open(t, nc2, o)
	if got, err := b2.Get(ctx, "r1"); err != nil || !cmp.Equal(got, r) {
		t.Errorf("Get after restart = %+v, %v; want %+v", got, err, r)
	}
	if got, created, err := b2.Submit(ctx, reservation("r2", "alice"), "k"); err != nil || created || got.ID != "r1" {
		t.Errorf("Submit(same visitor and key) after restart = %+v, %v, %v; want r1, not created", got, created, err)
	}
	run(t, b2, confirm)
	waitStatus(t, b2, "r1", booking.Confirmed)
}

// TestPublishFailedRetry: Submit records the reservation, then the stream
// refuses the message (full). The retry with the same key publishes it.
func TestPublishFailedRetry(t *testing.T) {
	ctx := context.Background()
	nc := connectEmbedded(t, startEmbedded(t, testenv.DataDir(t)))
	o := testOptions()
	o.MaxBacklog = 1
	b := open(t, nc, o)
	if _, _, err := b.Submit(ctx, reservation("first", "alice"), "k"); err != nil {
		t.Fatal(err)
	}
	second := reservation("second", "bob")
	_, _, err := b.Submit(ctx, second, "k")
	if !errors.Is(err, mq.ErrUnavailable) {
		t.Fatalf("Submit to a full stream err = %v, want ErrUnavailable", err)
	}
	// Recorded but not published: pending until the retry.
	if got, err := b.Get(ctx, "second"); err != nil || got.Status != booking.Pending {
		t.Fatalf("Get(second) after the failed publish = %+v, %v; want pending", got, err)
	}
	run(t, b, confirm)
	waitStatus(t, b, "first", booking.Confirmed)

	// The retry carries another reservation id (a new request): it gets the
	// recorded one back, published now.
	got, created, err := b.Submit(ctx, reservation("second-retry", "bob"), "k")
	if err != nil || created || got.ID != "second" {
		t.Fatalf("retry = %+v, %v, %v; want second, not created", got, created, err)
	}
	waitStatus(t, b, "second", booking.Confirmed)
	if _, err := b.Get(ctx, "second-retry"); !errors.Is(err, mq.ErrNotFound) {
		t.Errorf("Get(second-retry) err = %v, want ErrNotFound", err)
	}
}

// TestRepublishDeduplicated: retries of a pending reservation re-publish it,
// and the stream keeps one message.
func TestRepublishDeduplicated(t *testing.T) {
	ctx := context.Background()
	nc := connectEmbedded(t, startEmbedded(t, testenv.DataDir(t)))
	o := testOptions()
	b := open(t, nc, o)
	for range 5 {
		if _, _, err := b.Submit(ctx, reservation("r", "alice"), "k"); err != nil {
			t.Fatal(err)
		}
	}
	js, _ := jetstream.New(nc)
	st, err := js.Stream(ctx, streamName(o.Name))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("stream holds %d messages after 5 submissions of one reservation, want 1", info.State.Msgs)
	}
}

// TestLayout pins the settings that docs/architecture.md, operators and the
// failure semantics rely on.
func TestLayout(t *testing.T) {
	ctx := context.Background()
	nc := connectEmbedded(t, startEmbedded(t, testenv.DataDir(t)))
	o := testOptions()
	b := open(t, nc, o)
	run(t, b, confirm)
	js, _ := jetstream.New(nc)
	st, err := js.Stream(ctx, streamName(o.Name))
	if err != nil {
		t.Fatal(err)
	}
	sc := st.CachedInfo().Config
	if sc.Retention != jetstream.WorkQueuePolicy || sc.Storage != jetstream.FileStorage ||
		sc.Duplicates != 10*time.Minute || !cmp.Equal(sc.Subjects, []string{o.Name + ".reservations.>"}) {
		t.Errorf("stream config = retention %v, storage %v, duplicates %v, subjects %v",
			sc.Retention, sc.Storage, sc.Duplicates, sc.Subjects)
	}
	var cc jetstream.ConsumerConfig
	testenv.Eventually(t, time.Minute, "the consumer deciders", func() bool {
		c, err := st.Consumer(ctx, "deciders")
		if err == nil {
			cc = c.CachedInfo().Config
		}
		return err == nil
	})
	if cc.AckPolicy != jetstream.AckExplicitPolicy || cc.AckWait != o.AckWait ||
		cc.MaxAckPending != 2*10 || cc.MaxDeliver != -1 {
		t.Errorf("consumer config = ack %v, ack wait %v, max ack pending %d, max deliver %d",
			cc.AckPolicy, cc.AckWait, cc.MaxAckPending, cc.MaxDeliver)
	}
	kv, err := js.KeyValue(ctx, o.Name+"_reservations")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Submit(ctx, reservation("plain-id_1", "alice"), "k"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Submit(ctx, reservation("odd id.*", "bob"), "k"); err != nil {
		t.Fatal(err)
	}
	keys, err := kv.Keys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var res, res64, idem int
	for _, k := range keys {
		switch {
		case k == "res.plain-id_1":
			res++
		case len(k) > 6 && k[:6] == "res64.":
			res64++
		case len(k) == len("idem.")+64 && k[:5] == "idem.":
			idem++
		default:
			t.Errorf("unexpected key %q", k)
		}
	}
	if res != 1 || res64 != 1 || idem != 2 {
		t.Errorf("keys %v: want res.plain-id_1, one res64.… and two idem.…", keys)
	}
}

// TestMalformed: a message that is not a pending reservation is
// terminated, and the ones behind it are decided.
func TestMalformed(t *testing.T) {
	ctx := context.Background()
	nc := connectEmbedded(t, startEmbedded(t, testenv.DataDir(t)))
	o := testOptions()
	b := open(t, nc, o)
	js, _ := jetstream.New(nc)
	for _, data := range []string{"not json", `{"reservation_id":""}`, `{"reservation_id":"x","status":"confirmed"}`} {
		if _, err := js.Publish(ctx, o.Name+".reservations.3", []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := b.Submit(ctx, reservation("good", "alice"), "k"); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	run(t, b, func(ctx context.Context, batch []booking.Reservation) ([]booking.Reservation, error) {
		calls.Add(1)
		for _, r := range batch {
			if r.ID != "good" {
				t.Errorf("handler got %+v", r)
			}
		}
		return confirm(ctx, batch)
	})
	waitStatus(t, b, "good", booking.Confirmed)
	st, err := js.Stream(ctx, streamName(o.Name))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, "the stream empty", func() bool {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs == 0
	})
}

// TestHandlerPanic: a panicking handler does not take Consume down; the
// batch is redelivered.
func TestHandlerPanic(t *testing.T) {
	ctx := context.Background()
	nc := connectEmbedded(t, startEmbedded(t, testenv.DataDir(t)))
	b := open(t, nc, testOptions())
	if _, _, err := b.Submit(ctx, reservation("p", "alice"), "k"); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	run(t, b, func(ctx context.Context, batch []booking.Reservation) ([]booking.Reservation, error) {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return confirm(ctx, batch)
	})
	waitStatus(t, b, "p", booking.Confirmed)
	if calls.Load() < 2 {
		t.Errorf("handler called %d times, want a redelivery after the panic", calls.Load())
	}
}

// TestUndecided: a reservation the handler returns still pending is not
// acknowledged; it comes back.
func TestUndecided(t *testing.T) {
	ctx := context.Background()
	nc := connectEmbedded(t, startEmbedded(t, testenv.DataDir(t)))
	b := open(t, nc, testOptions())
	if _, _, err := b.Submit(ctx, reservation("u", "alice"), "k"); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	run(t, b, func(ctx context.Context, batch []booking.Reservation) ([]booking.Reservation, error) {
		if calls.Add(1) == 1 {
			return batch, nil // returned as is: pending
		}
		return confirm(ctx, batch)
	})
	waitStatus(t, b, "u", booking.Confirmed)
}

// checkUnavailable calls every operation and wants a prompt ErrUnavailable.
func checkUnavailable(t *testing.T, b *natsmq.Broker) {
	t.Helper()
	checks := map[string]func(ctx context.Context) error{
		"Submit": func(ctx context.Context) error {
			_, _, err := b.Submit(ctx, reservation("x", "alice"), "k")
			return err
		},
		"Get":   func(ctx context.Context) error { _, err := b.Get(ctx, "x"); return err },
		"Watch": func(ctx context.Context) error { _, err := b.Watch(ctx, "x"); return err },
		"Consume": func(ctx context.Context) error {
			return b.Consume(ctx, mq.ConsumeOptions{Workers: 1, MaxBatch: 1}, confirm)
		},
	}
	for op, call := range checks {
		t.Run(op, func(t *testing.T) {
			// The deadline only guards against a hang: a prompt failure is
			// one that does not wait for it.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := call(ctx)
			if ctx.Err() != nil {
				t.Errorf("err = %v after the caller's deadline, want a failure of its own before it", err)
			}
			if !errors.Is(err, mq.ErrUnavailable) {
				t.Errorf("err = %v, want ErrUnavailable", err)
			}
			if errors.Is(err, mq.ErrNotFound) {
				t.Errorf("err = %v, want only ErrUnavailable", err)
			}
		})
	}
}

func TestUnavailableClosedConn(t *testing.T) {
	nc := connectEmbedded(t, startEmbedded(t, testenv.DataDir(t)))
	b := open(t, nc, testOptions())
	nc.Close()
	checkUnavailable(t, b)
	if _, err := natsmq.Open(context.Background(), nc, testOptions()); !errors.Is(err, mq.ErrUnavailable) {
		t.Errorf("Open on a closed connection err = %v, want ErrUnavailable", err)
	}
}

// TestConsumeConnClosed: Consume stops with ErrUnavailable once its
// connection is closed for good, rather than retrying forever.
func TestConsumeConnClosed(t *testing.T) {
	nc := connectEmbedded(t, startEmbedded(t, testenv.DataDir(t)))
	o := testOptions()
	b := open(t, nc, o)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.Consume(ctx, mq.ConsumeOptions{Workers: 2, MaxBatch: 1}, confirm) }()
	// Close once Consume has made its durable consumer, so that the
	// connection goes away under a running Consume, not before it starts.
	js, _ := jetstream.New(nc)
	testenv.Eventually(t, 30*time.Second, "Consume to create its consumer", func() bool {
		st, err := js.Stream(ctx, streamName(o.Name))
		if err != nil {
			return false
		}
		_, err = st.Consumer(ctx, "deciders")
		return err == nil
	})
	nc.Close()
	if err := <-done; !errors.Is(err, mq.ErrUnavailable) {
		t.Errorf("Consume after the connection closed = %v, want ErrUnavailable", err)
	}
}

// TestUnavailableServerDown: the server goes away under an open broker; the
// connection keeps trying to reconnect, and the broker does not wait for it.
func TestUnavailableServerDown(t *testing.T) {
	s, err := natsmq.StartEmbedded(testenv.DataDir(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stopServer(s)
	nc := connectEmbedded(t, s)
	b := open(t, nc, testOptions())
	stopServer(s)
	testenv.Eventually(t, time.Minute, "the connection down after the server stopped", func() bool { return !nc.IsConnected() })
	checkUnavailable(t, b)
}

// TestOpenUnreachable: Open through a connection that never reached its
// server fails at once.
func TestOpenUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	nc, err := nats.Connect("nats://"+addr, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a guard against a hang
	defer cancel()
	if _, err := natsmq.Open(ctx, nc, testOptions()); !errors.Is(err, mq.ErrUnavailable) {
		t.Errorf("Open err = %v, want ErrUnavailable", err)
	}
	if ctx.Err() != nil {
		t.Error("Open waited for the caller's deadline, want a failure of its own before it")
	}
}

// TestCluster runs the suite against the three-node JetStream cluster at
// USHER_TEST_NATS_CLUSTER (scripts/nats-cluster.sh) with the stream, its
// consumer and the bucket replicated three times, as `usher serve --nats
// nats://a,nats://b,nats://c --nats-replicas 3` runs. Each broker has a
// unique name, deleted when its test ends.
func TestCluster(t *testing.T) {
	u := testenv.URL(t, "USHER_TEST_NATS_CLUSTER")
	nc, err := nats.Connect(u, nats.Timeout(5*time.Second), nats.Name("usher natsmq cluster test"))
	if err != nil {
		t.Fatalf("USHER_TEST_NATS_CLUSTER is set but NATS at %s does not answer: %v", u, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("Replicated", func(t *testing.T) {
		o := testOptions()
		o.Replicas = 3
		open(t, nc, o)
		t.Cleanup(func() { deleteAll(t, js, o.Name) })
		b := open(t, nc, o) // a second instance's Open turns direct gets on, then off
		checkReplicas(t, js, o.Name, 3)
		// Reads go to the leader: a reservation is found, and watched, at
		// once after Submit returned, whatever replica a direct get or
		// the watcher's consumer would have reached.
		ctx := context.Background()
		for i := range 100 {
			r := reservation(fmt.Sprintf("ryw-%d", i), fmt.Sprintf("v%d", i))
			if _, _, err := b.Submit(ctx, r, "k"); err != nil {
				t.Fatal(err)
			}
			if got, err := b.Get(ctx, r.ID); err != nil || got.Status != booking.Pending {
				t.Fatalf("Get(%s) right after Submit = %+v, %v; want pending", r.ID, got, err)
			}
			wctx, cancel := context.WithCancel(ctx)
			w, err := b.Watch(wctx, r.ID)
			if err != nil {
				t.Fatalf("Watch(%s) right after Submit: %v", r.ID, err)
			}
			if got := <-w; got.Status != booking.Pending {
				t.Fatalf("Watch(%s) right after Submit sent %+v, want pending", r.ID, got)
			}
			cancel()
		}
	})
	mqtest.Run(t, func(tb testing.TB) mq.Broker {
		o := testOptions()
		o.Replicas = 3
		b := open(tb, nc, o)
		tb.Cleanup(func() { deleteAll(tb, js, o.Name) })
		return b
	})
}

// checkReplicas wants the broker's stream and bucket to have n replicas,
// each on a node of its own.
func checkReplicas(t *testing.T, js jetstream.JetStream, name string, n int) {
	t.Helper()
	ctx := context.Background()
	for _, stream := range []string{streamName(name), "KV_" + name + "_reservations"} {
		st, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatalf("stream %s: %v", stream, err)
		}
		info := st.CachedInfo()
		if info.Config.Replicas != n {
			t.Errorf("stream %s: %d replicas configured, want %d", stream, info.Config.Replicas, n)
		}
		if info.Cluster == nil {
			t.Fatalf("stream %s: no cluster info: not on a cluster", stream)
		}
		nodes := map[string]bool{info.Cluster.Leader: true}
		for _, p := range info.Cluster.Replicas {
			nodes[p.Name] = true
		}
		if info.Cluster.Leader == "" || len(nodes) != n {
			t.Errorf("stream %s: leader %q and replicas %+v: want %d nodes", stream, info.Cluster.Leader, info.Cluster.Replicas, n)
		}
		if info.Config.AllowDirect {
			t.Errorf("stream %s: direct gets on: a replica behind the leader may answer reads", stream)
		}
	}
}
