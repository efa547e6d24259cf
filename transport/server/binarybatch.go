package server

import (
	"context"
	"fmt"
	"sync"

	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/wire"
)

// binarybatch.go: a client's lease commands in one call
// (wire.OpLeaseBatch, a relay's). Each command is decided exactly as if
// it had come alone on the same connection: authorized for its own
// operation, decoded and validated on its own, and sent to the register
// through the same path (the leader's lease batcher, or a follower's
// batched forwarding), so a batch changes neither what is decided nor
// the bound. A command that fails (refused by the Authorizer, malformed,
// an unknown limit, no leader) gets its own error answer; the others are
// decided. The call itself fails only when its payload is not a batch.
//
// Each command is decided on a goroutine of its own, as its own call
// would be, and at most maxBatchedLeaseCommands of all the batches a node
// serves at once: a connection may have thousands of calls in flight, and
// a batch holds hundreds of commands. A batch waits for slots; a command
// that finds none before the call's deadline is answered overloaded.

// maxBatchedLeaseCommands bounds the commands of clients' lease batches a
// node's Binary decides at once.
const maxBatchedLeaseCommands = 8192

// leaseBatch serves an OpLeaseBatch: every command's answer, in order, in
// one frame.
func (b *Binary) leaseBatch(ctx context.Context, payload []byte, allow Authorizer) ([]byte, error) {
	calls, err := wire.DecodeLeaseBatch(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", node.ErrInvalid, err)
	}
	answers := make([]wire.LeaseAnswer, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		if allow != nil {
			if err := allow(c.Op, ""); err != nil {
				answers[i] = leaseAnswerOf(nil, refusal(err))
				continue
			}
		}
		busy := ctx.Err() != nil
		if !busy {
			select {
			case b.batchSlots <- struct{}{}:
			case <-ctx.Done():
				busy = true
			}
		}
		if busy {
			b.metrics.countLease(protoBinary, leaseError)
			answers[i] = leaseAnswerOf(nil, fmt.Errorf("%w: this node decides at most %d lease commands of batches at once, and found no slot before the call's deadline: retry, with the same request ID",
				node.ErrOverloaded, maxBatchedLeaseCommands))
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-b.batchSlots; wg.Done() }()
			resp, err := b.lease(ctx, c.Op, c.Payload)
			answers[i] = leaseAnswerOf(resp, err)
		}()
	}
	wg.Wait()
	return wire.EncodeLeaseBatchAnswers(answers), nil
}

// leaseAnswerOf is one command's answer in a batch: its result, or its
// error's code and message, as its own call would have been answered.
func leaseAnswerOf(resp []byte, err error) wire.LeaseAnswer {
	if err != nil {
		return wire.LeaseAnswer{Code: node.WireCode(err), Payload: []byte(node.Message(err))}
	}
	return wire.LeaseAnswer{Code: wire.CodeOK, Payload: resp}
}
