package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node/worker"
	"github.com/permitd/permitd/transport/client"
)

// clientRegister adapts a *client.Client to worker.Register: the worker's
// fsm commands become the client's lease calls and the answers fsm
// results.
//
// Errors. A failure the client reports as never delivered
// (client.ErrNotDelivered: every attempt failed to connect) is wrapped with
// worker.ErrNotDelivered, so the worker may keep spending the grant the
// call reported on. Every other failure (timeouts, dropped connections, 503
// answers) is returned as is: the command may have been applied. Answers
// that refuse the command are results, not errors: 404 becomes
// fsm.LeaseUnknownLimit and 400 fsm.LeaseInvalid, with the server's
// message as Detail.
type clientRegister struct {
	c *client.Client
}

var _ worker.Register = clientRegister{}

// Lease implements worker.Register.
func (r clientRegister) Lease(ctx context.Context, limit string, q fsm.Lease) (fsm.LeaseResult, error) {
	g, err := r.c.Lease(ctx, limit, client.LeaseRequest{
		Holder: q.Holder, Group: q.Group, Weight: q.Weight,
		DemandPerSec: milliToPerSec(q.DemandMilliPermitsPerSec), TTL: time.Duration(q.TTLNanos), RequestID: q.RequestID,
	})
	return leaseResult("lease", g, err)
}

// Renew implements worker.Register.
func (r clientRegister) Renew(ctx context.Context, limit string, q fsm.Renew) (fsm.LeaseResult, error) {
	g, err := r.c.Renew(ctx, limit, q.LeaseID, q.Epoch, client.LeaseReport{
		Spent: q.SpentPermits, StolenOut: q.StolenOutPermits, StolenIn: q.StolenInPermits,
		DemandPerSec: milliToPerSec(q.DemandMilliPermitsPerSec), TTL: time.Duration(q.TTLNanos), RequestID: q.RequestID,
	})
	return leaseResult("renew", g, err)
}

// Return implements worker.Register.
func (r clientRegister) Return(ctx context.Context, limit string, q fsm.Return) (fsm.LeaseResult, error) {
	g, err := r.c.Return(ctx, limit, q.LeaseID, q.Epoch, client.LeaseReport{
		Spent: q.SpentPermits, StolenOut: q.StolenOutPermits, StolenIn: q.StolenInPermits, RequestID: q.RequestID,
	})
	return leaseResult("return", g, err)
}

// milliToPerSec converts thousandths of a permit per second to permits per
// second. The client sends the shortest decimal of the float64, which for
// any demand up to fsm.MaxDemandMilliPermitsPerSec (13 digits) is the
// exact thousandths, so the server reads back the same integer.
func milliToPerSec(milli int64) float64 { return float64(milli) / 1000 }

// leaseResult turns the client's answer or error into the worker's.
func leaseResult(op string, g client.LeaseGrant, err error) (fsm.LeaseResult, error) {
	if err != nil {
		var api *client.APIError
		switch {
		case errors.Is(err, client.ErrNotDelivered):
			return fsm.LeaseResult{}, fmt.Errorf("permitd worker: %s: %w: %w", op, worker.ErrNotDelivered, err)
		case errors.As(err, &api) && errors.Is(err, client.ErrNotFound):
			return fsm.LeaseResult{Status: fsm.LeaseUnknownLimit, Detail: api.Message}, nil
		case errors.As(err, &api) && api.StatusCode == 400:
			return fsm.LeaseResult{Status: fsm.LeaseInvalid, Detail: api.Message}, nil
		}
		return fsm.LeaseResult{}, fmt.Errorf("permitd worker: %s (may have been applied): %w", op, err)
	}
	var st fsm.LeaseStatus
	switch g.Status {
	case client.LeaseGranted:
		st = fsm.LeaseGranted
	case client.LeaseRefused:
		st = fsm.LeaseRefused
	case client.LeaseFenced:
		st = fsm.LeaseFenced
	case client.LeaseReturned:
		st = fsm.LeaseReturned
	default:
		return fsm.LeaseResult{}, fmt.Errorf("permitd worker: %s: unknown lease status %q in the answer (allowed: granted, refused, fenced, returned)", op, g.Status)
	}
	return fsm.LeaseResult{
		Status: st, LeaseID: g.LeaseID, Epoch: g.Epoch, Permits: g.Permits, ExpiresInNanos: int64(g.ExpiresIn),
		ShareMilliPermitsPerSec: g.ShareMilliPerSec, CreditedPermits: g.CreditedPermits,
		RetryAfterNanos: int64(g.RetryAfter), Duplicate: g.Duplicate, Detail: g.Detail,
	}, nil
}
