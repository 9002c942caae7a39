package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka starts franz-go's in-process Kafka cluster (kfake: no Apache Kafka
// is packaged for the test machines), closed when the test ends, and
// returns its kafka:// URL and the cluster.
func Kafka(tb testing.TB, opts ...kfake.Opt) (string, *kfake.Cluster) {
	tb.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		tb.Fatalf("kfake: %v", err)
	}
	tb.Cleanup(c.Close)
	u := "kafka://"
	for i, a := range c.ListenAddrs() {
		if i > 0 {
			u += ","
		}
		u += a
	}
	return u, c
}

// ReadTopic returns every record of topic on the cluster of addrs: the
// partitions in turn, each in its order, up to the end offsets it found
// first.
func ReadTopic(tb testing.TB, addrs []string, topic string) []*kgo.Record {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		tb.Fatal(err)
	}
	defer admin.Close()
	ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		tb.Fatalf("end offsets of %s: %v", topic, err)
	}
	want := map[int32]int64{}
	parts := map[int32]kgo.Offset{}
	total := 0
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			parts[o.Partition] = kgo.NewOffset().At(0)
			total += int(o.Offset)
		}
	})
	if total == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	byPart := map[int32][]*kgo.Record{}
	for n := 0; n < total; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			tb.Fatalf("read %s: %d of %d records: %v", topic, n, total, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { tb.Fatalf("read %s: %v", topic, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < want[r.Partition] {
				byPart[r.Partition] = append(byPart[r.Partition], r)
				n++
			}
		})
	}
	var out []*kgo.Record
	for p := range int32(len(ends[topic]) + 1) {
		out = append(out, byPart[p]...)
	}
	return out
}
