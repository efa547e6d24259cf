package workload

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/permitd/permitd/jepsen-lite/runner/process"
)

// Lease relays (`permitd relay`) in the leased workload: some sidecars
// send their lease commands through a relay (--relay: the relay first,
// the register's nodes after it), the others straight to the register.
// Each relay reaches each agent through a cutProxy of its own, so that
// the relay fault can cut the relays off from the register (and nothing
// else) in either mode of the run; the relays listen on loopback in the
// runner's namespace, next to the sidecars.

// RelayCount is how many relays a leased run of workers sidecars has for
// the setting relays (LeasedConfig.Relays): relays itself when positive
// (at most workers), none when negative, and by default 2 from 3 workers
// on, 1 with 2 workers, none with 1 (some sidecars always go direct).
func RelayCount(relays, workers int) int {
	switch {
	case relays < 0:
		return 0
	case relays > 0:
		return min(relays, workers)
	case workers >= 3:
		return 2
	case workers == 2:
		return 1
	}
	return 0
}

// RelayOf is the relay (0-based) sidecar i sends its lease commands
// through, or -1 for the register directly: sidecars take the relays in
// turn and every (relays+1)-th goes direct (with 3 groups and 2 relays,
// one relay in front of each of the first two groups, the third direct).
func RelayOf(i, relays int) int {
	if relays <= 0 {
		return -1
	}
	if r := i % (relays + 1); r < relays {
		return r
	}
	return -1
}

// RelayStats are a relay process's counters (its GET /metrics).
type RelayStats struct {
	Commands        int64 `json:"commands"`
	Batches         int64 `json:"batches"`
	BatchedCommands int64 `json:"batched_commands"`
	FailedBatches   int64 `json:"failed_batches"`
	Refused         int64 `json:"refused"`
}

func (s *RelayStats) add(o RelayStats) {
	s.Commands += o.Commands
	s.Batches += o.Batches
	s.BatchedCommands += o.BatchedCommands
	s.FailedBatches += o.FailedBatches
	s.Refused += o.Refused
}

// relayMetrics maps the relay's metric names to its counters.
var relayMetrics = map[string]func(*RelayStats) *int64{
	"permitd_relay_commands_total":         func(s *RelayStats) *int64 { return &s.Commands },
	"permitd_relay_batches_total":          func(s *RelayStats) *int64 { return &s.Batches },
	"permitd_relay_batched_commands_total": func(s *RelayStats) *int64 { return &s.BatchedCommands },
	"permitd_relay_failed_batches_total":   func(s *RelayStats) *int64 { return &s.FailedBatches },
	"permitd_relay_refused_total":          func(s *RelayStats) *int64 { return &s.Refused },
}

// parseRelayMetrics reads the relay's counters from Prometheus text.
func parseRelayMetrics(text string) (RelayStats, error) {
	var st RelayStats
	found := 0
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		field, known := relayMetrics[name]
		if !ok || !known {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return st, fmt.Errorf("workload: relay metric %s: %w", name, err)
		}
		*field(&st) = int64(v)
		found++
	}
	if found < len(relayMetrics) {
		return st, fmt.Errorf("workload: relay metrics: %d of the %d counters found", found, len(relayMetrics))
	}
	return st, nil
}

// relayProc is one `permitd relay`: its addresses, its proxies to the
// agents, its supervisor, and its counters' last read per process.
type relayProc struct {
	Name     string
	Listen   string
	Metrics  string
	Upstream string // leader or spread
	LogPath  string
	proxies  []*cutProxy
	proc     *process.Supervisor

	mu    sync.Mutex
	stats []RelayStats // stats[g-1]: generation g's last read
}

// layoutRelays lays out n relays in dir, reaching servers through proxies
// of their own; it returns the listeners that hold their ports until the
// caller closes them.
func (f *Fleet) layoutRelays(n int, dir string) ([]net.Listener, error) {
	var held []net.Listener
	for r := range n {
		var addrs [2]string
		for k := range addrs {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return held, fmt.Errorf("workload: no free port for a relay: %w", err)
			}
			held = append(held, l)
			addrs[k] = l.Addr().String()
		}
		rp := &relayProc{Name: fmt.Sprintf("r%d", r+1), Listen: addrs[0], Metrics: addrs[1], Upstream: "leader"}
		if r%2 == 1 {
			rp.Upstream = "spread" // a follower first, which forwards
		}
		rp.LogPath = filepath.Join(dir, rp.Name+".log")
		for _, s := range f.servers {
			p, err := newCutProxy(s)
			if err != nil {
				return held, err
			}
			rp.proxies = append(rp.proxies, p)
		}
		rp.proc = process.New(process.Spec{Name: rp.Name, Label: "relay " + rp.Name, LogPath: rp.LogPath, Logf: f.logf,
			Command: func() (string, []string) { return f.bin, f.relayArgs(rp) }, Env: f.cfg.Creds.WorkerEnv()})
		f.relays = append(f.relays, rp)
	}
	return held, nil
}

// relayArgs is rp's command line (without the program).
func (f *Fleet) relayArgs(rp *relayProc) []string {
	servers := make([]string, len(rp.proxies))
	for i, p := range rp.proxies {
		servers[i] = p.Addr()
	}
	args := []string{"relay", "--listen", rp.Listen, "--servers", strings.Join(servers, ","), "--upstream", rp.Upstream,
		"--metrics-addr", rp.Metrics, "--log-level", "info"}
	return append(args, f.cfg.Creds.RelayArgs()...)
}

// startRelay starts relay i (it must be down) and waits until it serves
// (its metrics answer: the listener for the workers is up before them).
func (f *Fleet) startRelay(ctx context.Context, i int) error {
	rp := f.relays[i]
	rp.mu.Lock()
	_, err := rp.proc.Start()
	if err == nil {
		rp.stats = append(rp.stats, RelayStats{})
	}
	rp.mu.Unlock()
	if err != nil {
		return err
	}
	err = rp.proc.WaitReady(ctx, time.Now().Add(10*time.Second), 50*time.Millisecond, func(ctx context.Context) error {
		_, err := f.readRelay(ctx, rp, 500*time.Millisecond)
		return err
	})
	if err != nil {
		return fmt.Errorf("workload: relay %s not serving: %w (see %s)", rp.Name, err, rp.LogPath)
	}
	return nil
}

// readRelay reads rp's counters into its current process's slot.
func (f *Fleet) readRelay(ctx context.Context, rp *relayProc, timeout time.Duration) (RelayStats, error) {
	g := rp.proc.State().Generation
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+rp.Metrics+"/metrics", nil)
	if err != nil {
		return RelayStats{}, fmt.Errorf("workload: %w", err)
	}
	resp, err := f.hc.Do(req)
	if err != nil {
		return RelayStats{}, fmt.Errorf("workload: relay %s metrics: %w", rp.Name, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := bufio.NewReader(resp.Body).WriteTo(&b); err != nil {
		return RelayStats{}, fmt.Errorf("workload: relay %s metrics: %w", rp.Name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return RelayStats{}, fmt.Errorf("workload: relay %s metrics: %s", rp.Name, resp.Status)
	}
	st, err := parseRelayMetrics(b.String())
	if err != nil {
		return st, err
	}
	rp.mu.Lock()
	if g >= 1 && g <= len(rp.stats) && rp.proc.State().Generation == g {
		rp.stats[g-1] = st
	}
	rp.mu.Unlock()
	return st, nil
}

// launchRelays starts every relay and its proxies.
func (f *Fleet) launchRelays(ctx context.Context) error {
	var errs []error
	for i, rp := range f.relays {
		for _, p := range rp.proxies {
			p.serve()
		}
		errs = append(errs, f.startRelay(ctx, i))
	}
	return errors.Join(errs...)
}

// stopRelays reads every relay's counters, stops it gracefully and closes
// its proxies.
func (f *Fleet) stopRelays(ctx context.Context, grace time.Duration) {
	var wg sync.WaitGroup
	for _, rp := range f.relays {
		wg.Go(func() {
			if st := rp.proc.State(); st.Up && !st.Paused {
				_, _ = f.readRelay(ctx, rp, time.Second)
			}
			rp.proc.Stop(grace)
			for _, p := range rp.proxies {
				p.Close()
			}
		})
	}
	wg.Wait()
}

// The relay faults act on the relays through these methods (package
// nemesis's Sidecars interface); relays are named by index.

// Relays returns the relays' names, by index.
func (f *Fleet) Relays() []string {
	var out []string
	for _, rp := range f.relays {
		out = append(out, rp.Name)
	}
	return out
}

// KillRelay reads relay i's counters one last time, then kills it with -9.
func (f *Fleet) KillRelay(ctx context.Context, i int) error {
	rp := f.relays[i]
	_, _ = f.readRelay(ctx, rp, 300*time.Millisecond)
	return rp.proc.Kill()
}

// StopRelay reads relay i's counters, then stops it gracefully (SIGTERM:
// its workers' connections close and their calls go to their next
// server).
func (f *Fleet) StopRelay(ctx context.Context, i int) {
	rp := f.relays[i]
	_, _ = f.readRelay(ctx, rp, 300*time.Millisecond)
	rp.proc.Stop(5 * time.Second)
}

// StartRelay starts relay i again (it must be down), with the same
// addresses, and waits until it serves.
func (f *Fleet) StartRelay(ctx context.Context, i int) error { return f.startRelay(ctx, i) }

// CutRelays cuts every relay off from the register (mode CutDrop or
// CutBlackhole, on every relay's proxies; "" lifts the cut). The workers
// are not cut: a relay that gets no answer answers its workers "no
// leader", and they go on to the register directly.
func (f *Fleet) CutRelays(mode string) {
	for _, rp := range f.relays {
		for _, p := range rp.proxies {
			p.Cut(mode)
		}
	}
}

// healRelays lifts the cut and restarts every relay that is down.
func (f *Fleet) healRelays(ctx context.Context) {
	f.CutRelays("")
	for i, rp := range f.relays {
		if !rp.proc.State().Up {
			if err := f.startRelay(ctx, i); err != nil {
				f.logf("heal: %v", err)
			}
		}
	}
}

// LeasedRelayReport is one relay in the summary.
type LeasedRelayReport struct {
	Name     string `json:"name"`
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
	// Workers are the sidecars given --relay to it.
	Workers  []string `json:"workers"`
	Log      string   `json:"log"`
	Restarts int      `json:"restarts"`
	// Stats sum every process's last read counters.
	Stats RelayStats `json:"stats"`
}

// relayReports reports the relays.
func (f *Fleet) relayReports() []LeasedRelayReport {
	var out []LeasedRelayReport
	for _, rp := range f.relays {
		rep := LeasedRelayReport{Name: rp.Name, Listen: rp.Listen, Upstream: rp.Upstream,
			Log: filepath.Join("workers", rp.Name+".log"), Restarts: rp.proc.Restarts()}
		for _, s := range f.sidecars {
			if s.relay == rp {
				rep.Workers = append(rep.Workers, s.Name)
			}
		}
		rp.mu.Lock()
		for _, st := range rp.stats {
			rep.Stats.add(st)
		}
		rp.mu.Unlock()
		out = append(out, rep)
	}
	return out
}
