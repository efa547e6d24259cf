package worker

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/permitd/permitd/fsm"
)

// The fleet harness: a register (the fake, or a real 3-node raft cluster:
// register_cluster_test.go) behind one fault link per worker, workers
// gossiping on loopback (optionally through a fault layer on memberlist's
// transport: gossipfault_test.go), and one open-loop load driver per
// worker that records every permit spent with its real monotonic time.

const testLimit = "api"

var debugMembers = false

// workerSpec is one worker of a fleet and the demand its driver puts on
// it, in permits per second.
type workerSpec struct {
	name, group string
	demand      float64
}

// fleetSpec describes a fleet.
type fleetSpec struct {
	rate          float64 // permits per second of the limit
	burst, maxOut int64   // C and O
	ttl, renew    time.Duration
	stealGrace    time.Duration
	workers       []workerSpec
	stealFault    stealFaultFunc
	// transportFault, if set, drops or delays steal messages in a fault
	// layer on memberlist's transport (faultTransport) instead of in the
	// worker (stealFault).
	transportFault stealFaultFunc
	// register selects the fake register or a real 3-node cluster.
	register registerKind
	// unreachableAfter is the workers' Config.UnreachableAfter (0: the
	// default).
	unreachableAfter time.Duration
	// raftTimeout is a cluster register's raft heartbeat and election
	// timeout (0: 1 s).
	raftTimeout time.Duration
}

// spendLog is what one driver recorded: permits spent and errors, with
// their times since the fleet's base.
type spendLog struct {
	mu     sync.Mutex
	spends []int64
	errs   []errEvent
	// grants records, at the instant the worker handed them out, which
	// grant the permits came from.
	grants []grantSpend
	// refusals are the asks TryAcquire answered false without an error
	// (a sidecar's 429).
	refusals []int64
}

type grantSpend struct {
	atNanos int64
	key     grantKey
	n       int64
	stolen  bool
	// kept: kept by the renewal of the grant in flight (part of grant
	// epoch+1 if the register applied it).
	kept bool
}

type errEvent struct {
	atNanos int64
	err     error
}

type fleet struct {
	t       *testing.T
	spec    fleetSpec
	base    time.Time
	reg     testRegister
	workers []*Worker
	links   []*link
	logs    []*spendLog
	stop    chan struct{}
	drivers sync.WaitGroup
	// gossipFaults counts what the transport fault layers did.
	gossipFaults transportFaultStats
	// keptSpends counts the permits checkGrants saw spent while kept by
	// a renewal in flight.
	keptSpends int64
}

// hasGrant reports whether the register issued grant k.
func (f *fleet) hasGrant(k grantKey) bool {
	_, ok := f.reg.grant(k)
	return ok
}

// baseSpec is the fleet of the acceptance tests: 6 workers in 3 groups
// whose demands are 10 %, 50 % and 200 % of a 1000 permits/s limit, with
// a 300 ms TTL renewed every 150 ms and C = O = 300 (one TTL of permits).
func baseSpec() fleetSpec {
	return fleetSpec{
		rate: 1000, burst: 300, maxOut: 300,
		ttl: 300 * time.Millisecond, renew: 150 * time.Millisecond,
		workers: []workerSpec{
			{"a1", "A", 50}, {"a2", "A", 50},
			{"b1", "B", 250}, {"b2", "B", 250},
			{"c1", "C", 1000}, {"c2", "C", 1000},
		},
	}
}

// startFleet creates the register, the limit and the workers, starts them
// and waits until every worker sees every other.
func startFleet(t *testing.T, spec fleetSpec) *fleet {
	t.Helper()
	f := &fleet{t: t, spec: spec, base: time.Now(), stop: make(chan struct{})}
	f.reg = newTestRegister(t, spec.register, f.base, spec.raftTimeout)
	f.reg.putLeased(testLimit, spec.rate, spec.burst, spec.maxOut)

	// Gossip runs on loopback UDP/TCP with ports chosen by the kernel.
	// (memberlist's MockNetwork is not used for fleets: its transports hand
	// packets over unbuffered channels, so two nodes answering each
	// other's probes from their packet handlers can block each other for
	// good, and members then look dead.)
	var seed string
	for i, ws := range spec.workers {
		l := &link{r: f.reg}
		log := &spendLog{}
		mlc := memberlist.DefaultLocalConfig()
		mlc.BindAddr, mlc.BindPort = "127.0.0.1", 0
		// A small cluster may miss a join's few gossip retransmissions;
		// frequent push/pull syncs make every worker see every other fast.
		mlc.PushPullInterval = 100 * time.Millisecond
		if spec.transportFault != nil {
			mlc.Transport = newFaultTransport(t, ws.name, spec.transportFault, &f.gossipFaults)
			mlc.EnableCompression = false
		}
		var join []string
		if i > 0 {
			join = []string{seed}
		}
		w, err := New(Config{
			Name: ws.name, Group: ws.group, Limit: testLimit, Register: l,
			Gossip: mlc, Join: join,
			TTL: spec.ttl, RenewEvery: spec.renew, StealGrace: spec.stealGrace, UnreachableAfter: spec.unreachableAfter,
			stealFault: spec.stealFault,
			onSpend: func(leaseID, epoch uint64, n int64, stolen, kept bool) {
				at := f.nowNanos()
				log.mu.Lock()
				log.grants = append(log.grants, grantSpend{at, grantKey{leaseID, epoch}, n, stolen, kept})
				log.mu.Unlock()
			},
		})
		if err != nil {
			t.Fatalf("New(%s): %v", ws.name, err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatalf("Start(%s): %v", ws.name, err)
		}
		if i == 0 {
			seed = w.ml.LocalNode().Address()
		}
		f.workers = append(f.workers, w)
		f.links = append(f.links, l)
		f.logs = append(f.logs, log)
	}
	t.Cleanup(f.shutdown)
	waitFor(t, 5*time.Second, "every worker sees every member", func() bool {
		for _, w := range f.workers {
			n := 0
			for _, names := range w.Status().Members {
				n += len(names)
			}
			if n != len(f.workers) {
				if debugMembers {
					t.Logf("%s sees %v", w.cfg.Name, w.Status().Members)
				}
				return false
			}
		}
		return true
	})
	return f
}

// nowNanos is the fleet's real time.
func (f *fleet) nowNanos() int64 { return int64(time.Since(f.base)) }

// drive starts the open-loop drivers. Each worker's driver generates its
// demand as asks of one permit, on a clock (open loop: asks do not wait
// for earlier ones), and askers concurrent callers take them with
// TryAcquire(1, 5 ms), logging what they spent. The worker counts an ask
// when it is made, granted or not, so its measured demand is the demand
// (an ask that finds all askers busy for long waits in a queue; one that
// finds the queue full is not made).
func (f *fleet) drive() {
	for i := range f.workers {
		asks := make(chan struct{}, 256)
		f.drivers.Add(1 + askers)
		go f.generate(i, asks)
		for range askers {
			go f.asker(i, asks)
		}
	}
}

// askers is the number of concurrent callers per worker.
const askers = 4

func (f *fleet) generate(i int, asks chan<- struct{}) {
	defer f.drivers.Done()
	demand := f.spec.workers[i].demand
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	var asked int64
	for {
		select {
		case <-f.stop:
			return
		case <-tick.C:
		}
		for due := int64(demand * time.Since(start).Seconds()); asked < due; asked++ {
			select {
			case asks <- struct{}{}:
			default:
			}
		}
	}
}

func (f *fleet) asker(i int, asks <-chan struct{}) {
	defer f.drivers.Done()
	w, log := f.workers[i], f.logs[i]
	for {
		select {
		case <-f.stop:
			return
		case <-asks:
		}
		ok, err := w.TryAcquire(1, 5*time.Millisecond)
		at := f.nowNanos()
		log.mu.Lock()
		switch {
		case ok:
			log.spends = append(log.spends, at)
		case err != nil:
			log.errs = append(log.errs, errEvent{at, err})
		default:
			log.refusals = append(log.refusals, at)
		}
		log.mu.Unlock()
	}
}

// stopDrivers stops the load and waits for the drivers.
func (f *fleet) stopDrivers() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	f.drivers.Wait()
}

// shutdown stops the drivers and the workers.
func (f *fleet) shutdown() {
	f.stopDrivers()
	var wg sync.WaitGroup
	for _, w := range f.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = w.Stop(ctx)
		}()
	}
	wg.Wait()
}

// spent returns the spend times of the workers whose index passes keep,
// in [from, to).
func (f *fleet) spent(keep func(i int) bool, from, to int64) int64 {
	var n int64
	for i, log := range f.logs {
		if !keep(i) {
			continue
		}
		log.mu.Lock()
		for _, at := range log.spends {
			if at >= from && at < to {
				n++
			}
		}
		log.mu.Unlock()
	}
	return n
}

// inGroup selects the workers of a group.
func (f *fleet) inGroup(g string) func(int) bool {
	return func(i int) bool { return f.spec.workers[i].group == g }
}

// allSpends returns every spend time, sorted.
func (f *fleet) allSpends() []int64 {
	var all []int64
	for _, log := range f.logs {
		log.mu.Lock()
		all = append(all, log.spends...)
		log.mu.Unlock()
	}
	slices.Sort(all)
	return all
}

// minRenewals returns the smallest number of renewals of the selected
// workers.
func (f *fleet) minRenewals(keep func(int) bool) uint64 {
	least := ^uint64(0)
	for i, w := range f.workers {
		if keep(i) {
			least = min(least, w.Stats().Renewals)
		}
	}
	return least
}

func all(int) bool { return true }

// boundExcess checks the over-grant bound on sorted spend times: in every
// window [t_i, t_j], the j-i+1 permits spent must be at most
// C + O + floor((t_j-t_i)/I) + 1. Equivalently (j-i) - (C+O) <= (t_j-t_i)/I,
// i.e. b_j - b_i <= (C+O)*I with b_k = k*I - t_k, checked in one pass. It
// returns the largest (j-i) - floor((t_j-t_i)/I) over all windows, the
// quantity that must stay <= C + O.
func boundExcess(spends []int64, intervalNanos int64) int64 {
	if len(spends) == 0 {
		return 0
	}
	var worst int64 = -1 << 62
	minB := int64(0) - spends[0] // b_0
	for k, t := range spends {
		b := int64(k)*intervalNanos - t
		minB = min(minB, b)
		// (j-i) - (t_j-t_i)/I = (b_j - b_i)/I; the floor of the window's
		// quotient makes the integer form ceil.
		excess := b - minB
		worst = max(worst, (excess+intervalNanos-1)/intervalNanos)
	}
	return worst
}

// maxInWindow returns the most permits spent in any window of length w.
func maxInWindow(spends []int64, w int64) int {
	best, i := 0, 0
	for j := range spends {
		for spends[j]-spends[i] > w {
			i++
		}
		best = max(best, j-i+1)
	}
	return best
}

// checkBound checks the over-grant bound over the whole run and that the
// fleet spent no more than the register minted, and logs the margins.
func (f *fleet) checkBound() {
	f.t.Helper()
	spends := f.allSpends()
	pool := f.reg.pool(testLimit)
	c, o, interval := pool.BurstPermits, pool.MaxOutstandingPermits, pool.IntervalNanos
	excess := boundExcess(spends, interval)
	if excess > c+o {
		f.t.Errorf("over-grant bound broken: some window holds floor(W/I) + 1 + %d permits, more than C + O = %d", excess, c+o)
	}
	sec := int64(time.Second)
	in1s := maxInWindow(spends, sec)
	bound1s := c + o + sec/interval + 1
	f.t.Logf("bound: worst window exceeds floor(W/I)+1 by %d permits (allowed C+O = %d, margin %d); busiest 1 s window %d permits (bound %d)",
		excess, c+o, c+o-excess, in1s, bound1s)
	if int64(len(spends)) > pool.MintedPermits {
		f.t.Errorf("the fleet spent %d permits, the register minted only %d", len(spends), pool.MintedPermits)
	}
	f.t.Logf("spent %d of %d minted (free %d, outstanding %d, settled %d: spent %d, stolen %d, expired %d)",
		len(spends), pool.MintedPermits, pool.FreePermits, pool.OutstandingPermits, pool.SettledPermits,
		pool.SpentPermits, pool.StolenPermits, pool.ExpiredPermits)
}

// registerShares returns, per group, the sum of the shares the register
// gave the group's active leases, in permits per second.
func (f *fleet) registerShares() map[string]float64 {
	out := map[string]float64{}
	for _, l := range f.reg.leases(testLimit) {
		if l.Active {
			out[l.Group] += float64(l.ShareMilliPermitsPerSec) / 1000
		}
	}
	return out
}

// registerSharesAndFair returns, per group, the sum of the shares the
// register gave the group's active leases, and the max-min division of
// the rate by the demands those leases reported (in the same read), in
// permits per second.
func (f *fleet) registerSharesAndFair(groups []string) (shares, fair map[string]float64) {
	f.t.Helper()
	shares, demand := map[string]float64{}, map[string]int64{}
	for _, l := range f.reg.leases(testLimit) {
		if l.Active {
			shares[l.Group] += float64(l.ShareMilliPermitsPerSec) / 1000
			demand[l.Group] += l.DemandMilliPermitsPerSec
		}
	}
	claims := make([]fsm.GroupDemand, len(groups))
	for i, g := range groups {
		claims[i] = fsm.GroupDemand{Group: g, Weight: 1, Demand: demand[g]}
	}
	div, err := fsm.FairShares(int64(f.spec.rate*1000), claims)
	if err != nil {
		f.t.Fatalf("FairShares: %v", err)
	}
	fair = map[string]float64{}
	for i, g := range groups {
		fair[g] = float64(div[i]) / 1000
	}
	return shares, fair
}

// stealTotals returns the fleet's permits stolen in and out.
func (f *fleet) stealTotals() (in, out int64) {
	for _, w := range f.workers {
		s := w.Stats()
		in += s.StolenInPermits
		out += s.StolenOutPermits
	}
	return in, out
}

// waitFor polls cond until it holds or the timeout passes (then fails).
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a wait for an outcome
	}
}

// rate returns permits per second over [from, to).
func rate(n, from, to int64) float64 { return float64(n) / (float64(to-from) / 1e9) }

func pct(got, want float64) string { return fmt.Sprintf("%.1f%%", 100*(got-want)/want) }

// checkGrants audits assumptions 2 and 3 of the bound against the
// register's own decisions: every permit a worker handed out from its own
// grant was handed out before the register applied the renew or return
// that reported on that grant, and before the grant's expiry at the
// register; every stolen permit before the expiry of the donor's grant
// (on the cluster, conservative bounds of those instants: see
// clusterRegister). A permit kept by a renewal (the in-flight allowance)
// belongs to the renewal's new grant if the register applied it, and is
// checked against that grant (spent before its expiry and its own
// report); else against the expiry of the grant it came from (the report
// that kept it settled nothing of it). And no permit is spent
// twice: of every grant, the fleet handed out at most its permits. It
// logs the smallest slack seen to each of those limits.
func (f *fleet) checkGrants() {
	f.t.Helper()
	toExpiry, toReport := int64(math.MaxInt64), int64(math.MaxInt64)
	bad := 0
	handedOut := map[grantKey]int64{}
	for i, log := range f.logs {
		log.mu.Lock()
		for _, s := range log.grants {
			// A kept permit whose renewal no answer shows applied stays
			// outstanding in the grant it came from until its expiry (a
			// renewal fenced or lost reports nothing on it): only the
			// expiry ends it.
			keptUnrenewed := false
			if s.kept {
				f.keptSpends += s.n
				if next := (grantKey{s.key.leaseID, s.key.epoch + 1}); f.hasGrant(next) {
					s.key = next
				} else {
					keptUnrenewed = true
				}
			}
			handedOut[s.key] += s.n
			g, ok := f.reg.grant(s.key)
			if !ok {
				f.t.Errorf("%s spent %d permits of grant %+v, which the register never issued", f.spec.workers[i].name, s.n, s.key)
				bad++
				continue
			}
			end := g.expiresAtNanos
			toExpiry = min(toExpiry, end-s.atNanos)
			if !s.stolen && !keptUnrenewed {
				end = min(end, g.reportedAtNanos)
				toReport = min(toReport, g.reportedAtNanos-s.atNanos)
			}
			if s.atNanos >= end && bad < 10 {
				bad++
				f.t.Errorf("%s spent %d permits of grant %+v (stolen %v) at %v, after its end at the register %v (expiry %v, reported %v)",
					f.spec.workers[i].name, s.n, s.key, s.stolen, time.Duration(s.atNanos), time.Duration(end),
					time.Duration(g.expiresAtNanos), time.Duration(g.reportedAtNanos))
			}
		}
		log.mu.Unlock()
	}
	// No permit is spent twice: what the fleet handed out of a grant, by
	// its holder and by the peers that stole from it, is at most what the
	// register granted.
	fullest := 0.0
	for k, n := range handedOut {
		g, ok := f.reg.grant(k)
		if !ok {
			continue // reported above
		}
		if n > g.permits {
			f.t.Errorf("the fleet handed out %d permits of grant %+v, which gave %d", n, k, g.permits)
		}
		if g.permits > 0 {
			fullest = max(fullest, float64(n)/float64(g.permits))
		}
	}
	f.t.Logf("grants: every permit handed out at least %v before its grant's expiry at the register, and %v before the report on it reached the register; %d grants spent from, the fullest %.0f%% spent; %d permits spent while kept by a renewal in flight",
		time.Duration(toExpiry), time.Duration(toReport), len(handedOut), 100*fullest, f.keptSpends)
}
