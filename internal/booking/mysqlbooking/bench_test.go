package mysqlbooking_test

import (
	"testing"

	"usher/internal/booking/bookingtest"
	"usher/internal/testenv"
)

// Shape of BenchmarkConfirmThroughput; scripts/bench-mysql.sh runs
// mysqlslap with the same number of connections.
const (
	benchConns = 10
	benchBatch = 100
)

// BenchmarkConfirmThroughput sells b.N seats of a fresh schedule, one
// one-seat reservation each, in random seat order, through Decide: a pool
// of benchConns connections, benchConns callers, benchBatch reservations
// per call. It reports confirmations/s, the figure scripts/bench-mysql.sh
// compares with mysqlslap running the bare conditional UPDATE, one per
// transaction, on as many connections.
func BenchmarkConfirmThroughput(b *testing.B) {
	s := open(b, testenv.MySQLDatabase(b), benchConns)
	bookingtest.ConfirmThroughput(b, s, benchConns, benchBatch)
}
