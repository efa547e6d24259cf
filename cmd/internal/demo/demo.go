package demo

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport"
	"github.com/permitd/permitd/transport/client"
)

// demoNode is one embedded node with its HTTP server.
type demoNode struct {
	id, raftAddr, httpAddr, dir string
	node                        *node.Node
	srv                         *http.Server
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

// Config is what the demo runs (permitd demo's flags): which scenes,
// how, and the tuning of each.
type Config struct {
	// Scene is the one Scene to run (1, 2 or 3), or 0 for all of them in
	// turn.
	Scene int
	// Verbose shows the nodes' logs; Secure runs the cluster secured
	// (secure.go).
	Verbose, Secure bool
	Scene1          Scene1Config
	Scene2          Scene2Config
	Scene3          Scene3Config
}

// Scene1Config tunes scene 1: how long it runs, the strict limit's rate,
// the clients, and when the leader is killed (0: never).
type Scene1Config struct {
	Duration  time.Duration
	Rate      float64
	Clients   int
	KillAfter time.Duration
}

// Scene2Config tunes scene 2: how long it runs (group C is cut off from
// 1/4 to 1/2 of it) and the leased limit's rate.
type Scene2Config struct {
	Duration time.Duration
	Rate     float64
}

// Scene3Config tunes scene 3: how long it runs, and llm-tpm's rate and
// burst.
type Scene3Config struct {
	Duration     time.Duration
	TokensPerSec int64
	BurstSeconds float64
}

// Run runs the cluster and the scenes cfg names, in turn.
func Run(ctx context.Context, out io.Writer, cfg Config) error {
	s2 := scene2{rate: cfg.Scene2.Rate, duration: cfg.Scene2.Duration, cutAfter: cfg.Scene2.Duration / 4, cutFor: cfg.Scene2.Duration / 4,
		workersPerGroup: 2, callers: 1, ttl: time.Second, secure: cfg.Secure}
	s3 := scene3{duration: cfg.Scene3.Duration, tokensPerSec: cfg.Scene3.TokensPerSec, burstSeconds: cfg.Scene3.BurstSeconds, workers: s3DefaultWorkers}
	scene, verbose := cfg.Scene, cfg.Verbose
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
		ln, h := sec.serve(d.id, ln, transport.NewHandler(n, transport.HandlerOptions{Logger: logger.Named("http")}))
		d.srv = transport.NewServer(d.httpAddr, h)
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
		ctx1, cancel := context.WithTimeout(ctx, cfg.Scene1.Duration)
		err := scene1(ctx1, out, nodes, leader, stopNode, cfg.Scene1.Rate, cfg.Scene1.Clients, cfg.Scene1.KillAfter, sec)
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
	if _, err := l.node.PutLimit(ctx, "demo", cfg); err != nil {
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
