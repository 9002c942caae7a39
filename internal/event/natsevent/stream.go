// Package natsevent carries usher's events (package event) over NATS
// JetStream: the event stream (EnsureStream), the Publisher that the queue,
// the holds and the settings hand their events to, and the Relay that
// publishes the booking outbox. Every message is one event's JSON on
// event.Subject, with Nats-Msg-Id set to its ID.
//
// Limits: the Publisher is best effort (an event it cannot publish is
// dropped, counted and logged; only counted events are tried again); the
// Relay is at least once (the stream's duplicate window and the collector
// drop the copies). See docs/architecture.md#events.
package natsevent

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"usher/internal/event"
)

// The event stream's fixed settings (docs/operations.md#the-event-stream).
const (
	// StreamMaxAge is how long the stream keeps an event: a week, so that a
	// collector down over a weekend catches up, and the console can show
	// last week's timeline. At about 300 bytes an event, a sale of a
	// million visitors (entered, admitted, left: three events each) is
	// about 1 GB.
	StreamMaxAge = 7 * 24 * time.Hour
	// StreamDuplicates is the stream's de-duplication window: a
	// publication with a Nats-Msg-Id seen this recently is dropped. It
	// must exceed the relay's retry horizon (a relay that restarts within
	// it republishes nothing twice; after it, the collector's idempotence
	// still counts an event once). The server keeps every ID of the window
	// in memory: at 1,000 events/s, 600,000 IDs.
	StreamDuplicates = 10 * time.Minute
)

var validPrefix = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// EnsureStream creates the event stream of the deployment named prefix
// (--nats-name) or updates its settings, with replicas (--nats-replicas),
// and returns it. It is idempotent: the publishers and the collector all
// call it at start. File storage, limits retention (events stay for
// StreamMaxAge whoever read them; the oldest go first), StreamDuplicates,
// and on one replica the asynchronous persist mode: the server acknowledges
// an event before its write reaches the disk, so a crash of the server (on
// the embedded default, of the usher process) may lose the events of the
// last few milliseconds, outbox events the relay already marked sent
// included. Servers before 2.12 ignore the setting and fsync as configured.
func EnsureStream(ctx context.Context, js jetstream.JetStream, prefix string, replicas int) (jetstream.Stream, error) {
	if !validPrefix.MatchString(prefix) {
		return nil, fmt.Errorf("natsevent: stream: name %q: want letters, digits, '-' and '_'", prefix)
	}
	if replicas <= 0 {
		replicas = 1
	}
	name := event.StreamName(prefix)
	cfg := jetstream.StreamConfig{
		Name:        name,
		Description: "usher: events (entered, admitted, holds, reservations, settings) for the collector and the console",
		Subjects:    []string{event.SubjectFilter(prefix)},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		MaxAge:      StreamMaxAge,
		Duplicates:  StreamDuplicates,
	}
	if replicas == 1 {
		// One node: acknowledge before the fsync (the embedded server
		// fsyncs every write otherwise, for the reservations: about 24
		// times fewer events a second, BenchmarkStreamPersist). A
		// replicated stream is durable through its replicas instead.
		cfg.PersistMode = jetstream.AsyncPersistMode
	}
	st, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("natsevent: stream %s: %w", name, err)
	}
	return st, nil
}

// validToken reports whether s can be one token of a subject: not empty,
// none of NATS's separators or wildcards. Room IDs always are
// ([a-z0-9-]); the check keeps a malformed row from poisoning a batch.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.' || c == '*' || c == '>' || c <= ' ' || c == 0x7f:
			return false
		}
	}
	return true
}

// errInvalid marks an event that can never be published (no room, or a
// room that is not a subject token).
var errInvalid = errors.New("natsevent: event without a valid room or type")

// message returns e's subject and JSON.
func message(prefix string, e event.Event) (string, []byte, error) {
	if !validToken(e.Room) || !validToken(string(e.Type)) || e.ID == "" {
		return "", nil, errInvalid
	}
	data, err := jsonEvent(e)
	if err != nil {
		return "", nil, err
	}
	return event.Subject(prefix, e.Room, e.Type), data, nil
}
