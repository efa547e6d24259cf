package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/fsm"
)

// batcher.go: group commit on the leader (doc.go's invariant 2: batching
// shares an fsync, never an instant).

// batcher groups concurrent commands of one kind (reserves, or lease
// commands) into one log entry (group commit). It runs only while this
// node leads. A lone command is sent at once; while up to maxInflight
// entries are being committed, newly arriving commands queue and leave
// together in the next entry (at most maxBatch), in arrival order. No
// timer is involved, so there is no added latency at low load.
//
// Each command is stamped when it reaches the leader (its arrival), and
// the entry carries every arrival, so the register decides each command
// at its own time, as if it had been applied alone on arrival: batching
// shares an fsync, never an instant. Arrivals are made non-decreasing in
// log order (a command stamped before one queued ahead of it takes that
// one's stamp), and a command stamped in an earlier term than the entry's
// takes the entry's stamp: both only make decisions later.
type batcher[C, R any] struct {
	n           *Node
	kind        batchKind[C, R]
	mu          sync.RWMutex // guards closed against enqueues racing close
	closed      bool
	in          chan *pending[C, R]
	maxBatch    int
	inflight    chan struct{}
	stop        chan struct{}
	wg          sync.WaitGroup
	applyTimout time.Duration
	pool        sync.Pool

	// last is the latest arrival given to a command (loop goroutine only).
	last arrival
	// prevBatchAt is when the newest command of the previous batch
	// arrived, prevLeftAt when that batch left for the log and prevMany
	// whether it held more than one command (loop goroutine only): a
	// batch lingers only if its first command came within the linger of
	// prevBatchAt, or of prevLeftAt after a batch of several.
	prevBatchAt, prevLeftAt time.Time
	prevMany                bool
}

// batchKind is what a batcher needs to know of its commands: what to call
// them in errors, how to encode a batch of them (each with its arrival),
// and whether the node's batch hooks (Config.OnBatch, testHoldAnswers)
// and its reserve-entry counters (Status.ReserveBatches: reserve entries
// only) watch its entries.
type batchKind[C, R any] struct {
	what   string
	encode func(st fsm.Stamp, cs []C, arrivals []int64) ([]byte, error)
	hooks  bool
	// linger is how long a batch waits for more commands after its first
	// one, once a commit slot is free (0: it leaves at once), if that
	// first one arrived under load (underLoad: within the linger of the
	// previous batch; a command after a quiet spell leaves at once). Each
	// entry costs the leader a disk commit and a replication round;
	// commands whose answers can wait a few tens of milliseconds (lease
	// commands: their holders go on spending kept permits) share more of
	// them.
	linger time.Duration
}

// arrival is when a command reached the leader: its cluster-time stamp
// and the real instant of the reading.
type arrival struct {
	st fsm.Stamp
	at time.Time
}

// pending is one command waiting for its entry to commit.
type pending[C, R any] struct {
	cmd     C
	arrived arrival
	done    chan batchResult[R]
}

// batchResult is the register's answer to a pending command, or why there is
// none; appliedAt is when the entry's apply returned, index the entry's
// raft index.
type batchResult[R any] struct {
	res       R
	err       error
	appliedAt time.Time
	index     uint64
}

func newBatcher[C, R any](n *Node, kind batchKind[C, R], maxBatch, maxInflight int, applyTimeout time.Duration) *batcher[C, R] {
	b := &batcher[C, R]{
		n:           n,
		kind:        kind,
		in:          make(chan *pending[C, R], maxBatch*4),
		maxBatch:    maxBatch,
		inflight:    make(chan struct{}, maxInflight),
		stop:        make(chan struct{}),
		applyTimout: applyTimeout,
	}
	b.pool.New = func() any { return &pending[C, R]{done: make(chan batchResult[R], 1)} }
	b.wg.Add(1)
	go b.loop()
	return b
}

// get returns a pending command from the batcher's pool, put gives it
// back once its outcome has been read.
func (b *batcher[C, R]) get() *pending[C, R]  { return b.pool.Get().(*pending[C, R]) }
func (b *batcher[C, R]) put(p *pending[C, R]) { b.pool.Put(p) }

// run stamps c's arrival, queues it and waits for its outcome (and its
// arrival). Once queued, the command may be committed: it waits for the
// outcome even past ctx, so that the answer is never lost while the
// decision is real; the batcher always answers, with the decision or with
// an unknown outcome when leadership is lost or the node stops.
func (b *batcher[C, R]) run(ctx context.Context, c C) (batchResult[R], arrival, error) {
	st, at, ok := b.n.stampForApply()
	if !ok {
		return batchResult[R]{}, arrival{}, fmt.Errorf("%w: this node is not the leader", ErrNoLeader)
	}
	p := b.get()
	p.cmd, p.arrived = c, arrival{st: st, at: at}
	if err := b.enqueue(ctx, p); err != nil {
		b.put(p)
		return batchResult[R]{}, arrival{}, err
	}
	out := <-p.done
	arrived := p.arrived
	var zero C
	p.cmd = zero
	b.put(p)
	return out, arrived, out.err
}

// runAll is run for several commands that arrived together (a follower's
// batch, forwardbatch.go): each is stamped and queued in order, then every
// outcome is awaited. outs[i] is cs[i]'s outcome; a command that could not
// be queued has its error, and no decision.
func (b *batcher[C, R]) runAll(ctx context.Context, cs []C) []batchResult[R] {
	outs := make([]batchResult[R], len(cs))
	queued := make([]*pending[C, R], len(cs))
	for i, c := range cs {
		st, at, ok := b.n.stampForApply()
		if !ok {
			outs[i].err = fmt.Errorf("%w: this node is not the leader", ErrNoLeader)
			continue
		}
		p := b.get()
		p.cmd, p.arrived = c, arrival{st: st, at: at}
		if err := b.enqueue(ctx, p); err != nil {
			b.put(p)
			outs[i].err = err
			continue
		}
		queued[i] = p
	}
	var zero C
	for i, p := range queued {
		if p == nil {
			continue
		}
		outs[i] = <-p.done
		p.cmd = zero
		b.put(p)
	}
	return outs
}

// enqueue hands p to the batcher unless it is closed or ctx ends first.
// Once enqueue returns nil, p.done will receive exactly one outcome.
func (b *batcher[C, R]) enqueue(ctx context.Context, p *pending[C, R]) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return ErrShutdown
	}
	// The common case first: room in the queue. A send that cannot block
	// neither locks the other channels nor calls ctx.Done, which allocates
	// the context's channel (and, deep in a handler's stack, grows it): at
	// 40 k reserves/s that select cost the leader about a fifth of its
	// throughput.
	select {
	case b.in <- p:
		return nil
	default:
	}
	select {
	case b.in <- p:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: queueing: %v", ErrNoLeader, ctx.Err())
	case <-b.stop:
		return ErrShutdown
	}
}

// close stops the loop and answers every command still queued.
func (b *batcher[C, R]) close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	close(b.stop)
	b.mu.Unlock()
	b.wg.Wait()
	b.drainFail()
}

func (b *batcher[C, R]) loop() {
	defer b.wg.Done()
	var batch []*pending[C, R]
	for {
		var first *pending[C, R]
		select {
		case first = <-b.in:
		case <-b.stop:
			b.drainFail()
			return
		}
		batch = append(batch[:0], first)
		// Wait for a commit slot; commands arriving meanwhile join the batch.
		select {
		case b.inflight <- struct{}{}:
		case <-b.stop:
			failAll(batch, ErrShutdown)
			b.drainFail()
			return
		}
		if b.kind.linger > 0 && b.underLoad(first.arrived.at) {
			batch = b.gather(batch)
		}
	drain:
		for len(batch) < b.maxBatch {
			select {
			case p := <-b.in:
				batch = append(batch, p)
			default:
				break drain
			}
		}
		b.prevBatchAt, b.prevMany = batch[len(batch)-1].arrived.at, len(batch) > 1
		if b.kind.linger > 0 {
			b.prevLeftAt = time.Now()
		}
		b.submit(batch)
		batch = make([]*pending[C, R], 0, len(batch))
	}
}

// underLoad reports whether a batch whose first command arrived at is to
// linger: that command came within the linger of the previous batch's
// newest arrival (a steady stream), or of the previous batch's leaving
// when that batch held several commands. The second catches commands
// that come in waves (relays' batches, each sent when the previous one
// is answered): they arrive a commit after a lingered batch left, longer
// than the linger after its newest arrival, and went to the log without
// lingering every other time (35 entries a second at a thousand workers
// through ten relays, 19 with it). A lone caller's commands, one batch
// each, are not held by it: one after a quiet spell still leaves at once.
func (b *batcher[C, R]) underLoad(at time.Time) bool {
	if at.Sub(b.prevBatchAt) < b.kind.linger {
		return true
	}
	return b.prevMany && at.Sub(b.prevLeftAt) < b.kind.linger
}

// gather adds to batch the commands that arrive within the kind's linger
// of its first one's arrival, up to maxBatch (or until the batcher stops:
// the batch then leaves as it is and fails at submit or is answered).
func (b *batcher[C, R]) gather(batch []*pending[C, R]) []*pending[C, R] {
	wait := b.kind.linger - time.Since(batch[0].arrived.at)
	if wait <= 0 {
		return batch
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for len(batch) < b.maxBatch {
		select {
		case p := <-b.in:
			batch = append(batch, p)
		case <-t.C:
			return batch
		case <-b.stop:
			return batch
		}
	}
	return batch
}

func (b *batcher[C, R]) drainFail() {
	for {
		select {
		case p := <-b.in:
			p.done <- batchResult[R]{err: ErrShutdown}
		default:
			return
		}
	}
}

func failAll[C, R any](batch []*pending[C, R], err error) {
	for _, p := range batch {
		p.done <- batchResult[R]{err: err}
	}
}

// submit stamps, encodes and applies one batch, and answers its commands
// when the entry is applied.
func (b *batcher[C, R]) submit(batch []*pending[C, R]) {
	st, at, ok := b.n.stampForApply()
	if !ok {
		<-b.inflight
		failAll(batch, fmt.Errorf("%w: this node is not the leader", ErrNoLeader))
		return
	}
	cs := make([]C, len(batch))
	arrivals := make([]int64, len(batch))
	for i, p := range batch {
		if p.arrived.st.Term != st.Term {
			p.arrived = arrival{st: st, at: at} // stamped on another timeline
		}
		if b.last.st.Term == st.Term && p.arrived.st.Nanos < b.last.st.Nanos {
			p.arrived = b.last // queued behind a later stamp
		}
		b.last = p.arrived
		cs[i], arrivals[i] = p.cmd, p.arrived.st.Nanos
	}
	buf, err := b.kind.encode(fsm.Stamp{Nanos: arrivals[0], Term: st.Term}, cs, arrivals)
	if err != nil {
		<-b.inflight
		failAll(batch, fmt.Errorf("%w: %v", ErrInvalid, err))
		return
	}
	start := time.Now()
	var waitNanos int64 // the batch's summed stamp-to-Apply time (stages.go)
	if b.kind.hooks {
		for _, p := range batch {
			waitNanos += int64(start.Sub(p.arrived.at))
		}
	}
	f := b.n.raft.Apply(buf, b.applyTimout)
	go func() {
		defer func() { <-b.inflight }()
		err := b.n.awaitFuture(f)
		if err != nil {
			failAll(batch, mapRaftErr(err))
			return
		}
		applied := time.Now()
		results, ok := f.Response().([]R)
		if !ok || len(results) != len(batch) {
			// Committed, but the answer is lost: the outcome is unknown to
			// the caller, who may retry with the same request_id.
			failAll(batch, fmt.Errorf("%w: internal error: batch of %d %s got response %T (outcome unknown)", ErrNoLeader, len(batch), b.kind.what, f.Response()))
			return
		}
		if b.kind.hooks {
			b.n.commits.add(len(batch), applied.Sub(start))
			if b.n.cfg.OnBatch != nil {
				b.n.cfg.OnBatch(len(batch), applied.Sub(start))
			}
			if hold := b.n.testHoldAnswers; hold != nil {
				hold() // a test stalls the answers here, as a slow fsync would
			}
		}
		index := f.Index()
		for i, p := range batch {
			p.done <- batchResult[R]{res: results[i], appliedAt: applied, index: index}
		}
		if b.kind.hooks {
			st := b.n.stages
			st.addEntry(index, len(batch), waitNanos, st.at(start), st.now())
		}
	}()
}

// reserveBatch is the reserve batcher's kind: CmdReserveBatch entries,
// watched by the batch hooks and counted in Status.
var reserveBatch = batchKind[fsm.Reserve, fsm.ReserveResult]{
	what: "reserves",
	encode: func(st fsm.Stamp, rs []fsm.Reserve, arrivals []int64) ([]byte, error) {
		for i := range rs {
			rs[i].ArrivedNanos = arrivals[i]
		}
		return fsm.AppendReserveBatch(make([]byte, 0, 16+len(rs)*48), st, rs)
	},
	hooks: true,
}

// leaseBatch is the lease batcher's kind: CmdLeaseBatch entries.
var leaseBatch = batchKind[fsm.LeaseCommand, fsm.LeaseResult]{
	what: "lease commands",
	encode: func(st fsm.Stamp, cs []fsm.LeaseCommand, arrivals []int64) ([]byte, error) {
		for i := range cs {
			cs[i].ArrivedNanos = arrivals[i]
		}
		return fsm.AppendLeaseBatch(make([]byte, 0, 16+len(cs)*64), st, cs)
	},
	linger: leaseLinger,
}

// leaseLinger is the lease batcher's linger under load: at a thousand
// workers renewing every second it turns about 370 entries per second
// into about 20 (80 with 10 ms), for up to 50 ms more per renewal, which
// its worker spends on the permits it kept (the in-flight allowance); a
// lease command after a quiet spell (a first lease, a small fleet) does
// not wait.
const leaseLinger = 50 * time.Millisecond

// mapRaftErr turns raft's errors into this package's.
func mapRaftErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrLeadershipTransferInProgress), errors.Is(err, raft.ErrEnqueueTimeout),
		errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("%w: %v (the outcome may be unknown: retry with the same request_id)", ErrNoLeader, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w (the outcome may be unknown: retry with the same request_id)", ErrNoLeader, ErrShutdown)
	}
	return fmt.Errorf("node: raft: %w", err)
}
