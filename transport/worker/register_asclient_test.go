package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/client"
)

// fsmCalls are a test register's lease calls in the register's own types.
type fsmCalls interface {
	leaseFSM(ctx context.Context, q fsm.Lease) (fsm.LeaseResult, error)
	renewFSM(ctx context.Context, q fsm.Renew) (fsm.LeaseResult, error)
	returnFSM(ctx context.Context, q fsm.Return) (fsm.LeaseResult, error)
}

// asRegister answers a test register's calls as the Go client answers the
// HTTP API's (see transport's lease endpoints): a granted, refused, fenced
// or returned lease is an answer; an unknown limit is a 404 and an invalid
// command a 400 (*client.APIError); any other error stays ambiguous.
type asRegister struct{ r fsmCalls }

// Lease implements Register.
func (a asRegister) Lease(ctx context.Context, limit string, q client.LeaseRequest) (client.LeaseGrant, error) {
	res, err := a.r.leaseFSM(ctx, fsm.Lease{Limit: limit, Holder: q.Holder, Group: q.Group, Weight: q.Weight,
		DemandMilliPermitsPerSec: q.DemandMilliPerSec, TTLNanos: int64(q.TTL), RequestID: q.RequestID})
	return asGrant(limit, res, err, q.RequestID)
}

// Renew implements Register.
func (a asRegister) Renew(ctx context.Context, limit string, id, epoch uint64, rep client.LeaseReport) (client.LeaseGrant, error) {
	res, err := a.r.renewFSM(ctx, fsm.Renew{Report: report(limit, id, epoch, rep), KeptPermits: rep.Kept,
		DemandMilliPermitsPerSec: rep.DemandMilliPerSec, TTLNanos: int64(rep.TTL), RequestID: rep.RequestID})
	return asGrant(limit, res, err, rep.RequestID)
}

// Return implements Register.
func (a asRegister) Return(ctx context.Context, limit string, id, epoch uint64, rep client.LeaseReport) (client.LeaseGrant, error) {
	res, err := a.r.returnFSM(ctx, fsm.Return{Report: report(limit, id, epoch, rep), RequestID: rep.RequestID})
	return asGrant(limit, res, err, rep.RequestID)
}

func report(limit string, id, epoch uint64, rep client.LeaseReport) fsm.Report {
	return fsm.Report{Limit: limit, LeaseID: id, Epoch: epoch, SpentPermits: rep.Spent, StolenOutPermits: rep.StolenOut, StolenInPermits: rep.StolenIn}
}

// asGrant maps the register's answer as the HTTP API and the client do.
func asGrant(limit string, res fsm.LeaseResult, err error, requestID string) (client.LeaseGrant, error) {
	switch {
	case errors.Is(err, fsm.ErrInvalidCommand) || errors.Is(err, node.ErrInvalid):
		return client.LeaseGrant{}, &client.APIError{Server: "test", StatusCode: http.StatusBadRequest, Message: err.Error()}
	case errors.Is(err, node.ErrNotFound):
		return client.LeaseGrant{}, &client.APIError{Server: "test", StatusCode: http.StatusNotFound, Message: err.Error()}
	case err != nil:
		return client.LeaseGrant{}, err
	}
	status, ok := map[fsm.LeaseStatus]client.LeaseStatus{fsm.LeaseGranted: client.LeaseGranted, fsm.LeaseRefused: client.LeaseRefused,
		fsm.LeaseFenced: client.LeaseFenced, fsm.LeaseReturned: client.LeaseReturned}[res.Status]
	switch {
	case res.Status == fsm.LeaseUnknownLimit:
		return client.LeaseGrant{}, &client.APIError{Server: "test", StatusCode: http.StatusNotFound, Message: fmt.Sprintf("limit %q not found", limit)}
	case res.Status == fsm.LeaseInvalid:
		return client.LeaseGrant{}, &client.APIError{Server: "test", StatusCode: http.StatusBadRequest, Message: res.Detail}
	case !ok:
		return client.LeaseGrant{}, fmt.Errorf("test register: unknown lease status %d", res.Status)
	}
	return client.LeaseGrant{Status: status, LeaseID: res.LeaseID, Epoch: res.Epoch, Permits: res.Permits,
		ExpiresIn: time.Duration(res.ExpiresInNanos), ShareMilliPerSec: res.ShareMilliPermitsPerSec, CreditedPermits: res.CreditedPermits,
		RetryAfter: time.Duration(res.RetryAfterNanos), Duplicate: res.Duplicate, Detail: res.Detail, RequestID: requestID}, nil
}
