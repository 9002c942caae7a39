// Package kafkaevent carries usher's events (package event) over Kafka: the
// topic (EnsureTopic), the Publisher that the queue, the holds and the
// settings hand their events to, and the Relay that publishes the booking
// outbox. Every record is one event's JSON on event.Topic, keyed by its
// room, so a room's events keep their order in one partition.
//
// Limits: the Publisher is best effort, as natsevent's is (an event it
// cannot publish is dropped, counted and logged; only counted events are
// tried again); the Relay is at least once. Kafka keeps every copy of a
// re-published event: consumers de-duplicate on the event's ID. Tested
// against franz-go's in-process kfake cluster only, not Apache Kafka.
package kafkaevent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"usher/internal/event"
)

// The topic's settings when EnsureTopic creates it; an existing topic is
// used as it is.
const (
	// Partitions bounds how many collectors share the work (one
	// partition each at least).
	Partitions = 12
	// Retention is how long the topic keeps an event: a week, as the NATS
	// stream does (natsevent.StreamMaxAge).
	Retention = 7 * 24 * time.Hour
)

// EnsureTopic creates the event topic of the deployment named prefix with
// Partitions partitions, the cluster's default replication factor and
// Retention, unless it exists. It fails when no broker answers before ctx
// ends.
func EnsureTopic(ctx context.Context, cl *kgo.Client, prefix string) error {
	topic := event.Topic(prefix)
	req := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = topic
	t.NumPartitions = Partitions
	t.ReplicationFactor = -1
	c := kmsg.NewCreateTopicsRequestTopicConfig()
	c.Name = "retention.ms"
	c.Value = kmsg.StringPtr(strconv.FormatInt(Retention.Milliseconds(), 10))
	t.Configs = append(t.Configs, c)
	req.Topics = append(req.Topics, t)
	req.TimeoutMillis = 10_000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("kafkaevent: topic %s: %w", topic, err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("kafkaevent: topic %s: %d topics in the answer", topic, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("kafkaevent: topic %s: %w", topic, err)
	}
	return nil
}

// errInvalid marks an event that can never be published (no ID, room or
// type).
var errInvalid = errors.New("kafkaevent: event without an ID, a room or a type")

// record returns e as a record of prefix's topic.
func record(prefix string, e event.Event) (*kgo.Record, error) {
	if e.ID == "" || e.Room == "" || e.Type == "" {
		return nil, errInvalid
	}
	data, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: event.Topic(prefix), Key: []byte(e.Room), Value: data}, nil
}

// produce publishes recs and waits, for at most timeout (or until ctx ends),
// for the brokers' acknowledgements; acked tells, per record, whether they
// came. Records still on their way when it returns are not waited for:
// their late outcome is ignored (a counted event may then be published
// twice; the consumers drop the copy by its ID).
func produce(ctx context.Context, cl *kgo.Client, recs []*kgo.Record, timeout time.Duration) (acked []bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		i   int
		err error
	}
	ch := make(chan result, len(recs))
	for i, r := range recs {
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) { ch <- result{i, err} })
	}
	acked = make([]bool, len(recs))
	for range recs {
		select {
		case r := <-ch:
			if r.err == nil {
				acked[r.i] = true
			} else {
				err = r.err
			}
		case <-ctx.Done():
			return acked, fmt.Errorf("kafkaevent: produce: %w", ctx.Err())
		}
	}
	if err != nil {
		err = fmt.Errorf("kafkaevent: produce: %w", err)
	}
	return acked, err
}
