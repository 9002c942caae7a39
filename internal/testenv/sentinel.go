package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// SentinelSet is the master set name of StartSentinel's topology.
const SentinelSet = "usher"

// Sentinel is a Redis Sentinel topology of a test's own on loopback: a
// primary, one replica and three sentinels, each a redis-server process
// this test started (so a test may kill one). Like scripts/sentinel.sh,
// which serves USHER_TEST_REDIS_SENTINEL, it detects a dead primary after
// one second (down-after-milliseconds 1000) and has no persistence.
type Sentinel struct {
	// URL reaches the primary through the sentinels (redisqueue.Open).
	URL string
	// Primary and Replica are the data servers, as started: after a
	// failover the replica is the primary.
	Primary, Replica *exec.Cmd
	// PrimaryAddr and ReplicaAddr are their host:port.
	PrimaryAddr, ReplicaAddr string
	sentinels                []string
}

// StartSentinel starts the topology on free ports and waits until the
// replica has finished its first sync and the sentinels know the replica
// and each other (a failover needs all three). It skips without
// redis-server, but fails under CI. Every process is killed when the test
// ends.
//
// The wait for the sync matters: the sentinels count a replica as soon as
// the primary lists it, before it has any data, and promote it all the
// same. A primary killed in that window (Redis 7 delays a diskless first
// sync by repl-diskless-sync-delay, 5 s by default; the primary here uses
// 0) fails over to an empty replica, and every room is gone.
func StartSentinel(tb testing.TB) *Sentinel {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Skip(tb, "redis-server", "install redis-server (apt-get install redis-server)")
	}
	dir := tb.TempDir()
	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		dieWithTest(cmd)
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	s := &Sentinel{PrimaryAddr: ClosedAddr(tb), ReplicaAddr: ClosedAddr(tb)}
	data := func(addr string, extra ...string) *exec.Cmd {
		host, port, _ := net.SplitHostPort(addr)
		return start(append([]string{"--port", port, "--bind", host, "--save", "", "--appendonly", "no",
			"--dir", dir, "--dbfilename", "dump-" + port + ".rdb"}, extra...)...)
	}
	s.Primary = data(s.PrimaryAddr, "--repl-diskless-sync-delay", "0")
	phost, pport, _ := net.SplitHostPort(s.PrimaryAddr)
	s.Replica = data(s.ReplicaAddr, "--replicaof", phost, pport)
	for range 3 {
		addr := ClosedAddr(tb)
		host, port, _ := net.SplitHostPort(addr)
		// A sentinel rewrites its config file: each gets one of its own.
		conf := filepath.Join(dir, "sentinel-"+port+".conf")
		text := fmt.Sprintf("port %s\nbind %s\ndir %s\n"+
			"sentinel monitor %s %s %s 2\n"+
			"sentinel down-after-milliseconds %[4]s 1000\n"+
			"sentinel failover-timeout %[4]s 5000\n"+
			"sentinel parallel-syncs %[4]s 1\n", port, host, dir, SentinelSet, phost, pport)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			tb.Fatal(err)
		}
		start(conf, "--sentinel")
		s.sentinels = append(s.sentinels, addr)
	}
	s.URL = "redis://" + s.sentinels[0] + "/0?addr=" + s.sentinels[1] + "&addr=" + s.sentinels[2] + "&master_set=" + SentinelSet
	Eventually(tb, time.Minute, "the replica to finish its first sync", func() bool {
		r, err := replication(s.ReplicaAddr)
		return err == nil && r["master_link_status"] == "up" && r["master_sync_in_progress"] == "0"
	})
	last := map[string]string{} // what each sentinel answered last, logged if the wait fails
	defer func() {
		if tb.Failed() {
			tb.Logf("the sentinels answered: %v", last)
		}
	}()
	Eventually(tb, time.Minute, "the sentinels to know the replica and each other", func() bool {
		ok := true
		for _, addr := range s.sentinels {
			m, err := s.master(addr)
			last[addr] = fmt.Sprintf("num-other-sentinels %s num-slaves %s flags %s err %v", m["num-other-sentinels"], m["num-slaves"], m["flags"], err)
			ok = ok && err == nil && m["num-other-sentinels"] == "2" && m["num-slaves"] == "1"
		}
		return ok
	})
	return s
}

// PrimaryOf returns the address of the primary that the first sentinel
// that answers names.
func (s *Sentinel) PrimaryOf() (string, error) {
	var last error
	for _, addr := range s.sentinels {
		m, err := s.master(addr)
		if err != nil {
			last = err
			continue
		}
		return net.JoinHostPort(m["ip"], m["port"]), nil
	}
	return "", last
}

// master asks the sentinel at addr for SENTINEL MASTER of the set.
func (s *Sentinel) master(addr string) (map[string]string, error) {
	var m map[string]string
	err := ask(addr, func(ctx context.Context, c rueidis.Client) (err error) {
		m, err = c.Do(ctx, c.B().Arbitrary("SENTINEL", "MASTER").Args(SentinelSet).Build()).AsStrMap()
		return err
	})
	return m, err
}

// replication returns the fields of INFO replication of the server at
// addr.
func replication(addr string) (map[string]string, error) {
	var text string
	err := ask(addr, func(ctx context.Context, c rueidis.Client) (err error) {
		text, err = c.Do(ctx, c.B().Info().Section("replication").Build()).ToString()
		return err
	})
	m := map[string]string{}
	for line := range strings.Lines(text) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m, err
}

// nodeClient is a client of the one server at addr (no cluster or
// sentinel discovery, no cache, no retry), that gives up dialing in a
// second.
func nodeClient(addr string) (rueidis.Client, error) {
	return rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true, DisableRetry: true,
		Dialer: net.Dialer{Timeout: time.Second},
	})
}

// ask runs f with a client of its own on the server at addr, within two
// seconds.
func ask(addr string, f func(context.Context, rueidis.Client) error) error {
	c, err := nodeClient(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return f(ctx, c)
}
