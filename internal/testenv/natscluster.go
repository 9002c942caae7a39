package testenv

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// NATSCluster is a three-node NATS JetStream cluster of a test's own on
// loopback, each node a nats-server process this test started (so a test
// may kill one, or two, and start them again on their store). Like
// scripts/nats-cluster.sh, which serves USHER_TEST_NATS_CLUSTER, it runs
// the nats-server of the module version go.mod pins, built by NATSServer.
type NATSCluster struct {
	// URL is every node's client URL, comma-separated: what nats.Connect
	// and `usher serve --nats` take.
	URL   string
	Nodes []*NATSNode
}

// NATSNode is one node of a NATSCluster.
type NATSNode struct {
	// Name is the node's server name (n1, n2, n3): what JetStream reports
	// as a stream's leader or replica.
	Name string
	// ClientURL reaches this node alone.
	ClientURL string
	monitor   string // host:port of the monitoring endpoint
	bin, conf string
	log       string

	mu  sync.Mutex
	cmd *exec.Cmd // nil while stopped
}

// NATSServer builds the nats-server of the module version go.mod pins into
// a temporary directory and returns its path. The build is cached by the
// go command: a few seconds after the first. It skips without the go
// command, but fails under CI.
func NATSServer(tb testing.TB) string {
	tb.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		Skip(tb, "go", "put the go command on PATH (it builds nats-server from the module)")
	}
	bin := filepath.Join(tb.TempDir(), "nats-server")
	out, err := exec.Command(gobin, "build", "-o", bin, "github.com/nats-io/nats-server/v2").CombinedOutput()
	if err != nil {
		tb.Fatalf("go build nats-server: %v\n%s", err, out)
	}
	return bin
}

// StartNATSCluster starts the three nodes on free ports and waits until
// every node reports its JetStream current (/healthz), so a stream with
// three replicas can be created at once. Every process is killed when the
// test ends; if the test failed, the end of each node's log is logged.
func StartNATSCluster(tb testing.TB) *NATSCluster {
	tb.Helper()
	bin := NATSServer(tb)
	dir := tb.TempDir()
	const size = 3
	routes := make([]string, size)
	for i := range routes {
		routes[i] = "nats-route://" + ClosedAddr(tb)
	}
	c := &NATSCluster{}
	var urls []string
	for i := range size {
		n := &NATSNode{Name: fmt.Sprintf("n%d", i+1), bin: bin}
		client := ClosedAddr(tb)
		n.ClientURL, n.monitor = "nats://"+client, ClosedAddr(tb)
		n.conf = filepath.Join(dir, n.Name+".conf")
		n.log = filepath.Join(dir, n.Name+".log")
		text := fmt.Sprintf(`server_name: %s
listen: %s
http: %s
log_file: %q
jetstream {
  store_dir: %q
  max_memory_store: 64MB
  max_file_store: 1GB
}
cluster {
  name: usher-test
  listen: %s
  routes: [%s]
}
`, n.Name, client, n.monitor, n.log, filepath.Join(dir, n.Name), strings.TrimPrefix(routes[i], "nats-route://"), strings.Join(routes, ", "))
		if err := os.WriteFile(n.conf, []byte(text), 0o600); err != nil {
			tb.Fatal(err)
		}
		c.Nodes = append(c.Nodes, n)
		urls = append(urls, n.ClientURL)
	}
	c.URL = strings.Join(urls, ",")
	tb.Cleanup(func() {
		for _, n := range c.Nodes {
			n.stop()
		}
		if tb.Failed() {
			for _, n := range c.Nodes {
				tb.Logf("end of %s's log:\n%s", n.Name, tail(n.log, 30))
			}
		}
	})
	for _, n := range c.Nodes {
		n.Start(tb)
	}
	c.WaitHealthy(tb)
	return c
}

// Node returns the node named name (n1, n2, n3), or nil.
func (c *NATSCluster) Node(name string) *NATSNode {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// WaitHealthy waits until every running node answers /healthz with its
// JetStream current: the meta group and every stream and consumer it
// hosts have caught up. It fails the test after a minute.
func (c *NATSCluster) WaitHealthy(tb testing.TB) {
	tb.Helper()
	Eventually(tb, time.Minute, "every running NATS node healthy", func() bool {
		for _, n := range c.Nodes {
			if n.Running() && !n.Healthy() {
				return false
			}
		}
		return true
	})
}

// Start starts the node (again, on the store it had).
func (n *NATSNode) Start(tb testing.TB) {
	tb.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		tb.Fatalf("nats node %s: already running", n.Name)
	}
	cmd := exec.Command(n.bin, "-c", n.conf)
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		tb.Fatalf("nats node %s: %v", n.Name, err)
	}
	n.cmd = cmd
}

// Kill kills the node with SIGKILL and waits for the process to end.
func (n *NATSNode) Kill(tb testing.TB) {
	tb.Helper()
	if !n.stop() {
		tb.Fatalf("nats node %s: not running", n.Name)
	}
}

func (n *NATSNode) stop() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	n.cmd.Process.Kill()
	n.cmd.Wait()
	n.cmd = nil
	return true
}

// Running reports whether the node's process was started and not killed.
func (n *NATSNode) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Healthy reports whether the node answers /healthz with 200.
func (n *NATSNode) Healthy() bool {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get("http://" + n.monitor + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
