//go:build linux

package redisqueue_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/queue/redisqueue"
	"usher/internal/testenv"
)

// The partition on a Redis Cluster (issue 34): primaries A, B and C and A's
// replica A2. Every node announces a proxy's address for its port and its
// bus, so that the nodes, their replication and the test all go through
// the proxies. A makes its connections from 127.0.0.3, the others from
// 127.0.0.4; the cut stalls A's proxies for 127.0.0.4 and the others' for
// 127.0.0.3, while the test (127.0.0.1) reaches every node.
//
//	USHER_TEST_PARTITION_CLUSTER=1   run it (about a minute), with the
//	                                 partition test's _CUT; the cluster's
//	                                 node timeout is 2 s
//	USHER_TEST_PARTITION_CLUSTER_PORT first of 12 ports (default 16500):
//	                                 nodes, then data proxies, then bus
//	                                 proxies; the nodes' bus ports are
//	                                 theirs + 10000
//
// A Cluster acknowledges a write once its primary has it (usher refuses
// wait_replicas there), so the run reports what it loses instead of
// failing on it.
func TestPartitionCluster(t *testing.T) {
	if os.Getenv("USHER_TEST_PARTITION_CLUSTER") != "1" {
		t.Skip("set USHER_TEST_PARTITION_CLUSTER=1 to run the Cluster partition test (about a minute)")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Skip(t, "redis-server", "install redis-server (apt-get install redis-server)")
	}
	base := 16500
	if v := os.Getenv("USHER_TEST_PARTITION_CLUSTER_PORT"); v != "" {
		if base, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	const hostA, hostOthers, hostProxy = "127.0.0.3", "127.0.0.4", "127.0.0.5"
	names := []string{"A", "A2", "B", "C"}
	hosts := []string{hostA, hostOthers, hostOthers, hostOthers}
	dir := t.TempDir()
	var proxies []*partitionProxy
	announced := make([]string, len(names)) // the data proxies' addresses
	for i, name := range names {
		port, dataProxy, busProxy := base+i, base+4+i, base+8+i
		node := net.JoinHostPort(hosts[i], strconv.Itoa(port))
		cutIP := hostA // the others' proxies stall A
		if i == 0 {
			cutIP = hostOthers
		}
		announced[i] = net.JoinHostPort(hostProxy, strconv.Itoa(dataProxy))
		dp := newPartitionProxy(t, announced[i], node, net.ParseIP(cutIP))
		bp := newPartitionProxy(t, net.JoinHostPort(hostProxy, strconv.Itoa(busProxy)),
			net.JoinHostPort(hosts[i], strconv.Itoa(port+10000)), net.ParseIP(cutIP))
		proxies = append(proxies, dp, bp)
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", hosts[i], "--bind-source-addr", hosts[i],
			"--protected-mode", "no", "--save", "", "--appendonly", "no", "--dir", dir, "--logfile", name+".log",
			"--dbfilename", name+".rdb", "--cluster-enabled", "yes", "--cluster-config-file", "nodes-"+name+".conf",
			"--cluster-node-timeout", "2000", "--cluster-announce-ip", hostProxy,
			"--cluster-announce-port", strconv.Itoa(dataProxy), "--cluster-announce-bus-port", strconv.Itoa(busProxy),
			"--repl-diskless-sync-delay", "0")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		cmd.Dir = dir
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	do := func(addr string, args ...string) (rueidis.RedisResult, error) {
		var res rueidis.RedisResult
		err := askNode(addr, func(ctx context.Context, c rueidis.Client) error {
			res = c.Do(ctx, c.B().Arbitrary(args[0]).Args(args[1:]...).Build())
			return res.Error()
		})
		return res, err
	}
	testenv.Eventually(t, 30*time.Second, "the nodes to answer", func() bool {
		for _, a := range announced {
			if _, err := do(a, "PING"); err != nil {
				return false
			}
		}
		return true
	})
	ids := make([]string, len(names))
	for i, a := range announced {
		r, err := do(a, "CLUSTER", "MYID")
		if err != nil {
			t.Fatal(err)
		}
		ids[i], _ = r.ToString()
		if i > 0 {
			h, p, _ := net.SplitHostPort(a)
			if _, err := do(announced[0], "CLUSTER", "MEET", h, p, strconv.Itoa(base+8+i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A serves every slot but the last two, so the room's keys are on A
	// (the room index may not be); B and C one each, so that they vote.
	r, err := do(announced[0], "CLUSTER", "KEYSLOT", "part:{r}")
	if err != nil {
		t.Fatal(err)
	}
	if slot, _ := r.AsInt64(); slot >= 16382 {
		t.Fatalf("the room's slot %d is not A's", slot)
	}
	for i, rng := range [][2]int{{0, 16381}, {}, {16382, 16382}, {16383, 16383}} {
		if i == 1 {
			continue
		}
		if _, err := do(announced[i], "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(rng[0]), strconv.Itoa(rng[1])); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 30*time.Second, "A2 to know A", func() bool {
		_, err := do(announced[1], "CLUSTER", "REPLICATE", ids[0])
		return err == nil
	})
	testenv.Eventually(t, time.Minute, "the cluster to be ok and A2 in sync", func() bool {
		for _, a := range announced {
			r, err := do(a, "CLUSTER", "INFO")
			if s, _ := r.ToString(); err != nil || !strings.Contains(s, "cluster_state:ok") {
				return false
			}
		}
		rep := infoReplication(announced[1])
		return rep["master_link_status"] == "up" && rep["master_sync_in_progress"] == "0"
	})

	url := "redis://" + announced[0] + "/0?addr=" + announced[2] + "&addr=" + announced[3]
	c, err := redisqueue.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s := redisqueue.New(c, "part:")

	cutFor := envDuration(t, "USHER_TEST_PARTITION_CUT", 25*time.Second)
	tl := &timeline{cut: time.Now().Add(5 * time.Second), seen: map[string]bool{}}
	// The cluster's view of A and A2, from B, every 100 ms.
	watch, stopWatch := context.WithCancel(context.Background())
	t.Cleanup(stopWatch)
	go func() {
		for watch.Err() == nil {
			if r, err := do(announced[2], "CLUSTER", "NODES"); err == nil {
				text, _ := r.ToString()
				for line := range strings.Lines(text) {
					f := strings.Fields(line)
					if len(f) > 2 && (f[0] == ids[0] || f[0] == ids[1]) {
						name := "A"
						if f[0] == ids[1] {
							name = "A2"
						}
						tl.once(time.Now(), name+f[2], fmt.Sprintf("B sees %s as %s", name, f[2]))
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	cut := func() {
		for _, p := range proxies {
			p.Cut()
		}
	}
	heal := func() {
		for _, p := range proxies {
			p.Heal()
		}
	}
	runPartition(t, partitionScenario{
		s: s, label: "Redis Cluster, A cut off from A2, B and C", cutWhat: "A is cut off from A2, B and C",
		cutFor: cutFor, after: 10 * time.Second, cut: cut, heal: heal, oldPrimary: announced[0],
		dump: func() {
			if logs, err := exec.Command("sh", "-c", "cd "+dir+" && tail -n 40 *.log").CombinedOutput(); err == nil {
				t.Logf("logs:\n%s", logs)
			}
		},
	}, tl)
}
