// Package natsmq is the mq.Broker on NATS JetStream, embedded in-process
// (StartEmbedded, ConnectEmbedded) or external (any nats.Conn to a server
// with JetStream): a work-queue stream holds the reservations the database
// has not taken yet, a key-value bucket every reservation's latest state.
//
// Consume delivers at least once (a dead consumer's batch comes back after
// AckWait, a failed one after RetryAfter) and relies on the handler being
// idempotent, as booking.Store.Decide is. A Submit that fails may have
// recorded the reservation: the caller must retry with the same key.
//
// Limits: while the connection is down every operation fails at once with
// mq.ErrUnavailable (nothing is queued for later). Reservation ids must be
// unique; states and idempotency keys live for Options.KeepFor. Layout and
// steps: docs/architecture.md#the-broker-on-jetstream.
package natsmq

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"usher/internal/booking"
	"usher/internal/mq"
)

var _ mq.Broker = (*Broker)(nil)

// Options name and tune a Broker. The zero value is the default.
type Options struct {
	// Name prefixes the stream, subjects and bucket (letters, digits, '-'
	// and '_'). Default "usher". Tests use a unique name each.
	Name string
	// AckWait is how long the server waits for a consumer's acknowledgement
	// or progress signal before it delivers a message again: how long a
	// batch held by a dead consumer stays stuck. Default 30 s.
	AckWait time.Duration
	// Duplicates is the stream's de-duplication window. Default 10 min.
	Duplicates time.Duration
	// KeepFor is how long reservation states and idempotency keys live
	// after their last write. Zero keeps them forever. It must exceed the
	// longest database outage, or pending states expire before the decision.
	KeepFor time.Duration
	// MaxBacklog caps the messages in the stream; once full, Submit fails
	// with mq.ErrUnavailable instead of dropping older reservations. Zero
	// is unlimited.
	MaxBacklog int64
	// Replicas for the stream and the bucket on a clustered server.
	// Default 1. Above 1 every read goes to the stream leader: a
	// reservation is found right after Submit, and a decided one never
	// reads back pending.
	Replicas int
	// FetchWait is how long an idle consumer's pull waits for messages; it
	// also bounds how long Consume takes to return once ctx ends. Default 1 s.
	FetchWait time.Duration
	// Timeout bounds each call to the server. Default 5 s.
	Timeout time.Duration
	// Logger receives consumer faults. Default: discard.
	Logger *slog.Logger
}

const consumerName = "deciders"

// Log attribute keys.
const (
	logErr     = "err"
	logSubject = "subject"
	logCount   = "count"
	logID      = "reservation"
	logRetry   = "retry_after"
)

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func (o Options) withDefaults() (Options, error) {
	if o.Name == "" {
		o.Name = "usher"
	}
	if !validName.MatchString(o.Name) {
		return o, fmt.Errorf("natsmq: name %q: want letters, digits, '-' and '_'", o.Name)
	}
	if o.AckWait <= 0 {
		o.AckWait = 30 * time.Second
	}
	if o.Duplicates <= 0 {
		o.Duplicates = 10 * time.Minute
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.FetchWait <= 0 {
		o.FetchWait = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// Broker is an mq.Broker on JetStream. It does not own its connection:
// close the nats.Conn after every Consume and Watch has ended.
type Broker struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	kv      jetstream.KeyValue
	stream  string
	subject string // prefix of the publish subjects, ends in "."
	o       Options
	log     *slog.Logger
}

// Open creates the stream and the bucket, or updates their settings, and
// returns a Broker on them. It starts nothing. The consumer is created by
// Consume, whose options bound it.
func Open(ctx context.Context, nc *nats.Conn, o Options) (*Broker, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	b := &Broker{
		nc:      nc,
		stream:  strings.ToUpper(o.Name) + "_RESERVATIONS",
		subject: o.Name + ".reservations.",
		o:       o,
		log:     o.Logger,
	}
	if err := b.ready(); err != nil {
		return nil, b.unavailable("open", err)
	}
	// Each call below gets its own o.Timeout (WithDefaultTimeout, when ctx
	// has no deadline): a replicated stream and bucket created one after
	// the other on a cluster that just started may each take seconds.
	if b.js, err = jetstream.New(nc, jetstream.WithDefaultTimeout(o.Timeout)); err != nil {
		return nil, b.unavailable("open", err)
	}
	backlog, discard := int64(-1), jetstream.DiscardOld
	if o.MaxBacklog > 0 {
		backlog, discard = o.MaxBacklog, jetstream.DiscardNew
	}
	_, err = b.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        b.stream,
		Description: "usher: pending reservations waiting for the database",
		Subjects:    []string{b.subject + ">"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
		Duplicates:  o.Duplicates,
		MaxMsgs:     backlog,
		Discard:     discard,
	})
	if err != nil {
		return nil, b.setupError("open: stream "+b.stream, err)
	}
	b.kv, err = b.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      o.Name + "_reservations",
		Description: "usher: reservation states and idempotency keys",
		History:     1,
		TTL:         o.KeepFor,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	})
	if err != nil {
		return nil, b.setupError("open: bucket "+o.Name+"_reservations", err)
	}
	if o.Replicas > 1 {
		if b.kv, err = b.leaderReads(ctx, o.Name+"_reservations"); err != nil {
			return nil, b.setupError("open: bucket "+o.Name+"_reservations", err)
		}
	}
	return b, nil
}

// leaderReads turns direct gets off on a replicated bucket and returns a
// handle whose reads go to the stream leader. A direct get (the bucket's
// default) may be answered by any replica, also one that has not applied
// the latest write yet: a visitor would not find the reservation Submit
// just recorded, or would see it pending after its decision. Every Open
// of the bucket turns them on again (CreateOrUpdateKeyValue), so it checks
// that the handle was made while they were off.
func (b *Broker) leaderReads(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	for range 3 {
		st, err := b.js.Stream(ctx, "KV_"+bucket)
		if err != nil {
			return nil, err
		}
		if cfg := st.CachedInfo().Config; cfg.AllowDirect {
			cfg.AllowDirect = false
			if _, err := b.js.UpdateStream(ctx, cfg); err != nil {
				return nil, err
			}
		}
		kv, err := b.js.KeyValue(ctx, bucket) // reads the stream's settings
		if err != nil {
			return nil, err
		}
		if st, err = b.js.Stream(ctx, "KV_"+bucket); err != nil {
			return nil, err
		}
		if !st.CachedInfo().Config.AllowDirect {
			return kv, nil
		}
		// Another Open turned them on meanwhile.
	}
	return nil, errors.New("direct gets turned on again by concurrent opens of the bucket")
}

// Submit implements mq.Broker: one reservation per visitor and idempotency
// key. A Submit that fails may have recorded it: the caller must retry with
// the same key, or it stays pending. It ignores r's Status, Reason and
// DecidedAt and records r as pending. A second Submit returns the
// reservation's latest state.
func (b *Broker) Submit(ctx context.Context, r booking.Reservation, idempotencyKey string) (booking.Reservation, bool, error) {
	if r.ID == "" {
		return booking.Reservation{}, false, fmt.Errorf("natsmq: submit: %w: empty reservation id", booking.ErrInvalid)
	}
	if err := b.ready(); err != nil {
		return booking.Reservation{}, false, b.unavailable("submit "+r.ID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	defer cancel()
	r.Status, r.Reason, r.DecidedAt = booking.Pending, "", time.Time{}
	data, err := json.Marshal(r)
	if err != nil {
		return booking.Reservation{}, false, fmt.Errorf("natsmq: submit %s: %w", r.ID, err)
	}
	ikey := idemKey(r.Visitor, idempotencyKey)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		_, err = b.kv.Create(ctx, ikey, data)
		switch {
		case err == nil:
			if err := b.publish(ctx, r, data); err != nil {
				return booking.Reservation{}, false, err
			}
			return r, true, nil
		case !errors.Is(err, jetstream.ErrKeyExists):
			return booking.Reservation{}, false, b.unavailable("submit "+r.ID, err)
		}
		first, created, err := b.resume(ctx, ikey)
		if !errors.Is(err, errKeyGone) {
			return first, created, err
		}
		// The key exists but cannot be read yet: on a cluster, the leader
		// refuses a second create while the first is still being replicated,
		// before it can serve the first one's value. Or the key expired
		// (KeepFor) in between, and the next create wins.
		select {
		case <-ctx.Done():
			return booking.Reservation{}, false, b.unavailable("submit "+r.ID, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// errKeyGone is resume's answer for an idempotency key that a create found
// but a read did not.
var errKeyGone = errors.New("natsmq: idempotency key not readable")

// resume returns the reservation that an earlier Submit recorded under ikey.
// If it is still pending, that Submit may have stopped before its state or
// its message was written: resume writes both again. Both writes are
// idempotent (create-if-absent, and a publication the stream de-duplicates,
// or, after the window, a second delivery that Decide absorbs).
func (b *Broker) resume(ctx context.Context, ikey string) (booking.Reservation, bool, error) {
	e, err := b.kv.Get(ctx, ikey)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return booking.Reservation{}, false, errKeyGone
	}
	if err != nil {
		return booking.Reservation{}, false, b.unavailable("submit: read "+ikey, err)
	}
	var first booking.Reservation
	if err := json.Unmarshal(e.Value(), &first); err != nil {
		return booking.Reservation{}, false, fmt.Errorf("natsmq: submit: decode %s: %w", ikey, err)
	}
	cur, err := b.get(ctx, first.ID)
	switch {
	case errors.Is(err, mq.ErrNotFound) || err == nil && cur.Status == booking.Pending:
		if err := b.publish(ctx, first, e.Value()); err != nil {
			return booking.Reservation{}, false, err
		}
		return first, false, nil
	case err != nil:
		return booking.Reservation{}, false, err
	}
	return cur, false, nil
}

// publish records r as pending unless a state exists (it never overwrites a
// decision) and publishes data, r's pending JSON, waiting for the stream.
func (b *Broker) publish(ctx context.Context, r booking.Reservation, data []byte) error {
	key := stateKey(r.ID)
	if _, err := b.kv.Create(ctx, key, data); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return b.unavailable("submit "+r.ID+": record", err)
	}
	msg := &nats.Msg{Subject: b.subject + strconv.FormatInt(r.ScheduleID, 10), Data: data}
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		_, err := b.js.PublishMsg(ctx, msg, jetstream.WithMsgID(key), jetstream.WithExpectStream(b.stream))
		var apiErr *jetstream.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode != errDuplicateInProcess {
			if err != nil {
				return b.unavailable("submit "+r.ID+": publish", err)
			}
			return nil
		}
		// A concurrent publication of the same message is being replicated
		// (a cluster): the stream will either keep it, and this one is then
		// a duplicate, or refuse it, and this one goes in. Ask again.
		select {
		case <-ctx.Done():
			return b.unavailable("submit "+r.ID+": publish", err)
		case <-time.After(wait):
		}
	}
}

// errDuplicateInProcess is JetStream's answer to a publication whose
// Nats-Msg-Id another publication is still proposing to the stream's peers.
const errDuplicateInProcess jetstream.ErrorCode = 10158

// Lookup implements mq.Broker.
func (b *Broker) Lookup(ctx context.Context, visitor, key string) (booking.Reservation, error) {
	if err := b.ready(); err != nil {
		return booking.Reservation{}, b.unavailable("lookup", err)
	}
	ctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	defer cancel()
	r, _, err := b.resume(ctx, idemKey(visitor, key))
	if errors.Is(err, errKeyGone) { // never submitted, or expired (KeepFor)
		return booking.Reservation{}, fmt.Errorf("natsmq: lookup: %w", mq.ErrNotFound)
	}
	return r, err
}

// Get implements mq.Broker.
func (b *Broker) Get(ctx context.Context, id string) (booking.Reservation, error) {
	if err := b.ready(); err != nil {
		return booking.Reservation{}, b.unavailable("get "+id, err)
	}
	ctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	defer cancel()
	return b.get(ctx, id)
}

func (b *Broker) get(ctx context.Context, id string) (booking.Reservation, error) {
	if id == "" {
		return booking.Reservation{}, fmt.Errorf("natsmq: get: empty id: %w", mq.ErrNotFound)
	}
	e, err := b.kv.Get(ctx, stateKey(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return booking.Reservation{}, fmt.Errorf("natsmq: get %s: %w", id, mq.ErrNotFound)
	}
	if err != nil {
		return booking.Reservation{}, b.unavailable("get "+id, err)
	}
	return decodeState(id, e.Value())
}

// Watch implements mq.Broker, with one ephemeral consumer on the server
// per call. An unknown id is mq.ErrNotFound. The channel
// also closes, undecided, if the reservation's state is deleted (KeepFor)
// or the connection is lost for good; the caller then calls Get.
func (b *Broker) Watch(ctx context.Context, id string) (<-chan booking.Reservation, error) {
	if id == "" {
		return nil, fmt.Errorf("natsmq: watch: empty id: %w", mq.ErrNotFound)
	}
	if err := b.ready(); err != nil {
		return nil, b.unavailable("watch "+id, err)
	}
	w, err := b.kv.Watch(ctx, stateKey(id))
	if err != nil {
		return nil, b.unavailable("watch "+id, err)
	}
	// The watcher sends the current value, if any, then nil.
	timer := time.NewTimer(b.o.Timeout)
	defer timer.Stop()
	var e jetstream.KeyValueEntry
	select {
	case e = <-w.Updates():
	case <-timer.C:
		err = context.DeadlineExceeded
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		w.Stop()
		return nil, b.unavailable("watch "+id, err)
	}
	if e == nil {
		// No value yet where the watcher's consumer runs: on a cluster
		// that may be a replica behind the leader, so ask the leader.
		gctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
		e, err = b.kv.Get(gctx, stateKey(id))
		cancel()
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
			w.Stop()
			return nil, fmt.Errorf("natsmq: watch %s: %w", id, mq.ErrNotFound)
		case err != nil:
			w.Stop()
			return nil, b.unavailable("watch "+id, err)
		}
	}
	if e.Operation() != jetstream.KeyValuePut {
		w.Stop()
		return nil, fmt.Errorf("natsmq: watch %s: %w", id, mq.ErrNotFound)
	}
	first, err := decodeState(id, e.Value())
	if err != nil {
		w.Stop()
		return nil, err
	}
	out := make(chan booking.Reservation, 1)
	out <- first
	if decided(first) {
		w.Stop()
		close(out)
		return out, nil
	}
	seen := e.Revision() // the watcher sends it too if it came from the leader
	go func() {
		defer close(out)
		defer w.Stop()
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil || e.Revision() <= seen {
					continue
				}
				seen = e.Revision()
				if e.Operation() != jetstream.KeyValuePut {
					return
				}
				r, err := decodeState(id, e.Value())
				if err != nil {
					b.log.Error("watch: undecodable state", logID, id, logErr, err)
					return
				}
				select {
				case out <- r:
				case <-ctx.Done():
					return
				}
				if decided(r) {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func decided(r booking.Reservation) bool {
	return r.Status == booking.Confirmed || r.Status == booking.Rejected
}

func decodeState(id string, data []byte) (booking.Reservation, error) {
	var r booking.Reservation
	if err := json.Unmarshal(data, &r); err != nil {
		return booking.Reservation{}, fmt.Errorf("natsmq: decode state of %s: %w", id, err)
	}
	return r, nil
}

// ready fails at once when the connection is down: a request would
// otherwise sit in the reconnect buffer until its deadline.
func (b *Broker) ready() error {
	if b.nc == nil {
		return errors.New("no connection")
	}
	if !b.nc.IsConnected() {
		return fmt.Errorf("connection %s", b.nc.Status())
	}
	return nil
}

// unavailable wraps a failure to reach the broker, keeping its cause (and a
// context error) in the chain.
func (b *Broker) unavailable(op string, err error) error {
	return fmt.Errorf("natsmq: %s: %w: %w", op, mq.ErrUnavailable, err)
}

// setupError classifies a failure to create the stream or the bucket: the
// server answered with an API error (a conflicting configuration, retrying
// will not help) or it could not be reached.
func (b *Broker) setupError(op string, err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode != jetstream.JSErrCodeJetStreamNotEnabled &&
		apiErr.ErrorCode != jetstream.JSErrCodeJetStreamNotEnabledForAccount {
		return fmt.Errorf("natsmq: %s: %w", op, err)
	}
	return b.unavailable(op, err)
}

// plainID matches ids that are used as they are in keys.
var plainID = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// stateKey is the bucket key of a reservation's state, also its message id.
func stateKey(id string) string {
	if plainID.MatchString(id) {
		return "res." + id
	}
	return "res64." + base64.RawURLEncoding.EncodeToString([]byte(id))
}

// idemKey is the bucket key of (visitor, key): a hash, so any strings fit,
// with the visitor's length in front so that no two pairs share an input.
func idemKey(visitor, key string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s%s", len(visitor), visitor, key)
	return "idem." + hex.EncodeToString(h.Sum(nil))
}
