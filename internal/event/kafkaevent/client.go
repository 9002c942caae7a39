package kafkaevent

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ParseURL returns the brokers of a kafka://host:port[,host:port…] URL
// (the port defaults to 9092).
func ParseURL(spec string) ([]string, error) {
	rest, ok := strings.CutPrefix(spec, "kafka://")
	if !ok || rest == "" {
		return nil, fmt.Errorf("kafkaevent: %q: want kafka://host:port[,host:port…]", spec)
	}
	var brokers []string
	for _, b := range strings.Split(strings.TrimSuffix(rest, "/"), ",") {
		host, port, err := net.SplitHostPort(b)
		if err != nil {
			host, port = b, "9092"
		}
		if host == "" || strings.ContainsAny(host, "/?#@") || port == "" {
			return nil, fmt.Errorf("kafkaevent: %q: broker %q: want host:port", spec, b)
		}
		brokers = append(brokers, net.JoinHostPort(host, port))
	}
	return brokers, nil
}

// DeliveryTimeout is how long the client keeps trying a record before it
// fails it: a broker outage cannot hold records in the client for ever
// (the Publisher has counted them as failed after its Timeout already).
const DeliveryTimeout = time.Minute

// Connect returns a client of the brokers, with opts, once one of them
// answered (a clear error when none does before ctx ends). The client
// produces idempotently (franz-go's default: a retried batch is not
// written twice, and a partition keeps its order) and gives a record up
// after DeliveryTimeout.
func Connect(ctx context.Context, brokers []string, name string, opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID(name), kgo.RecordDeliveryTimeout(DeliveryTimeout)}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafkaevent: %w", err)
	}
	if err := cl.Ping(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafkaevent: no broker of %s answers: %w", strings.Join(brokers, ","), err)
	}
	return cl, nil
}
