package runner

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/transport/client"
)

// NemesisRecord is what one scheduled fault did.
type NemesisRecord struct {
	// Index is the event's position in the schedule.
	Index int `json:"index"`
	// Event is the scheduled fault.
	Event Event `json:"event"`
	// Targets are the nodes (or workers, "w3") it hit.
	Targets []string `json:"targets"`
	// StartNanos and EndNanos are when it was applied and healed, in the
	// history's time base (EndNanos 0: never healed, the run was cut).
	StartNanos int64 `json:"start_ns"`
	EndNanos   int64 `json:"end_ns"`
	// Notes say how targets were chosen and what was observed.
	Notes []string `json:"notes,omitempty"`
	// Errors are the control requests that failed (a paused node cannot
	// answer; the fault state is pushed again when it can).
	Errors []string `json:"errors,omitempty"`
	// SnapshotForced (snapshot faults) reports that the leader was seen to
	// compact its log past the isolated follower before the heal.
	SnapshotForced bool `json:"snapshot_forced,omitempty"`
	// Transfers (transfer faults) are the leadership transfers made.
	Transfers []TransferRecord `json:"transfers,omitempty"`
	// Restarts (reconfig:snapshot-restart) are the nodes snapshotted,
	// killed and restarted, and how long each took to be ready.
	Restarts []RestartRecord `json:"restarts,omitempty"`
}

// activeFault is a fault being applied.
type activeFault struct {
	rec       *NemesisRecord
	inv       history.Op
	blocks    map[string][]string // node ID → raft addresses it blocks both ways
	blockDial map[string][]string // node ID → raft addresses it may not dial
	loss      map[string]faultState
	killed    []*agentNode
	paused    []*agentNode
	workers   []int
	clockGen  map[string]int // node ID → generation the clock change hit
	leaderIdx uint64         // snapshot: the leader's applied index at start
	// snapshot: the isolated follower and its last log index at start.
	follower     *agentNode
	followerLast uint64
	// undo heals a worker fault (leased workload) or puts a reconfigured
	// limit back, returning errors.
	undo func(context.Context) []string
	// launch starts a fault's background loop (transfer, reconfig) once
	// the fault is recorded; stop ends it and waits for it, before the
	// fault is healed.
	launch, stop func()
}

// nemesis applies a schedule to a cluster and records it in the history.
type nemesis struct {
	cfg     Config
	cl      *cluster
	ct      *control
	hw      *history.Writer
	start   time.Time
	workers *workerPool
	fleet   *fleet // leased workload: the worker sidecars (worker faults)
	rng     *rand.Rand
	logf    func(string, ...any)
	// limit is the workload's limit and admin a client for its puts
	// (reconfig faults).
	limit limitInfo
	admin *client.Client

	mu      sync.Mutex
	active  map[int]*activeFault
	records []*NemesisRecord
	pushed  map[string]faultState // last fault state each node accepted
	pushGen map[string]int        // the generation that accepted it
	healer  int                   // the heal op's process
	events  int                   // the schedule's length
	// slowed reports that a reconfig put may have left the limit slower
	// than its original configuration (the final heal restores it).
	slowed bool
}

// auxProcess is the history process of event i's own operations (each
// leadership transfer, each put of a reconfiguration), apart from the
// fault's own nemesis operation; i = events is the final heal's.
func (nm *nemesis) auxProcess(i int) int { return -2 - nm.events - i }

// recordNote and recordError add to a record that a background loop may
// be filling.
func (nm *nemesis) recordNote(rec *NemesisRecord, note string) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	rec.Notes = append(rec.Notes, note)
}

func (nm *nemesis) recordError(rec *NemesisRecord, e string) {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	rec.Errors = append(rec.Errors, e)
}

func newNemesis(cfg Config, cl *cluster, ct *control, hw *history.Writer, start time.Time, wp *workerPool, logf func(string, ...any)) *nemesis {
	return &nemesis{
		cfg: cfg, cl: cl, ct: ct, hw: hw, start: start, workers: wp, logf: logf,
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x6e656d65736973)), healer: -1_000_000,
		active: map[int]*activeFault{}, pushed: map[string]faultState{}, pushGen: map[string]int{},
	}
}

func (nm *nemesis) now() int64 { return int64(time.Since(nm.start)) }

// tick is a fault's start or end.
type tick struct {
	at    time.Duration
	index int
	start bool
}

// run applies events at their times, then heals everything at healAt. It
// returns when the heal is done or ctx ends (after healing as far as it
// can).
func (nm *nemesis) run(ctx context.Context, events []Event, healAt time.Duration) {
	nm.healer = -1 - len(events)
	nm.events = len(events)
	var ticks []tick
	for i, ev := range events {
		ticks = append(ticks, tick{ev.At, i, true}, tick{ev.Until, i, false})
	}
	slices.SortStableFunc(ticks, func(a, b tick) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		switch {
		case a.start == b.start:
			return 0
		case !a.start:
			return -1 // ends before starts at the same instant
		}
		return 1
	})
	for _, tk := range ticks {
		if !nm.waitUntil(ctx, tk.at) {
			break
		}
		if tk.start {
			nm.begin(ctx, tk.index, events[tk.index])
		} else {
			nm.end(ctx, tk.index)
		}
		nm.reconcile(ctx)
	}
	nm.waitUntil(ctx, healAt)
	nm.healAll(context.WithoutCancel(ctx))
}

// waitUntil sleeps until the run's offset at, pushing fault states to
// nodes that missed them every half second. It reports false if ctx ended.
func (nm *nemesis) waitUntil(ctx context.Context, at time.Duration) bool {
	for {
		left := time.Until(nm.start.Add(at))
		if left <= 0 {
			return true
		}
		if sleepCtx(ctx, min(left, 500*time.Millisecond)) != nil {
			return false
		}
		nm.reconcile(ctx)
	}
}

// leader finds the current leader among running nodes, waiting up to 3s
// for one; without one it picks a running node at random (noted).
func (nm *nemesis) leader(ctx context.Context, rec *NemesisRecord) *agentNode {
	deadline := time.Now().Add(3 * time.Second)
	for {
		if id, _ := leaderOf(nm.ct.statuses(ctx, nm.cl.nodes, 500*time.Millisecond)); id != "" {
			return nm.node(id)
		}
		if time.Now().After(deadline) || sleepCtx(ctx, 100*time.Millisecond) != nil {
			break
		}
	}
	up := nm.upNodes()
	if len(up) == 0 {
		return nil
	}
	nm.mu.Lock() // the transfer loop picks leaders concurrently
	n := up[nm.rng.IntN(len(up))]
	nm.mu.Unlock()
	nm.recordNote(rec, "no leader found within 3s: picked "+n.ID)
	return n
}

func (nm *nemesis) node(id string) *agentNode {
	for _, n := range nm.cl.nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// upNodes returns the running, unpaused nodes.
func (nm *nemesis) upNodes() []*agentNode {
	var out []*agentNode
	for _, n := range nm.cl.nodes {
		if up, paused, _ := n.state(); up && !paused {
			out = append(out, n)
		}
	}
	return out
}

// permuted returns nodes shuffled by pick.
func permuted(nodes []*agentNode, pick uint64) []*agentNode {
	out := slices.Clone(nodes)
	r := rand.New(rand.NewPCG(pick, pick^0x9e3779b97f4a7c15))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// without returns nodes minus x.
func without(nodes []*agentNode, x *agentNode) []*agentNode {
	var out []*agentNode
	for _, n := range nodes {
		if n != x {
			out = append(out, n)
		}
	}
	return out
}

// blockGroups makes every node of each group block every node of the
// other groups.
func blockGroups(af *activeFault, groups ...[]*agentNode) {
	for i, g := range groups {
		for j, h := range groups {
			if i == j {
				continue
			}
			for _, a := range g {
				for _, b := range h {
					af.blocks[a.ID] = append(af.blocks[a.ID], b.RaftAddr)
				}
			}
		}
	}
}

// begin applies event i.
func (nm *nemesis) begin(ctx context.Context, i int, ev Event) {
	rec := &NemesisRecord{Index: i, Event: ev}
	af := &activeFault{rec: rec, blocks: map[string][]string{}, blockDial: map[string][]string{}, loss: map[string]faultState{}, clockGen: map[string]int{}}
	all := nm.cl.nodes
	pickOne := func(cands []*agentNode) *agentNode {
		if len(cands) == 0 {
			return nil
		}
		return cands[ev.Pick%uint64(len(cands))]
	}
	var targets []*agentNode
	switch ev.Fault {
	case FaultPartition, FaultSnapshot:
		switch ev.Variant {
		case "isolate-leader", "one-way":
			targets = []*agentNode{nm.leader(ctx, rec)}
		case "isolate-one":
			targets = []*agentNode{pickOne(all)}
		case "isolate-follower":
			l := nm.leader(ctx, rec)
			targets = []*agentNode{pickOne(without(all, l))}
			if f := targets[0]; f != nil && ev.Fault == FaultSnapshot {
				if st, err := nm.ct.status(ctx, f, time.Second); err == nil {
					af.follower, af.followerLast = f, st.LastLogIndex
				}
			}
			if l != nil {
				if st, err := nm.ct.status(ctx, l, time.Second); err == nil {
					af.leaderIdx = st.AppliedIndex
					rec.Notes = append(rec.Notes, fmt.Sprintf("leader %s at applied index %d", l.ID, st.AppliedIndex))
				}
			}
		}
		if len(targets) == 1 && targets[0] == nil {
			targets = nil
		}
		switch ev.Variant {
		case "isolate-leader", "isolate-one", "isolate-follower":
			if len(targets) == 1 {
				blockGroups(af, targets, without(all, targets[0]))
			}
		case "one-way":
			if len(targets) == 1 {
				af.blockDial[targets[0].ID] = raftAddrs(without(all, targets[0]))
				rec.Notes = append(rec.Notes, targets[0].ID+" cannot dial the others (they can still dial it)")
			}
		case "halves":
			p := permuted(all, ev.Pick)
			a, b := p[:len(p)/2], p[len(p)/2:]
			blockGroups(af, a, b)
			targets = a
			rec.Notes = append(rec.Notes, fmt.Sprintf("halves %v | %v", ids(a), ids(b)))
		case "bridge":
			p := permuted(all, ev.Pick)
			h := len(p) / 2
			a, bridge, b := p[:h], p[h], p[h+1:]
			blockGroups(af, a, b)
			targets = []*agentNode{bridge}
			rec.Notes = append(rec.Notes, fmt.Sprintf("%v | %v, bridged by %s", ids(a), ids(b), bridge.ID))
		case "ring":
			p := permuted(all, ev.Pick)
			n := len(p)
			for i, a := range p {
				for j, b := range p {
					if d := (j - i + n) % n; d != 0 && d != 1 && d != n-1 {
						af.blocks[a.ID] = append(af.blocks[a.ID], b.RaftAddr)
					}
				}
			}
			targets = p
			rec.Notes = append(rec.Notes, fmt.Sprintf("ring %v: each node reaches its two neighbours only", ids(p)))
		}
	case FaultKill, FaultPause:
		up := nm.upNodes()
		switch ev.Variant {
		case "leader":
			targets = []*agentNode{nm.leader(ctx, rec)}
			if targets[0] == nil {
				targets = nil
			}
		case "one":
			if n := pickOne(up); n != nil {
				targets = []*agentNode{n}
			}
		case "minority":
			p := permuted(up, ev.Pick)
			targets = p[:min(len(p), (len(all)-1)/2)]
		case "all":
			targets = up
		case "workers":
			af.workers = nm.workers.pickHalf(ev.Pick)
			nm.workers.pause(af.workers)
			for _, w := range af.workers {
				rec.Targets = append(rec.Targets, fmt.Sprintf("w%d", w))
			}
		}
		for _, n := range targets {
			var err error
			if ev.Fault == FaultKill {
				err = nm.cl.kill(n)
				af.killed = append(af.killed, n)
			} else if err = nm.cl.pause(n); err == nil {
				af.paused = append(af.paused, n)
			}
			if err != nil {
				rec.Errors = append(rec.Errors, err.Error())
			}
		}
	case FaultClock:
		switch ev.Variant {
		case "skew-leader", "rate-leader":
			if l := nm.leader(ctx, rec); l != nil {
				targets = []*agentNode{l}
			}
		case "skew-one", "rate-one":
			if n := pickOne(nm.upNodes()); n != nil {
				targets = []*agentNode{n}
			}
		case "skew-followers":
			l := nm.leader(ctx, rec)
			targets = without(nm.upNodes(), l)
		}
		rate := cmp.Or(ev.ClockRate, 1)
		for _, n := range targets {
			_, _, gen := n.state()
			if err := nm.ct.setClock(ctx, n, ev.ClockOffset, rate); err != nil {
				rec.Errors = append(rec.Errors, err.Error())
				continue
			}
			af.clockGen[n.ID] = gen
		}
		rec.Notes = append(rec.Notes, fmt.Sprintf("clock offset %+v, rate %.2f", ev.ClockOffset, rate))
	case FaultWorker:
		if nm.fleet == nil {
			rec.Errors = append(rec.Errors, "worker faults need the leased workload's sidecars")
			break
		}
		rec.Targets, af.undo = nm.fleet.beginFault(ctx, ev, rec)
	case FaultTransfer:
		nm.beginTransfer(ctx, i, ev, af)
	case FaultReconfig:
		nm.beginReconfig(ctx, i, ev, af)
	case FaultLoss:
		switch ev.Variant {
		case "one":
			targets = []*agentNode{pickOne(all)}
		case "all":
			targets = all
		}
		for _, n := range targets {
			af.loss[n.ID] = faultState{Loss: ev.Loss, Delay: ev.Delay.String(), Jitter: ev.Jitter.String()}
		}
		rec.Notes = append(rec.Notes, fmt.Sprintf("loss %.2f per write, delay %v + [0, %v]", ev.Loss, ev.Delay, ev.Jitter))
	}
	if rec.Targets == nil {
		rec.Targets = ids(targets)
	}
	inv, err := nm.hw.Invoke(-1-i, "", history.FNemesis, "", history.NemesisValue{Fault: ev.Fault, Targets: rec.Targets, Detail: ev.Variant + nemesisDetail(rec)})
	if err != nil {
		rec.Errors = append(rec.Errors, err.Error())
	}
	af.inv = inv
	rec.StartNanos = inv.TimeNanos
	nm.mu.Lock()
	nm.active[i] = af
	nm.records = append(nm.records, rec)
	nm.mu.Unlock()
	nm.logf("nemesis %s on %v %s", ev.Name(), rec.Targets, strings.Join(rec.Notes, "; "))
	if af.launch != nil {
		af.launch()
	}
}

func nemesisDetail(rec *NemesisRecord) string {
	if len(rec.Notes) == 0 {
		return ""
	}
	return ": " + strings.Join(rec.Notes, "; ")
}

// end heals event i.
func (nm *nemesis) end(ctx context.Context, i int) {
	nm.mu.Lock()
	af := nm.active[i]
	nm.mu.Unlock()
	if af == nil {
		return
	}
	if af.stop != nil {
		af.stop()
	}
	if trs := af.rec.Transfers; len(trs) > 0 {
		done := 0
		for _, tr := range trs {
			if tr.Outcome == string(history.OK) {
				done++
			}
		}
		af.rec.Notes = append(af.rec.Notes, fmt.Sprintf("%d leadership transfers, %d seen done", len(trs), done))
	}
	if af.rec.Event.Fault == FaultSnapshot && af.follower != nil {
		nm.awaitCompaction(ctx, af)
	}
	nm.mu.Lock()
	delete(nm.active, i)
	nm.mu.Unlock()
	rec := af.rec
	for _, n := range af.killed {
		if err := nm.cl.start(n); err != nil {
			rec.Errors = append(rec.Errors, err.Error())
		}
	}
	for _, n := range af.paused {
		if err := nm.cl.resume(n); err != nil {
			rec.Errors = append(rec.Errors, err.Error())
		}
	}
	if len(af.workers) > 0 {
		nm.workers.resume(af.workers)
	}
	if af.undo != nil {
		rec.Errors = append(rec.Errors, af.undo(ctx)...)
	}
	// Clocks heal forward only: the rate goes back to 1, and a backward
	// jump is undone by jumping forward again, but a forward jump stays
	// (the test clock, like a monotonic clock, never goes back: jumping it
	// back would stall it for the offset's length).
	for id, gen := range af.clockGen {
		n := nm.node(id)
		if _, _, g := n.state(); g != gen {
			continue // restarted meanwhile: its clock starts afresh
		}
		if err := nm.ct.setClock(ctx, n, max(-rec.Event.ClockOffset, 0), 1); err != nil {
			rec.Errors = append(rec.Errors, "clock reset: "+err.Error())
		}
	}
	if rec.Event.Fault == FaultSnapshot && af.leaderIdx > 0 {
		sts := nm.ct.statuses(ctx, nm.cl.nodes, time.Second)
		if id, _ := leaderOf(sts); id != "" {
			rec.Notes = append(rec.Notes, fmt.Sprintf("leader %s advanced %d entries while the follower was isolated", id, sts[id].AppliedIndex-min(af.leaderIdx, sts[id].AppliedIndex)))
		}
	}
	op, err := nm.hw.Complete(af.inv, history.Info, "", "", history.NemesisValue{Fault: rec.Event.Fault, Targets: rec.Targets, Detail: "healed"})
	if err != nil {
		rec.Errors = append(rec.Errors, err.Error())
	}
	rec.EndNanos = op.TimeNanos
	nm.logf("healed %s", rec.Event.Name())
}

// compactionWait bounds how long a snapshot fault keeps its follower
// isolated past its scheduled end, waiting for the leader to compact its
// log past the follower.
const compactionWait = 5 * time.Second

// awaitCompaction keeps a snapshot fault's follower isolated until the
// leader's oldest log entry is newer than the follower's last one (so
// that the follower can only catch up from a snapshot), or compactionWait
// has passed, and records which.
func (nm *nemesis) awaitCompaction(ctx context.Context, af *activeFault) {
	rec := af.rec
	deadline := time.Now().Add(compactionWait)
	for {
		sts := nm.ct.statuses(ctx, without(nm.cl.nodes, af.follower), time.Second)
		if id, _ := leaderOf(sts); id != "" && sts[id].FirstLogIndex > af.followerLast {
			rec.SnapshotForced = true
			rec.Notes = append(rec.Notes, fmt.Sprintf("leader %s compacted its log past the isolated follower %s (first log index %d > its last %d): it must catch up from a snapshot",
				id, af.follower.ID, sts[id].FirstLogIndex, af.followerLast))
			return
		}
		if time.Now().After(deadline) || sleepCtx(ctx, 100*time.Millisecond) != nil {
			rec.Notes = append(rec.Notes, fmt.Sprintf("the leader did not compact its log past %s's last index %d within %v of the scheduled heal", af.follower.ID, af.followerLast, compactionWait))
			return
		}
	}
}

// desired computes every node's fault state from the active faults.
func (nm *nemesis) desired() map[string]faultState {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	out := make(map[string]faultState, len(nm.cl.nodes))
	for _, n := range nm.cl.nodes {
		fs := faultState{Block: []string{}, BlockDial: []string{}, Delay: "0s", Jitter: "0s"}
		var delay, jitter time.Duration
		for _, af := range nm.active {
			fs.Block = append(fs.Block, af.blocks[n.ID]...)
			fs.BlockDial = append(fs.BlockDial, af.blockDial[n.ID]...)
			if l, ok := af.loss[n.ID]; ok {
				fs.Loss = max(fs.Loss, l.Loss)
				d, _ := time.ParseDuration(l.Delay)
				j, _ := time.ParseDuration(l.Jitter)
				delay, jitter = max(delay, d), max(jitter, j)
			}
		}
		slices.Sort(fs.Block)
		fs.Block = slices.Compact(fs.Block)
		slices.Sort(fs.BlockDial)
		fs.BlockDial = slices.Compact(fs.BlockDial)
		fs.Delay, fs.Jitter = delay.String(), jitter.String()
		out[n.ID] = fs
	}
	return out
}

// reconcile pushes the desired fault state to every running, unpaused
// node that does not have it (a restarted node starts with none). Failures
// are retried at the next reconcile.
func (nm *nemesis) reconcile(ctx context.Context) {
	want := nm.desired()
	var wg sync.WaitGroup
	for _, n := range nm.cl.nodes {
		up, paused, gen := n.state()
		if !up || paused {
			continue
		}
		nm.mu.Lock()
		have, ok := nm.pushed[n.ID]
		same := ok && nm.pushGen[n.ID] == gen && have.equal(want[n.ID])
		nm.mu.Unlock()
		if same {
			continue
		}
		wg.Go(func() {
			if err := nm.ct.setFaults(ctx, n, want[n.ID]); err != nil {
				nm.logf("fault state for %s not applied yet: %v", n.ID, err)
				return
			}
			nm.mu.Lock()
			nm.pushed[n.ID], nm.pushGen[n.ID] = want[n.ID], gen
			nm.mu.Unlock()
		})
	}
	wg.Wait()
}

// healAll ends every active fault, then makes sure every node runs,
// unpaused, with no fault, and no worker is paused. It is recorded as a
// "heal" nemesis op.
func (nm *nemesis) healAll(ctx context.Context) {
	nm.mu.Lock()
	var idx []int
	for i := range nm.active {
		idx = append(idx, i)
	}
	nm.mu.Unlock()
	slices.Sort(idx)
	for _, i := range idx {
		nm.end(ctx, i)
	}
	inv, _ := nm.hw.Invoke(nm.healer, "", history.FNemesis, "", history.NemesisValue{Fault: "heal", Detail: "final heal: every node running, no faults"})
	for _, node := range nm.cl.nodes {
		if up, _, _ := node.state(); !up {
			if err := nm.cl.start(node); err != nil {
				nm.logf("heal: %v", err)
			}
		}
		if err := nm.cl.resume(node); err != nil {
			nm.logf("heal: %v", err)
		}
	}
	nm.workers.resumeAll()
	if nm.fleet != nil {
		nm.fleet.healAll(ctx)
	}
	nm.mu.Lock()
	slowed := nm.slowed
	nm.mu.Unlock()
	if slowed {
		if err := nm.putInterval(ctx, nm.auxProcess(nm.events), 1); err != nil {
			nm.logf("heal: restoring the limit: %v", err)
		} else {
			nm.logf("heal: %s back to its original interval %v", nm.limit.Name, time.Duration(nm.limit.IntervalNanos))
		}
	}
	for attempt := 0; attempt < 20; attempt++ {
		nm.reconcile(ctx)
		if nm.allPushed() {
			break
		}
		_ = sleepCtx(ctx, 250*time.Millisecond)
	}
	_, _ = nm.hw.Complete(inv, history.Info, "", "", history.NemesisValue{Fault: "heal"})
	nm.logf("final heal done")
}

// allPushed reports whether every running node has the desired state.
func (nm *nemesis) allPushed() bool {
	want := nm.desired()
	nm.mu.Lock()
	defer nm.mu.Unlock()
	for _, n := range nm.cl.nodes {
		up, paused, gen := n.state()
		if !up || paused {
			return false
		}
		if have, ok := nm.pushed[n.ID]; !ok || nm.pushGen[n.ID] != gen || !have.equal(want[n.ID]) {
			return false
		}
	}
	return true
}

// recordsCopy returns the records so far.
func (nm *nemesis) recordsCopy() []NemesisRecord {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	out := make([]NemesisRecord, len(nm.records))
	for i, r := range nm.records {
		out[i] = *r
	}
	return out
}
