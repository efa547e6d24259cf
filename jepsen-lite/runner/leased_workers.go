package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/fakeapi"
	"github.com/permitd/permitd/jepsen-lite/history"
)

// sidecar is one `permitd worker` process of the leased workload: its
// name, group, addresses, and every process (incarnation) that ran it.
type sidecar struct {
	Name       string
	Group      string
	Index      int
	HTTPAddr   string
	GossipAddr string
	LogPath    string

	mu         sync.Mutex
	proc       *process
	paused     bool
	generation int
	restarts   int
	crashes    []string
	incs       []*checker.WorkerIncarnation // incs[g-1] is generation g
	regFault   string                       // register fault the process accepted ("" none)
	regGen     int                          // the generation that accepted it
}

// gen returns the current generation (0 before the first start).
func (s *sidecar) gen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.generation
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

// fleet is the leased workload's worker sidecars.
type fleet struct {
	bin      string
	cfg      Config
	limit    string
	servers  []string
	start    time.Time
	logf     func(string, ...any)
	sidecars []*sidecar
	hc       *http.Client

	mu       sync.Mutex
	isolated map[string]string // group → register fault mode

	failClosed    atomic.Int64
	failClosedMsg atomic.Value // string: one 503 answer, as an example
}

// newFleet lays out cfg.Workers sidecars in cfg.Groups groups (worker i in
// group i%G+1, named like the other workloads' workers) on loopback.
func newFleet(bin string, cfg Config, limit string, servers []string, logf func(string, ...any)) (*fleet, error) {
	f := &fleet{bin: bin, cfg: cfg, limit: limit, servers: servers, logf: logf, isolated: map[string]string{},
		hc: &http.Client{Timeout: 2 * time.Second}}
	dir := filepath.Join(cfg.OutDir, "workers")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	var held []io.Closer
	defer func() {
		for _, h := range held {
			h.Close()
		}
	}()
	for i := range cfg.Workers {
		h, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("runner: no free port for a worker: %w", err)
		}
		held = append(held, h)
		gossip, closers, err := gossipPort()
		if err != nil {
			return nil, err
		}
		held = append(held, closers...)
		name := fmt.Sprintf("g%d-w%d", i%cfg.Groups+1, i)
		f.sidecars = append(f.sidecars, &sidecar{
			Name: name, Group: fmt.Sprintf("g%d", i%cfg.Groups+1), Index: i,
			HTTPAddr: h.Addr().String(), GossipAddr: gossip, LogPath: filepath.Join(dir, name+".log"),
		})
	}
	return f, nil
}

// gossipPort finds a loopback port free for both TCP and UDP (memberlist
// uses both), holding both until the caller closes them.
func gossipPort() (string, []io.Closer, error) {
	for attempt := 0; attempt < 20; attempt++ {
		t, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", nil, fmt.Errorf("runner: no free gossip port: %w", err)
		}
		u, err := net.ListenPacket("udp", t.Addr().String())
		if err != nil {
			t.Close()
			continue
		}
		return t.Addr().String(), []io.Closer{t, u}, nil
	}
	return "", nil, errors.New("runner: no loopback port free for both TCP and UDP (gossip)")
}

// args is s's command line.
func (f *fleet) args(s *sidecar) []string {
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
	return append(args, f.cfg.Leased.WorkerFlags...)
}

// startOne starts s (it must be down) and opens its next incarnation.
func (f *fleet) startOne(s *sidecar) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil && !s.proc.hasExited() {
		return fmt.Errorf("runner: start %s: already running as pid %d", s.Name, s.proc.pid)
	}
	if s.proc != nil {
		s.crashes = append(s.crashes, fmt.Sprintf("%s (pid %d)", s.Name, s.proc.pid))
	}
	p, err := startProcess(s.Name, s.LogPath, s.generation+1, f.bin, f.args(s))
	if err != nil {
		return err
	}
	s.proc, s.paused = p, false
	s.generation++
	if s.generation > 1 {
		s.restarts++
	}
	s.incs = append(s.incs, &checker.WorkerIncarnation{Worker: s.Name, Generation: s.generation})
	f.logf("started worker %s (pid %d)", s.Name, p.pid)
	return nil
}

// startAll starts every sidecar and waits until each answers /healthz (a
// worker serves only once it holds its first lease or gave up trying).
func (f *fleet) startAll(ctx context.Context) error {
	for _, s := range f.sidecars {
		if err := f.startOne(s); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(f.sidecars))
	for i, s := range f.sidecars {
		wg.Go(func() { errs[i] = f.waitHealthy(ctx, s, 20*time.Second) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitHealthy waits until s answers GET /healthz.
func (f *fleet) waitHealthy(ctx context.Context, s *sidecar, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f.do(ctx, s, "GET", "/healthz", nil, nil, 500*time.Millisecond)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || sleepCtx(ctx, 100*time.Millisecond) != nil {
			return fmt.Errorf("runner: worker %s not healthy within %v: %v (see %s)", s.Name, timeout, err, s.LogPath)
		}
	}
}

// do sends a control request to s and decodes a 2xx answer into out.
func (f *fleet) do(ctx context.Context, s *sidecar, method, path string, in, out any, timeout time.Duration) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, "http://"+s.HTTPAddr+path, body)
	if err != nil {
		return err
	}
	resp, err := f.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s on %s: %d %s", method, path, s.Name, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// sidecarStatusJSON is the part of a sidecar's GET /v1/status the runner
// reads.
type sidecarStatusJSON struct {
	Lease struct {
		CutOff    bool   `json:"cut_off"`
		LastError string `json:"last_error"`
	} `json:"lease"`
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
func (f *fleet) read(ctx context.Context, s *sidecar, timeout time.Duration) bool {
	g := s.gen()
	sent := int64(time.Since(f.start))
	var st sidecarStatusJSON
	if err := f.do(ctx, s, "GET", "/v1/status", nil, &st, timeout); err != nil || s.gen() != g {
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
func (f *fleet) readAll(ctx context.Context, timeout time.Duration) {
	var wg sync.WaitGroup
	for _, s := range f.sidecars {
		s.mu.Lock()
		up := s.proc != nil && !s.proc.hasExited() && !s.paused
		s.mu.Unlock()
		if up {
			wg.Go(func() { f.read(ctx, s, timeout) })
		}
	}
	wg.Wait()
}

// poll reads every sidecar's counters every 250ms and pushes the register
// faults to sidecars that miss them, until ctx ends.
func (f *fleet) poll(ctx context.Context) {
	for sleepCtx(ctx, 250*time.Millisecond) == nil {
		f.readAll(ctx, 500*time.Millisecond)
		f.reconcile(ctx)
	}
}

// reconcile pushes each running, unpaused sidecar's register fault (its
// group's, or none) unless that process already accepted it.
func (f *fleet) reconcile(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range f.sidecars {
		f.mu.Lock()
		want := f.isolated[s.Group]
		f.mu.Unlock()
		s.mu.Lock()
		up := s.proc != nil && !s.proc.hasExited() && !s.paused
		same := s.regGen == s.generation && s.regFault == want
		gen := s.generation
		s.mu.Unlock()
		if !up || same {
			continue
		}
		wg.Go(func() {
			var err error
			if want == "" {
				err = f.do(ctx, s, "DELETE", "/v1/debug/faults", nil, nil, time.Second)
			} else {
				err = f.do(ctx, s, "POST", "/v1/debug/faults", map[string]string{"register": want}, nil, time.Second)
			}
			if err != nil {
				f.logf("register fault for worker %s not applied yet: %v", s.Name, err)
				return
			}
			s.mu.Lock()
			if s.generation == gen {
				s.regFault, s.regGen = want, gen
			}
			s.mu.Unlock()
		})
	}
	wg.Wait()
}

// kill reads s's counters one last time, then SIGKILLs it and waits until
// it is reaped.
func (f *fleet) kill(ctx context.Context, s *sidecar) error {
	f.read(ctx, s, 300*time.Millisecond)
	s.mu.Lock()
	p := s.proc
	s.proc, s.paused = nil, false
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	_ = syscall.Kill(p.pid, syscall.SIGKILL)
	select {
	case <-p.exited:
		f.logf("killed worker %s (pid %d)", s.Name, p.pid)
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("runner: worker %s (pid %d) not reaped 10s after SIGKILL", s.Name, p.pid)
	}
}

// signal sends SIGSTOP (pause) or SIGCONT to s.
func (f *fleet) signal(s *sidecar, pause bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.paused == pause {
		return nil
	}
	sig := syscall.SIGCONT
	if pause {
		sig = syscall.SIGSTOP
	}
	if err := syscall.Kill(s.proc.pid, sig); err != nil {
		return fmt.Errorf("runner: %v worker %s (pid %d): %w", sig, s.Name, s.proc.pid, err)
	}
	s.paused = pause
	return nil
}

// stop ends s gracefully (SIGCONT, SIGTERM: the worker returns its lease),
// SIGKILL after grace.
func (f *fleet) stop(s *sidecar, grace time.Duration) {
	s.mu.Lock()
	p := s.proc
	s.proc, s.paused = nil, false
	s.mu.Unlock()
	p.terminate("worker "+s.Name, grace, f.logf)
}

// stopAll stops every sidecar, in parallel.
func (f *fleet) stopAll(grace time.Duration) {
	var wg sync.WaitGroup
	for _, s := range f.sidecars {
		wg.Go(func() { f.stop(s, grace) })
	}
	wg.Wait()
}

// healAll lifts every register fault, restarts dead sidecars and continues
// paused ones (the final heal).
func (f *fleet) healAll(ctx context.Context) {
	f.mu.Lock()
	clear(f.isolated)
	f.mu.Unlock()
	for _, s := range f.sidecars {
		s.mu.Lock()
		down := s.proc == nil
		s.mu.Unlock()
		if down {
			if err := f.startOne(s); err != nil {
				f.logf("heal: %v", err)
			}
		}
		if err := f.signal(s, false); err != nil {
			f.logf("heal: %v", err)
		}
	}
	for attempt := 0; attempt < 20 && ctx.Err() == nil; attempt++ {
		f.reconcile(ctx)
		if f.allHealed() {
			return
		}
		_ = sleepCtx(ctx, 250*time.Millisecond)
	}
}

// allHealed reports whether every sidecar runs with no register fault.
func (f *fleet) allHealed() bool {
	for _, s := range f.sidecars {
		s.mu.Lock()
		ok := s.proc != nil && !s.paused && s.regGen == s.generation && s.regFault == ""
		s.mu.Unlock()
		if !ok {
			return false
		}
	}
	return true
}

// finish reads every sidecar twice after the load stopped (the counters'
// last two reads, which the fleet's steal check compares), then stops
// them (returning their leases).
func (f *fleet) finish(ctx context.Context) {
	_ = sleepCtx(ctx, 500*time.Millisecond) // steals in flight land
	f.readAll(ctx, 2*time.Second)
	f.readAll(ctx, 2*time.Second)
	f.stopAll(5 * time.Second)
}

// observations are the sidecars' incarnations for the checker.
func (f *fleet) observations() *checker.LeasedInput {
	in := &checker.LeasedInput{}
	for _, s := range f.sidecars {
		s.mu.Lock()
		for _, inc := range s.incs {
			c := *inc
			c.Snapshots = append([]checker.WorkerSnapshot(nil), inc.Snapshots...)
			c.GrantNanos = append([]int64(nil), inc.GrantNanos...)
			in.Incarnations = append(in.Incarnations, c)
		}
		s.mu.Unlock()
	}
	return in
}

// logs returns the sidecars' logs for the logs checker.
func (f *fleet) logs() ([]checker.Log, []string) {
	var logs []checker.Log
	var errs []string
	for _, s := range f.sidecars {
		b, err := os.ReadFile(s.LogPath)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		logs = append(logs, checker.Log{Name: "workers/" + s.Name + ".log", Text: string(b)})
	}
	return logs, errs
}

// unexpectedExits lists sidecars that exited without the runner's signal.
func (f *fleet) unexpectedExits() []string {
	var out []string
	for _, s := range f.sidecars {
		s.mu.Lock()
		out = append(out, s.crashes...)
		if s.proc != nil && s.proc.hasExited() {
			out = append(out, fmt.Sprintf("%s (pid %d)", s.Name, s.proc.pid))
		}
		s.mu.Unlock()
	}
	return out
}

// LeasedSummary is the leased workload's part of the summary.
type LeasedSummary struct {
	// TTL, Margin, C and O are the lease settings (Margin 0: the
	// worker's default).
	TTLNanos              int64 `json:"ttl_ns"`
	MarginNanos           int64 `json:"margin_ns"`
	BurstPermits          int64 `json:"burst_permits"`
	MaxOutstandingPermits int64 `json:"max_outstanding_permits"`
	// Formula is the bound judged at the fake API.
	Formula string `json:"formula"`
	// FailClosed counts 503 answers (the sidecar failed closed);
	// FailClosedExample is one of them.
	FailClosed        int64  `json:"fail_closed"`
	FailClosedExample string `json:"fail_closed_example,omitempty"`
	// Fleet sums every process's last counters.
	Fleet   checker.WorkerCounters `json:"fleet"`
	Workers []LeasedWorkerReport   `json:"workers"`
}

// LeasedWorkerReport is one sidecar in the summary.
type LeasedWorkerReport struct {
	Name       string `json:"name"`
	Group      string `json:"group"`
	HTTPAddr   string `json:"http_addr"`
	GossipAddr string `json:"gossip_addr"`
	Log        string `json:"log"`
	Restarts   int    `json:"restarts"`
	// Last is the sum of every process's last read counters.
	Last checker.WorkerCounters `json:"last"`
	// Grants are the 200 answers the runner received from it.
	Grants int `json:"grants"`
}

// summary reports the fleet.
func (f *fleet) summary(li limitInfo) *LeasedSummary {
	out := &LeasedSummary{
		TTLNanos: int64(f.cfg.Leased.TTL), MarginNanos: int64(f.cfg.Leased.Margin),
		BurstPermits: li.BurstPermits, MaxOutstandingPermits: li.MaxOutstandingPermits, Formula: li.WindowFormula,
		FailClosed: f.failClosed.Load(),
	}
	out.FailClosedExample, _ = f.failClosedMsg.Load().(string)
	for _, s := range f.sidecars {
		s.mu.Lock()
		rep := LeasedWorkerReport{Name: s.Name, Group: s.Group, HTTPAddr: s.HTTPAddr, GossipAddr: s.GossipAddr,
			Log: filepath.Join("workers", s.Name+".log"), Restarts: s.restarts}
		for _, inc := range s.incs {
			rep.Grants += len(inc.GrantNanos)
			if n := len(inc.Snapshots); n > 0 {
				addCounters(&rep.Last, inc.Snapshots[n-1].WorkerCounters)
			}
		}
		s.mu.Unlock()
		addCounters(&out.Fleet, rep.Last)
		out.Workers = append(out.Workers, rep)
	}
	return out
}

func addCounters(dst *checker.WorkerCounters, c checker.WorkerCounters) {
	dst.Leased += c.Leased
	dst.Spent += c.Spent
	dst.StolenIn += c.StolenIn
	dst.StolenOut += c.StolenOut
	dst.Credited += c.Credited
	dst.ExpiredUnused += c.ExpiredUnused
	dst.Outstanding += c.Outstanding
}

// sidecarAnswer is a sidecar's reserve answer.
type sidecarAnswer struct {
	Granted      bool   `json:"granted"`
	RetryAfterNs int64  `json:"retry_after_ns"`
	Error        string `json:"error"`
}

// client returns the loop of client id: reserve one permit from its
// sidecar (max_wait cfg.MaxWait), and when granted call the fake API at
// once, within leasedMaxUseDelay of the reserve's invoke (else drop the
// grant). Every reserve and API call is in the history.
func (f *fleet) client(wl *workload) func(ctx context.Context, id int) error {
	return func(ctx context.Context, id int) error {
		s := f.sidecars[id]
		hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2, DisableCompression: true}}
		defer hc.CloseIdleConnections()
		rng := rand.New(rand.NewPCG(wl.cfg.Seed, uint64(id)+0x6c65))
		url := "http://" + s.HTTPAddr + "/v1/limits/" + f.limit + "/reserve"
		req := history.ReserveRequest{Limit: f.limit, Permits: 1, MaxWaitNanos: int64(wl.cfg.MaxWait)}
		backoff := func(lo, hi int) { _ = sleepCtx(ctx, time.Duration(lo+rng.IntN(hi-lo+1))*time.Millisecond) }
		for seq := 0; seq < maxWorkerOps && ctx.Err() == nil; seq++ {
			wl.pool.pausePoint(ctx, id)
			if ctx.Err() != nil {
				break
			}
			reqID := fmt.Sprintf("%s-%d", s.Name, seq)
			body := fmt.Sprintf(`{"permits":1,"max_wait":%q,"request_id":%q}`, wl.cfg.MaxWait.String(), reqID)
			g0 := s.gen()
			inv, err := wl.hw.Invoke(id, s.Name, history.FReserve, reqID, req)
			if err != nil {
				return err
			}
			code, ans, rerr := postReserve(ctx, hc, url, body)
			g1 := s.gen()
			switch {
			case rerr != nil:
				typ := history.Info
				if errors.Is(rerr, syscall.ECONNREFUSED) {
					typ = history.Fail // nothing listened: certainly no effect
					wl.counters.failed.Add(1)
				} else {
					wl.counters.unknown.Add(1)
				}
				if _, err := wl.hw.Complete(inv, typ, s.Name, reqID, history.ReserveResponse{Error: rerr.Error()}); err != nil {
					return err
				}
				backoff(50, 100)
				continue
			case code == http.StatusTooManyRequests:
				wl.counters.refused.Add(1)
				if _, err := wl.hw.Complete(inv, history.Fail, s.Name, reqID, history.ReserveResponse{RetryAfterNanos: max(ans.RetryAfterNs, 1)}); err != nil {
					return err
				}
				// Half to all of the sidecar's estimate of its next slot,
				// between 1 and 50 ms (0: unknown).
				back := min(max(ans.RetryAfterNs/int64(time.Millisecond), 2), 50)
				backoff(int(back/2), int(back))
				continue
			case code != http.StatusOK || !ans.Granted:
				wl.counters.failed.Add(1)
				msg := fmt.Sprintf("%d: %s", code, ans.Error)
				if code == http.StatusServiceUnavailable {
					f.failClosed.Add(1)
					if f.failClosedMsg.Load() == nil {
						f.failClosedMsg.Store(fmt.Sprintf("%s at %v: %s", s.Name, time.Since(f.start).Round(time.Millisecond), msg))
					}
				}
				if _, err := wl.hw.Complete(inv, history.Fail, s.Name, reqID, history.ReserveResponse{Error: msg}); err != nil {
					return err
				}
				backoff(50, 100)
				continue
			}
			wl.counters.granted.Add(1)
			wl.counters.permitsGranted.Add(1)
			comp, err := wl.hw.Complete(inv, history.OK, s.Name, reqID, history.ReserveResponse{Granted: true})
			if err != nil {
				return err
			}
			if g0 == g1 {
				s.addGrant(g0, comp.TimeNanos)
			}
			wl.pool.pausePoint(ctx, id)
			now := time.Now()
			sent := int64(now.Sub(wl.start))
			if sent-inv.TimeNanos > int64(leasedMaxUseDelay) {
				wl.counters.skippedStale.Add(1)
				continue
			}
			ainv, err := wl.hw.Invoke(id, s.Name, history.FAPICall, reqID, history.APICallValue{Worker: s.Name})
			if err != nil {
				return err
			}
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, cerr := wl.api.Call(actx, fakeapi.CallRequest{Worker: s.Name, RequestID: reqID, SentNanos: &sent})
			cancel()
			if cerr != nil {
				wl.counters.apiErrors.Add(1)
				if _, err := wl.hw.Complete(ainv, history.Info, s.Name, "", history.APICallValue{Worker: s.Name, Error: cerr.Error()}); err != nil {
					return err
				}
				continue
			}
			wl.counters.apiCalls.Add(1)
			if _, err := wl.hw.Complete(ainv, history.OK, s.Name, "", history.APICallValue{Worker: s.Name, Status: 200}); err != nil {
				return err
			}
		}
		return nil
	}
}

// postReserve sends one reserve to a sidecar and decodes its answer.
func postReserve(ctx context.Context, hc *http.Client, url, body string) (int, sidecarAnswer, error) {
	var ans sidecarAnswer
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		return 0, ans, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, ans, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, ans, err
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		ans.Error = strings.TrimSpace(string(b))
	}
	return resp.StatusCode, ans, nil
}
