package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/cluster"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
)

// permuted returns nodes shuffled by pick.
func permuted(nodes []*cluster.Node, pick uint64) []*cluster.Node {
	out := slices.Clone(nodes)
	r := rand.New(rand.NewPCG(pick, pick^0x9e3779b97f4a7c15))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// without returns nodes minus x.
func without(nodes []*cluster.Node, x *cluster.Node) []*cluster.Node {
	var out []*cluster.Node
	for _, n := range nodes {
		if n != x {
			out = append(out, n)
		}
	}
	return out
}

// blockGroups makes every node of each group block every node of the
// other groups.
func blockGroups(af *activeFault, groups ...[]*cluster.Node) {
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

// compactionWait bounds how long a snapshot fault keeps its follower
// isolated past its scheduled end, waiting for the leader to compact its
// log past the follower.
const compactionWait = 5 * time.Second

// awaitCompaction keeps a snapshot fault's follower isolated until the
// leader's oldest log entry is newer than the follower's last one (so
// that the follower can only catch up from a snapshot), or compactionWait
// has passed, and records which.
func (nm *Nemesis) awaitCompaction(ctx context.Context, af *activeFault) {
	rec := af.rec
	deadline := time.Now().Add(compactionWait)
	for {
		sts := nm.ct.Statuses(ctx, without(nm.cl.Nodes, af.follower), time.Second)
		if id, _ := cluster.LeaderOf(sts); id != "" && sts[id].FirstLogIndex > af.followerLast {
			rec.SnapshotForced = true
			rec.Notes = append(rec.Notes, fmt.Sprintf("leader %s compacted its log past the isolated follower %s (first log index %d > its last %d): it must catch up from a snapshot",
				id, af.follower.ID, sts[id].FirstLogIndex, af.followerLast))
			return
		}
		if time.Now().After(deadline) || wait.Sleep(ctx, 100*time.Millisecond) != nil {
			rec.Notes = append(rec.Notes, fmt.Sprintf("the leader did not compact its log past %s's last index %d within %v of the scheduled heal", af.follower.ID, af.followerLast, compactionWait))
			return
		}
	}
}

// desired computes every node's fault state from the active faults.
func (nm *Nemesis) desired() map[string]cluster.FaultState {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	out := make(map[string]cluster.FaultState, len(nm.cl.Nodes))
	for _, n := range nm.cl.Nodes {
		fs := cluster.FaultState{Block: []string{}, BlockDial: []string{}, Delay: "0s", Jitter: "0s"}
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
func (nm *Nemesis) reconcile(ctx context.Context) {
	want := nm.desired()
	var wg sync.WaitGroup
	for _, n := range nm.cl.Nodes {
		up, paused, gen := n.State()
		if !up || paused {
			continue
		}
		nm.mu.Lock()
		have, ok := nm.pushed[n.ID]
		same := ok && nm.pushGen[n.ID] == gen && have.Equal(want[n.ID])
		nm.mu.Unlock()
		if same {
			continue
		}
		wg.Go(func() {
			if err := nm.ct.SetFaults(ctx, n, want[n.ID]); err != nil {
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
func (nm *Nemesis) healAll(ctx context.Context) {
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
	for _, node := range nm.cl.Nodes {
		if up, _, _ := node.State(); !up {
			if err := nm.cl.Start(node); err != nil {
				nm.logf("heal: %v", err)
			}
		}
		if err := nm.cl.Resume(node); err != nil {
			nm.logf("heal: %v", err)
		}
	}
	nm.workers.ResumeAll()
	if nm.fleet != nil {
		nm.fleet.HealAll(ctx)
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
		_ = wait.Sleep(ctx, 250*time.Millisecond)
	}
	_, _ = nm.hw.Complete(inv, history.Info, "", "", history.NemesisValue{Fault: "heal"})
	nm.logf("final heal done")
}

// allPushed reports whether every running node has the desired state.
func (nm *Nemesis) allPushed() bool {
	want := nm.desired()
	nm.mu.Lock()
	defer nm.mu.Unlock()
	for _, n := range nm.cl.Nodes {
		up, paused, gen := n.State()
		if !up || paused {
			return false
		}
		if have, ok := nm.pushed[n.ID]; !ok || nm.pushGen[n.ID] != gen || !have.Equal(want[n.ID]) {
			return false
		}
	}
	return true
}

// Records returns copies of the records so far.
func (nm *Nemesis) Records() []Record {
	nm.mu.Lock()
	defer nm.mu.Unlock()
	out := make([]Record, len(nm.records))
	for i, r := range nm.records {
		out[i] = *r
	}
	return out
}

// leader finds the current leader among running nodes, waiting up to 3s
// for one; without one it picks a running node at random (noted).
func (nm *Nemesis) leader(ctx context.Context, rec *Record) *cluster.Node {
	deadline := time.Now().Add(3 * time.Second)
	for {
		if id, _ := cluster.LeaderOf(nm.ct.Statuses(ctx, nm.cl.Nodes, 500*time.Millisecond)); id != "" {
			return nm.cl.Node(id)
		}
		if time.Now().After(deadline) || wait.Sleep(ctx, 100*time.Millisecond) != nil {
			break
		}
	}
	up := nm.cl.UpNodes()
	if len(up) == 0 {
		return nil
	}
	nm.mu.Lock() // the transfer loop picks leaders concurrently
	n := up[nm.rng.IntN(len(up))]
	nm.mu.Unlock()
	nm.recordNote(rec, "no leader found within 3s: picked "+n.ID)
	return n
}

// end heals event i.
func (nm *Nemesis) end(ctx context.Context, i int) {
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
		if err := nm.cl.Start(n); err != nil {
			rec.Errors = append(rec.Errors, err.Error())
		}
	}
	for _, n := range af.paused {
		if err := nm.cl.Resume(n); err != nil {
			rec.Errors = append(rec.Errors, err.Error())
		}
	}
	if len(af.workers) > 0 {
		nm.workers.Resume(af.workers)
	}
	if af.undo != nil {
		rec.Errors = append(rec.Errors, af.undo(ctx)...)
	}
	// Clocks heal forward only: the rate goes back to 1, and a backward
	// jump is undone by jumping forward again, but a forward jump stays
	// (the test clock, like a monotonic clock, never goes back: jumping it
	// back would stall it for the offset's length).
	for id, gen := range af.clockGen {
		n := nm.cl.Node(id)
		if _, _, g := n.State(); g != gen {
			continue // restarted meanwhile: its clock starts afresh
		}
		if err := nm.ct.SetClock(ctx, n, max(-rec.Event.ClockOffset, 0), 1); err != nil {
			rec.Errors = append(rec.Errors, "clock reset: "+err.Error())
		}
	}
	if rec.Event.Fault == FaultSnapshot && af.leaderIdx > 0 {
		sts := nm.ct.Statuses(ctx, nm.cl.Nodes, time.Second)
		if id, _ := cluster.LeaderOf(sts); id != "" {
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
