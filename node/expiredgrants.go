package node

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/fsm"
)

// expiredgrants.go: a grant answered as a refusal is counted as one.
//
// The node that sends a reserve's answer subtracts the time it held it
// (answer.go), and a grant whose first permit expired meanwhile leaves as
// a refusal (resultToErr). The register counted a grant when it decided
// it, and cannot learn better by itself: when the answer left is not in
// the log, and the counters must be the same on every replica. So the
// node that turned the answer into a refusal reports the grant in a later
// entry (fsm.CmdExpiredGrants), naming the entry that decided it (its raft
// index: the batcher's on the leader, carried back to a forwarding
// follower with the result) and the limits and permits it granted; the
// register then counts it as expired, a refusal (fsm's doc, "Counters").
//
// Reports queue here (at most maxQueuedExpiredGrants) and one goroutine
// sends them, up to fsm.MaxExpiredGrants per entry, one entry at a time:
// the reports that arrive while one is in flight leave together in the
// next, so a burst of expirations costs a few entries, and none are
// written while nothing expires. A report is sent once: one that cannot be
// queued, or whose entry fails (its outcome may be unknown: the register
// could count it twice if it were retried), is dropped and counted in
// Status.ExpiredGrantsUnreported. So the counters of a grant answered as
// a refusal may say "granted" — until its report is applied, or for good
// if the report is lost — never the reverse. Only fresh decisions are
// reported: a replay is not counted by the register in the first place.
// A grant whose answer left as a grant and was lost on its way (the
// client's retry then gets an expired replay) stays a grant: it was
// answered as one.

// maxQueuedExpiredGrants bounds the reports waiting to be sent.
const maxQueuedExpiredGrants = 4 * fsm.MaxExpiredGrants

// expiredReportTimeout bounds the sending of one report entry.
const expiredReportTimeout = 5 * time.Second

// expiredReports queues the reports of grants answered as refusals.
type expiredReports struct {
	mu    sync.Mutex
	queue []fsm.ExpiredGrant
	// wake has room for one signal: a report is queued.
	wake chan struct{}
	// expired counts the grants this node answered as refusals (replays
	// included), unreported the reports it dropped or could not send.
	expired, unreported atomic.Uint64
}

func newExpiredReports() *expiredReports {
	return &expiredReports{wake: make(chan struct{}, 1)}
}

// add queues the report of a grant decided at index on parts; index 0
// (unknown) is not reported.
func (q *expiredReports) add(index uint64, parts []fsm.Part) {
	if index == 0 {
		q.unreported.Add(1)
		return
	}
	q.mu.Lock()
	if len(q.queue) >= maxQueuedExpiredGrants {
		q.mu.Unlock()
		q.unreported.Add(1)
		return
	}
	q.queue = append(q.queue, fsm.ExpiredGrant{DecidedIndex: index, Parts: parts})
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take removes and returns up to fsm.MaxExpiredGrants queued reports.
func (q *expiredReports) take() []fsm.ExpiredGrant {
	q.mu.Lock()
	defer q.mu.Unlock()
	k := min(len(q.queue), fsm.MaxExpiredGrants)
	out := append([]fsm.ExpiredGrant(nil), q.queue[:k]...)
	q.queue = append(q.queue[:0], q.queue[k:]...)
	return out
}

// reportExpired notes that the answer to reserve r, decided at index (0:
// unknown), left as a refusal because its grant expired while held, and
// queues its report if it was a fresh decision.
func (n *Node) reportExpired(r fsm.Reserve, res fsm.ReserveResult, index uint64) {
	n.expired.expired.Add(1)
	if res.Duplicate {
		return
	}
	parts := []fsm.Part{{Limit: r.Limit, Permits: r.Permits}}
	if r.Track {
		parts = r.Parts()
	}
	n.expired.add(index, parts)
}

// sendExpiredReports sends the queued reports until the node stops.
func (n *Node) sendExpiredReports() {
	for {
		select {
		case <-n.stopCh:
			return
		case <-n.expired.wake:
		}
		for gs := n.expired.take(); len(gs) > 0; gs = n.expired.take() {
			n.sendExpiredReport(gs)
		}
	}
}

// sendExpiredReport writes one report entry, once.
func (n *Node) sendExpiredReport(gs []fsm.ExpiredGrant) {
	entry, err := fsm.AppendExpiredGrants(nil, fsm.Stamp{}, gs)
	if err == nil {
		ctx, cancel := context.WithTimeout(n.stopped, expiredReportTimeout)
		_, err = n.command(ctx, entry)
		cancel()
	}
	if err != nil {
		n.expired.unreported.Add(uint64(len(gs)))
		n.log.Debug("reporting grants answered as refusals failed; the register counts them as granted", "grants", len(gs), "error", err)
	}
}
