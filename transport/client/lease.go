package client

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/permitd/permitd/transport/api"
	"github.com/permitd/permitd/transport/wire"
)

// Leases: a worker (holder) of a leased limit leases a share of its
// permits for a TTL, spends them locally, and renews, reporting what it
// spent. See package fsm's Leases section and fsm/README.md's "Leased over-grant bound"
// for the bound this keeps.
//
// Timing. A LeaseGrant's ExpiresIn counts from SentAt, the client's
// monotonic clock read just before the request that got the answer was
// sent (not from when the answer arrived: the decision may have been taken
// any time in between). The holder must stop spending the grant's permits,
// and giving them away, at SentAt + ExpiresIn - margin, where margin covers
// its clock's rate error over the TTL (a margin of TTL/100 covers a clock
// 1% fast); UsableUntil computes that instant. It must also stop spending a
// grant once it has sent the renew or return that reports on it.
//
// Retries. Every lease, renew and return carries a request ID (generated
// unless given) that stays the same across the client's failover retries,
// so a command whose answer was lost is decided once: the register answers
// the retry with the first decision (Duplicate). A grant replayed after it
// expired is answered as fenced.

// LeasePolicy is the body of PutLeasePolicy.
type LeasePolicy struct {
	// Leased makes the limit leased (true) or linearized again (false;
	// only once no lease holds permits).
	Leased bool
	// BurstPermits (C) and MaxOutstandingPermits (O): 0 selects the
	// default, one second of permits. Must be 0 when Leased is false.
	BurstPermits          int64
	MaxOutstandingPermits int64
}

// LeasePolicyResult is the answer to PutLeasePolicy: the effective
// capacities (api.LeasePolicyResult).
type LeasePolicyResult = api.LeasePolicyResult

// LeaseRequest asks for a lease.
type LeaseRequest struct {
	// Holder names the worker, Group its group (1-128 characters of
	// [A-Za-z0-9_.:-]). A holder holds at most one live lease per limit.
	Holder, Group string
	// Weight is the group's weight in the fair division (1-1000000); 0
	// leaves it to the server (1).
	Weight int64
	// DemandMilliPerSec is the rate the holder wants, in thousandths of a
	// permit per second (0-10^12), as the register counts it.
	DemandMilliPerSec int64
	// TTL is how long the grant lasts (100ms-60s).
	TTL time.Duration
	// RequestID is the idempotency key; empty: a new random one.
	RequestID string
}

// LeaseReport is what a holder reports on its current grant when it
// renews or returns it.
type LeaseReport struct {
	// Spent is how many of the grant's permits the holder spent itself,
	// StolenOut how many it gave to other holders (together at most the
	// grant). StolenIn is how many it received from other leases since its
	// last report (informational).
	Spent, StolenOut, StolenIn int64
	// Kept (Renew only) is how many unspent permits of the grant the
	// holder keeps spending while the renewal is in flight, until its
	// answer arrives and at most until the grant's usable-until (the
	// in-flight allowance): they stay outstanding at the register and
	// become the first permits of the new grant, whose Permits count
	// them. Spent + StolenOut + Kept is at most the grant.
	Kept int64
	// DemandMilliPerSec and TTL (Renew only) are as in LeaseRequest.
	DemandMilliPerSec int64
	TTL               time.Duration
	// RequestID is the idempotency key; empty: a new random one.
	RequestID string
}

// LeaseStatus is the outcome of a lease, renew or return.
type LeaseStatus string

// Lease outcomes. Refused and Fenced are answers, not errors.
const (
	// LeaseGranted (lease, renew): the holder may spend Permits until
	// UsableUntil.
	LeaseGranted LeaseStatus = "granted"
	// LeaseRefused (lease): no lease was opened (the holder already holds
	// one, named by LeaseID and Epoch, or the limit holds too many);
	// retry after RetryAfter.
	LeaseRefused LeaseStatus = "refused"
	// LeaseFenced (renew, return; lease for a grant replayed after its
	// expiry): the lease is not live at that epoch; stop using its grant.
	LeaseFenced LeaseStatus = "fenced"
	// LeaseReturned (return): the lease is closed.
	LeaseReturned LeaseStatus = "returned"
)

// LeaseGrant is the answer to Lease, Renew or Return.
type LeaseGrant struct {
	Status LeaseStatus
	// LeaseID and Epoch name the grant (Granted), the closed lease
	// (Returned) or the holder's existing lease (Refused).
	LeaseID, Epoch uint64
	// Permits (Granted) may be spent until UsableUntil.
	Permits int64
	// ExpiresIn (Granted) is how long after SentAt the grant stops being
	// usable (see the package's lease timing).
	ExpiresIn time.Duration
	// ShareMilliPerSec (Granted) is the holder's fair share of the rate,
	// in thousandths of a permit per second.
	ShareMilliPerSec int64
	// CreditedPermits (renew, return) went back to the free pool.
	CreditedPermits int64
	// RetryAfter (Refused) is when the lease could be opened, counted
	// from ReceivedAt.
	RetryAfter time.Duration
	// Duplicate: the server had already decided this request ID and
	// replayed that decision.
	Duplicate bool
	// Detail explains Refused and Fenced.
	Detail string
	// RequestID is the idempotency key the command carried.
	RequestID string
	// SentAt is the client's clock just before the request that got this
	// answer was sent; ReceivedAt when the answer had been received.
	SentAt, ReceivedAt time.Time
}

// Granted reports whether the answer is a grant.
func (g LeaseGrant) Granted() bool { return g.Status == LeaseGranted }

// ExpiresAt is the end of the grant on the client's clock: SentAt +
// ExpiresIn (zero unless granted).
func (g LeaseGrant) ExpiresAt() time.Time {
	if g.Status != LeaseGranted {
		return time.Time{}
	}
	return g.SentAt.Add(g.ExpiresIn)
}

// UsableUntil is when the holder must stop spending the grant: SentAt +
// ExpiresIn - margin, margin covering the client clock's rate error over
// the TTL. Zero unless granted.
func (g LeaseGrant) UsableUntil(margin time.Duration) time.Time {
	if g.Status != LeaseGranted {
		return time.Time{}
	}
	return g.SentAt.Add(wire.AddNanos(g.ExpiresIn, -margin))
}

// leaseBody is the JSON of a lease, renew or return request.
type leaseBody struct {
	Holder      string `json:"holder,omitempty"`
	Group       string `json:"group,omitempty"`
	Weight      int64  `json:"weight,omitempty"`
	Epoch       uint64 `json:"epoch,omitempty"`
	Spent       int64  `json:"spent,omitempty"`
	StolenOut   int64  `json:"stolen_out,omitempty"`
	StolenIn    int64  `json:"stolen_in,omitempty"`
	Kept        int64  `json:"kept,omitempty"`
	DemandMilli *int64 `json:"demand_milli_per_sec,omitempty"`
	TTL         string `json:"ttl,omitempty"`
	RequestID   string `json:"request_id"`
}

// checkDemand checks a demand in milli-permits per second.
func checkDemand(what string, milli int64) error {
	if milli < 0 || milli > MaxDemandMilliPerSec {
		return fmt.Errorf("%w: %s demand %d milli-permits/s; allowed: 0 to %d", ErrInvalid, what, milli, int64(MaxDemandMilliPerSec))
	}
	return nil
}

// PutLeasePolicy makes limit leased (p.Leased) or linearized again and sets
// its pool's capacities.
func (c *Client) PutLeasePolicy(ctx context.Context, limit string, p LeasePolicy) (LeasePolicyResult, error) {
	body := struct {
		Leased                bool  `json:"leased"`
		BurstPermits          int64 `json:"burst_permits,omitempty"`
		MaxOutstandingPermits int64 `json:"max_outstanding_permits,omitempty"`
	}{p.Leased, p.BurstPermits, p.MaxOutstandingPermits}
	var out LeasePolicyResult
	err := c.call(ctx, http.MethodPut, limitPath(limit)+"/lease-policy", body, &out)
	return out, err
}

// Lease asks for a lease on limit. A refusal (the holder already holds a
// lease, ...) is an answer with Status LeaseRefused, not an error.
func (c *Client) Lease(ctx context.Context, limit string, req LeaseRequest) (LeaseGrant, error) {
	if req.TTL <= 0 {
		return LeaseGrant{}, fmt.Errorf("%w: lease on %q with TTL %v; allowed: 100ms to 60s", ErrInvalid, limit, req.TTL)
	}
	if err := checkDemand("lease", req.DemandMilliPerSec); err != nil {
		return LeaseGrant{}, err
	}
	if c.bin != nil && c.bin.leases {
		return c.leaseCallBinary(ctx, "lease on "+strconv.Quote(limit), limit, wire.OpLease, req.RequestID, func(id string) []byte {
			return wire.EncodeLeaseOpen(wire.LeaseOpen{Limit: limit, Holder: req.Holder, Group: req.Group, Weight: req.Weight,
				DemandMilli: req.DemandMilliPerSec, TTLNanos: int64(req.TTL), RequestID: id})
		})
	}
	demand := req.DemandMilliPerSec
	b := leaseBody{Holder: req.Holder, Group: req.Group, Weight: req.Weight, DemandMilli: &demand, TTL: req.TTL.String(), RequestID: req.RequestID}
	return c.leaseCall(ctx, limitPath(limit)+"/lease", b)
}

// Renew reports on the current grant (epoch) of lease leaseID on limit and
// asks for the next one. A stale epoch or a lease that is no longer live
// is an answer with Status LeaseFenced, not an error.
func (c *Client) Renew(ctx context.Context, limit string, leaseID, epoch uint64, rep LeaseReport) (LeaseGrant, error) {
	if rep.TTL <= 0 {
		return LeaseGrant{}, fmt.Errorf("%w: renew of lease %d on %q with TTL %v; allowed: 100ms to 60s", ErrInvalid, leaseID, limit, rep.TTL)
	}
	if err := checkDemand("renew", rep.DemandMilliPerSec); err != nil {
		return LeaseGrant{}, err
	}
	b, err := reportBody(limit, "renew", leaseID, epoch, rep)
	if err != nil {
		return LeaseGrant{}, err
	}
	if rep.Kept < 0 {
		return LeaseGrant{}, fmt.Errorf("%w: renew of lease %d on %q keeps %d permits; allowed: >= 0", ErrInvalid, leaseID, limit, rep.Kept)
	}
	if c.bin != nil && c.bin.leases {
		return c.leaseCallBinary(ctx, "renew on "+strconv.Quote(limit), limit, wire.OpRenew, rep.RequestID, func(id string) []byte {
			return wire.EncodeLeaseRenew(wire.LeaseRenew{LeaseReport: wireReport(limit, leaseID, epoch, rep, id),
				Kept: rep.Kept, DemandMilli: rep.DemandMilliPerSec, TTLNanos: int64(rep.TTL)})
		})
	}
	b.Kept = rep.Kept
	demand := rep.DemandMilliPerSec
	b.DemandMilli, b.TTL = &demand, rep.TTL.String()
	return c.leaseCall(ctx, leasePath(limit, leaseID)+"/renew", b)
}

// Return reports on the current grant (epoch) of lease leaseID on limit and
// closes the lease (rep.DemandMilliPerSec and rep.TTL are not used). A fenced
// lease is an answer with Status LeaseFenced, not an error.
func (c *Client) Return(ctx context.Context, limit string, leaseID, epoch uint64, rep LeaseReport) (LeaseGrant, error) {
	b, err := reportBody(limit, "return", leaseID, epoch, rep)
	if err != nil {
		return LeaseGrant{}, err
	}
	if c.bin != nil && c.bin.leases {
		return c.leaseCallBinary(ctx, "return on "+strconv.Quote(limit), limit, wire.OpReturn, rep.RequestID, func(id string) []byte {
			return wire.EncodeLeaseReturn(wireReport(limit, leaseID, epoch, rep, id))
		})
	}
	return c.leaseCall(ctx, leasePath(limit, leaseID)+"/return", b)
}

func leasePath(limit string, leaseID uint64) string {
	return limitPath(limit) + "/leases/" + strconv.FormatUint(leaseID, 10)
}

func reportBody(limit, what string, leaseID, epoch uint64, rep LeaseReport) (leaseBody, error) {
	if leaseID < 1 || epoch < 1 {
		return leaseBody{}, fmt.Errorf("%w: %s of lease %d epoch %d on %q; allowed: both >= 1", ErrInvalid, what, leaseID, epoch, limit)
	}
	if rep.Spent < 0 || rep.StolenOut < 0 || rep.StolenIn < 0 {
		return leaseBody{}, fmt.Errorf("%w: %s of lease %d on %q reports spent %d, stolen out %d, stolen in %d; allowed: >= 0",
			ErrInvalid, what, leaseID, limit, rep.Spent, rep.StolenOut, rep.StolenIn)
	}
	return leaseBody{Epoch: epoch, Spent: rep.Spent, StolenOut: rep.StolenOut, StolenIn: rep.StolenIn, RequestID: rep.RequestID}, nil
}

// leaseCall sends one lease command with a request ID that stays the same
// across failover retries, and decodes 200, 409 and 429 answers.
func (c *Client) leaseCall(ctx context.Context, path string, b leaseBody) (LeaseGrant, error) {
	if b.RequestID == "" {
		b.RequestID = newRequestID()
	}
	body, err := jsonMarshal(b)
	if err != nil {
		return LeaseGrant{}, fmt.Errorf("%w: encoding the request: %v", ErrInvalid, err)
	}
	resp, err := c.send(ctx, http.MethodPost, path, body)
	if err != nil {
		return LeaseGrant{}, err
	}
	switch resp.code {
	case http.StatusOK, http.StatusConflict, http.StatusTooManyRequests:
	default:
		return LeaseGrant{}, resp.apiError()
	}
	var a api.LeaseAnswer
	if err := jsonUnmarshal(resp.body, &a); err != nil {
		return LeaseGrant{}, fmt.Errorf("client: cannot decode the answer of %s to POST %s: %w", resp.server, path, err)
	}
	want := map[int][]LeaseStatus{
		http.StatusOK:              {LeaseGranted, LeaseReturned},
		http.StatusConflict:        {LeaseFenced},
		http.StatusTooManyRequests: {LeaseRefused},
	}[resp.code]
	ok := false
	for _, s := range want {
		ok = ok || LeaseStatus(a.Status) == s
	}
	if !ok {
		return LeaseGrant{}, fmt.Errorf("client: %s answered POST %s with %d and status %q", resp.server, path, resp.code, a.Status)
	}
	return LeaseGrant{
		Status: LeaseStatus(a.Status), LeaseID: a.LeaseID, Epoch: a.Epoch, Permits: a.Permits, ExpiresIn: time.Duration(a.ExpiresInNanos),
		ShareMilliPerSec: a.ShareMilliPerSec, CreditedPermits: a.CreditedPermits,
		RetryAfter: time.Duration(a.RetryAfterNanos), Duplicate: a.Duplicate, Detail: a.Error, RequestID: b.RequestID,
		SentAt: resp.sentAt, ReceivedAt: resp.receivedAt,
	}, nil
}

// LeasePool is the answer to Leases: a leased limit's pool, its accounts
// and counters, and its leases sorted by id (api.LeasePool).
type LeasePool = api.LeasePool

// LeaseState is one lease of a LeasePool (api.LeaseState).
type LeaseState = api.LeaseState

// Leases returns the lease pool of a leased limit and its leases
// (ErrNotFound for an unknown limit, ErrInvalid if it is not leased).
func (c *Client) Leases(ctx context.Context, limit string) (LeasePool, error) {
	var p LeasePool
	err := c.call(ctx, http.MethodGet, limitPath(limit)+"/leases", nil, &p)
	return p, err
}

// wireReport is a report on a grant in the binary protocol's terms.
func wireReport(limit string, leaseID, epoch uint64, rep LeaseReport, requestID string) wire.LeaseReport {
	return wire.LeaseReport{Limit: limit, LeaseID: leaseID, Epoch: epoch, Spent: rep.Spent, StolenOut: rep.StolenOut,
		StolenIn: rep.StolenIn, RequestID: requestID}
}

// leaseCallBinary is leaseCall over the binary protocol (WithBinaryLeases):
// the same request ID across failover, the same answers, and Detail worded
// as the HTTP API words it.
func (c *Client) leaseCallBinary(ctx context.Context, what, limit string, op byte, requestID string, encode func(requestID string) []byte) (LeaseGrant, error) {
	if requestID == "" {
		requestID = newRequestID()
	}
	payload := encode(requestID)
	var g LeaseGrant
	err := c.failover(ctx, what, func(server string) (attemptOutcome, error) {
		ans, err := c.callBinary(ctx, server, op, payload)
		if err != nil {
			return binaryOutcome(err), err
		}
		res, err := wire.DecodeLeaseResult(ans.payload)
		if err != nil {
			return attemptDone, fmt.Errorf("client: cannot decode the answer of %s to %s: %w", server, what, err)
		}
		var status LeaseStatus
		var fallback string
		switch res.Status {
		case wire.LeaseGranted:
			status = LeaseGranted
		case wire.LeaseReturned:
			status = LeaseReturned
		case wire.LeaseRefused:
			status, fallback = LeaseRefused, "refused; retry after "+api.DurationText(time.Duration(res.RetryAfterNanos))
		case wire.LeaseFenced:
			status, fallback = LeaseFenced, "the lease is not live at that epoch: stop using that grant"
		default:
			return attemptRetry, &APIError{Server: server, StatusCode: http.StatusServiceUnavailable,
				Message: fmt.Sprintf("%s: unexpected result status %d", what, res.Status)}
		}
		g = LeaseGrant{
			Status: status, LeaseID: res.LeaseID, Epoch: res.Epoch, Permits: res.Permits, ExpiresIn: time.Duration(res.ExpiresInNanos),
			ShareMilliPerSec: res.ShareMilli, CreditedPermits: res.CreditedPermits, RetryAfter: time.Duration(res.RetryAfterNanos),
			Duplicate: res.Duplicate, RequestID: requestID, SentAt: ans.sentAt, ReceivedAt: ans.receivedAt,
		}
		if fallback != "" {
			op, _, _ := strings.Cut(what, " ")
			g.Detail = op + " on limit " + strconv.Quote(limit) + ": " + fallback
			if res.Detail != "" {
				g.Detail = op + " on limit " + strconv.Quote(limit) + ": " + res.Detail
			}
		}
		return attemptDone, nil
	})
	if err != nil {
		return LeaseGrant{}, err
	}
	return g, nil
}
