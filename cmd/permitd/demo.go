package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/server"
)

func init() {
	register("demo", "run a 3-node cluster in this process with clients, kill its leader once, then partition a group of leased workers", runDemo)
}

// demoNode is one embedded node with its HTTP server.
type demoNode struct {
	id, raftAddr, httpAddr, dir string
	node                        *node.Node
	srv                         *http.Server
}

func runDemo(args []string, stdout, stderr io.Writer) int {
	c := newCmdLine("demo", "demo [flags]", `
Starts three register nodes in this process on loopback (temporary data
directories, removed at exit).

Scene 1 (--duration): creates a strict limit and runs clients that acquire
permits through different nodes. Prints one line per second: grants in that
second, the smallest gap between two permits, the mean wait and the leader.
After --kill-after it kills the leader (no graceful handover) to show
failover.

Scene 2 (--scene2-duration): makes a leased limit and runs six workers
(transport/worker, in this process) in three groups A, B and C, one caller each,
through the cluster's HTTP API. Group C's register access is cut for a
quarter of the scene: it spends its lease, steals from the others, then
fails closed; after it reconnects it is back to its share. Prints one line
per second with each group's permits/s and share, and checks the fleet
against the over-grant bound C + O + floor(W/I) + 1 (W = 1 s).

Scene 3 (--scene3-duration): eight workers call a fake LLM API that
answers 429 above 10 requests/s, 15000 tokens/s or 4 calls in flight. Each
call reserves all three on the register at once (a request, an estimate of
3000 tokens, an in-flight permit), waits for the grant, makes the call
(real cost 500..3000 tokens, known at its end), then settles the actual
tokens and releases the in-flight permit. Prints one line per second with
requests/s, tokens/s and calls in flight against each limit and the API's
429s, then totals and the fraction of the binding limit reached.

Ctrl-C stops it cleanly.

Exit status: 0 ok; 1 the demo failed (or the fleet broke the bound, or
the fake API answered a 429); 2 usage error.
`, stdout, stderr)
	var (
		duration, killAt time.Duration
		rate             float64
		clients          int
		verbose, secure  bool
		scene            string
	)
	c.Duration(&duration, "duration", 15*time.Second, durPositive, "how long scene 1 runs (Ctrl-C stops earlier)")
	c.Float(&rate, "rate", "R", 10, func(x float64) bool { return x > 0 && x <= 1000 }, "a number > 0 and <= 1000", "permits per second of the demo limit (strict spacing)")
	c.Int(&clients, "clients", "N", 6, 1, 256, "an integer from 1 to 256", "concurrent clients, spread over the three nodes")
	c.Duration(&killAt, "kill-after", 5*time.Second, durNonNegative, "kill the leader after this long (0: never)")
	c.Bool(&verbose, "verbose", false, "show the nodes' logs")
	c.Bool(&secure, "secure", false, "run the cluster secured: raft over mutual TLS, the API over TLS, an admin token on every request (certificates and token made for the run)")
	c.Choice(&scene, "scene", "all", "which scenes to run: 1 (clients, leader kill), 2 (leased workers, a partitioned group), 3 (multi-limit reserves for a fake LLM API) or all", "1", "2", "3", "all")
	s2 := scene2{workersPerGroup: 2, callers: 1, ttl: time.Second}
	c.DurationAtLeast(&s2.duration, "scene2-duration", 15*time.Second, durPositive, 4*time.Second, "how long scene 2 runs; group C is cut off from the register from 1/4 to 1/2 of it")
	c.Float(&s2.rate, "scene2-rate", "R", 300, func(x float64) bool { return x >= 10 && x <= 100_000 }, "a number from 10 to 100000", "permits per second of scene 2's leased limit")
	s3 := scene3{workers: s3DefaultWorkers}
	c.DurationAtLeast(&s3.duration, "scene3-duration", s3DefaultSceneDuration, durPositive, 2*time.Second, "how long scene 3 runs")
	c.Int64(&s3.tokensPerSec, "scene3-tpm", "N", s3DefaultTokensPerSec, 3000, 1_000_000, "an integer from 3000 to 1000000",
		"tokens per second of scene 3's llm-tpm limit (15000: tokens bind first; 40000: requests do)")
	c.Float(&s3.burstSeconds, "scene3-burst", "S", s3BurstSeconds, func(x float64) bool { return x >= 0 && x <= 60 }, "a number of seconds from 0 to 60",
		"seconds of llm-tpm's rate its bursty store holds: the most a window holds beyond the rate, and the room for refunds of estimates crossing each grant")
	if ok, code := c.parse(args); !ok {
		return code
	}
	which := map[string]int{"1": 1, "2": 2, "3": 3, "all": 0}[scene]
	s2.cutAfter, s2.cutFor = s2.duration/4, s2.duration/4
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s2.secure = secure
	if err := demo(ctx, stdout, rate, clients, killAt, verbose, duration, which, s2, s3); err != nil {
		return c.fail(exitFailure, err)
	}
	return 0
}

func loopbackAddrs(n int) ([]string, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	var out []string
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// demo runs the cluster and the scenes: scene 1 for duration, then scene
// 2 as s2 says, then scene 3 as s3 says (scene 0: all, else only the one
// named).
func demo(ctx context.Context, out io.Writer, rate float64, clients int, killAfter time.Duration, verbose bool,
	duration time.Duration, scene int, s2 scene2, s3 scene3) error {
	addrs, err := loopbackAddrs(6)
	if err != nil {
		return err
	}
	level := hclog.Off
	if verbose {
		level = hclog.Info
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "demo", Level: level, Output: os.Stderr})
	if s2.secure {
		if s2.sec, err = newDemoSecurity([]string{"n1", "n2", "n3"}); err != nil {
			return fmt.Errorf("demo: certificates: %w", err)
		}
		defer s2.sec.close()
		fmt.Fprint(out, s2.sec.describe())
	}
	sec := s2.sec
	var nodes []*demoNode
	var initial []raft.Server
	for i := 0; i < 3; i++ {
		dir, err := os.MkdirTemp("", "permitd-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		d := &demoNode{id: fmt.Sprintf("n%d", i+1), raftAddr: addrs[2*i], httpAddr: addrs[2*i+1], dir: dir}
		nodes = append(nodes, d)
		initial = append(initial, raft.Server{ID: raft.ServerID(d.id), Address: raft.ServerAddress(d.raftAddr), Suffrage: raft.Voter})
	}
	start := func(d *demoNode) error {
		n, err := node.New(node.Config{ID: d.id, DataDir: d.dir, RaftAddr: d.raftAddr, InitialCluster: initial, Logger: logger.Named(d.id),
			Network: sec.network(d.id)})
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", d.httpAddr)
		if err != nil {
			n.Shutdown()
			return err
		}
		d.node = n
		ln, h := sec.serve(d.id, ln, server.NewHandler(n, server.HandlerOptions{Logger: logger.Named("http")}))
		d.srv = server.NewHTTPServer(d.httpAddr, h)
		go d.srv.Serve(ln)
		return nil
	}
	stopNode := func(d *demoNode, crash bool) {
		if d.node == nil {
			return
		}
		if crash {
			d.node.Kill()
		} else {
			d.node.Shutdown()
		}
		d.srv.Close()
		d.node = nil
	}
	for _, d := range nodes {
		if err := start(d); err != nil {
			return err
		}
	}
	defer func() {
		for _, d := range nodes {
			stopNode(d, false)
		}
	}()
	leader := func() (*demoNode, uint64) {
		for _, d := range nodes {
			if d.node == nil {
				continue
			}
			if st := d.node.Status(); st.State == "leader" && st.Ready {
				return d, st.Term
			}
		}
		return nil, 0
	}
	fmt.Fprintf(out, "permitd demo: 3 nodes on %s, %s, %s (HTTP)\n", nodes[0].httpAddr, nodes[1].httpAddr, nodes[2].httpAddr)
	for {
		if l, _ := leader(); l != nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}
	if scene == 0 || scene == 1 {
		ctx1, cancel := context.WithTimeout(ctx, duration)
		err := scene1(ctx1, out, nodes, leader, stopNode, rate, clients, killAfter, sec)
		cancel()
		if err != nil {
			return err
		}
	}
	if scene == 1 || ctx.Err() != nil {
		return nil
	}
	var servers []string
	for _, d := range nodes {
		if d.node != nil {
			servers = append(servers, d.httpAddr)
		}
	}
	s2.logger, s2.servers = logger, servers
	s2.leader = func() *node.Node {
		for ctx.Err() == nil {
			if l, _ := leader(); l != nil {
				return l.node
			}
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	}
	if scene == 0 || scene == 2 {
		if err := runScene2(ctx, out, s2); err != nil {
			return err
		}
	}
	if (scene != 0 && scene != 3) || ctx.Err() != nil {
		return nil
	}
	s3.logger, s3.servers, s3.leader, s3.sec = logger, servers, s2.leader, sec
	return runScene3(ctx, out, s3)
}

// scene1 runs the demo's first scene until ctx ends: clients on a strict
// limit, and the leader killed once after killAfter.
func scene1(ctx context.Context, out io.Writer, nodes []*demoNode, leader func() (*demoNode, uint64), stopNode func(*demoNode, bool),
	rate float64, clients int, killAfter time.Duration, security *demoSecurity) error {
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: rate, Per: time.Second, MaxReserved: int64(clients), Expiry: time.Duration(float64(time.Second) / rate / 10)})
	if err != nil {
		return err
	}
	l, _ := leader()
	if _, err := l.node.PutLimit(ctx, fsm.PutLimit{Name: "demo", Config: cfg}); err != nil {
		return fmt.Errorf("create limit: %w", err)
	}
	interval := time.Duration(cfg.IntervalNanos)
	fmt.Fprintf(out, "limit \"demo\": strict, %g/s (one permit every %v), %d clients\n", rate, interval, clients)

	type use struct {
		at   time.Time
		wait time.Duration
	}
	uses := make(chan use, 4096)
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		var servers []string
		for k := 0; k < 3; k++ {
			servers = append(servers, nodes[(i+k)%3].httpAddr)
		}
		c, err := client.New(servers, security.clientOptions()...)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				if err := c.Acquire(ctx, "demo", 1); err != nil {
					continue
				}
				select {
				case uses <- use{at: time.Now(), wait: time.Since(t0)}:
				case <-ctx.Done():
				}
			}
		}()
	}
	go func() { wg.Wait(); close(uses) }()

	began := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var all []time.Time
	var sec []use
	killed := killAfter <= 0
	for {
		select {
		case u, ok := <-uses:
			if !ok {
				summarize(out, all, interval)
				return nil
			}
			all = append(all, u.at)
			sec = append(sec, u)
		case <-tick.C:
			minGap := time.Duration(0)
			var waitSum time.Duration
			for i, u := range sec {
				waitSum += u.wait
				if i > 0 {
					if g := u.at.Sub(sec[i-1].at); minGap == 0 || g < minGap {
						minGap = g
					}
				}
			}
			meanWait := time.Duration(0)
			if len(sec) > 0 {
				meanWait = waitSum / time.Duration(len(sec))
			}
			lid, term := "none (election)", uint64(0)
			if l, t := leader(); l != nil {
				lid, term = l.id, t
			}
			fmt.Fprintf(out, "t=%3.0fs  grants/s=%3d  min gap=%-10v mean wait=%-10v leader=%s term=%d\n",
				time.Since(began).Seconds(), len(sec), minGap.Round(time.Millisecond), meanWait.Round(time.Millisecond), lid, term)
			sec = sec[:0]
			if !killed && time.Since(began) >= killAfter {
				killed = true
				if l, _ := leader(); l != nil {
					fmt.Fprintf(out, "*** killing leader %s (crash, no handover)\n", l.id)
					stopNode(l, true)
				}
			}
		}
	}
}

// summarize prints the run's totals and checks the spacing clients saw.
func summarize(out io.Writer, uses []time.Time, interval time.Duration) {
	sort.Slice(uses, func(i, j int) bool { return uses[i].Before(uses[j]) })
	maxWin, j := 0, 0
	for i := range uses {
		for uses[i].Sub(uses[j]) >= time.Second {
			j++
		}
		maxWin = max(maxWin, i-j+1)
	}
	minGap := time.Duration(0)
	for i := 1; i < len(uses); i++ {
		if g := uses[i].Sub(uses[i-1]); minGap == 0 || g < minGap {
			minGap = g
		}
	}
	bound := int(time.Second/interval) + 1
	fmt.Fprintf(out, "done: %d permits; most in any 1 s window: %d (strict bound floor(W/I)+1 = %d); smallest gap seen by clients: %v (interval %v, less network jitter)\n",
		len(uses), maxWin, bound, minGap.Round(100*time.Microsecond), interval)
}
