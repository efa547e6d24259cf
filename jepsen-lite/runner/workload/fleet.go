package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/httpjson"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
	"github.com/permitd/permitd/jepsen-lite/runner/process"
)

// sidecar is one `permitd worker` of the leased workload: its name,
// group, addresses, the supervisor of its processes, and what the runner
// observed of each process (incarnation).
type sidecar struct {
	Name       string
	Group      string
	Index      int
	HTTPAddr   string
	GossipAddr string
	LogPath    string
	proc       *process.Supervisor
	// relay is the relay it sends its lease commands through first
	// (nil: the register directly).
	relay *relayProc

	mu       sync.Mutex
	incs     []*checker.WorkerIncarnation // incs[g-1] is generation g
	regFault string                       // register fault the process accepted ("" none)
	regGen   int                          // the generation that accepted it
}

// gen returns the current generation (0 before the first start).
func (s *sidecar) gen() int { return s.proc.State().Generation }

// up reports whether s runs, unpaused.
func (s *sidecar) up() bool {
	st := s.proc.State()
	return st.Up && !st.Paused
}

// addGrant records a grant answered by generation g at atNanos.
func (s *sidecar) addGrant(g int, atNanos int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g >= 1 && g <= len(s.incs) {
		s.incs[g-1].GrantNanos = append(s.incs[g-1].GrantNanos, atNanos)
	}
}

// addSnapshot records a status read of generation g.
func (s *sidecar) addSnapshot(g int, snap checker.WorkerSnapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g >= 1 && g <= len(s.incs) {
		s.incs[g-1].Snapshots = append(s.incs[g-1].Snapshots, snap)
	}
}

// Fleet is the leased workload's worker sidecars: one `permitd worker
// --test-hooks` process each, supervised by package process, all on
// loopback in the runner's namespace and gossiping with each other; and
// the lease relays some of them send their lease commands through
// (relay.go).
type Fleet struct {
	bin      string
	cfg      Config
	limit    string
	servers  []string
	start    time.Time
	logf     func(string, ...any)
	sidecars []*sidecar
	relays   []*relayProc
	hc       *http.Client

	mu       sync.Mutex
	isolated map[string]string // group → register fault mode

	failClosed    atomic.Int64
	failClosedMsg atomic.Value // string: one 503 answer, as an example
}

// NewFleet lays out cfg.Workers sidecars of bin in cfg.Groups groups
// (worker i in group i%G+1, named like the other workloads' workers) on
// loopback, leasing limit from servers, and RelayCount relays (sidecar i
// through relay RelayOf(i)); nothing is started. With
// cfg.Creds they reach the servers over TLS with the worker token (given
// in their environment, out of the logged command line).
func NewFleet(bin string, cfg Config, limit string, servers []string, logf func(string, ...any)) (*Fleet, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	f := &Fleet{bin: bin, cfg: cfg, limit: limit, servers: servers, logf: logf, isolated: map[string]string{},
		hc: &http.Client{Timeout: 2 * time.Second}}
	dir := filepath.Join(cfg.OutDir, "workers")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	var held []io.Closer
	defer func() {
		for _, h := range held {
			h.Close()
		}
	}()
	nr := RelayCount(cfg.Leased.Relays, cfg.Workers)
	hr, err := f.layoutRelays(nr, dir)
	for _, h := range hr {
		held = append(held, h)
	}
	if err != nil {
		f.closeProxies()
		return nil, err
	}
	for i := range cfg.Workers {
		h, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			f.closeProxies()
			return nil, fmt.Errorf("workload: no free port for a worker: %w", err)
		}
		held = append(held, h)
		gossip, closers, err := gossipPort()
		if err != nil {
			f.closeProxies()
			return nil, err
		}
		held = append(held, closers...)
		name := Name(i, cfg.Groups)
		s := &sidecar{
			Name: name, Group: fmt.Sprintf("g%d", i%max(cfg.Groups, 1)+1), Index: i,
			HTTPAddr: h.Addr().String(), GossipAddr: gossip, LogPath: filepath.Join(dir, name+".log"),
		}
		if r := RelayOf(i, nr); r >= 0 {
			s.relay = f.relays[r]
		}
		s.proc = process.New(process.Spec{Name: name, Label: "worker " + name, LogPath: s.LogPath, Logf: logf,
			Command: func() (string, []string) { return f.bin, f.args(s) }, Env: cfg.Creds.WorkerEnv()})
		f.sidecars = append(f.sidecars, s)
	}
	return f, nil
}

// gossipPort finds a loopback port free for both TCP and UDP (memberlist
// uses both), holding both until the caller closes them.
func gossipPort() (string, []io.Closer, error) {
	for attempt := 0; attempt < 20; attempt++ {
		t, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", nil, fmt.Errorf("workload: no free gossip port: %w", err)
		}
		u, err := net.ListenPacket("udp", t.Addr().String())
		if err != nil {
			t.Close()
			continue
		}
		return t.Addr().String(), []io.Closer{t, u}, nil
	}
	return "", nil, errors.New("workload: no loopback port free for both TCP and UDP (gossip)")
}

// args is s's command line (without the program).
func (f *Fleet) args(s *sidecar) []string {
	var join []string
	for _, o := range f.sidecars {
		if o != s {
			join = append(join, o.GossipAddr)
		}
	}
	args := []string{"worker", "--name", s.Name, "--group", s.Group, "--limit", f.limit,
		"--servers", strings.Join(f.servers, ","), "--gossip-addr", s.GossipAddr, "--join", strings.Join(join, ","),
		"--http-addr", s.HTTPAddr, "--ttl", f.cfg.Leased.TTL.String(), "--gossip-push-pull", "1s",
		"--test-hooks", "--log-level", "info"}
	if f.cfg.Leased.Margin > 0 {
		args = append(args, "--margin", f.cfg.Leased.Margin.String())
	}
	if s.relay != nil {
		args = append(args, "--relay", s.relay.Listen)
	}
	// A secure run: TLS to the agents (the token is in the environment,
	// see NewFleet); the sidecar itself stays plain HTTP on loopback.
	args = append(args, f.cfg.Creds.WorkerArgs()...)
	return append(args, f.cfg.Leased.WorkerFlags...)
}

// startOne starts s (it must be down) and opens its next incarnation.
func (f *Fleet) startOne(s *sidecar) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.proc.Start()
	if err != nil {
		return err
	}
	s.incs = append(s.incs, &checker.WorkerIncarnation{Worker: s.Name, Generation: g})
	return nil
}

// Launch starts the relays, then every sidecar, and waits until each
// answers /healthz (a worker serves only once it holds its first lease or
// gave up trying); start is the history's time base. On error the caller
// must still call StopAll.
func (f *Fleet) Launch(ctx context.Context, start time.Time) error {
	f.start = start
	if err := f.launchRelays(ctx); err != nil {
		return err
	}
	for _, s := range f.sidecars {
		if err := f.startOne(s); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(f.sidecars))
	for i, s := range f.sidecars {
		wg.Go(func() {
			err := s.proc.WaitReady(ctx, time.Now().Add(20*time.Second), 100*time.Millisecond, func(ctx context.Context) error {
				return f.do(ctx, s, http.MethodGet, "/healthz", nil, nil, 500*time.Millisecond)
			})
			if err != nil {
				errs[i] = fmt.Errorf("workload: worker %s not healthy: %w (see %s)", s.Name, err, s.LogPath)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// do sends a control request to s and decodes a 2xx answer into out.
func (f *Fleet) do(ctx context.Context, s *sidecar, method, path string, in, out any, timeout time.Duration) error {
	return httpjson.Do(ctx, f.hc, "worker "+s.Name, s.HTTPAddr, method, path, in, out, timeout)
}

// sidecarStatusJSON is the part of a sidecar's GET /v1/status the runner
// reads.
type sidecarStatusJSON struct {
	Stats struct {
		Leased        int64 `json:"leased_permits"`
		Spent         int64 `json:"spent_permits"`
		StolenIn      int64 `json:"stolen_in_permits"`
		StolenOut     int64 `json:"stolen_out_permits"`
		Credited      int64 `json:"credited_permits"`
		ExpiredUnused int64 `json:"expired_unused_permits"`
		Outstanding   int64 `json:"outstanding_permits"`
	} `json:"stats"`
}

// read reads s's status into its current incarnation; false if it did not
// answer (or was restarted meanwhile).
func (f *Fleet) read(ctx context.Context, s *sidecar, timeout time.Duration) bool {
	g := s.gen()
	sent := int64(time.Since(f.start))
	var st sidecarStatusJSON
	if err := f.do(ctx, s, http.MethodGet, "/v1/status", nil, &st, timeout); err != nil || s.gen() != g {
		return false
	}
	c := st.Stats
	s.addSnapshot(g, checker.WorkerSnapshot{SentNanos: sent, WorkerCounters: checker.WorkerCounters{
		Leased: c.Leased, Spent: c.Spent, StolenIn: c.StolenIn, StolenOut: c.StolenOut,
		Credited: c.Credited, ExpiredUnused: c.ExpiredUnused, Outstanding: c.Outstanding,
	}})
	return true
}

// readAll reads every running, unpaused sidecar once, in parallel.
func (f *Fleet) readAll(ctx context.Context, timeout time.Duration) {
	var wg sync.WaitGroup
	for _, s := range f.sidecars {
		if s.up() {
			wg.Go(func() { f.read(ctx, s, timeout) })
		}
	}
	wg.Wait()
}

// Poll reads every sidecar's counters every 250ms and pushes the register
// faults to sidecars that miss them, until ctx ends.
func (f *Fleet) Poll(ctx context.Context) {
	for wait.Sleep(ctx, 250*time.Millisecond) == nil {
		f.readAll(ctx, 500*time.Millisecond)
		f.reconcile(ctx)
	}
}

// reconcile pushes each running, unpaused sidecar's register fault (its
// group's, or none) unless that process already accepted it.
func (f *Fleet) reconcile(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range f.sidecars {
		f.mu.Lock()
		want := f.isolated[s.Group]
		f.mu.Unlock()
		st := s.proc.State()
		s.mu.Lock()
		same := s.regGen == st.Generation && s.regFault == want
		s.mu.Unlock()
		if !st.Up || st.Paused || same {
			continue
		}
		wg.Go(func() {
			var err error
			if want == "" {
				err = f.do(ctx, s, http.MethodDelete, "/v1/debug/faults", nil, nil, time.Second)
			} else {
				err = f.do(ctx, s, http.MethodPost, "/v1/debug/faults", map[string]string{"register": want}, nil, time.Second)
			}
			if err != nil {
				f.logf("register fault for worker %s not applied yet: %v", s.Name, err)
				return
			}
			s.mu.Lock()
			if s.gen() == st.Generation {
				s.regFault, s.regGen = want, st.Generation
			}
			s.mu.Unlock()
		})
	}
	wg.Wait()
}

// StopAll stops every sidecar gracefully (SIGTERM: the worker returns its
// lease; SIGKILL after grace), in parallel, then the relays (after the
// workers, whose returns may go through them) and their proxies.
func (f *Fleet) StopAll(grace time.Duration) {
	var wg sync.WaitGroup
	for _, s := range f.sidecars {
		wg.Go(func() { s.proc.Stop(grace) })
	}
	wg.Wait()
	f.stopRelays(context.Background(), grace)
}

// closeProxies closes the relays' proxies (a layout given up).
func (f *Fleet) closeProxies() {
	for _, rp := range f.relays {
		for _, p := range rp.proxies {
			p.Close()
		}
	}
}

// Finish reads every sidecar twice after the load stopped (the counters'
// last two reads, which the fleet's steal check compares), then stops
// them (returning their leases).
func (f *Fleet) Finish(ctx context.Context) {
	_ = wait.Sleep(ctx, 500*time.Millisecond) // steals in flight land
	f.readAll(ctx, 2*time.Second)
	f.readAll(ctx, 2*time.Second)
	f.StopAll(5 * time.Second)
}
