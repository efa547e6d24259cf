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
func measureRegisterLoad(ctx context.Context, o options, bin, tmp string, n, g int) (res loadResult, err error) {
	res = loadResult{Holders: n, Groups: g, Via: o.via, Protocol: o.protocol}
	dir, err := os.MkdirTemp(tmp, fmt.Sprintf("load%d-g%d-", n, g))
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	var extra []string
	if o.pprofOut != "" {
		extra = append(extra, "--pprof")
	}
	reg, err := startRegister(ctx, bin, dir, extra...)
	if err != nil {
		return res, err
	}
	defer reg.stop()

	if res.LeaderIdleCores, res.ClusterIdleCores, err = reg.idleCores(ctx); err != nil {
		return res, err
	}
	var relays *relayProcs
	if o.relays > 0 {
		if relays, err = startRelays(ctx, bin, reg, o.relays); err != nil {
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

	const limit = "scale"
	rate := o.ratePerWorker * float64(n)
	if _, err := reg.cl.PutLimit(ctx, limit, client.LimitSpec{Algorithm: "strict", Rate: rate, Per: time.Second}); err != nil {
		return res, fmt.Errorf("put limit: %w", err)
	}
	if _, err := reg.cl.PutLeasePolicy(ctx, limit, client.LeasePolicy{Leased: true}); err != nil {
		return res, fmt.Errorf("lease policy: %w", err)
	}
	ttl := o.ttl
	if ttl == 0 {
		ttl = 2 * time.Second // the worker's default
	}
	demands := groupDemands(1.5*rate, g)
	perGroup := make([]int, g)
	for i := range n {
		perGroup[i%g]++
	}

	var renewals, failed atomic.Int64
	var measuring atomic.Bool
	var latMu sync.Mutex
	var lat []time.Duration
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for i := range n {
		gi := i % g
		demandMilli := int64(demands[gi] / float64(perGroup[gi]) * 1000)
		cl := clients[i%len(clients)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			// Each holder starts at its own phase of the renewal period.
			if sleep(runCtx, time.Duration(rng.Int64N(int64(ttl/2)))) != nil {
				return
			}
			name := fmt.Sprintf("h%04d", i)
			var grant client.LeaseGrant
			for runCtx.Err() == nil {
				t0 := time.Now()
				var err error
				if grant.Status != client.LeaseGranted {
					grant, err = cl.Lease(runCtx, limit, client.LeaseRequest{Holder: name, Group: groupName(gi), DemandMilliPerSec: demandMilli, TTL: ttl})
				} else {
					grant, err = cl.Renew(runCtx, limit, grant.LeaseID, grant.Epoch, client.LeaseReport{Spent: grant.Permits, DemandMilliPerSec: demandMilli, TTL: ttl})
				}
				d := time.Since(t0)
				if err != nil {
					if runCtx.Err() != nil {
						return
					}
					failed.Add(1)
					grant = client.LeaseGrant{}
				} else if measuring.Load() {
					renewals.Add(1)
					latMu.Lock()
					lat = append(lat, d)
					latMu.Unlock()
				}
				if sleep(runCtx, alignedWait(time.Now(), ttl/2-d, o.alignEvery)) != nil {
					return
				}
			}
		}()
	}
	if err := sleep(ctx, o.warmup+ttl/2); err != nil {
		return res, err
	}
	st0, err := reg.leaderStatus(ctx)
	if err != nil {
		return res, err
	}
	c0, _ := reg.cpuSeconds(reg.leaderPID())
	a0, _ := reg.allCPU()
	r0 := relays.cpu(reg)
	t0 := time.Now()
	measuring.Store(true)
	profDone := make(chan error, len(reg.http))
	for i, addr := range reg.http {
		switch {
		case o.pprofOut == "":
			profDone <- nil
		case i == reg.leader:
			go func() { profDone <- fetchProfile(ctx, addr, o.window, o.pprofOut) }()
		default:
			out := fmt.Sprintf("%s.follower%d", o.pprofOut, i)
			go func() { profDone <- fetchProfile(ctx, addr, o.window, out) }()
		}
	}
	if err := sleep(ctx, o.window); err != nil {
		return res, err
	}
	measuring.Store(false)
	c1, _ := reg.cpuSeconds(reg.leaderPID())
	a1, _ := reg.allCPU()
	r1 := relays.cpu(reg)
	el := time.Since(t0).Seconds()
	res.ClusterCores = (sum(a1) - sum(a0)) / el
	res.RelayCores = (r1 - r0) / el
	st1, err := reg.leaderStatus(ctx)
	if err != nil {
		return res, err
	}
	stop()
	wg.Wait()
	for range reg.http {
		if err := <-profDone; err != nil {
			fmt.Fprintf(os.Stderr, "   profile: %v\n", err)
		}
	}
	res.RenewalsPerSec = float64(renewals.Load()) / el
	res.EntriesPerSec = float64(st1.AppliedIndex-st0.AppliedIndex) / el
	res.LeaderCores = (c1 - c0) / el
	if res.RenewalsPerSec > 0 {
		res.LeaderMicrosPerRen = 1e6 * (res.LeaderCores - res.LeaderIdleCores) / res.RenewalsPerSec
	}
	res.Failed = failed.Load()
	if len(lat) > 0 {
		slices.Sort(lat)
		res.P50Ms = float64(lat[len(lat)/2]) / 1e6
		res.P99Ms = float64(lat[len(lat)*99/100]) / 1e6
	}
	return res, nil
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
func runRegisterLoad(ctx context.Context, o options, bin, tmp string) error {
	fmt.Println("| holders | groups | via, protocol, clients | renewals/s | log entries/s | leader cores: total / idle | leader µs/renewal | 3 nodes' cores: total / idle | 3 nodes' µs/renewal | renewal p50 / p99 ms | failed calls | relays: cores |")
	fmt.Println("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, n := range o.registerLoad {
		for _, g := range o.groups {
			if g > n {
				continue
			}
			fmt.Fprintf(os.Stderr, "== %d holders in %d groups\n", n, g)
			res, err := measureRegisterLoad(ctx, o, bin, tmp, n, g)
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
