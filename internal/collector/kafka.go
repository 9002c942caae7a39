package collector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"usher/internal/analytics"
	"usher/internal/event"
)

// KafkaOpts are the client options NewKafka's client must be made with:
// the consumer group <Prefix>.<Durable> on event.Topic(Prefix), read from
// the start on its first run, offsets committed by the collector alone,
// and no rebalance while a polled batch is being counted.
func KafkaOpts(o Options) []kgo.Opt {
	o = o.withDefaults()
	return []kgo.Opt{
		kgo.ConsumerGroup(o.Prefix + "." + o.Durable),
		kgo.ConsumeTopics(event.Topic(o.Prefix)),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(o.FetchWait),
	}
}

// NewKafka returns a collector on cl, a client made with KafkaOpts(o)
// (which it does not own: close it after Run returned). It starts nothing.
func NewKafka(cl *kgo.Client, a *analytics.Analytics, o Options) (*Collector, error) {
	if cl == nil {
		return nil, errors.New("collector: want a Kafka client")
	}
	c, err := newCollector(a, o)
	if err != nil {
		return nil, err
	}
	c.kc = cl
	return c, nil
}

// errClientClosed is Run's error when the Kafka client closed under it.
var errClientClosed = errors.New("collector: kafka client closed")

// runKafka polls batches, counts each, then commits its offsets, until ctx
// ends. A batch that fails is counted again after RetryAfter, with the
// partitions held; when ctx ends first its offsets stay uncommitted, so
// the group's next consumer reads it again (the IDs drop what was
// counted). A failed commit is logged: the events come again and count
// nothing.
func (c *Collector) runKafka(ctx context.Context) error {
	defer c.kc.AllowRebalance()
	c.log.Info("collect: consuming", "topic", event.Topic(c.o.Prefix), "group", c.o.Prefix+"."+c.o.Durable)
	nextPrune := time.Time{}
	lag := map[int32]int64{}
	for ctx.Err() == nil {
		if now := time.Now(); now.After(nextPrune) {
			nextPrune = now.Add(c.o.PruneEvery)
			pctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
			if err := c.a.Prune(pctx); err != nil {
				c.log.Warn("collect: prune", logErr, err)
			}
			cancel()
		}
		// A quiet topic returns after FetchWait, so that pruning and
		// shutdown do not wait on the next event.
		pctx, cancel := context.WithTimeout(ctx, c.o.FetchWait)
		fs := c.kc.PollRecords(pctx, c.o.Batch)
		cancel()
		if fs.IsClientClosed() {
			return errClientClosed
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				c.log.Warn("collect: fetch", "topic", topic, "partition", p, logErr, err)
			}
		})
		recs := fs.Records()
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if n := len(p.Records); n > 0 {
				lag[p.Partition] = max(0, p.HighWatermark-p.Records[n-1].Offset-1)
			}
		})
		var pending int64
		for _, n := range lag {
			pending += n
		}
		c.pending.Set(float64(pending))
		if len(recs) == 0 {
			c.kc.AllowRebalance()
			continue
		}
		if !c.countKafka(ctx, recs) {
			return nil // ctx ended before the batch counted: not committed
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.o.Timeout)
		if err := c.kc.CommitRecords(cctx, recs...); err != nil {
			c.log.Warn("collect: commit (the events come again and count nothing)", logCount, len(recs), logErr, err)
		}
		cancel()
		c.kc.AllowRebalance()
	}
	return nil
}

// countKafka counts recs' events until it succeeds, or reports false
// when ctx ends first.
func (c *Collector) countKafka(ctx context.Context, recs []*kgo.Record) bool {
	evs := make([]event.Event, 0, len(recs))
	for _, r := range recs {
		if e, ok := c.decode(r.Value, "record", fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)); ok {
			evs = append(evs, e)
		}
	}
	for len(evs) > 0 {
		err := c.apply(ctx, evs)
		if err == nil {
			break
		}
		c.log.Warn("collect: batch failed, counted again later", logCount, len(evs), logErr, err)
		sleep(ctx, c.o.RetryAfter)
		if ctx.Err() != nil {
			return false
		}
	}
	return true
}
