package testenv

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/queue/redisqueue"
	"usher/internal/redisscript"
)

// Cluster is a Redis Cluster of a test's own on loopback: primaries only,
// each a redis-server process this test started, joined by `redis-cli
// --cluster create`. A test may move its slots (MoveSlot) without
// disturbing the shared cluster of scripts/cluster.sh, which serves
// USHER_TEST_REDIS_CLUSTER. No persistence.
type Cluster struct {
	// URL reaches the cluster as usher's --store does (redisqueue.Open).
	URL string
	// Addrs are the primaries' host:port, in the order of their slot
	// ranges as created (Addrs[0] serves slot 0).
	Addrs []string
	ids   map[string]string // addr → node id
	mu    sync.Mutex
	conns map[string]rueidis.Client // addr → a client of that node only
}

// StartCluster starts n ≥ 3 primaries on free ports and waits until every
// node reports cluster_state:ok. It skips without redis-server and
// redis-cli, but fails under CI. Every process is killed when the test
// ends.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Skip(tb, "redis-server", "install redis-server (apt-get install redis-server)")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		Skip(tb, "redis-cli", "install redis-tools (apt-get install redis-tools)")
	}
	dir := tb.TempDir()
	cl := &Cluster{ids: map[string]string{}, conns: map[string]rueidis.Client{}}
	tb.Cleanup(func() {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		for _, c := range cl.conns {
			c.Close()
		}
	})
	for range n {
		addr := ClosedAddr(tb)
		host, port, _ := net.SplitHostPort(addr)
		_, bus, _ := net.SplitHostPort(ClosedAddr(tb)) // not port+10000, which may not exist
		cmd := exec.Command(bin, "--port", port, "--bind", host, "--save", "", "--appendonly", "no",
			"--dir", dir, "--dbfilename", "dump-"+port+".rdb", "--cluster-enabled", "yes", "--cluster-port", bus,
			"--cluster-config-file", "nodes-"+port+".conf", "--cluster-node-timeout", "2000")
		dieWithTest(cmd)
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		cl.Addrs = append(cl.Addrs, addr)
	}
	for _, addr := range cl.Addrs {
		Eventually(tb, 30*time.Second, addr+" to answer", func() bool { return cl.do(addr, "PING") == nil })
	}
	args := append([]string{"--cluster", "create"}, cl.Addrs...)
	if out, err := exec.Command(cli, append(args, "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	Eventually(tb, time.Minute, "every node to report cluster_state:ok", func() bool {
		for _, addr := range cl.Addrs {
			info, err := cl.str(addr, "CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
		}
		return true
	})
	for _, addr := range cl.Addrs {
		id, err := cl.str(addr, "CLUSTER", "MYID")
		if err != nil {
			tb.Fatal(err)
		}
		cl.ids[addr] = id
	}
	cl.URL = "redis://" + cl.Addrs[0] + "?addr=" + strings.Join(cl.Addrs[1:], "&addr=")
	return cl
}

// MoveSlot moves slot from the primary at from to the one at to while
// clients keep using it, as `redis-cli --cluster reshard` does: BeginMove,
// then MIGRATE batch keys at a time until the source has none left, then
// FinishMove. Between batches the slot is half moved: clients see ASK
// redirections and TRYAGAIN. It returns the number of keys moved.
func (cl *Cluster) MoveSlot(slot int, from, to string, batch int) (int, error) {
	if err := cl.BeginMove(slot, from, to); err != nil {
		return 0, err
	}
	moved := 0
	for {
		keys, err := cl.strs(from, "CLUSTER", "GETKEYSINSLOT", strconv.Itoa(slot), strconv.Itoa(batch))
		if err != nil {
			return moved, err
		}
		if len(keys) == 0 {
			break
		}
		if err := cl.Migrate(from, to, keys...); err != nil {
			return moved, err
		}
		moved += len(keys)
	}
	return moved, cl.FinishMove(slot, to)
}

// BeginMove starts moving slot from the primary at from to the one at to:
// the target imports it, then the source migrates it.
func (cl *Cluster) BeginMove(slot int, from, to string) error {
	s := strconv.Itoa(slot)
	if err := cl.do(to, "CLUSTER", "SETSLOT", s, "IMPORTING", cl.ids[from]); err != nil {
		return err
	}
	return cl.do(from, "CLUSTER", "SETSLOT", s, "MIGRATING", cl.ids[to])
}

// Migrate moves keys from the primary at from to the one at to (MIGRATE).
func (cl *Cluster) Migrate(from, to string, keys ...string) error {
	host, port, _ := net.SplitHostPort(to)
	return cl.do(from, append([]string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}, keys...)...)
}

// FinishMove gives slot to the primary at to on every node, the target
// first, so that the slot is never owned by no one.
func (cl *Cluster) FinishMove(slot int, to string) error {
	for _, addr := range append([]string{to}, cl.Addrs...) {
		if err := cl.do(addr, "CLUSTER", "SETSLOT", strconv.Itoa(slot), "NODE", cl.ids[to]); err != nil {
			return fmt.Errorf("setslot node on %s: %w", addr, err)
		}
	}
	return nil
}

// Owner returns the address of the primary that the node at Addrs[0]
// says serves slot.
func (cl *Cluster) Owner(slot int) (string, error) {
	c, err := cl.client(cl.Addrs[0])
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return SlotOwner(ctx, c, slot)
}

// SlotOwner returns the address of the primary that the cluster node c
// talks to says serves slot (CLUSTER SLOTS).
func SlotOwner(ctx context.Context, c rueidis.Client, slot int) (string, error) {
	owners, err := redisscript.SlotOwners(ctx, c)
	switch {
	case err != nil:
		return "", err
	case owners == nil:
		return "", fmt.Errorf("not a cluster")
	case slot < 0 || slot >= len(owners) || owners[slot] == "":
		return "", fmt.Errorf("no node serves slot %d", slot)
	}
	return owners[slot], nil
}

// client returns a client of one node only.
func (cl *Cluster) client(addr string) (rueidis.Client, error) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if c, ok := cl.conns[addr]; ok {
		return c, nil
	}
	c, err := nodeClient(addr)
	if err != nil {
		return nil, err
	}
	cl.conns[addr] = c
	return c, nil
}

func (cl *Cluster) result(addr string, args ...string) rueidis.RedisResult {
	c, err := cl.client(addr)
	if err != nil {
		return rueidis.NewErrorResult(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Do(ctx, c.B().Arbitrary(args[0]).Args(args[1:]...).Build())
}

func (cl *Cluster) do(addr string, args ...string) error { return cl.result(addr, args...).Error() }

func (cl *Cluster) str(addr string, args ...string) (string, error) {
	return cl.result(addr, args...).ToString()
}

func (cl *Cluster) strs(addr string, args ...string) ([]string, error) {
	return cl.result(addr, args...).AsStrSlice()
}

// Client connects to the cluster as usher does (redisqueue.Open) and
// closes the client when the test ends.
func (cl *Cluster) Client(tb testing.TB) rueidis.Client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := redisqueue.Open(ctx, cl.URL)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// Other returns a primary other than addr.
func (cl *Cluster) Other(addr string) string {
	for _, a := range cl.Addrs {
		if a != addr {
			return a
		}
	}
	return ""
}

// Reshard moves n slots from the primary at from to the one at to with
// `redis-cli --cluster reshard`, which takes the source's lowest-numbered
// slots, ten keys per MIGRATE (its default --cluster-pipeline).
func (cl *Cluster) Reshard(from, to string, n int) error {
	out, err := exec.Command("redis-cli", "--cluster", "reshard", from, "--cluster-from", cl.ids[from],
		"--cluster-to", cl.ids[to], "--cluster-slots", strconv.Itoa(n), "--cluster-yes").CombinedOutput()
	if err != nil {
		return fmt.Errorf("redis-cli --cluster reshard: %v\n%s", err, out)
	}
	return nil
}
