package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/fsm"
)

// waiters.go: the answer to a reserve that waits in an in-flight cap's
// queue (fsm/waiters.go) is held by the leader until an applied entry
// decides it.
//
// The register answers such a reserve Queued, with its reservation ID. The
// leader's goroutine that submitted it (reserveLocal, for a local or a
// forwarded reserve) then waits for the decision of a later entry: a
// release that frees its slot, a put, or the no-op the waker writes when a
// hold lapses or its deadline comes (waker.go). Every node reads the
// decisions of each entry right after applying it (waiterFSM) and hands
// them to the goroutines waiting on those reservations (waiterHub); the
// hub also keeps the latest decisions for a while, so that a goroutine
// that registers just after the entry that decided it still finds it.
//
// While it waits, the reserve holds no slot among the leader's
// MaxPendingReserves nor a place in the window of calls of the connection
// it was forwarded by (awaitWaiter gives both back: else as many waiters
// as the window stalled every later call of that follower, the release
// they wait for included); a follower that forwarded it keeps its own
// slot for the whole call, since it cannot tell that the reserve waits.
//
// The answer is expressed relative to the moment it is sent: the decision
// is relative to a cluster time of the entry that decided it
// (Result.NowNanos), and the leader subtracts the time its timeline has
// counted since then (stamp - NowNanos), which is never more than the real
// time since (the timeline never runs faster than real time): the wait
// only gets longer, and the hold's expiry and end (ExpiresInNanos,
// HoldExpiresInNanos), counted from the moment the leader answers, never
// last longer than the register counts them. A
// follower that forwarded the reserve counts it from its own sending of
// the call plus the time the leader held it (relayedResult, answer.go),
// and the client from its request's sending plus the time the node it
// talks to held it (held_ns): neither is later than the moment the
// expiry was made for.
//
// A node that stops leading while it holds such an answer, or whose
// client goes away, stops waiting: the reserve is still queued (or was
// granted) in the register. Every such reserve carries a request ID (the
// node the client talks to makes one up if the client sent none), so a
// retry, at any node, is answered Queued again (or with the decision,
// once made) and waits for the same decision: its place in the queue is
// kept. A reserve whose client went away, or whose ID only the node knows
// and that ends without an answer, is withdrawn (reserveMayWait) rather
// than left to hold a slot for nobody until its TTL; one with the client's
// own request ID only withdrawGrace later, and only if the client did not
// retry it meanwhile (fsm.Withdraw.GraceNanos).

// waiterRecent is how many of the latest decisions a hub keeps.
const waiterRecent = 1 << 14

// waiterDecided is a decision on a waiting reservation and the raft index
// of the entry that made it.
type waiterDecided struct {
	fsm.WaiterDecision
	index uint64
}

// waiterHub hands the decisions on waiting reservations to the goroutines
// that wait for them. Safe for concurrent use.
type waiterHub struct {
	mu      sync.Mutex
	waiting map[uint64][]chan waiterDecided
	recent  map[uint64]waiterDecided
	// order lists the IDs in recent, oldest first, as a ring from head.
	order []uint64
	head  int
}

func newWaiterHub() *waiterHub {
	return &waiterHub{waiting: map[uint64][]chan waiterDecided{}, recent: map[uint64]waiterDecided{}}
}

// decided delivers the decisions of the entry applied at index.
func (h *waiterHub) decided(index uint64, ds []fsm.WaiterDecision) {
	if len(ds) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, wd := range ds {
		d := waiterDecided{wd, index}
		for _, ch := range h.waiting[d.Reservation] {
			ch <- d // buffered, and each channel gets one decision
		}
		delete(h.waiting, d.Reservation)
		if len(h.order) < waiterRecent {
			h.order = append(h.order, d.Reservation)
		} else {
			delete(h.recent, h.order[h.head])
			h.order[h.head] = d.Reservation
			h.head = (h.head + 1) % waiterRecent
		}
		h.recent[d.Reservation] = d
	}
}

// wait returns a channel that receives the decision on reservation id
// (at once if it was made already), and a function that stops waiting.
func (h *waiterHub) wait(id uint64) (<-chan waiterDecided, func()) {
	ch := make(chan waiterDecided, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if d, ok := h.recent[id]; ok {
		ch <- d
		return ch, func() {}
	}
	h.waiting[id] = append(h.waiting[id], ch)
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		chs := h.waiting[id]
		for i, c := range chs {
			if c == ch {
				chs = append(chs[:i], chs[i+1:]...)
				break
			}
		}
		if len(chs) == 0 {
			delete(h.waiting, id)
		} else {
			h.waiting[id] = chs
		}
	}
}

// waiterFSM is the FSM as raft sees it: after every applied entry, the
// decisions it made on waiting reservations go to the hub, and the waker
// looks at the queue again.
type waiterFSM struct {
	receiptFSM
	n *Node
}

// Apply implements raft.FSM.
func (f waiterFSM) Apply(l *raft.Log) interface{} {
	res := f.receiptFSM.Apply(l)
	decisions := f.n.fsm.TakeWaiterDecisions()
	f.n.observeEntry(res, decisions)
	f.n.waiters.decided(l.Index, decisions)
	f.n.pokeWaker()
	return res
}

// errWaitAbandoned is why a node stops holding a queued reserve's answer.
const errWaitAbandoned = "the reserve waits in an in-flight cap's queue, and this node stopped holding its answer (%s): retry with the same request_id to wait on for the same decision"

// awaitWaiter holds the answer to reserve r, which the register queued
// (queued: its answer, Queued, with the reservation's ID), until an
// applied entry decides it, and returns that decision relative to now.
// The pending-reserve slot r holds on this node, and its place in the
// window of the connection it came by, are given back first: a waiting
// reserve is no longer in the commit pipeline those bound. It
// fails with ErrNoLeader, an unknown outcome, when this node stops leading
// or ctx ends first (reserveMayWait, on the node the client talks to,
// retries or withdraws).
func (n *Node) awaitWaiter(ctx context.Context, r fsm.Reserve, queued fsm.ReserveResult) (decidedReserve, error) {
	admissionOf(ctx).giveAll()
	ch, stop := n.waiters.wait(queued.ReservationID)
	defer stop()
	abandoned := func(why string) (decidedReserve, error) {
		return decidedReserve{}, userErrorf(ErrNoLeader, errWaitAbandoned, why)
	}
	lost, leading := n.timeline.activeDone()
	if !leading {
		return abandoned("it no longer leads")
	}
	select {
	case d := <-ch:
		n.testStallAnswer(ctx)
		at := time.Now() // before the timeline's reading: the durations count from at
		now, _, _, ok := n.timeline.stamp()
		if !ok {
			return abandoned("it no longer leads")
		}
		res := shiftResult(d.Result, time.Duration(max(now-d.Result.NowNanos, 0)))
		res.Duplicate = queued.Duplicate
		res, err := n.resultToErr(r, res, d.index)
		return decidedReserve{res: res, index: d.index, at: at}, err
	case <-lost:
		return abandoned("it no longer leads")
	case <-ctx.Done():
		return abandoned(ctx.Err().Error())
	case <-n.stopCh:
		return abandoned("it is shutting down")
	}
}

// reserveMayWait is Reserve for a reserve that may wait in an in-flight
// cap's queue (the reservation form, a max wait), on the node its client
// talks to. A reserve without a request ID gets one made up here, so that
// this node's own retries (a leader change while it waits) keep its place
// in the queue. When the reserve ends without an answer its client will
// be told of, the node withdraws it (Withdraw): the client went away
// (ctx ended), or the request ID is the node's own (nobody else can ask
// for the decision again: Force also releases a grant made meanwhile). A
// client's own request ID is withdrawn only while it still waits, so that
// a retry of it is answered refused, and only withdrawGrace later, with a
// grace that spares a reserve retried since (fsm.Withdraw.GraceNanos): a
// client whose attempt timed out, or whose connection broke, and that
// retries with its request ID at once, at this node or another, keeps its
// place. A leader change alone withdraws nothing, so that the client's
// retry keeps its place.
func (n *Node) reserveMayWait(ctx context.Context, r fsm.Reserve) (fsm.ReserveResult, error) {
	own := r.RequestID == ""
	if own {
		r.RequestID = newWaiterRequestID()
	}
	res, err := n.reserve(ctx, r, false)
	switch {
	case err == nil || !(errors.Is(err, ErrNoLeader) || ctx.Err() != nil):
	case own:
		n.withdraw(fsm.Withdraw{RequestID: r.RequestID, Owner: r.Owner, Force: true}, 0)
	case ctx.Err() != nil:
		grace := n.withdrawGraceNow()
		// The withdrawal is applied at most grace + withdrawTimeout after
		// the client went away, on a timeline that runs no faster than
		// real time: every retry since is within 2 graces + the timeout.
		n.withdraw(fsm.Withdraw{RequestID: r.RequestID, Owner: r.Owner,
			GraceNanos: min(int64(2*grace+withdrawTimeout), fsm.MaxWithdrawGraceNanos)}, grace)
	}
	if own {
		res.Duplicate = false // a replay of this node's own retry, not the client's
	}
	return res, err
}

// withdrawGrace is how long after its client went away a node withdraws
// a waiting reserve with the client's request ID: time for the client to
// retry (the Go client retries a timed-out attempt at the next server at
// once).
const withdrawGrace = 2 * time.Second

// withdrawGraceNow returns withdrawGrace, or a test's own.
func (n *Node) withdrawGraceNow() time.Duration {
	if d := n.testWithdrawGrace.Load(); d > 0 {
		return time.Duration(d)
	}
	return withdrawGrace
}

// newWaiterRequestID makes up a request ID for a reserve that may wait
// and has none: "w:" and 24 random hexadecimal digits.
func newWaiterRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "w:" + hex.EncodeToString(b[:])
}

// withdrawLocal applies a Withdraw on the leader.
func (n *Node) withdrawLocal(ctx context.Context, c fsm.Withdraw) (fsm.ReleaseResult, error) {
	v, err := n.applyAdmin(ctx, func(st fsm.Stamp) ([]byte, error) { return fsm.AppendWithdraw(nil, st, c) })
	return resultAs[fsm.ReleaseResult]("withdraw", v, err)
}

// withdrawTimeout bounds withdraw.
const withdrawTimeout = 5 * time.Second

// withdraw applies c in the background, after a delay. Best effort: if
// it fails, a reserve still waiting is refused at its deadline, and a
// grant lapses at its TTL.
func (n *Node) withdraw(c fsm.Withdraw, after time.Duration) {
	entry, err := fsm.AppendWithdraw(nil, fsm.Stamp{}, c)
	if err != nil {
		n.log.Error("withdrawing a waiting reserve: cannot encode it", "error", err)
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if after > 0 && !n.pause(n.stopped, after) {
			return
		}
		ctx, cancel := context.WithTimeout(n.stopped, withdrawTimeout)
		defer cancel()
		res, err := commandRetried[fsm.ReleaseResult](n, ctx, "withdraw", entry, true)
		if err != nil {
			n.log.Debug("withdrawing a waiting reserve nobody waits for failed", "request_id", c.RequestID, "error", err)
		}
		if f := n.testWithdrawn; f != nil {
			f(res, err)
		}
	}()
}

// admissionKey carries, in a reserve's context, the slots it holds that
// a waiting reserve must not (an *admission): its pending-reserve slot
// (overload.go) and, for a call read off a pipelined connection, its
// place in the connection's window (forward.go).
type admissionKey struct{}

// admission is one layer of the slots a reserve holds: given back once,
// by release (or, for a connection's window, by a receive from sem),
// whether by the reserve's waiting (giveAll) or by the layer's owner
// when the call returns (leave). outer is the layer its context carried
// already. A struct rather than closures: every call and reserve takes
// one or two, and sync.OnceFunc and its closures were five allocations
// each.
type admission struct {
	release func()
	sem     chan struct{}
	given   atomic.Bool
	outer   *admission
}

// withAdmission returns ctx carrying release, after the slots ctx
// carried already (if any), and the layer, whose leave gives release's
// slots back (at most once, with giveAll).
func withAdmission(ctx context.Context, release func()) (context.Context, *admission) {
	a := &admission{release: release, outer: admissionOf(ctx)}
	return context.WithValue(ctx, admissionKey{}, a), a
}

// leave gives this layer's slots back, unless they were already.
func (a *admission) leave() {
	if a.given.CompareAndSwap(false, true) {
		if a.sem != nil {
			<-a.sem
			return
		}
		a.release()
	}
}

// giveAll gives back the slots of this layer and of every outer one
// (none for nil).
func (a *admission) giveAll() {
	for ; a != nil; a = a.outer {
		a.leave()
	}
}

// admissionOf returns the slots the reserve ctx belongs to holds (nil if
// none).
func admissionOf(ctx context.Context) *admission {
	a, _ := ctx.Value(admissionKey{}).(*admission)
	return a
}
