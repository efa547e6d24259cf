package nemesis

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/permitd/permitd/jepsen-lite/runner/cluster"
)

// pickOne is the candidate the event's pick chooses (nil: none).
func pickOne(cands []*cluster.Node, pick uint64) *cluster.Node {
	if len(cands) == 0 {
		return nil
	}
	return cands[pick%uint64(len(cands))]
}

// beginPartition applies a partition or snapshot event's blocks and
// returns its targets.
func (nm *Nemesis) beginPartition(ctx context.Context, ev Event, rec *Record, af *activeFault) []*cluster.Node {
	all := nm.cl.Nodes
	var targets []*cluster.Node
	switch ev.Variant {
	case "isolate-leader", "one-way":
		targets = []*cluster.Node{nm.leader(ctx, rec)}
	case "isolate-one":
		targets = []*cluster.Node{pickOne(all, ev.Pick)}
	case "isolate-follower":
		targets = nm.isolateFollower(ctx, ev, rec, af)
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
			af.blockDial[targets[0].ID] = cluster.RaftAddrs(without(all, targets[0]))
			rec.Notes = append(rec.Notes, targets[0].ID+" cannot dial the others (they can still dial it)")
		}
	case "halves":
		p := permuted(all, ev.Pick)
		a, b := p[:len(p)/2], p[len(p)/2:]
		blockGroups(af, a, b)
		targets = a
		rec.Notes = append(rec.Notes, fmt.Sprintf("halves %v | %v", cluster.IDs(a), cluster.IDs(b)))
	case "bridge":
		p := permuted(all, ev.Pick)
		h := len(p) / 2
		a, bridge, b := p[:h], p[h], p[h+1:]
		blockGroups(af, a, b)
		targets = []*cluster.Node{bridge}
		rec.Notes = append(rec.Notes, fmt.Sprintf("%v | %v, bridged by %s", cluster.IDs(a), cluster.IDs(b), bridge.ID))
	case "ring":
		targets = blockRing(af, permuted(all, ev.Pick))
		rec.Notes = append(rec.Notes, fmt.Sprintf("ring %v: each node reaches its two neighbours only", cluster.IDs(targets)))
	}
	return targets
}

// isolateFollower picks the follower to isolate; for a snapshot event it
// notes the follower's last log index and the leader's applied index.
func (nm *Nemesis) isolateFollower(ctx context.Context, ev Event, rec *Record, af *activeFault) []*cluster.Node {
	l := nm.leader(ctx, rec)
	targets := []*cluster.Node{pickOne(without(nm.cl.Nodes, l), ev.Pick)}
	if f := targets[0]; f != nil && ev.Fault == FaultSnapshot {
		if st, err := nm.ct.Status(ctx, f, time.Second); err == nil {
			af.follower, af.followerLast = f, st.LastLogIndex
		}
	}
	if l != nil {
		if st, err := nm.ct.Status(ctx, l, time.Second); err == nil {
			af.leaderIdx = st.AppliedIndex
			rec.Notes = append(rec.Notes, fmt.Sprintf("leader %s at applied index %d", l.ID, st.AppliedIndex))
		}
	}
	return targets
}

// blockRing blocks every link of p but those between ring neighbours and
// returns p.
func blockRing(af *activeFault, p []*cluster.Node) []*cluster.Node {
	n := len(p)
	for i, a := range p {
		for j, b := range p {
			if d := (j - i + n) % n; d != 0 && d != 1 && d != n-1 {
				af.blocks[a.ID] = append(af.blocks[a.ID], b.RaftAddr)
			}
		}
	}
	return p
}

// beginProcessFault kills or pauses an event's nodes (or pauses half the
// workers) and returns the nodes.
func (nm *Nemesis) beginProcessFault(ctx context.Context, ev Event, rec *Record, af *activeFault) []*cluster.Node {
	up := nm.cl.UpNodes()
	var targets []*cluster.Node
	switch ev.Variant {
	case "leader":
		targets = []*cluster.Node{nm.leader(ctx, rec)}
		if targets[0] == nil {
			targets = nil
		}
	case "one":
		if n := pickOne(up, ev.Pick); n != nil {
			targets = []*cluster.Node{n}
		}
	case "minority":
		p := permuted(up, ev.Pick)
		targets = p[:min(len(p), (len(nm.cl.Nodes)-1)/2)]
	case "all":
		targets = up
	case "workers":
		af.workers = nm.workers.PickHalf(ev.Pick)
		nm.workers.Pause(af.workers)
		for _, w := range af.workers {
			rec.Targets = append(rec.Targets, fmt.Sprintf("w%d", w))
		}
	}
	for _, n := range targets {
		var err error
		if ev.Fault == FaultKill {
			err = nm.cl.Kill(n)
			af.killed = append(af.killed, n)
		} else if err = nm.cl.Pause(n); err == nil {
			af.paused = append(af.paused, n)
		}
		if err != nil {
			rec.Errors = append(rec.Errors, err.Error())
		}
	}
	return targets
}

// beginClock sets the clock offset and rate of an event's nodes and
// returns them.
func (nm *Nemesis) beginClock(ctx context.Context, ev Event, rec *Record, af *activeFault) []*cluster.Node {
	var targets []*cluster.Node
	switch ev.Variant {
	case "skew-leader", "rate-leader":
		if l := nm.leader(ctx, rec); l != nil {
			targets = []*cluster.Node{l}
		}
	case "skew-one", "rate-one":
		if n := pickOne(nm.cl.UpNodes(), ev.Pick); n != nil {
			targets = []*cluster.Node{n}
		}
	case "skew-followers":
		l := nm.leader(ctx, rec)
		targets = without(nm.cl.UpNodes(), l)
	}
	rate := cmp.Or(ev.ClockRate, 1)
	for _, n := range targets {
		_, _, gen := n.State()
		if err := nm.ct.SetClock(ctx, n, ev.ClockOffset, rate); err != nil {
			rec.Errors = append(rec.Errors, err.Error())
			continue
		}
		af.clockGen[n.ID] = gen
	}
	rec.Notes = append(rec.Notes, fmt.Sprintf("clock offset %+v, rate %.2f", ev.ClockOffset, rate))
	return targets
}

// beginLoss sets the loss, delay and jitter of an event's nodes and
// returns them.
func (nm *Nemesis) beginLoss(ev Event, rec *Record, af *activeFault) []*cluster.Node {
	var targets []*cluster.Node
	switch ev.Variant {
	case "one":
		targets = []*cluster.Node{pickOne(nm.cl.Nodes, ev.Pick)}
	case "all":
		targets = nm.cl.Nodes
	}
	for _, n := range targets {
		af.loss[n.ID] = cluster.FaultState{Loss: ev.Loss, Delay: ev.Delay.String(), Jitter: ev.Jitter.String()}
	}
	rec.Notes = append(rec.Notes, fmt.Sprintf("loss %.2f per write, delay %v + [0, %v]", ev.Loss, ev.Delay, ev.Jitter))
	return targets
}
