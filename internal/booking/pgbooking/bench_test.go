package pgbooking_test

import (
	"testing"

	"usher/internal/booking/bookingtest"
	"usher/internal/booking/pgbooking"
	"usher/internal/testenv"
)

// Shape of BenchmarkConfirmThroughput; scripts/bench-pg.sh runs pgbench
// with the same number of connections.
const (
	benchConns = 10
	benchBatch = 100
)

// BenchmarkConfirmThroughput sells b.N seats of a fresh schedule, one
// one-seat reservation each, in random seat order, through Decide: a pool
// of benchConns connections, benchConns callers, benchBatch reservations
// per call. It reports confirmations/s, the figure scripts/bench-pg.sh
// compares with pgbench running the bare conditional UPDATE, one per
// transaction, on as many connections.
func BenchmarkConfirmThroughput(b *testing.B) {
	s := open(b, testenv.PostgresSchema(b), benchConns)
	bookingtest.ConfirmThroughput(b, s, benchConns, benchBatch)
}

// BenchmarkConfirmThroughputPipeline is BenchmarkConfirmThroughput with the
// set path off: the throughput of a batch whose reservations compete for
// seats among themselves (one statement per reservation).
func BenchmarkConfirmThroughputPipeline(b *testing.B) {
	s := open(b, testenv.PostgresSchema(b), benchConns)
	pgbooking.PipelineOnly(s)
	bookingtest.ConfirmThroughput(b, s, benchConns, benchBatch)
}
