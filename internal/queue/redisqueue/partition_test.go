//go:build linux

package redisqueue_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"usher/internal/queue"
	"usher/internal/queue/redisqueue"
	"usher/internal/testenv"
)

// The partition test (issue 34) runs a topology of its own: a primary P on
// 127.0.0.1, a replica R and three sentinels on 127.0.0.2. R and the
// sentinels reach P only through partitionProxy, and they make every
// connection from 127.0.0.2 (bind-source-addr), so that the proxy can cut
// them off from P while this test, from 127.0.0.1, still reaches P through
// the same address: the split brain of a network fault. (This machine has
// no iptables; a proxy needs no privilege, so CI can run it anywhere.)
//
//	USHER_TEST_PARTITION=1          run it (it takes about a minute)
//	USHER_TEST_PARTITION_CUT=25s    how long the cut lasts
//	USHER_TEST_PARTITION_PORTS      "P R PROXY S1 S2 S3 [R2]", default
//	                                "16490 16491 16492 26490 26491 26492 16493"
//	USHER_TEST_PARTITION_REPLICAS=2 a second replica R2 beside R
//	USHER_TEST_PARTITION_STORE      query appended to the Sentinel URL,
//	                                e.g. "wait_replicas=0" for today's
//	                                behaviour
const partitionSet = "usherpart"

// partitionProxy forwards to target. While cut, it stalls every connection
// from the cut address, both ways, as a dropping firewall does: bytes
// already sent are held, and delivered at the heal if the peer still
// waits; new connections from it are accepted and stall too.
type partitionProxy struct {
	ln     net.Listener
	target string
	cutIP  net.IP
	mu     sync.Mutex
	cut    bool
	healed chan struct{} // closed at the heal
	conns  []net.Conn
}

func newPartitionProxy(tb testing.TB, addr, target string, cutIP net.IP) *partitionProxy {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	p := &partitionProxy{ln: ln, target: target, cutIP: cutIP, healed: make(chan struct{})}
	close(p.healed)
	tb.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *partitionProxy) serve(c net.Conn) {
	cuttable := c.RemoteAddr().(*net.TCPAddr).IP.Equal(p.cutIP)
	if cuttable {
		p.gate()
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, up)
	p.mu.Unlock()
	pipe := func(dst, src net.Conn) {
		defer dst.Close()
		defer src.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if cuttable {
					p.gate()
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go pipe(up, c)
	pipe(c, up)
}

// gate waits while the proxy is cut.
func (p *partitionProxy) gate() {
	p.mu.Lock()
	ch := p.healed
	p.mu.Unlock()
	<-ch
}

func (p *partitionProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut {
		p.cut, p.healed = true, make(chan struct{})
	}
}

func (p *partitionProxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		p.cut = false
		close(p.healed)
	}
}

// partitionTopology is P, R (and R2), the proxy in front of P and three
// sentinels.
type partitionTopology struct {
	P, R, R2, Proxy string // addresses (R2: "" without)
	sentinels       []string
	proxy           *partitionProxy
	URL             string
	dir             string // the servers' logs
}

func startPartitionTopology(t *testing.T, replicas int) *partitionTopology {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Skip(t, "redis-server", "install redis-server (apt-get install redis-server)")
	}
	ports := strings.Fields(os.Getenv("USHER_TEST_PARTITION_PORTS"))
	if len(ports) == 0 {
		ports = strings.Fields("16490 16491 16492 26490 26491 26492 16493")
	}
	if len(ports) < 6+replicas-1 {
		t.Fatalf("USHER_TEST_PARTITION_PORTS wants ports P R PROXY S1 S2 S3 and R2 for a second replica, got %q", ports)
	}
	const hostP, hostR = "127.0.0.1", "127.0.0.2"
	tp := &partitionTopology{
		P: net.JoinHostPort(hostP, ports[0]), R: net.JoinHostPort(hostR, ports[1]),
		Proxy: net.JoinHostPort(hostP, ports[2]),
	}
	for _, a := range []string{tp.P, tp.R, tp.Proxy} {
		if c, err := net.DialTimeout("tcp", a, 200*time.Millisecond); err == nil {
			c.Close()
			t.Fatalf("%s is taken: set USHER_TEST_PARTITION_PORTS", a)
		}
	}
	dir := t.TempDir()
	start := func(args ...string) {
		cmd := exec.Command(bin, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		cmd.Dir = dir
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	common := []string{"--protected-mode", "no", "--save", "", "--appendonly", "no", "--dir", dir, "--repl-diskless-sync-delay", "0"}
	tp.dir = dir
	start(append([]string{"--port", ports[0], "--bind", hostP, "--dbfilename", "p.rdb", "--logfile", "p.log"}, common...)...)
	tp.proxy = newPartitionProxy(t, tp.Proxy, tp.P, net.ParseIP(hostR))
	replica := func(port, name string) {
		start(append([]string{"--port", port, "--bind", hostR, "--dbfilename", name + ".rdb",
			"--bind-source-addr", hostR, "--replica-announce-ip", hostR, "--logfile", name + ".log",
			"--replicaof", hostP, ports[2]}, common...)...)
	}
	replica(ports[1], "r")
	if replicas == 2 {
		tp.R2 = net.JoinHostPort(hostR, ports[6])
		replica(ports[6], "r2")
	}
	for _, port := range ports[3:6] {
		conf := filepath.Join(dir, "sentinel-"+port+".conf")
		text := fmt.Sprintf("port %s\nbind %s\nbind-source-addr %[2]s\nprotected-mode no\ndir %s\nlogfile sentinel-%[1]s.log\n"+
			"sentinel monitor %[4]s %[5]s %[6]s 2\n"+
			"sentinel down-after-milliseconds %[4]s 1000\n"+
			"sentinel failover-timeout %[4]s 5000\n"+
			"sentinel parallel-syncs %[4]s 1\n", port, hostR, dir, partitionSet, hostP, ports[2])
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		start(conf, "--sentinel")
		tp.sentinels = append(tp.sentinels, net.JoinHostPort(hostR, port))
	}
	tp.URL = "redis://" + tp.sentinels[0] + "/0?addr=" + tp.sentinels[1] + "&addr=" + tp.sentinels[2] +
		"&master_set=" + partitionSet
	testenv.Eventually(t, time.Minute, "the replica to sync and the sentinels to know it and each other", func() bool {
		for _, r := range []string{tp.R, tp.R2}[:replicas] {
			if r := infoReplication(r); r["master_link_status"] != "up" || r["master_sync_in_progress"] != "0" {
				return false
			}
		}
		for _, s := range tp.sentinels {
			m := sentinelMaster(s)
			if m["num-other-sentinels"] != "2" || m["num-slaves"] != strconv.Itoa(replicas) {
				return false
			}
		}
		return true
	})
	return tp
}

// ask runs f on a client of the one server at addr, within two seconds.
func askNode(addr string, f func(context.Context, rueidis.Client) error) error {
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true, DisableRetry: true,
		Dialer: net.Dialer{Timeout: time.Second},
	})
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return f(ctx, c)
}

func infoReplication(addr string) map[string]string {
	var text string
	askNode(addr, func(ctx context.Context, c rueidis.Client) (err error) {
		text, err = c.Do(ctx, c.B().Info().Section("replication").Build()).ToString()
		return err
	})
	m := map[string]string{}
	for line := range strings.Lines(text) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

func sentinelMaster(addr string) map[string]string {
	var m map[string]string
	askNode(addr, func(ctx context.Context, c rueidis.Client) (err error) {
		m, err = c.Do(ctx, c.B().Arbitrary("SENTINEL", "MASTER").Args(partitionSet).Build()).AsStrMap()
		return err
	})
	return m
}

// timeline records events relative to the cut.
type timeline struct {
	mu     sync.Mutex
	cut    time.Time
	events []string
	seen   map[string]bool
}

func (tl *timeline) add(at time.Time, what string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.events = append(tl.events, fmt.Sprintf("%+7.2fs %s", at.Sub(tl.cut).Seconds(), what))
}

// once adds what only the first time key is seen.
func (tl *timeline) once(at time.Time, key, what string) {
	tl.mu.Lock()
	first := !tl.seen[key]
	tl.seen[key] = true
	tl.mu.Unlock()
	if first {
		tl.add(at, what)
	}
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

// ack is an acknowledged call: an entry, or an admission.
type ack struct {
	visitor string
	seq     int64
	at      time.Time
}

// TestPartition cuts the primary off from its replica and the sentinels
// while usher still reaches it, with a crowd entering (~100/s) and being
// admitted (20/s), and checks after the heal that every acknowledged
// entry and admission is still in the store and that no two visitors were
// given the same place (issue 34).
func TestPartition(t *testing.T) {
	if os.Getenv("USHER_TEST_PARTITION") != "1" {
		t.Skip("set USHER_TEST_PARTITION=1 to run the partition test (about a minute)")
	}
	cutFor := envDuration(t, "USHER_TEST_PARTITION_CUT", 25*time.Second)
	before, after := 5*time.Second, 10*time.Second
	replicas := 1
	if os.Getenv("USHER_TEST_PARTITION_REPLICAS") == "2" {
		replicas = 2
	}
	tp := startPartitionTopology(t, replicas)
	ctx := context.Background()
	url := tp.URL
	if q := os.Getenv("USHER_TEST_PARTITION_STORE"); q != "" {
		url += "&" + q
	}
	c, err := redisqueue.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s := redisqueue.New(c, "part:")
	wait, err := redisqueue.ParseAck(url)
	if err != nil {
		t.Fatal(err)
	}
	s.SetAck(wait)

	tl := &timeline{cut: time.Now().Add(before), seen: map[string]bool{}}
	// The first sentinel's events.
	sen, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{tp.sentinels[0]}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sen.Close)
	subCtx, stopSub := context.WithCancel(ctx)
	t.Cleanup(stopSub)
	go sen.Receive(subCtx, sen.B().Psubscribe().Pattern("*").Build(), func(m rueidis.PubSubMessage) {
		if !strings.HasPrefix(m.Channel, "__") {
			tl.once(time.Now(), m.Channel+m.Message, m.Channel+" "+m.Message)
		}
	})

	sc := partitionScenario{
		s: s, label: "store " + strings.TrimPrefix(url, tp.URL), cutWhat: "P is cut off from R and the sentinels",
		cutFor: cutFor, after: after, cut: tp.proxy.Cut, heal: tp.proxy.Heal, oldPrimary: tp.P, strict: true,
		dump: func() {
			t.Logf("P: %v\nR: %v\nsentinel: %v", infoReplication(tp.P), infoReplication(tp.R), sentinelMaster(tp.sentinels[0]))
			if logs, err := exec.Command("sh", "-c", "cd "+tp.dir+" && tail -n 40 *.log").CombinedOutput(); err == nil {
				t.Logf("logs:\n%s", logs)
			}
		},
	}
	runPartition(t, sc, tl)
}

// partitionScenario is a topology's part of a partition run: the store,
// how to cut and heal, the old primary (which must resync after the heal),
// and whether losses fail the test (strict) or are only reported.
type partitionScenario struct {
	s               *redisqueue.Store
	label, cutWhat  string
	cutFor, after   time.Duration
	cut, heal, dump func()
	oldPrimary      string
	strict          bool
}

// runPartition runs the crowd through the cut and the heal (at tl.cut)
// and checks, after the old primary resynced, every acknowledged entry,
// admission and leave.
func runPartition(t *testing.T, sc partitionScenario, tl *timeline) {
	ctx, s, cutFor, after, cut, heal := context.Background(), sc.s, sc.cutFor, sc.after, sc.cut, sc.heal
	set := queue.DefaultSettings()
	set.AdmitRate, set.MaxActive = 20, 100000
	// Passes are held (no renewals here): admitted visitors stay active.
	set.ActiveTTL, set.ClaimWindow, set.PresenceTimeout = 10*time.Minute, 10*time.Minute, 10*time.Minute
	const room = "r"
	if _, err := s.PutRoom(ctx, room, set, queue.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		entries  []ack // acknowledged entries
		admitted []ack // acknowledged admissions
		failed   int   // enter calls that failed (the visitor retried)
		lastFail time.Time
		admitErr int
	)
	stopAt := tl.cut.Add(cutFor + after)
	var wg sync.WaitGroup
	// The crowd: a visitor every 10 ms, each retrying a failed enter every
	// second (Enter is idempotent) until it is acknowledged.
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; time.Now().Before(stopAt); i++ {
			<-tick.C
			v := fmt.Sprintf("v%05d", i)
			wg.Go(func() {
				for try := 0; try < 90; try++ {
					cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					e, _, err := s.Enter(cctx, room, v, time.Now(), queue.EnterOptions{})
					cancel()
					if err == nil {
						mu.Lock()
						entries = append(entries, ack{v, e.Seq, time.Now()})
						mu.Unlock()
						return
					}
					tl.once(time.Now(), "enter failed", "the first enter fails: "+err.Error())
					mu.Lock()
					failed++
					lastFail = time.Now()
					mu.Unlock()
					time.Sleep(time.Second)
				}
			})
		}
	})
	// The scheduler: a step every 100 ms.
	wg.Go(func() {
		for time.Now().Before(stopAt) {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			r, err := s.Admit(cctx, room, time.Now())
			cancel()
			now := time.Now()
			mu.Lock()
			if err != nil {
				admitErr++
			}
			for _, v := range r.Admitted {
				admitted = append(admitted, ack{v, 0, now})
			}
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	})
	// The pass checks, every 50 ms. A visitor that a poll finds active
	// gets its pass (the service issues one then), whether or not the
	// step that admitted it was acknowledged: the 60 visitors after the
	// acknowledged admissions are polled for that. The checkWindow last
	// visitors admitted, and the checkWindow last given a pass, must stay
	// active (their slots outlive the test).
	const checkWindow = 100
	refused := map[string]time.Time{}
	passed := map[string]time.Time{} // visitor → when a poll found it active
	var passes []string              // passed's visitors in order
	leaving := map[string]bool{}     // visitors told to leave (acknowledged or not)
	var left []ack                   // acknowledged leaves
	wg.Go(func() {
		for time.Now().Before(stopAt) {
			mu.Lock()
			var recent, front []string
			for _, a := range admitted[max(0, len(admitted)-checkWindow):] {
				recent = append(recent, a.visitor)
			}
			recent = append(recent, passes[max(0, len(passes)-checkWindow):]...)
			for i := len(admitted); i < min(len(entries), len(admitted)+60); i++ {
				front = append(front, entries[i].visitor)
			}
			mu.Unlock()
			poll := func(v string) (queue.Entry, bool) {
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				e, err := s.Status(cctx, room, v, time.Now())
				return e, err == nil
			}
			for _, v := range front {
				if e, ok := poll(v); ok && e.Status == queue.Active {
					mu.Lock()
					if _, ok := passed[v]; !ok {
						passed[v] = time.Now()
						passes = append(passes, v)
					}
					mu.Unlock()
				}
			}
			for _, v := range recent {
				if e, ok := poll(v); ok && e.Status != queue.Active {
					mu.Lock()
					if _, ok := refused[v]; !ok && !leaving[v] {
						refused[v] = time.Now()
					}
					mu.Unlock()
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	// The leavers: every 200 ms the visitor admitted longest ago that has
	// not left leaves, until acknowledged (Leave is safe to repeat).
	wg.Go(func() {
		next := 0
		for time.Now().Before(stopAt) {
			time.Sleep(200 * time.Millisecond)
			mu.Lock()
			if next >= len(admitted) {
				mu.Unlock()
				continue
			}
			v := admitted[next].visitor
			next++
			leaving[v] = true
			mu.Unlock()
			for time.Now().Before(stopAt.Add(30 * time.Second)) {
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				err := s.Leave(cctx, room, v)
				cancel()
				if err == nil {
					mu.Lock()
					left = append(left, ack{v, 0, time.Now()})
					mu.Unlock()
					break
				}
				time.Sleep(time.Second)
			}
		}
	})
	// The cut and the heal.
	time.Sleep(time.Until(tl.cut))
	cut()
	tl.add(time.Now(), "cut: "+sc.cutWhat)
	time.Sleep(cutFor)
	heal()
	tl.add(time.Now(), "heal")
	wg.Wait()
	tl.add(time.Now(), "the crowd stops")
	// The old primary follows the new one and has synced.
	logged := false
	defer func() {
		if t.Failed() && !logged {
			tl.mu.Lock()
			t.Logf("timeline:\n  %s", strings.Join(tl.events, "\n  "))
			tl.mu.Unlock()
			sc.dump()
		}
	}()
	testenv.Eventually(t, time.Minute, "the old primary to resync as a replica", func() bool {
		r := infoReplication(sc.oldPrimary)
		return r["role"] == "slave" && r["master_link_status"] == "up" && r["master_sync_in_progress"] == "0"
	})
	tl.add(time.Now(), "the old primary has resynced")

	// Every acknowledged entry and admission, checked.
	now := time.Now()
	status := map[string]queue.Entry{}
	check := func(v string) (queue.Entry, error) {
		if e, ok := status[v]; ok {
			return e, nil
		}
		e, err := s.Status(ctx, room, v, now)
		if err == nil {
			status[v] = e
		}
		return e, err
	}
	var lost []ack
	seqs := map[int64]string{}
	collisions := 0
	for _, a := range entries {
		e, err := check(a.visitor)
		if err != nil {
			t.Fatalf("status %s: %v", a.visitor, err)
		}
		if e.Status == queue.Gone && !leaving[a.visitor] {
			lost = append(lost, a)
		}
		if a.seq > 0 {
			if other, ok := seqs[a.seq]; ok && other != a.visitor {
				collisions++
				if collisions <= 3 {
					t.Logf("place %d was acknowledged to both %s and %s", a.seq, other, a.visitor)
				}
			}
			seqs[a.seq] = a.visitor
		}
	}
	var undone []ack
	mu.Lock()
	for v, at := range passed {
		admitted = append(admitted, ack{v, 0, at})
	}
	mu.Unlock()
	for _, a := range admitted {
		if leaving[a.visitor] {
			continue
		}
		e, err := check(a.visitor)
		if err != nil {
			t.Fatalf("status %s: %v", a.visitor, err)
		}
		if e.Status != queue.Active {
			undone = append(undone, a)
		}
	}
	// Every acknowledged leave holds: the visitor holds no slot.
	var stayed []ack
	for _, a := range left {
		e, err := s.Status(ctx, room, a.visitor, now)
		if err != nil {
			t.Fatalf("status %s: %v", a.visitor, err)
		}
		if e.Status == queue.Active {
			stayed = append(stayed, a)
		}
	}
	mu.Lock()
	for v, at := range refused {
		undone = append(undone, ack{v, 0, at})
	}
	mu.Unlock()
	span := func(as []ack) string {
		if len(as) == 0 {
			return ""
		}
		ts := make([]time.Time, len(as))
		for i, a := range as {
			ts[i] = a.at
		}
		lo, hi := slices.MinFunc(ts, time.Time.Compare), slices.MaxFunc(ts, time.Time.Compare)
		return fmt.Sprintf(", acknowledged between %+.2fs and %+.2fs", lo.Sub(tl.cut).Seconds(), hi.Sub(tl.cut).Seconds())
	}
	logged = true
	tl.mu.Lock()
	t.Logf("partition of %v, %s:\n  %s", cutFor, sc.label, strings.Join(tl.events, "\n  "))
	tl.mu.Unlock()
	t.Logf("entries acknowledged %d, lost %d%s; places given twice %d; failed enter calls %d (retried), the last at %+.2fs",
		len(entries), len(lost), span(lost), collisions, failed, lastFail.Sub(tl.cut).Seconds())
	t.Logf("admissions acknowledged or passes issued %d, refused or undone %d%s; failed steps %d", len(admitted), len(undone), span(undone), admitErr)
	t.Logf("leaves acknowledged %d, undone %d%s", len(left), len(stayed), span(stayed))
	if !sc.strict {
		return
	}
	if len(stayed) > 0 {
		t.Errorf("%d acknowledged leaves were undone: the visitors hold slots", len(stayed))
	}
	if len(entries) == 0 || len(admitted) == 0 || len(left) == 0 {
		t.Fatal("no entry, admission or leave was acknowledged: the test shows nothing")
	}
	if len(lost) > 0 {
		t.Errorf("%d acknowledged entries were lost", len(lost))
	}
	if collisions > 0 {
		t.Errorf("%d places were acknowledged to two visitors", collisions)
	}
	if len(undone) > 0 {
		t.Errorf("%d acknowledged admissions or issued passes were refused or undone", len(undone))
	}
}
