package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/hold"
	"usher/internal/queue"
	"usher/internal/testenv"
)

// TestClusterReshard moves the slots of the room and of the hold scope in
// use between the primaries of a Redis Cluster of its own
// (testenv.StartCluster: CI's shared cluster is not disturbed) while
// visitors enter, poll, are admitted, hold seats and leave through the
// stores that fastStores builds from the cluster URL, with the store
// deadline usher serves with. The room and the scope are named so that
// their slots are among the lowest: three times, `redis-cli --cluster
// reshard` moves the sixteen lowest slots of their primary to the next one.
// Then each slot moves twenty times more by hand, ten keys per
// MIGRATE (redis-cli's default --cluster-pipeline); while a slot is half
// moved the source answers ASK for the keys already gone, the target
// TRYAGAIN for a script (every script declares a key that is on neither:
// the stores' guard key), and after each move the old owner answers MOVED.
//
// It asserts: no acknowledged write is lost (the client-side log of
// TestSentinelFailover, checked against the store after the moves); the
// store never counts more than max_active active visitors; no seat is
// under two live holds; every failed call is unavailable (503), never
// another error; and the clients followed redirections, from the servers'
// own counters (INFO errorstats: MOVED and ASK replies sent; INFO
// commandstats: ASKING received). It logs the calls that failed, the
// TRYAGAIN replies the stores retried, and the keys moved, as one record
// for docs/benchmarks.md.
func TestClusterReshard(t *testing.T) {
	t.Parallel()
	cl := testenv.StartCluster(t, 3)
	var closers closers
	t.Cleanup(func() { closers.Close() })
	ctx := context.Background()
	qs, hs := openQueueHold(t, cl.URL, "usher:", &closers)
	qs = queue.WithTimeout(qs, queue.DefaultStoreTimeout)
	hs = hold.WithTimeout(hs, queue.DefaultStoreTimeout)

	const seats, workers, moves, reshards, low = 20000, 32, 20, 3, 16
	admin := clusterClient(t, cl.URL)
	// A room and a scope among the lowest slots, which redis-cli's reshard
	// moves first.
	room, scope := lowSlotName(t, admin, "usher:{sale-%d}:meta", low), lowSlotName(t, admin, "usher:hold:{show-%d}:stock", low)
	set := queue.DefaultSettings()
	set.MaxActive = 20
	set.AdmitRate = 1000
	set.ActiveTTL = 10 * time.Minute // nothing lapses during the test
	set.ClaimWindow = 10 * time.Minute
	set.PresenceTimeout = 0
	if err := set.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := qs.PutRoom(ctx, room, set, queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := hs.SetStock(ctx, scope, 1); err != nil { // the scope's stock key, so its slot has a key from the start
		t.Fatal(err)
	}
	slots := []int{keySlot(t, admin, "usher:{"+room+"}:meta"), keySlot(t, admin, "usher:hold:{"+scope+"}:stock")}

	l := newFailoverLog()
	steps := storeHolds(hs, scope, seats)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { l.admitter(qs, room, stop) })
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				l.visit(qs, room, steps, fmt.Sprintf("w%d-%d", w, i), stop)
			}
		})
	}
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	t.Cleanup(halt)

	testenv.Eventually(t, time.Minute, "100 holds before the moves", func() bool { return l.count(func() int { return len(l.holds) }) >= 100 })
	before := serverCounters(t, cl)
	l.kill() // the log counts calls from here on
	// First redis-cli itself: each reshard moves the source's lowest slots,
	// the two in use among them, to the next primary.
	start := time.Now()
	for range reshards {
		from, err := cl.Owner(0)
		if err != nil {
			t.Fatal(err)
		}
		to := cl.Addrs[(indexOf(cl.Addrs, from)+1)%len(cl.Addrs)]
		if err := cl.Reshard(from, to, low); err != nil {
			t.Fatal(err)
		}
		for _, slot := range slots {
			if owner, err := cl.Owner(slot); err != nil || owner != to {
				t.Fatalf("after redis-cli reshard %d slots from %s to %s, slot %d is on %s (%v)", low, from, to, slot, owner, err)
			}
		}
	}
	resharding := time.Since(start)
	// Then by hand, one slot at a time, as often as the test likes.
	keysMoved := 0
	start = time.Now()
	for i := range moves {
		for _, slot := range slots {
			from, err := cl.Owner(slot)
			if err != nil {
				t.Fatal(err)
			}
			to := cl.Addrs[(indexOf(cl.Addrs, from)+1+i%2)%len(cl.Addrs)]
			n, err := cl.MoveSlot(slot, from, to, 10)
			if err != nil {
				t.Fatalf("move slot %d from %s to %s: %v", slot, from, to, err)
			}
			keysMoved += n
		}
	}
	moving := time.Since(start)
	after := l.count(func() int { return len(l.holds) })
	testenv.Eventually(t, time.Minute, "100 more holds after the moves", func() bool { return l.count(func() int { return len(l.holds) }) >= after+100 })
	halt()
	counters := serverCounters(t, cl).minus(before)

	r := l.check(t, qs, hs, room, scope)
	for _, err := range l.unexpected {
		t.Errorf("a call failed with something other than unavailable (503): %v", err)
	}
	if l.storeMaxActive > set.MaxActive {
		t.Errorf("the store counted %d active visitors, max_active is %d", l.storeMaxActive, set.MaxActive)
	}
	lost := r.lostEnters + r.lostAdmissions + r.lostHolds + r.lostLeaves
	if lost > 0 {
		t.Errorf("acknowledged writes lost: %d enters, %d admissions, %d holds, %d leaves", r.lostEnters, r.lostAdmissions, r.lostHolds, r.lostLeaves)
	}
	if r.seatsDoublyHeld > 0 || r.seatsAckedTwice > 0 {
		t.Errorf("%d seats under two live holds, %d acknowledged to two visitors", r.seatsDoublyHeld, r.seatsAckedTwice)
	}
	if counters["errorstat_MOVED"] == 0 || counters["errorstat_ASK"] == 0 || counters["cmdstat_asking"] == 0 {
		t.Errorf("the servers sent %d MOVED and %d ASK replies and received %d ASKING: the moves did not exercise the redirections",
			counters["errorstat_MOVED"], counters["errorstat_ASK"], counters["cmdstat_asking"])
	}
	errs := map[string]int64{}
	for k, v := range counters {
		if code, ok := strings.CutPrefix(k, "errorstat_"); ok && v > 0 {
			errs[code] = v
		}
	}
	for k, v := range l.samples {
		t.Logf("failed call %s: %s", k, v)
	}
	t.Logf("error replies the servers sent during and after the moves, by code: %v", errs)
	t.Logf("redis-cli resharded %d slots %d times in %.2fs, then moved slots %v %d times each (%d keys, ten per MIGRATE) in %.2fs; calls during and after the moves: %v",
		low, reshards, resharding.Seconds(), slots, moves, keysMoved, moving.Seconds(), l.calls)
	t.Logf("BenchmarkClusterReshard reshards %d resharding_s %.2f moves %d keys_moved %d moving_s %.2f acked_enters %d acked_admissions %d acked_holds %d acked_leaves %d "+
		"lost %d failed_calls %d moved_replies %d ask_replies %d asking %d tryagain_replies %d max_active %d store_max_active %d",
		reshards, resharding.Seconds(), moves*len(slots), keysMoved, moving.Seconds(), len(l.entered), len(l.admitted), len(l.holds), len(l.left),
		lost, l.failed, counters["errorstat_MOVED"], counters["errorstat_ASK"], counters["cmdstat_asking"],
		counters["errorstat_TRYAGAIN"], set.MaxActive, l.storeMaxActive)
}

// clusterClient connects to the cluster at url for the test's own
// commands.
func clusterClient(tb testing.TB, url string) rueidis.Client {
	tb.Helper()
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		tb.Fatal(err)
	}
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

func keySlot(tb testing.TB, c rueidis.Client, key string) int {
	tb.Helper()
	n, err := c.Do(context.Background(), c.B().ClusterKeyslot().Key(key).Build()).AsInt64()
	if err != nil {
		tb.Fatal(err)
	}
	return int(n)
}

// lowSlotName returns the first fmt.Sprintf(format, i) … name whose key,
// format with i, is in a slot below low: the name is what %d becomes
// inside the key's hash tag.
func lowSlotName(tb testing.TB, c rueidis.Client, format string, low int) string {
	tb.Helper()
	for i := range 1_000_000 {
		if keySlot(tb, c, fmt.Sprintf(format, i)) < low {
			key := fmt.Sprintf(format, i)
			return key[strings.Index(key, "{")+1 : strings.Index(key, "}")]
		}
	}
	tb.Fatalf("no name of %q in a slot below %d", format, low)
	return ""
}

func indexOf(s []string, v string) int {
	for i := range s {
		if s[i] == v {
			return i
		}
	}
	return -1
}

// counters are servers' INFO counters summed over the nodes:
// errorstat_<CODE> (error replies sent, by code) and cmdstat_<command>
// (calls received).
type counters map[string]int64

// serverCounters reads INFO errorstats and INFO commandstats on every
// node of cl.
func serverCounters(tb testing.TB, cl *testenv.Cluster) counters {
	tb.Helper()
	sum := counters{}
	for _, addr := range cl.Addrs {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true,
			Dialer: net.Dialer{Timeout: time.Second}})
		if err != nil {
			tb.Fatal(err)
		}
		for _, section := range []string{"errorstats", "commandstats"} {
			text, err := c.Do(context.Background(), c.B().Info().Section(section).Build()).ToString()
			if err != nil {
				c.Close()
				tb.Fatal(err)
			}
			for _, line := range strings.Split(text, "\n") {
				// errorstat_MOVED:count=3 or cmdstat_asking:calls=5,usec=…
				name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
				if !ok {
					continue
				}
				for _, kv := range strings.Split(rest, ",") {
					k, v, _ := strings.Cut(kv, "=")
					if k == "count" || k == "calls" {
						n, _ := strconv.ParseInt(v, 10, 64)
						sum[name] += n
					}
				}
			}
		}
		c.Close()
	}
	return sum
}

// minus returns c less an earlier reading.
func (c counters) minus(earlier counters) counters {
	out := counters{}
	for k, v := range c {
		out[k] = v - earlier[k]
	}
	return out
}
