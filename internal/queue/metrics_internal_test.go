package queue

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestPolledCounts: the cached counters are the registered series.
func TestPolledCounts(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	for range 3 {
		m.polled("r", true)
	}
	m.polled("r", false)
	m.polled("s", true)
	for _, tc := range []struct {
		room, answer string
		want         float64
	}{{"r", "estimated", 3}, {"r", "exact", 1}, {"s", "estimated", 1}, {"s", "exact", 0}} {
		var got dto.Metric
		if err := m.polls.WithLabelValues(tc.room, tc.answer).Write(&got); err != nil || got.GetCounter().GetValue() != tc.want {
			t.Errorf("usher_polls_total{room=%q,answer=%q} = %v (%v), want %v", tc.room, tc.answer, got.GetCounter().GetValue(), err, tc.want)
		}
	}
}

// BenchmarkPolled: a status poll's counter, cached per room, against the
// WithLabelValues it replaced.
func BenchmarkPolled(b *testing.B) {
	m := NewMetrics(prometheus.NewRegistry())
	b.Run("cached", func(b *testing.B) {
		for range b.N {
			m.polled("schedule-12345", true)
		}
	})
	b.Run("with-label-values", func(b *testing.B) {
		for range b.N {
			m.polls.WithLabelValues("schedule-12345", "estimated").Inc()
		}
	})
}
