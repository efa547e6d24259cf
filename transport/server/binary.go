package server

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/wire"
)

// binary.go: permitd's binary client protocol (package wire) on a node:
// reserves, sessions and lease commands, read from a pipelined connection
// whose preface byte the sniffing listener (sniff.go) has read, validated
// and decided exactly as their HTTP forms are (a follower forwards them to
// the leader), and answered in the protocol's vocabulary. The node serves
// the connection's calls (node.ServeCalls: its window, its call pool, the
// read-loop admission of reserves); this file says what a call means.

// Binary serves binary client connections for one node. The zero value is
// not usable; call NewBinary.
type Binary struct {
	n *node.Node
	// metrics counts the calls (nil: not counted): as the HTTP API's,
	// with protocol="binary".
	metrics *Metrics
	// batchSlots bounds the commands of clients' lease batches being
	// decided at once (binarybatch.go).
	batchSlots chan struct{}
}

// NewBinary returns the binary client protocol of n.
func NewBinary(n *node.Node) *Binary {
	return &Binary{n: n, batchSlots: make(chan struct{}, maxBatchedLeaseCommands)}
}

// WithMetrics makes b count its reserves and lease commands in m, as
// the HTTP API counts its own (protocol="binary"), and returns b. Call
// it before serving.
func (b *Binary) WithMetrics(m *Metrics) *Binary {
	b.metrics = m
	return b
}

// Serve serves one binary client connection whose preface byte the
// caller has already read: reserves, sessions and lease commands, each
// decided as its HTTP form is (a follower forwards it to the leader). Any
// other operation is answered CodeInvalid. It returns when the connection
// fails or the node stops, and closes c.
func (b *Binary) Serve(c net.Conn) { b.ServeWith(c, nil) }

// Authorizer decides whether a binary client may make a call: op, and the
// limit it names ("" for a call that names none, or before it is
// decoded). A non-nil error refuses the call with node.ErrForbidden and
// its message (node.ErrUnauthenticated if it wraps that: a revoked
// token).
type Authorizer func(op byte, limit string) error

// ServeWith is Serve with every call first checked by allow (nil: all
// allowed): lease commands before they are decoded (their role is the
// whole rule), a reserve once its limit is known. A refused call is
// answered CodeForbidden and reaches nothing else.
func (b *Binary) ServeWith(c net.Conn, allow Authorizer) {
	b.ServeAs(c, allow, fsm.OpenSession{})
}

// ServeAs is ServeWith for a client whose sessions are opened for open:
// its owner (the connection's token) and the owner's quota (see
// fsm.OpenSession). Its reserves of sessions carry the same owner, so that
// it uses only sessions opened with the same token (fsm.Reserve.Owner).
func (b *Binary) ServeAs(c net.Conn, allow Authorizer, open fsm.OpenSession) {
	b.n.ServeCalls(c, node.Calls{
		MaxFrame: wire.MaxClientFrame,
		Admit:    func(op byte, payload []byte) node.Admission { return b.admitAtRead(op, payload, allow) },
		Handle: func(ctx context.Context, op byte, payload []byte, held bool) ([]byte, error) {
			return b.handle(ctx, op, payload, allow, open, held)
		},
	})
}

// admitAtRead decides a binary client's call in the connection's read
// loop: a reserve takes its slot among the node's MaxPendingReserves
// there and then (node.TryHoldReserve says why). With no slot free, a
// reserve that decodes and that allow (nil: all allowed) lets through is
// refused (AdmitShed). An undecodable or refused (forbidden, revoked)
// reserve is left to the full path and gets its own error; one for an
// unknown or leased limit, with invalid fields, or sent to a removed node
// is answered CodeOverloaded like any other (it changes nothing either
// way, and once the node is below its bound it gets its own error). Any
// other call is served as it is.
func (b *Binary) admitAtRead(op byte, payload []byte, allow Authorizer) node.Admission {
	if op != wire.OpReserve {
		return node.AdmitServe
	}
	if b.n.TryHoldReserve() {
		return node.AdmitHeld
	}
	r, err := wire.DecodeReserve(payload)
	if err != nil || (allow != nil && allow(op, r.Limit) != nil) {
		return node.AdmitServe
	}
	b.metrics.countReserve(protoBinary, outcomeError) // answered overloaded, as HTTP's 503
	return node.AdmitShed
}

// refusal is the error of a call the Authorizer refused:
// node.ErrUnauthenticated if it says so (a revoked token), else
// node.ErrForbidden, with its message.
func refusal(err error) error {
	if errors.Is(err, node.ErrUnauthenticated) {
		return err
	}
	return fmt.Errorf("%w: %s", node.ErrForbidden, err.Error())
}

// handle serves one call of a binary client: a reserve (of a session: as
// open's owner), the opening of a session (for open's owner and quota),
// or a lease command.
func (b *Binary) handle(ctx context.Context, op byte, payload []byte, allow Authorizer, open fsm.OpenSession, held bool) ([]byte, error) {
	if op == wire.OpAuth {
		// Authentication is the listener's (AuthenticatedBinary); here
		// it was not required, or already done: a no-op, so that
		// clients can be given tokens before the nodes require them.
		return nil, nil
	}
	if allow != nil && op != wire.OpReserve {
		if err := allow(op, ""); err != nil {
			return nil, refusal(err)
		}
	}
	if op == wire.OpOpenSession {
		if len(payload) != 0 {
			return nil, fmt.Errorf("%w: open session takes no payload (%d bytes)", node.ErrInvalid, len(payload))
		}
		res, err := b.n.OpenSession(ctx, open)
		if err != nil {
			return nil, err
		}
		return wire.EncodeSessionResult(node.ToWireSessionResult(res)), nil
	}
	switch op {
	case wire.OpLease, wire.OpRenew, wire.OpReturn:
		return b.lease(ctx, op, payload)
	case wire.OpLeaseBatch:
		return b.leaseBatch(ctx, payload, allow)
	case wire.OpReserve:
	default:
		return nil, fmt.Errorf("%w: operation %d on a client connection: allowed: %d (reserve), %d (open session), %d-%d (lease, renew, return), %d (lease batch)",
			node.ErrInvalid, op, wire.OpReserve, wire.OpOpenSession, wire.OpLease, wire.OpReturn, wire.OpLeaseBatch)
	}
	r, err := wire.DecodeReserve(payload)
	if err != nil {
		b.metrics.countReserve(protoBinary, outcomeInvalid)
		return nil, fmt.Errorf("%w: %v", node.ErrInvalid, err)
	}
	if allow != nil {
		if err := allow(op, r.Limit); err != nil {
			return nil, refusal(err)
		}
	}
	q := reserveFromWire(r, open.Owner)
	var res fsm.ReserveResult
	if held {
		res, err = b.n.ReserveHeld(ctx, q)
	} else {
		res, err = b.n.Reserve(ctx, q)
	}
	b.countReserve(q, res, err)
	if err != nil {
		return nil, err
	}
	return wire.EncodeReserveResult(node.ToWireReserveResult(res)), nil
}

// countReserve counts a binary reserve's answer as the HTTP API counts
// its own: the result res of reserve q, or err.
func (b *Binary) countReserve(q fsm.Reserve, res fsm.ReserveResult, err error) {
	m := b.metrics
	if m == nil {
		return
	}
	if err != nil {
		m.countReserve(protoBinary, errorOutcome(err))
		return
	}
	switch res.Status {
	case fsm.Granted:
		permits := q.Permits
		for _, p := range q.Also {
			permits += p.Permits
		}
		m.reserveGranted(protoBinary, permits, res.WaitNanos)
	case fsm.Refused:
		m.countReserve(protoBinary, outcomeRefused)
	case fsm.KeysFull:
		m.countReserve(protoBinary, outcomeKeysFull)
	case fsm.UnknownLimit:
		m.countReserve(protoBinary, outcomeUnknown)
	case fsm.Invalid, fsm.SessionExpired:
		m.countReserve(protoBinary, outcomeInvalid)
	default: // Busy, and anything unexpected: answered as errors
		m.countReserve(protoBinary, outcomeError)
	}
}

// errorOutcome is the outcome of a request that failed with err, as the
// HTTP API counts it (storeError's 404, 400, other).
func errorOutcome(err error) reserveOutcome {
	switch {
	case errors.Is(err, node.ErrNotFound):
		return outcomeUnknown
	case errors.Is(err, node.ErrInvalid):
		return outcomeInvalid
	}
	return outcomeError
}

// countLease counts a binary lease command's answer as the HTTP API
// counts its own: the result res, or err.
func (b *Binary) countLease(res fsm.LeaseResult, err error) {
	m := b.metrics
	if m == nil {
		return
	}
	if err != nil {
		m.countLease(protoBinary, leaseErrorOutcome(errorOutcome(err)))
		return
	}
	o, ok := leaseOutcomes[res.Status]
	if !ok {
		o = leaseError
	}
	m.countLease(protoBinary, o)
}

// leaseOutcomes are the lease counter's outcomes of the register's
// answers (any other status is counted an error, as HTTP's 503).
var leaseOutcomes = map[fsm.LeaseStatus]leaseOutcome{
	fsm.LeaseGranted: leaseGranted, fsm.LeaseReturned: leaseReturned, fsm.LeaseRefused: leaseRefused,
	fsm.LeaseFenced: leaseFenced, fsm.LeaseUnknownLimit: leaseUnknown, fsm.LeaseInvalid: leaseInvalid,
}

// leaseErrorOutcome maps a failed request's outcome to the lease counter's.
func leaseErrorOutcome(o reserveOutcome) leaseOutcome {
	switch o {
	case outcomeUnknown:
		return leaseUnknown
	case outcomeInvalid:
		return leaseInvalid
	}
	return leaseError
}

// lease serves a binary client's lease, renew or return: the payload is
// decoded, converted and validated as the HTTP API's body is (a weight of
// 0 is the default, 1), and the register's outcome (granted, refused,
// fenced, returned) is the answer; an unknown or unleased limit and an
// invalid command are errors, as over HTTP.
func (b *Binary) lease(ctx context.Context, op byte, payload []byte) ([]byte, error) {
	var res fsm.LeaseResult
	var err error
	switch op {
	case wire.OpLease:
		q, derr := wire.DecodeLeaseOpen(payload)
		if derr != nil {
			b.metrics.countLease(protoBinary, leaseInvalid)
			return nil, fmt.Errorf("%w: lease: %v", node.ErrInvalid, derr)
		}
		res, err = b.n.Lease(ctx, leaseFromWire(q))
	case wire.OpRenew:
		q, derr := wire.DecodeLeaseRenew(payload)
		if derr != nil {
			b.metrics.countLease(protoBinary, leaseInvalid)
			return nil, fmt.Errorf("%w: renew: %v", node.ErrInvalid, derr)
		}
		res, err = b.n.Renew(ctx, renewFromWire(q))
	default:
		q, derr := wire.DecodeLeaseReturn(payload)
		if derr != nil {
			b.metrics.countLease(protoBinary, leaseInvalid)
			return nil, fmt.Errorf("%w: return: %v", node.ErrInvalid, derr)
		}
		res, err = b.n.Return(ctx, fsm.Return{Report: reportFromWire(q), RequestID: q.RequestID})
	}
	b.countLease(res, err)
	if err != nil {
		return nil, err
	}
	return wire.EncodeLeaseResult(node.ToWireLeaseResult(res)), nil
}
