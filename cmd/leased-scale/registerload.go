package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/cmd/internal/cluster"
	"github.com/permitd/permitd/transport/client"
)

// registerload.go: the register's side of a large fleet without the
// fleet's gossip (-register-load). At a thousand workers the workers do
// not fit one 2-core machine next to the register (hundreds of memberlist
// instances take both cores), so this mode runs only what the register
// sees of them: N lease holders, each opening a lease and renewing it
// every TTL/2 at its own random phase, reporting its grant spent (a
// saturated fleet), with the demands of the sweep's fleet. It measures
// the leader's CPU per renewal, the log entries per renewal and the
// renewal latency; -pprof-out keeps a CPU profile of the leader (and of
// each follower, at the same path with .followerN appended).

// loadResult is one register-load measurement.
type loadResult struct {
	Holders, Groups    int
	RenewalsPerSec     float64
	EntriesPerSec      float64
	LeaderCores        float64
	LeaderIdleCores    float64
	LeaderMicrosPerRen float64
	// ClusterCores is the three nodes' CPU together, ClusterIdleCores the
	// same before any holder started.
	ClusterCores, ClusterIdleCores float64
	// Relays is the relays the holders talked to first (-relays), and
	// RelayCores their CPU together over the window.
	Relays        int
	RelayCores    float64
	Via, Protocol string
	Clients       int
	P50Ms, P99Ms  float64
	Failed        int64
}

// measureRegisterLoad runs n holders in g groups against a fresh 3-node
// register for o.window after o.warmup.
func measureRegisterLoad(ctx context.Context, o options, s setup, n, g int) (res loadResult, err error) {
	res = loadResult{Holders: n, Groups: g, Via: o.via, Protocol: o.protocol}
	dir, err := os.MkdirTemp(s.tmp, fmt.Sprintf("load%d-g%d-", n, g))
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	var extra []string
	if o.pprofOut != "" {
		extra = append(extra, "--pprof")
	}
	reg, err := cluster.Start(ctx, s.bin, dir, extra...)
	if err != nil {
		return res, err
	}
	defer reg.Stop()

	if res.LeaderIdleCores, res.ClusterIdleCores, err = idleCores(ctx, reg); err != nil {
		return res, err
	}
	var relays *relayProcs
	if o.relays > 0 {
		if relays, err = startRelays(ctx, s.bin, reg, o.relays); err != nil {
			return res, err
		}
		defer relays.stop()
		res.Relays = o.relays
	}
	clients, err := holderClients(reg, o, n, relays)
	if err != nil {
		return res, err
	}
	defer closeClients(clients)
	res.Clients = len(clients)

	rate := o.ratePerWorker * float64(n)
	if err := putLeasedLimit(ctx, reg, rate); err != nil {
		return res, err
	}
	h := &holders{o: o, clients: clients, ttl: o.ttl}
	if h.ttl == 0 {
		h.ttl = 2 * time.Second // the worker's default
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	wg := h.start(runCtx, n, g, rate)
	if err := sleep(ctx, o.warmup+h.ttl/2); err != nil {
		return res, err
	}
	w, err := h.window(ctx, reg, relays)
	if err != nil {
		return res, err
	}
	stop()
	wg.Wait()
	for range reg.HTTP {
		if err := <-w.profiles; err != nil {
			fmt.Fprintf(os.Stderr, "   profile: %v\n", err)
		}
	}
	res.note(w, h)
	return res, nil
}

// holders are the lease holders of a register-load run: each opens a
// lease and renews it every TTL/2, counting its renewals, failures and
// latencies while measuring.
type holders struct {
	o                options
	clients          []*client.Client
	ttl              time.Duration
	renewals, failed atomic.Int64
	measuring        atomic.Bool
	latMu            sync.Mutex
	lat              []time.Duration
}

// start starts n holders in g groups, of the demands of the sweep's fleet
// for a limit of rate, until runCtx ends.
func (h *holders) start(runCtx context.Context, n, g int, rate float64) *sync.WaitGroup {
	demands, perGroup := groupSplit(1.5*rate, n, g)
	var wg sync.WaitGroup
	for i := range n {
		gi := i % g
		demandMilli := int64(demands[gi] / float64(perGroup[gi]) * 1000)
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.run(runCtx, i, gi, demandMilli)
		}()
	}
	return &wg
}

// run is holder i of group gi, with demandMilli millipermits/s: it starts
// at its own phase of the renewal period, then leases and renews until
// runCtx ends, reporting its grant spent (a saturated fleet).
func (h *holders) run(runCtx context.Context, i, gi int, demandMilli int64) {
	cl := h.clients[i%len(h.clients)]
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	if sleep(runCtx, time.Duration(rng.Int64N(int64(h.ttl/2)))) != nil {
		return
	}
	name := fmt.Sprintf("h%04d", i)
	var grant client.LeaseGrant
	for runCtx.Err() == nil {
		t0 := time.Now()
		var err error
		if grant.Status != client.LeaseGranted {
			grant, err = cl.Lease(runCtx, scaleLimit, client.LeaseRequest{Holder: name, Group: groupName(gi), DemandMilliPerSec: demandMilli, TTL: h.ttl})
		} else {
			grant, err = cl.Renew(runCtx, scaleLimit, grant.LeaseID, grant.Epoch, client.LeaseReport{Spent: grant.Permits, DemandMilliPerSec: demandMilli, TTL: h.ttl})
		}
		d := time.Since(t0)
		if err != nil {
			if runCtx.Err() != nil {
				return
			}
			h.failed.Add(1)
			grant = client.LeaseGrant{}
		} else if h.measuring.Load() {
			h.renewals.Add(1)
			h.latMu.Lock()
			h.lat = append(h.lat, d)
			h.latMu.Unlock()
		}
		if sleep(runCtx, alignedWait(time.Now(), h.ttl/2-d, h.o.alignEvery)) != nil {
			return
		}
	}
}

// loadWindow is what the measured window read: the leader's status, its
// CPU seconds and every node's, the relays' CPU, at its start (0) and
// end (1), its length in seconds, and the CPU profiles' outcomes.
type loadWindow struct {
	st0, st1 client.Status
	c0, c1   float64
	a0, a1   []float64
	r0, r1   float64
	seconds  float64
	profiles chan error
}

// window measures o.window with the holders' renewals counted, taking
// the nodes' CPU profiles with -pprof-out.
func (h *holders) window(ctx context.Context, reg *register, relays *relayProcs) (loadWindow, error) {
	o := h.o
	var w loadWindow
	var err error
	if w.st0, err = reg.LeaderStatus(ctx); err != nil {
		return w, err
	}
	w.c0, _ = reg.CPUSeconds(reg.LeaderPID())
	w.a0, _ = reg.AllCPU()
	w.r0 = relays.cpu(reg)
	t0 := time.Now()
	h.measuring.Store(true)
	w.profiles = make(chan error, len(reg.HTTP))
	for i, addr := range reg.HTTP {
		switch {
		case o.pprofOut == "":
			w.profiles <- nil
		case i == reg.Leader:
			go func() { w.profiles <- fetchProfile(ctx, addr, o.window, o.pprofOut) }()
		default:
			out := fmt.Sprintf("%s.follower%d", o.pprofOut, i)
			go func() { w.profiles <- fetchProfile(ctx, addr, o.window, out) }()
		}
	}
	if err := sleep(ctx, o.window); err != nil {
		return w, err
	}
	h.measuring.Store(false)
	w.c1, _ = reg.CPUSeconds(reg.LeaderPID())
	w.a1, _ = reg.AllCPU()
	w.r1 = relays.cpu(reg)
	w.seconds = time.Since(t0).Seconds()
	w.st1, err = reg.LeaderStatus(ctx)
	return w, err
}

// note records the window's rates, the holders' counts and their renewal
// latencies.
func (res *loadResult) note(w loadWindow, h *holders) {
	el := w.seconds
	res.ClusterCores = (sum(w.a1) - sum(w.a0)) / el
	res.RelayCores = (w.r1 - w.r0) / el
	res.RenewalsPerSec = float64(h.renewals.Load()) / el
	res.EntriesPerSec = float64(w.st1.AppliedIndex-w.st0.AppliedIndex) / el
	res.LeaderCores = (w.c1 - w.c0) / el
	if res.RenewalsPerSec > 0 {
		res.LeaderMicrosPerRen = 1e6 * (res.LeaderCores - res.LeaderIdleCores) / res.RenewalsPerSec
	}
	res.Failed = h.failed.Load()
	if lat := h.lat; len(lat) > 0 {
		slices.Sort(lat)
		res.P50Ms = float64(lat[len(lat)/2]) / 1e6
		res.P99Ms = float64(lat[len(lat)*99/100]) / 1e6
	}
}

// fetchProfile saves a CPU profile of the agent at httpAddr over d.
func fetchProfile(ctx context.Context, httpAddr string, d time.Duration, out string) error {
	secs := max(1, int(d/time.Second))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", httpAddr, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile: %s", resp.Status)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// printLoadRow prints one register-load result.
func printLoadRow(w io.Writer, r loadResult) {
	perRen := 0.0
	if r.RenewalsPerSec > 0 {
		perRen = 1e6 * (r.ClusterCores - r.ClusterIdleCores) / r.RenewalsPerSec
	}
	relays := "none"
	if r.Relays > 0 {
		relays = fmt.Sprintf("%d: %.3f cores", r.Relays, r.RelayCores)
	}
	fmt.Fprintf(w, "| %d | %d | %s, %s, %d clients | %.0f | %.0f | %.3f / %.3f | %.0f | %.3f / %.3f | %.0f | %.1f / %.1f | %d | %s |\n", r.Holders, r.Groups, r.Via, r.Protocol, r.Clients, r.RenewalsPerSec, r.EntriesPerSec,
		r.LeaderCores, r.LeaderIdleCores, r.LeaderMicrosPerRen, r.ClusterCores, r.ClusterIdleCores, perRen, r.P50Ms, r.P99Ms, r.Failed, relays)
}

// sum adds up xs.
func sum(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t
}

// runRegisterLoad measures every holder count in every group count and
// prints a table.
func runRegisterLoad(ctx context.Context, o options, s setup) error {
	fmt.Println("| holders | groups | via, protocol, clients | renewals/s | log entries/s | leader cores: total / idle | leader µs/renewal | 3 nodes' cores: total / idle | 3 nodes' µs/renewal | renewal p50 / p99 ms | failed calls | relays: cores |")
	fmt.Println("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, n := range o.registerLoad {
		for _, g := range o.groups {
			if g > n {
				continue
			}
			fmt.Fprintf(os.Stderr, "== %d holders in %d groups\n", n, g)
			res, err := measureRegisterLoad(ctx, o, s, n, g)
			if err != nil {
				return fmt.Errorf("%d holders in %d groups: %w", n, g, err)
			}
			printLoadRow(os.Stdout, res)
		}
	}
	return nil
}

// alignedWait is how long a holder that would wait d from now waits
// instead with -align-every every: until the first multiple of every (on
// the wall clock) after now+d (now, if d is negative), so that the holders' renewals leave
// together, as a group relay that flushes every that often would send
// them. A zero every leaves d as it is.
func alignedWait(now time.Time, d, every time.Duration) time.Duration {
	if every <= 0 {
		return d
	}
	d = max(d, 0)
	wake := now.Add(d)
	return d + wake.Truncate(every).Add(every).Sub(wake)
}
