package node

import (
	"io"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// receipt.go: how much of an election a new leader may count. A stamp is
// read before its entry is stored anywhere, so the instant a node stores an
// entry (a leader when it appends its own, a follower when the leader's
// AppendEntries arrives), installs a snapshot, or starts (everything on its
// disk was stamped before) is never earlier than the instant any stamp it
// then holds was read. So if r is the last such instant for state of an
// earlier term, at least now − r of real time has passed since the old
// timeline stood at the FSM's last applied time L, and a leader of term T
// may continue from
//
//	base = L + (now − r)      (both readings on this process's clocks)
//
// without its timeline ever running ahead of the real time since any
// stamp before it (the first invariant of doc.go): for every earlier
// stamp S read at real s, L − S ≤ (instant of L) − s, since the old
// timeline ran no faster than real time, and the instant of L ≤ r. Only
// the time before r is lost: the last message of the old leader's term
// this node took in, usually within a heartbeat of its crash, so most of
// an election is counted instead of none of it. An election after a full
// restart counts from the process's start (the downtime is lost).
//
// Entries of term T are this leader's own (one leader per term) and are
// stamped after the takeover, so they are not "earlier state"; the
// receipts are therefore kept per term and the takeover reads the latest
// one of a term before its own.

// receiptTerms is how many distinct terms keep a receipt; beyond it the
// oldest receipt (in time) is dropped. A takeover in term T needs the
// newest receipt of a term before T, and only receipts of T itself can
// be newer (no later term exists yet), so it is always kept. Dropping it
// would be unsafe, not merely lossy: an older receipt counts more time.
const receiptTerms = 8

// receipt is one reading of the node's clocks when it took in state.
type receipt struct {
	term       uint64 // the newest term in what was taken in (0: a start or a snapshot)
	clockNanos int64  // the timeline's clock
	realNanos  int64  // the process's monotonic clock
}

// receipts remembers, per term, when this node last took in state of that
// term. Safe for concurrent use.
type receipts struct {
	clock, real wire.Clock

	mu     sync.Mutex
	latest []receipt // ascending term, at most receiptTerms
}

// newReceipts returns receipts read on clock and real; the process's
// start counts as a receipt of every earlier term (term 0).
func newReceipts(clock, real wire.Clock) *receipts {
	r := &receipts{clock: clock, real: real}
	r.note(0)
	return r
}

// note records that state whose newest term is term was taken in now.
// The clocks are read under the lock: two notes of one term that overlap
// (raft calls from one goroutine today) could otherwise store the earlier
// reading last, and an earlier receipt counts more time than passed.
func (r *receipts) note(term uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := receipt{term: term, clockNanos: r.clock.NowNanos(), realNanos: r.real.NowNanos()}
	for i := range r.latest {
		if r.latest[i].term == term {
			r.latest[i] = now
			return
		}
	}
	i := len(r.latest)
	for i > 0 && r.latest[i-1].term > term {
		i--
	}
	r.latest = append(r.latest, receipt{})
	copy(r.latest[i+1:], r.latest[i:])
	r.latest[i] = now
	if len(r.latest) > receiptTerms {
		oldest := 0
		for j := range r.latest {
			if r.latest[j].realNanos < r.latest[oldest].realNanos {
				oldest = j
			}
		}
		r.latest = append(r.latest[:oldest], r.latest[oldest+1:]...)
	}
}

// lastBefore returns the newest receipt of a term before term, or false
// if there is none. A timeline that begins at it (timeline.beginAt) counts
// the time since on the slower of its two clocks, so an injected clock
// that jumps or runs fast counts no more than real time.
func (r *receipts) lastBefore(term uint64) (receipt, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var newest receipt
	found := false
	for _, x := range r.latest {
		if x.term < term && (!found || x.realNanos > newest.realNanos) {
			newest, found = x, true
		}
	}
	return newest, found
}

// receiptLog is the raft LogStore of a node: it notes when each entry was
// stored (receipt.go's model), then stores it in the wrapped store.
type receiptLog struct {
	raft.LogStore
	receipts *receipts
}

// StoreLog implements raft.LogStore.
func (l receiptLog) StoreLog(log *raft.Log) error {
	if err := l.LogStore.StoreLog(log); err != nil {
		return err
	}
	l.receipts.note(log.Term)
	return nil
}

// StoreLogs implements raft.LogStore.
func (l receiptLog) StoreLogs(logs []*raft.Log) error {
	if err := l.LogStore.StoreLogs(logs); err != nil {
		return err
	}
	var term uint64
	for _, e := range logs {
		term = max(term, e.Term)
	}
	l.receipts.note(term)
	return nil
}

// receiptFSM is the FSM as raft sees it: a restored snapshot (installed
// from a leader or read at start) is state taken in at the instant of the
// restore.
type receiptFSM struct {
	*fsm.FSM
	receipts *receipts
}

// Restore implements raft.FSM.
func (f receiptFSM) Restore(rc io.ReadCloser) error {
	if err := f.FSM.Restore(rc); err != nil {
		return err
	}
	f.receipts.note(0)
	return nil
}
