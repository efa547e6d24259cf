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

// batcher groups concurrent reserves into one log entry (group commit). It
// runs only while this node leads. A lone request is sent at once; while up
// to maxInflight entries are being committed, newly arriving reserves queue
// and leave together in the next entry (at most maxBatch), in arrival order.
// No timer is involved, so there is no added latency at low load.
//
// Each reserve is stamped when it reaches the leader (its arrival), and
// the entry carries every arrival, so the register decides each reserve at
// its own time, as if it had been applied alone on arrival: batching
// shares an fsync, never an instant. Arrivals are made non-decreasing in
// log order (a reserve stamped before one queued ahead of it takes that
// one's stamp), and a reserve stamped in an earlier term than the entry's
// takes the entry's stamp: both only make decisions later.
type batcher struct {
	n           *Node
	mu          sync.RWMutex // guards closed against enqueues racing close
	closed      bool
	in          chan *pendingReserve
	maxBatch    int
	inflight    chan struct{}
	stop        chan struct{}
	wg          sync.WaitGroup
	applyTimout time.Duration

	// last is the latest arrival given to a reserve (loop goroutine only).
	last arrival
}

// arrival is when a reserve reached the leader: its cluster-time stamp and
// the real instant of the reading.
type arrival struct {
	st fsm.Stamp
	at time.Time
}

// pendingReserve is one reserve waiting for its entry to commit.
type pendingReserve struct {
	r       fsm.Reserve
	arrived arrival
	done    chan reserveOutcome
}

// reserveOutcome is the register's answer to a pending reserve, or why
// there is none; appliedAt is when the entry's apply returned.
type reserveOutcome struct {
	res       fsm.ReserveResult
	err       error
	appliedAt time.Time
}

var pendingPool = sync.Pool{New: func() any { return &pendingReserve{done: make(chan reserveOutcome, 1)} }}

func newBatcher(n *Node, maxBatch, maxInflight int, applyTimeout time.Duration) *batcher {
	b := &batcher{
		n:           n,
		in:          make(chan *pendingReserve, maxBatch*4),
		maxBatch:    maxBatch,
		inflight:    make(chan struct{}, maxInflight),
		stop:        make(chan struct{}),
		applyTimout: applyTimeout,
	}
	b.wg.Add(1)
	go b.loop()
	return b
}

// enqueue hands p to the batcher unless it is closed or ctx ends first.
// Once enqueue returns nil, p.done will receive exactly one outcome.
func (b *batcher) enqueue(ctx context.Context, p *pendingReserve) error {
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

// close stops the loop and answers every reserve still queued.
func (b *batcher) close() {
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

func (b *batcher) loop() {
	defer b.wg.Done()
	var batch []*pendingReserve
	for {
		var first *pendingReserve
		select {
		case first = <-b.in:
		case <-b.stop:
			b.drainFail()
			return
		}
		batch = append(batch[:0], first)
		// Wait for a commit slot; reserves arriving meanwhile join the batch.
		select {
		case b.inflight <- struct{}{}:
		case <-b.stop:
			failAll(batch, ErrShutdown)
			b.drainFail()
			return
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
		b.submit(batch)
		batch = make([]*pendingReserve, 0, len(batch))
	}
}

func (b *batcher) drainFail() {
	for {
		select {
		case p := <-b.in:
			p.done <- reserveOutcome{err: ErrShutdown}
		default:
			return
		}
	}
}

func failAll(batch []*pendingReserve, err error) {
	for _, p := range batch {
		p.done <- reserveOutcome{err: err}
	}
}

// submit stamps, encodes and applies one batch, and answers its reserves
// when the entry is applied.
func (b *batcher) submit(batch []*pendingReserve) {
	st, at, ok := b.n.stampForApply()
	if !ok {
		<-b.inflight
		failAll(batch, fmt.Errorf("%w: this node is not the leader", ErrNoLeader))
		return
	}
	rs := make([]fsm.Reserve, len(batch))
	for i, p := range batch {
		if p.arrived.st.Term != st.Term {
			p.arrived = arrival{st: st, at: at} // stamped on another timeline
		}
		if b.last.st.Term == st.Term && p.arrived.st.Nanos < b.last.st.Nanos {
			p.arrived = b.last // queued behind a later stamp
		}
		b.last = p.arrived
		p.r.ArrivedNanos = p.arrived.st.Nanos
		rs[i] = p.r
	}
	entry := fsm.Stamp{Nanos: rs[0].ArrivedNanos, Term: st.Term}
	buf, err := fsm.AppendReserveBatch(make([]byte, 0, 16+len(batch)*48), entry, rs)
	if err != nil {
		<-b.inflight
		failAll(batch, fmt.Errorf("%w: %v", ErrInvalid, err))
		return
	}
	start := time.Now()
	f := b.n.raft.Apply(buf, b.applyTimout)
	go func() {
		defer func() { <-b.inflight }()
		err := b.n.awaitFuture(f)
		if err != nil {
			failAll(batch, mapRaftErr(err))
			return
		}
		applied := time.Now()
		results, ok := f.Response().([]fsm.ReserveResult)
		if !ok || len(results) != len(batch) {
			// Committed, but the answer is lost: the outcome is unknown to
			// the caller, who may retry with the same request_id.
			failAll(batch, fmt.Errorf("%w: internal error: batch of %d got response %T (outcome unknown)", ErrNoLeader, len(batch), f.Response()))
			return
		}
		if b.n.cfg.OnBatch != nil {
			b.n.cfg.OnBatch(len(batch), applied.Sub(start))
		}
		if hold := b.n.testHoldAnswers; hold != nil {
			hold() // a test stalls the answers here, as a slow fsync would
		}
		for i, p := range batch {
			p.done <- reserveOutcome{res: results[i], appliedAt: applied}
		}
	}()
}

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
