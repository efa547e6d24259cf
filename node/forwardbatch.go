package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

// forwardbatch.go: a follower forwards lease commands to the leader in
// batches (wire.OpCommandBatch).
//
// A fleet renews once per worker per period. Forwarded one call each, every
// renewal cost the leader a read, a decode, a goroutine hand-off and an
// answer of its own: about 100 µs of the leader's CPU per renewal at a
// thousand workers, as much as a renewal sent to the leader directly. So a
// follower sends the lease commands that arrive while its earlier batches
// are with the leader together, in one call (at most
// maxForwardBatchesInFlight batches at once, each of at most
// maxForwardBatch commands and maxForwardBatchBytes of entries); the
// leader queues them all to its lease batcher and answers them in one
// frame. Nothing waits on a timer: a command after a quiet spell leaves at
// once, alone, as a plain OpCommand. Under load a command waits at most
// for one earlier batch's answer, while the leader's own linger
// (leaseLinger) holds that answer anyway.
//
// Each command keeps its own outcome. The failure of a whole batch (a
// broken connection, a timeout, a leader that lost its leadership) is the
// failure of each of its commands, as a single forward's would be: the
// outcome is unknown (ErrNoLeader), and a command with a request ID is
// retried (retryAmbiguous), which the register answers with its first
// decision. A command for a new leader switches the follower's connection
// to it, which fails the batches still with the old one at once (as a
// single forward's connection switch does). A command whose caller gave
// up before its batch left is never sent, and at most maxForwardQueue
// commands wait (beyond, ErrOverloaded at once). A leader that does not
// know OpCommandBatch (an older version) answers it CodeInvalid "unknown
// forwarded operation"; the follower then forwards one command per call
// to that address until it restarts. (Nodes of different versions do not
// forward to each other anyway: a cluster is upgraded as a whole.)

const (
	// maxForwardBatch bounds the commands of one OpCommandBatch.
	maxForwardBatch = 1024
	// maxForwardBatchBytes bounds the entries' bytes of one batch (a
	// quarter of a frame, so that the answers fit one too).
	maxForwardBatchBytes = wire.MaxFrame / 4
	// maxForwardBatchesInFlight bounds the batches a follower has with the
	// leader at once.
	maxForwardBatchesInFlight = 2
	// maxForwardQueue bounds the commands waiting for a batch; beyond it a
	// command is refused at once as overloaded (nothing sent).
	maxForwardQueue = 4 * maxForwardBatch
)

// States of a forwardedCommand: waiting in the queue, taken into a batch,
// or given up by its caller before that (then never sent).
const (
	commandQueued int32 = iota
	commandTaken
	commandAbandoned
)

// leaseForwarder batches a follower's forwarded lease commands.
type leaseForwarder struct {
	fwd *forwarder
	// timeout bounds one batch's call.
	timeout time.Duration

	// calls counts the calls sent to leaders, commands the commands they
	// carried.
	calls, commands atomic.Uint64

	mu      sync.Mutex
	queue   []*forwardedCommand
	sending int
	// sendingTo counts the batches in flight per leader address.
	sendingTo map[string]int
	// single holds the leader addresses that answered OpCommandBatch as
	// unknown.
	single map[string]bool
}

// forwardedCommand is one command entry waiting to be forwarded to the
// leader at addr.
type forwardedCommand struct {
	addr  string
	entry []byte
	done  chan forwardAnswer
	state atomic.Int32
}

// forwardAnswer is the leader's answer to one forwarded command: the
// result's payload, or the error its answer code and message make.
type forwardAnswer struct {
	resp []byte
	err  error
}

func newLeaseForwarder(fwd *forwarder, timeout time.Duration) *leaseForwarder {
	return &leaseForwarder{fwd: fwd, timeout: timeout, single: map[string]bool{}, sendingTo: map[string]int{}}
}

// call forwards entry (a lease command stamped 0) to the leader at addr
// with the other commands queued meanwhile, and returns the leader's
// answer to it. Its shape is a viaLeader's; the time is zero (lease
// answers count their expiry from the request's sending, not from the
// answer's reading).
//
// A command whose caller gives up before its batch leaves is never sent.
// At most maxForwardQueue commands wait; beyond that a command is
// ErrOverloaded at once. A command for another leader than the one the
// batches in flight went to switches the connection to it, which fails
// those batches at once (their commands' outcome is unknown, as a single
// forward's is when the leader changes) instead of leaving the new
// leader's commands queued behind them until they time out.
func (f *leaseForwarder) call(ctx context.Context, addr string, entry []byte) ([]byte, time.Time, error) {
	p := &forwardedCommand{addr: addr, entry: entry, done: make(chan forwardAnswer, 1)}
	f.mu.Lock()
	if len(f.queue) >= maxForwardQueue {
		f.queue = slices.DeleteFunc(f.queue, func(q *forwardedCommand) bool { return q.state.Load() == commandAbandoned })
	}
	if len(f.queue) >= maxForwardQueue {
		f.mu.Unlock()
		return nil, time.Time{}, userErrorf(ErrOverloaded, "%d lease commands are waiting for the leader at %s; nothing was sent: retry shortly", len(f.queue), addr)
	}
	f.queue = append(f.queue, p)
	start := f.sending < maxForwardBatchesInFlight
	if start {
		f.sending++
	}
	stale := false
	for to, k := range f.sendingTo {
		stale = stale || (k > 0 && to != addr)
	}
	f.mu.Unlock()
	if stale {
		// The error, if any, is the next batch's to report.
		_, _ = f.fwd.get(addr)
	}
	if start {
		go f.send()
	}
	select {
	case a := <-p.done:
		return a.resp, time.Time{}, a.err
	case <-ctx.Done():
		if p.state.CompareAndSwap(commandQueued, commandAbandoned) {
			return nil, time.Time{}, fmt.Errorf("%w: leader %s: %v before the command was sent (it was not)", ErrNoLeader, addr, ctx.Err())
		}
		return nil, time.Time{}, fmt.Errorf("%w: leader %s: %v (the outcome is unknown)", ErrNoLeader, addr, ctx.Err())
	}
}

// send forwards the queue, a batch at a time, until it is empty.
func (f *leaseForwarder) send() {
	for {
		f.mu.Lock()
		if len(f.queue) == 0 {
			f.sending--
			f.mu.Unlock()
			return
		}
		var batch []*forwardedCommand
		k, size := 0, 0
		for ; k < len(f.queue) && len(batch) < maxForwardBatch; k++ {
			q := f.queue[k]
			if len(batch) > 0 && size+len(q.entry) > maxForwardBatchBytes {
				break
			}
			if q.state.CompareAndSwap(commandQueued, commandTaken) {
				batch = append(batch, q)
				size += len(q.entry)
			}
		}
		f.queue = slices.Clone(f.queue[k:])
		f.mu.Unlock()
		for len(batch) > 0 {
			// Commands queued across a change of leader go to the leader
			// each named.
			addr := batch[0].addr
			var to, rest []*forwardedCommand
			for _, p := range batch {
				if p.addr == addr {
					to = append(to, p)
				} else {
					rest = append(rest, p)
				}
			}
			f.sendTo(addr, to)
			batch = rest
		}
	}
}

// sendTo forwards ps to the leader at addr and answers each.
func (f *leaseForwarder) sendTo(addr string, ps []*forwardedCommand) {
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	f.mu.Lock()
	single := f.single[addr]
	f.sendingTo[addr]++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		if f.sendingTo[addr]--; f.sendingTo[addr] == 0 {
			delete(f.sendingTo, addr)
		}
		f.mu.Unlock()
	}()
	if single || len(ps) == 1 {
		f.sendEach(ctx, addr, ps)
		return
	}
	f.calls.Add(1)
	f.commands.Add(uint64(len(ps)))
	w := wire.Enc{B: make([]byte, 0, 8+len(ps)*96)}
	w.Uvar(uint64(len(ps)))
	for _, p := range ps {
		w.Bytes(p.entry)
	}
	resp, err := f.fwd.forward(ctx, addr, wire.OpCommandBatch, w.B)
	if err != nil && errors.Is(err, ErrInvalid) && strings.Contains(err.Error(), "unknown forwarded operation") {
		f.mu.Lock()
		f.single[addr] = true
		f.mu.Unlock()
		f.sendEach(ctx, addr, ps)
		return
	}
	var answers []forwardAnswer
	if err == nil {
		if answers, err = decodeForwardAnswers(resp, len(ps)); err != nil {
			err = fmt.Errorf("%w: leader %s: its answer to a batch of %d commands: %v (the outcome is unknown)", ErrNoLeader, addr, len(ps), err)
		}
	}
	for i, p := range ps {
		if err != nil {
			p.done <- forwardAnswer{err: err}
			continue
		}
		p.done <- answers[i]
	}
}

// sendEach forwards ps one call each, at once.
func (f *leaseForwarder) sendEach(ctx context.Context, addr string, ps []*forwardedCommand) {
	f.calls.Add(uint64(len(ps)))
	f.commands.Add(uint64(len(ps)))
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := f.fwd.forward(ctx, addr, wire.OpCommand, p.entry)
			p.done <- forwardAnswer{resp: resp, err: err}
		}()
	}
	wg.Wait()
}

// decodeForwardAnswers reads the leader's answer to a batch of want
// commands.
func decodeForwardAnswers(b []byte, want int) ([]forwardAnswer, error) {
	r := wire.Dec{B: b}
	if k := r.Uvar(); k != uint64(want) {
		return nil, fmt.Errorf("%w: %d answers to %d commands", wire.ErrMalformed, k, want)
	}
	answers := make([]forwardAnswer, want)
	for i := range answers {
		code := r.U8()
		payload := r.Bytes()
		if code == wire.CodeOK {
			answers[i].resp = payload
		} else {
			answers[i].err = errOf(code, string(payload))
		}
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	return answers, nil
}

// leaseBatchForwarded serves a follower's OpCommandBatch on the leader:
// each entry is decoded and checked as a forwarded OpCommand is (only
// lease commands are batched), the valid ones are queued to the lease
// batcher together, and every entry gets its own answer code and payload
// in the one answer.
func (n *Node) leaseBatchForwarded(ctx context.Context, payload []byte) ([]byte, error) {
	r := wire.Dec{B: payload}
	k := r.Uvar()
	if k == 0 || k > maxForwardBatch {
		return nil, fmt.Errorf("%w: a batch of forwarded commands holds 1 to %d entries, after its count", ErrInvalid, maxForwardBatch)
	}
	entries := make([][]byte, k)
	for i := range entries {
		entries[i] = r.Bytes()
	}
	if err := r.Done(); err != nil {
		return nil, fmt.Errorf("%w: a batch of forwarded commands: %v", ErrInvalid, err)
	}
	answers := make([]forwardAnswer, k)
	cmds := make([]fsm.LeaseCommand, 0, k)
	at := make([]int, 0, k)
	for i, raw := range entries {
		e, err := fsm.Decode(raw)
		switch {
		case err != nil:
			answers[i].err = fmt.Errorf("%w: %v", ErrInvalid, err)
			continue
		case e.Type != fsm.CmdLease && e.Type != fsm.CmdRenew && e.Type != fsm.CmdReturn:
			answers[i].err = fmt.Errorf("%w: a batch of forwarded commands holds lease, renew and return commands only, not command type %d", ErrInvalid, e.Type)
			continue
		}
		c := fsm.LeaseCommand{Kind: e.Type, Lease: e.Lease, Renew: e.Renew, Return: e.Return}
		if err := n.checkLeased(c.Limit()); err != nil {
			answers[i].err = err
			continue
		}
		cmds = append(cmds, c)
		at = append(at, i)
	}
	for j, out := range n.leases.runAll(ctx, cmds) {
		a := &answers[at[j]]
		switch {
		case out.err != nil:
			a.err = out.err
		case out.res.Status == 0:
			a.err = fmt.Errorf("%w: internal error: lease command answered without a status (outcome unknown)", ErrNoLeader)
		default:
			a.resp, a.err = encodeResult(out.res)
		}
	}
	w := wire.Enc{B: make([]byte, 0, 8+len(answers)*48)}
	w.Uvar(k)
	for _, a := range answers {
		if a.err != nil {
			w.U8(WireCode(a.err))
			w.Str(Message(a.err))
			continue
		}
		w.U8(wire.CodeOK)
		w.Bytes(a.resp)
	}
	return w.B, nil
}

// leaseEntry runs a lease command's entry (stamped 0) on the leader:
// command, with a follower's forwarding batched.
func (n *Node) leaseEntry(ctx context.Context, entry []byte) (any, error) {
	return leaderDoVia(n, ctx, time.Time{}, wire.OpCommand, nil,
		func(ctx context.Context, addr string) ([]byte, time.Time, error) {
			return n.fwdLeases.call(ctx, addr, entry)
		},
		n.entryLocal(entry), commandAnswer)
}
