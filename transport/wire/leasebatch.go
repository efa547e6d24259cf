package wire

import (
	"errors"
	"fmt"
)

// leasebatch.go: a client's lease commands in one call (OpLeaseBatch).
//
// A fleet of a thousand workers renews a thousand times a second, each
// renewal a call of its own: its read, its hand-off and its answer cost
// the node that takes it more than the register's decision. A relay
// (package transport/relay) that collects the renewals of the workers on
// its host sends them as one OpLeaseBatch; the node decides each command
// as if it had come alone and answers them all in one frame.

// MaxLeaseBatch bounds the commands of one OpLeaseBatch (its payload is
// also bounded by MaxClientPayload).
const MaxLeaseBatch = 512

// ErrLeaseBatch reports a malformed or out-of-bounds lease batch.
var ErrLeaseBatch = errors.New("wire: lease batch")

// LeaseCall is one lease command of a batch: its operation (OpLease,
// OpRenew or OpReturn) and payload (EncodeLeaseOpen, EncodeLeaseRenew,
// EncodeLeaseReturn).
type LeaseCall struct {
	Op      byte
	Payload []byte
}

// LeaseAnswer is the answer to one command of a batch: an answer code and
// its payload (a LeaseResult for CodeOK, else a message).
type LeaseAnswer struct {
	Code    byte
	Payload []byte
}

// isLeaseOp reports whether op is one of a client's lease commands.
func isLeaseOp(op byte) bool { return op == OpLease || op == OpRenew || op == OpReturn }

// EncodeLeaseBatch is the payload of an OpLeaseBatch call. It refuses an
// empty batch, more than MaxLeaseBatch calls, an operation other than a
// lease command, and a payload that would not fit one client frame.
func EncodeLeaseBatch(calls []LeaseCall) ([]byte, error) {
	if len(calls) == 0 || len(calls) > MaxLeaseBatch {
		return nil, fmt.Errorf("%w: %d commands; a batch holds 1 to %d", ErrLeaseBatch, len(calls), MaxLeaseBatch)
	}
	w := Enc{B: make([]byte, 0, 8+len(calls)*96)}
	w.Uvar(uint64(len(calls)))
	for i, c := range calls {
		if !isLeaseOp(c.Op) {
			return nil, fmt.Errorf("%w: command %d is operation %d; allowed: %d (lease), %d (renew), %d (return)", ErrLeaseBatch, i, c.Op, OpLease, OpRenew, OpReturn)
		}
		w.U8(c.Op)
		w.Bytes(c.Payload)
	}
	if len(w.B) > MaxClientPayload {
		return nil, fmt.Errorf("%w: %d bytes for %d commands; a batch holds at most %d bytes", ErrLeaseBatch, len(w.B), len(calls), MaxClientPayload)
	}
	return w.B, nil
}

// DecodeLeaseBatch decodes an OpLeaseBatch payload: 1 to MaxLeaseBatch
// commands, each a lease command's operation and payload (the payloads
// are not decoded: each is its command's own).
func DecodeLeaseBatch(p []byte) ([]LeaseCall, error) {
	r := Dec{B: p}
	k := r.Uvar()
	if r.Err() != nil {
		return nil, fmt.Errorf("%w: no command count; a batch holds 1 to %d commands after its count", ErrLeaseBatch, MaxLeaseBatch)
	}
	if k == 0 || k > MaxLeaseBatch {
		return nil, fmt.Errorf("%w: %d commands; a batch holds 1 to %d", ErrLeaseBatch, k, MaxLeaseBatch)
	}
	calls := make([]LeaseCall, k)
	for i := range calls {
		calls[i] = LeaseCall{Op: r.U8(), Payload: r.Bytes()}
		if r.Err() != nil {
			break
		}
		if !isLeaseOp(calls[i].Op) {
			return nil, fmt.Errorf("%w: command %d is operation %d; allowed: %d (lease), %d (renew), %d (return)", ErrLeaseBatch, i, calls[i].Op, OpLease, OpRenew, OpReturn)
		}
	}
	if err := r.Done(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrLeaseBatch, err)
	}
	return calls, nil
}

// EncodeLeaseBatchAnswers is the payload of a CodeOK answer to an
// OpLeaseBatch: the answers in the order of the commands.
func EncodeLeaseBatchAnswers(answers []LeaseAnswer) []byte {
	n := 8
	for _, a := range answers {
		n += 4 + len(a.Payload)
	}
	w := Enc{B: make([]byte, 0, n)}
	w.Uvar(uint64(len(answers)))
	for _, a := range answers {
		w.U8(a.Code)
		w.Bytes(a.Payload)
	}
	return w.B
}

// DecodeLeaseBatchAnswers decodes a CodeOK answer to an OpLeaseBatch of
// want commands.
func DecodeLeaseBatchAnswers(p []byte, want int) ([]LeaseAnswer, error) {
	r := Dec{B: p}
	if k := r.Uvar(); r.Err() != nil || k != uint64(want) {
		return nil, fmt.Errorf("%w: the answer does not hold %d answers", ErrLeaseBatch, want)
	}
	answers := make([]LeaseAnswer, want)
	for i := range answers {
		answers[i] = LeaseAnswer{Code: r.U8(), Payload: r.Bytes()}
	}
	if err := r.Done(); err != nil {
		return nil, fmt.Errorf("%w: answers: %v", ErrLeaseBatch, err)
	}
	return answers, nil
}
