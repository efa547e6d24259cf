package node

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/fsm"
)

// takeover.go: how a node becomes the cluster's clock. A new leader may
// stamp only after it has applied every entry committed before its term
// (a raft Barrier), and it continues from the last cluster time the FSM
// applied — never from its own clock, which may be anywhere — plus the
// time it can prove has passed since then:
//
//	base = fsm.LastNowNanos() after Barrier(term)
//	       + the time since it last took in state of an earlier term   (receipt.go)
//
// Only the time between the old leader's last stamp and this node's
// receipt of it is lost (grants only get later); the rest of the election
// is counted.
// A stamp carries its term; fsm.Apply trusts it only in an entry of that
// same term, so a stamp held across A→B→A is "no time passed" (see
// stampForApply). Readiness is the timeline's: ready while it stamps.

// watchLeadership activates the cluster timeline when this node becomes
// leader (after a Barrier has applied the whole log) and deactivates it when
// leadership is lost.
func (n *Node) watchLeadership() {
	ticker := time.NewTicker(200 * time.Millisecond)
	defer ticker.Stop()
	leaderCh := n.raft.LeaderCh()
	var campaign campaignLog
	for {
		select {
		case <-n.stopCh:
			n.timeline.end()
			return
		case isLeader := <-leaderCh:
			n.onLeadership(isLeader)
		case <-ticker.C:
			// LeaderCh keeps only the latest value; reconcile periodically.
			n.onLeadership(n.raft.State() == raft.Leader)
			n.checkMembership()
			n.logCampaign(&campaign, time.Now())
		}
	}
}

// onLeadership takes the timeline over when this node leads (a raft
// Barrier applies everything committed in earlier terms; the timeline then
// continues from the FSM's last applied cluster time plus the time since
// this node took that state in, receipt.go) and ends it when
// it does not. A leader seen again in a new term without the loss having
// been seen starts over: another leader may have stamped meanwhile.
func (n *Node) onLeadership(isLeader bool) {
	if !isLeader {
		if n.timeline.isActive() {
			n.log.Info("leadership lost", "term", n.raft.CurrentTerm())
			n.timeline.end()
		}
		return
	}
	term := n.raft.CurrentTerm()
	if n.timeline.isActive() {
		if n.timeline.activeTerm() == term {
			return
		}
		// Leadership was lost and regained without us seeing the loss:
		// another leader may have stamped entries meanwhile, so start over
		// from a barrier.
		n.log.Info("leadership regained in a new term: restarting the timeline", "term", term)
		n.timeline.end()
	}
	// Apply everything committed before taking over the timeline.
	if err := n.awaitFuture(n.raft.Barrier(n.cfg.ApplyTimeout)); err != nil {
		n.log.Warn("barrier after election failed", "error", err)
		return
	}
	if n.raft.State() != raft.Leader || n.raft.CurrentTerm() != term {
		return
	}
	last := n.fsm.LastNowNanos()
	from, counted := n.receipts.lastBefore(term)
	// Checked again after the readings: a node deposed in between may
	// have applied a later leader's stamps (in last) without their
	// receipts (a later term than term), and must not begin a timeline
	// on them (stampForApply would refuse its stamps, but the timeline
	// would stand ahead until it ended).
	if n.raft.State() != raft.Leader || n.raft.CurrentTerm() != term {
		return
	}
	if n.cfg.UnsafeResumeFromOwnClock {
		base := n.cfg.Clock.NowNanos() // the deliberate bug: see Config
		n.log.Warn("UNSAFE: resuming the cluster timeline from this node's own clock", "term", term, "from_ns", base, "fsm_last_ns", last)
		n.timeline.begin(term, base)
		return
	}
	if counted {
		n.timeline.beginAt(term, last, from.clockNanos, from.realNanos)
	} else {
		n.timeline.begin(term, last)
	}
	base, _, _, _ := n.timeline.stamp()
	n.log.Info("leading: cluster timeline continues", "term", term, "from_ns", base, "fsm_last_ns", last, "counted_ns", base-last)
}

// stampForApply stamps a command if this node is the leader of the term its
// timeline began in: the cluster time and that term (fsm.Apply trusts the
// time only in an entry appended in the same term), and the real instant
// of the reading.
func (n *Node) stampForApply() (fsm.Stamp, time.Time, bool) {
	now, term, at, ok := n.timeline.stamp()
	if !ok || n.raft.CurrentTerm() != term || n.raft.State() != raft.Leader {
		return fsm.Stamp{}, time.Time{}, false
	}
	return fsm.Stamp{Nanos: now, Term: term}, at, true
}

// waitLeading waits until this node's timeline is active or ctx ends.
func (n *Node) waitLeading(ctx context.Context) bool {
	if n.timeline.isActive() {
		return true
	}
	if n.raft.State() != raft.Leader {
		return false
	}
	select {
	case <-n.timeline.readyCh():
		return true
	case <-ctx.Done():
		return false
	case <-n.stopCh:
		return false
	}
}
