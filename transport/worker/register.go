package worker

import (
	"context"

	"github.com/permitd/permitd/transport/client"
)

// Register is what a worker needs from the permit register: the Go
// client's lease calls (*client.Client implements it; tests wrap it with
// faults, or back it with an in-process register).
//
// Error contract. A call returns the register's answer (granted, refused,
// fenced, returned), or an error when no answer came back or the register
// rejected the request:
//
//   - an error wrapping client.ErrNotDelivered: the request certainly
//     never reached the register (connections refused, the dial timed
//     out); the worker may go on spending the grant the call reported on
//     until its local expiry, as if the request had never been sent;
//   - an error matching client.ErrNotFound (the limit does not exist) or
//     client.ErrInvalid (the register, or the client before sending,
//     rejected the request: the limit is not leased, a bad name...): an
//     answer that gives no lease; the worker fails closed and asks again
//     later;
//   - any other error is ambiguous: the command may have been applied and
//     only its answer lost, so the worker treats the grant the command
//     reported on as reported (it stops spending it) and retries with the
//     same request ID.
type Register interface {
	Lease(ctx context.Context, limit string, q client.LeaseRequest) (client.LeaseGrant, error)
	Renew(ctx context.Context, limit string, leaseID, epoch uint64, r client.LeaseReport) (client.LeaseGrant, error)
	Return(ctx context.Context, limit string, leaseID, epoch uint64, r client.LeaseReport) (client.LeaseGrant, error)
}

var _ Register = (*client.Client)(nil)
