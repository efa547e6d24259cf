package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/node/faultnet"
	"github.com/permitd/permitd/transport/client"
)

// testRegister is a register the fleet harness runs against: the fake
// (one fsm.FSM in the process) or a real 3-node raft cluster. Besides
// Register it gives the test's view of what the register decided.
type testRegister interface {
	Register
	// putLeased creates a leased limit of rate permits/s, C = burst,
	// O = maxOut.
	putLeased(name string, rate float64, burst, maxOut int64) fsm.LeasePolicyResult
	// grant returns what the register decided about a grant, on the
	// fleet's real timeline (see grantLife).
	grant(k grantKey) (grantLife, bool)
	// pool and leases read the limit's lease book.
	pool(name string) fsm.LeasePoolInfo
	leases(name string) []fsm.LeaseInfo
}

var (
	_ testRegister = (*fakeRegister)(nil)
	_ testRegister = (*clusterRegister)(nil)
)

// registerKind selects the register of a fleet.
type registerKind int

const (
	fakeKind registerKind = iota
	clusterKind
)

func (k registerKind) String() string {
	if k == clusterKind {
		return "3-node cluster"
	}
	return "fake register"
}

// bothRegisters lists the registers the scenario tests run against.
var bothRegisters = []registerKind{fakeKind, clusterKind}

// newTestRegister builds a register of kind k whose timeline starts at
// base; a cluster's raft heartbeat and election timeouts are raftTimeout
// (0: 1 s).
func newTestRegister(t *testing.T, k registerKind, base time.Time, raftTimeout time.Duration) testRegister {
	t.Helper()
	if k == clusterKind {
		return newClusterRegister(t, base, raftTimeout)
	}
	return newFakeRegister(t, base)
}

// clusterRegister is a real permitd register: three node.Node on a
// faultnet in-memory switch, each with its own raft-boltdb store in a
// temporary directory. It implements Register for the workers: the calls
// go to the live nodes in turn (so two in three land on a follower, which
// forwards lease commands to the leader), skipping killed nodes
// (failover). Every error it returns is ambiguous (the command may have
// been applied); the fault layer above it (link) adds the not-delivered
// ones.
//
// It records, for the audits, every answer and every report:
//
//   - a grant's expiry at the register is known on cluster time, which
//     starts at the first leader's takeover and loses the elections, so
//     it is recorded on the fleet's real timeline as a lower bound:
//     (when the call was sent) + ExpiresInNanos. Cluster time never runs
//     faster than real time and the entry is stamped after the send, so
//     the register's own expiry is never earlier. The largest such bound
//     over all answers for the grant is kept;
//   - a grant is reported when a renew or return naming it was first sent
//     to a node (the worker closes the grant before sending; a call the
//     fault layer blocked never got here);
//   - every answer granting (leaseID, epoch) must carry the same permits,
//     and at most one of them may be a fresh (non-duplicate) grant.
type clusterRegister struct {
	t     *testing.T
	base  time.Time
	sw    *faultnet.Switch
	ids   []string
	addrs []string
	dirs  []string

	mu    sync.Mutex
	nodes []*node.Node // nil once killed
	next  int          // where the next call starts looking for a node
	// grants by key; fresh counts non-duplicate granting answers.
	grants map[grantKey]*clusterGrant
	errs   []string
	// inFlight counts the calls under way.
	inFlight atomic.Int64
	// readyTerm is the raft term of the first ready leader.
	readyTerm uint64
}

// clusterGrant is what the workers were told about a grant.
type clusterGrant struct {
	life   grantLife
	fresh  int
	dupes  int
	holder string
}

// clusterAddr is the address of node id on the switch.
func clusterAddr(id string) string { return id + ":7000" }

func newClusterRegister(t *testing.T, base time.Time, raftTimeout time.Duration) *clusterRegister {
	t.Helper()
	if raftTimeout == 0 {
		// Generous for a loaded 2-core machine running tests under
		// -race: a spurious election stalls the fleet for about a
		// second, longer than the timing assertions allow.
		raftTimeout = time.Second
	}
	r := &clusterRegister{t: t, base: base, sw: faultnet.New(), grants: map[grantKey]*clusterGrant{}}
	var servers []raft.Server
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("r%d", i)
		r.ids = append(r.ids, id)
		r.addrs = append(r.addrs, clusterAddr(id))
		r.dirs = append(r.dirs, t.TempDir())
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(clusterAddr(id)), Suffrage: raft.Voter})
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "register", Level: hclog.Error, Output: io.Discard})
	t.Cleanup(func() {
		if terms := r.terms(); len(terms) > 0 {
			t.Logf("register: term %d when ready, now %v (a term per election)", r.readyTerm, terms)
		}
		r.killAll()
	})
	for i, id := range r.ids {
		n, err := node.New(node.Config{
			ID: id, DataDir: r.dirs[i], RaftAddr: r.addrs[i], InitialCluster: servers,
			Network: r.sw.Host(r.addrs[i]), Logger: logger,
			HeartbeatTimeout: raftTimeout, ElectionTimeout: raftTimeout,
			LeaderLeaseTimeout: raftTimeout / 2, ApplyTimeout: 3 * time.Second,
			// Keep the whole log (no snapshot) for the replay audit.
			SnapshotThreshold: 1 << 30, SnapshotInterval: time.Hour,
		})
		if err != nil {
			t.Fatalf("start register node %s: %v", id, err)
		}
		r.mu.Lock()
		r.nodes = append(r.nodes, n)
		r.mu.Unlock()
	}
	r.readyTerm = r.nodes[r.leader()].Status().Term
	return r
}

// terms returns the current term of each live node.
func (r *clusterRegister) terms() map[string]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]uint64{}
	for i, n := range r.nodes {
		if n != nil {
			out[r.ids[i]] = n.Status().Term
		}
	}
	return out
}

// leader waits for a ready leader and returns its index.
func (r *clusterRegister) leader() int {
	r.t.Helper()
	at := -1
	waitFor(r.t, 10*time.Second, "a ready register leader", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i, n := range r.nodes {
			if n == nil {
				continue
			}
			if st := n.Status(); st.State == "leader" && st.Ready {
				at = i
				return true
			}
		}
		return false
	})
	return at
}

// kill crashes node i (node.Kill: no leadership transfer, raft stops
// wherever it is; what is on disk is what raft had fsynced).
func (r *clusterRegister) kill(i int) {
	r.mu.Lock()
	n := r.nodes[i]
	r.nodes[i] = nil
	r.mu.Unlock()
	if n != nil {
		n.Kill()
	}
}

func (r *clusterRegister) killAll() {
	r.mu.Lock()
	n := len(r.nodes)
	r.mu.Unlock()
	for i := range n {
		r.kill(i)
	}
}

// pick returns the node the next call goes to.
func (r *clusterRegister) pick() (*node.Node, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for range r.nodes {
		i := r.next % len(r.nodes)
		r.next++
		if n := r.nodes[i]; n != nil {
			return n, i
		}
	}
	return nil, -1
}

// admin runs op on some live node, retrying until it succeeds (ErrNoLeader
// during an election) or the deadline passes.
func (r *clusterRegister) admin(what string, op func(ctx context.Context, n *node.Node) error) {
	r.t.Helper()
	var last error
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		n, _ := r.pick()
		if n == nil {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		last = op(ctx, n)
		cancel()
		if last == nil {
			return
		}
		if !errors.Is(last, node.ErrNoLeader) {
			break
		}
		time.Sleep(10 * time.Millisecond) // retry pacing, not a wait for an outcome
	}
	r.t.Fatalf("register: %s: %v", what, last)
}

// putLeased implements testRegister.
func (r *clusterRegister) putLeased(name string, rate float64, burst, maxOut int64) fsm.LeasePolicyResult {
	r.t.Helper()
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: rate})
	if err != nil {
		r.t.Fatalf("compile: %v", err)
	}
	r.admin("put limit", func(ctx context.Context, n *node.Node) error {
		_, err := n.PutLimit(ctx, fsm.PutLimit{Name: name, Config: cfg})
		return err
	})
	var res fsm.LeasePolicyResult
	r.admin("put lease policy", func(ctx context.Context, n *node.Node) error {
		var err error
		res, err = n.PutLeasePolicy(ctx, fsm.LeasePolicy{Limit: name, Leased: true, BurstPermits: burst, MaxOutstandingPermits: maxOut})
		return err
	})
	return res
}

// view reads the limit's lease book through some live node.
func (r *clusterRegister) view(name string) (pool fsm.LeasePoolInfo, leases []fsm.LeaseInfo) {
	r.t.Helper()
	r.admin("lease view", func(ctx context.Context, n *node.Node) error {
		var err error
		pool, leases, err = n.LeaseView(ctx, name)
		return err
	})
	return pool, leases
}

// pool implements testRegister.
func (r *clusterRegister) pool(name string) fsm.LeasePoolInfo {
	p, _ := r.view(name)
	return p
}

// leases implements testRegister.
func (r *clusterRegister) leases(name string) []fsm.LeaseInfo {
	_, l := r.view(name)
	return l
}

// grant implements testRegister.
func (r *clusterRegister) grant(k grantKey) (grantLife, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, ok := r.grants[k]
	if !ok {
		return grantLife{}, false
	}
	return g.life, true
}

// checkAnswers reports grants that more than one fresh answer granted, or
// that answers granted with different permits.
func (r *clusterRegister) checkAnswers(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.errs {
		t.Error(e)
	}
	fresh, dupes := 0, 0
	for k, g := range r.grants {
		fresh += g.fresh
		dupes += g.dupes
		if g.fresh > 1 {
			t.Errorf("grant %+v of %s was granted %d times (fresh answers)", k, g.holder, g.fresh)
		}
	}
	t.Logf("register answers: %d grants, %d fresh and %d duplicate granting answers", len(r.grants), fresh, dupes)
}

// record notes one call and its answer. reported is the grant a renew or
// return reports on (zero for a lease).
func (r *clusterRegister) record(holder string, sentAt int64, reported grantKey, res fsm.LeaseResult, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if reported.leaseID != 0 {
		g := r.grants[reported]
		if g == nil {
			// A report on a grant no answer of ours carried (its answer
			// was lost below us, with the node that was killed).
			g = &clusterGrant{life: grantLife{expiresAtNanos: math.MinInt64, reportedAtNanos: math.MaxInt64}, holder: holder}
			r.grants[reported] = g
		}
		g.life.reportedAtNanos = min(g.life.reportedAtNanos, sentAt)
	}
	if err != nil || res.Status != fsm.LeaseGranted {
		return
	}
	k := grantKey{res.LeaseID, res.Epoch}
	g := r.grants[k]
	if g == nil {
		g = &clusterGrant{life: grantLife{expiresAtNanos: math.MinInt64, reportedAtNanos: math.MaxInt64, permits: res.Permits}, holder: holder}
		r.grants[k] = g
	}
	switch {
	case g.fresh+g.dupes == 0:
		g.life.permits = res.Permits
	case g.life.permits != res.Permits:
		r.errs = append(r.errs, fmt.Sprintf("grant %+v answered with %d permits, earlier with %d", k, res.Permits, g.life.permits))
	}
	if res.Duplicate {
		g.dupes++
	} else {
		g.fresh++
	}
	g.life.expiresAtNanos = max(g.life.expiresAtNanos, sentAt+res.ExpiresInNanos)
}

// call sends one command to a node, failing over on errors.
func (r *clusterRegister) call(holder string, reported grantKey, f func(n *node.Node) (fsm.LeaseResult, error)) (fsm.LeaseResult, error) {
	n, i := r.pick()
	if n == nil {
		return fsm.LeaseResult{}, errors.New("cluster register: every node is down")
	}
	sentAt := int64(time.Since(r.base))
	r.inFlight.Add(1)
	res, err := f(n)
	r.inFlight.Add(-1)
	r.record(holder, sentAt, reported, res, err)
	if err != nil {
		return fsm.LeaseResult{}, fmt.Errorf("cluster register: node %s (may have been applied): %w", r.ids[i], err)
	}
	return res, nil
}

// Lease implements Register.
func (r *clusterRegister) Lease(ctx context.Context, limit string, q client.LeaseRequest) (client.LeaseGrant, error) {
	return asRegister{r}.Lease(ctx, limit, q)
}

// Renew implements Register.
func (r *clusterRegister) Renew(ctx context.Context, limit string, id, epoch uint64, rep client.LeaseReport) (client.LeaseGrant, error) {
	return asRegister{r}.Renew(ctx, limit, id, epoch, rep)
}

// Return implements Register.
func (r *clusterRegister) Return(ctx context.Context, limit string, id, epoch uint64, rep client.LeaseReport) (client.LeaseGrant, error) {
	return asRegister{r}.Return(ctx, limit, id, epoch, rep)
}

func (r *clusterRegister) leaseFSM(ctx context.Context, q fsm.Lease) (fsm.LeaseResult, error) {
	return r.call(q.Holder, grantKey{}, func(n *node.Node) (fsm.LeaseResult, error) { return n.Lease(ctx, q) })
}

func (r *clusterRegister) renewFSM(ctx context.Context, q fsm.Renew) (fsm.LeaseResult, error) {
	return r.call("", grantKey{q.LeaseID, q.Epoch}, func(n *node.Node) (fsm.LeaseResult, error) { return n.Renew(ctx, q) })
}

func (r *clusterRegister) returnFSM(ctx context.Context, q fsm.Return) (fsm.LeaseResult, error) {
	return r.call("", grantKey{q.LeaseID, q.Epoch}, func(n *node.Node) (fsm.LeaseResult, error) { return n.Return(ctx, q) })
}

// loggedGrant is a grant as the committed log decided it.
type loggedGrant struct {
	permits int64
	index   uint64
}

// replayLog stops every node and replays the raft log of each node that
// was alive at the end into a fresh fsm.FSM, checking conservation
// (minted = free + outstanding + settled for the limit) after every entry.
// It returns the grants of the longest log (every granting, non-duplicate
// lease or renew, by key) and fails if a grant was issued twice in one log
// or if two logs disagree on a grant in their common prefix.
func (r *clusterRegister) replayLog(t *testing.T, limit string) map[grantKey]loggedGrant {
	t.Helper()
	var survivors []int
	r.mu.Lock()
	for i, n := range r.nodes {
		if n != nil {
			survivors = append(survivors, i)
		}
	}
	r.mu.Unlock()
	r.killAll()
	type replay struct {
		id     string
		grants map[grantKey]loggedGrant
		last   uint64
	}
	var logs []replay
	for _, i := range survivors {
		grants, last := replayOne(t, r.ids[i], filepath.Join(r.dirs[i], "raft.db"), limit)
		logs = append(logs, replay{r.ids[i], grants, last})
	}
	if len(logs) == 0 {
		t.Fatalf("no node survived to replay")
	}
	// The logs agree on their common prefix (committed entries are never
	// lost or changed, whatever the node).
	best := logs[0]
	for _, l := range logs[1:] {
		common := min(l.last, best.last)
		for _, pair := range [][2]replay{{l, best}, {best, l}} {
			for k, g := range pair[0].grants {
				if g.index > common {
					continue
				}
				if o, ok := pair[1].grants[k]; !ok || o != g {
					t.Errorf("node %s's log grants %+v %+v at index %d; node %s's log: %+v (present %v)", pair[0].id, k, g, g.index, pair[1].id, o, ok)
				}
			}
		}
		if l.last > best.last {
			best = l
		}
	}
	return best.grants
}

func replayOne(t *testing.T, id, path, limit string) (map[grantKey]loggedGrant, uint64) {
	t.Helper()
	store, err := raftboltdb.New(raftboltdb.Options{Path: path})
	if err != nil {
		t.Fatalf("open %s's log: %v", id, err)
	}
	defer store.Close()
	first, err := store.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	last, err := store.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first != 1 {
		t.Fatalf("node %s's log starts at %d (compacted): cannot replay", id, first)
	}
	f := fsm.New()
	grants := map[grantKey]loggedGrant{}
	badConservation := 0
	for idx := first; idx <= last; idx++ {
		var l raft.Log
		if err := store.GetLog(idx, &l); err != nil {
			t.Fatalf("node %s: log %d: %v", id, idx, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		var results []fsm.LeaseResult
		switch res := f.Apply(&l).(type) {
		case fsm.LeaseResult:
			results = []fsm.LeaseResult{res}
		case []fsm.LeaseResult: // a batch of lease commands
			results = res
		}
		for _, lr := range results {
			if lr.Status != fsm.LeaseGranted || lr.Duplicate {
				continue
			}
			k := grantKey{lr.LeaseID, lr.Epoch}
			if g, dup := grants[k]; dup {
				t.Errorf("node %s's log grants %+v twice: at index %d (%d permits) and %d (%d permits)", id, k, g.index, g.permits, idx, lr.Permits)
			}
			grants[k] = loggedGrant{permits: lr.Permits, index: idx}
		}
		if _, ok := f.LeasePool(limit); ok {
			minted, free, out, settled := f.LeaseAccounts(limit)
			if minted != free+out+settled && badConservation < 5 {
				badConservation++
				t.Errorf("node %s: after index %d minted %d != free %d + outstanding %d + settled %d", id, idx, minted, free, out, settled)
			}
		}
	}
	t.Logf("node %s: replayed %d log entries: %d grants", id, last, len(grants))
	return grants, last
}
