package worker

import (
	"context"

	"github.com/permitd/permitd/fsm"
)

// Register is what a worker needs from the permit register (transport/client
// implements it; tests use an in-process fake built on a real fsm.FSM).
//
// A call returns the register's answer, or an error when no answer came
// back. An error is ambiguous by default: the command may have been applied
// and only its answer lost, so the worker treats the grant the command
// reported on as reported (it stops spending it) and retries with the same
// request ID. An implementation that knows the request never reached the
// register (the connection was refused, the dial timed out) wraps its
// error with ErrNotDelivered; the worker may then go on spending that grant
// until its local expiry, as if the request had never been sent.
type Register interface {
	Lease(ctx context.Context, limit string, q fsm.Lease) (fsm.LeaseResult, error)
	Renew(ctx context.Context, limit string, q fsm.Renew) (fsm.LeaseResult, error)
	Return(ctx context.Context, limit string, q fsm.Return) (fsm.LeaseResult, error)
}
