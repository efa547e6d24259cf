package client

import (
	"context"
	"fmt"

	"github.com/permitd/permitd/transport/wire"
)

// LeaseBatch sends several lease commands (already encoded, each with its
// request ID) in one binary call (wire.OpLeaseBatch) and returns each
// command's answer, in order, as its own call would have been answered
// (package transport/relay uses it). It needs WithBinaryLeases.
//
// Failover is the single commands': a server that cannot be reached, or
// a call whose answer is lost, moves the whole batch to the next server
// with the same payload, so each command's request ID makes the register
// answer a command it already decided with its first decision. A command
// without a request ID could be applied twice; the relay refuses those.
// An error means no batch answer came back (ErrNotDelivered if certainly
// none was sent): the outcome of every command is unknown.
func (c *Client) LeaseBatch(ctx context.Context, calls []wire.LeaseCall) ([]wire.LeaseAnswer, error) {
	if c.bin == nil || !c.bin.leases {
		return nil, fmt.Errorf("%w: LeaseBatch needs the binary protocol for leases (WithBinaryLeases)", ErrInvalid)
	}
	payload, err := wire.EncodeLeaseBatch(calls)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var answers []wire.LeaseAnswer
	err = c.failover(ctx, fmt.Sprintf("lease batch of %d", len(calls)), func(server string) (attemptOutcome, error) {
		ans, err := c.callBinary(ctx, server, wire.OpLeaseBatch, payload)
		if err != nil {
			return binaryOutcome(err), err
		}
		answers, err = wire.DecodeLeaseBatchAnswers(ans.payload, len(calls))
		if err != nil {
			return attemptDone, fmt.Errorf("client: cannot decode the answer of %s to a lease batch: %w", server, err)
		}
		return attemptDone, nil
	})
	if err != nil {
		return nil, err
	}
	return answers, nil
}
