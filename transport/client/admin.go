package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/permitd/permitd/transport/api"
)

// LimitSpec is the configuration of a limit, as sent by PutLimit. Options
// that belong to another algorithm must stay nil: the server rejects them
// even when zero.
type LimitSpec struct {
	// Algorithm is "strict", "bursty", "warmup", "hybrid" or
	// "concurrency".
	Algorithm string
	// Rate is the number of permits per Per; > 0 (not sent for
	// concurrency, which has no rate).
	Rate float64
	// Per is the period of Rate; 0 leaves it to the server (1s).
	Per time.Duration

	// MaxReserved (strict): permits that may be reserved ahead.
	MaxReserved *int64
	// Expiry (strict): how long after its time a permit may be used.
	Expiry *time.Duration
	// MaxBurstSeconds (bursty): seconds of permits stored while idle.
	MaxBurstSeconds *float64
	// Warmup (warmup): the warm-up period.
	Warmup *time.Duration
	// ColdFactor (warmup): cold interval / stable interval.
	ColdFactor *float64
	// BurstRatio (hybrid): maximum catch-up speed relative to the rate.
	BurstRatio *float64
	// Strictness (hybrid): pacing mode.
	Strictness *float64
	// MaxInFlight (concurrency): permits held at once.
	MaxInFlight *int64
	// TTL (concurrency): how long a permit is held unless released.
	TTL *time.Duration
	// Shadow puts the limit in shadow mode: every reserve is decided and
	// counted but granted at once.
	Shadow bool
}

func durPtr(d *time.Duration) *string {
	if d == nil {
		return nil
	}
	s := d.String()
	return &s
}

func parseDurPtr(field string, s *string) (*time.Duration, error) {
	if s == nil {
		return nil, nil
	}
	d, err := time.ParseDuration(*s)
	if err != nil {
		return nil, fmt.Errorf("field %q: %w", field, err)
	}
	return &d, nil
}

// MarshalJSON encodes the spec as the body of PUT /v1/limits/{name}
// (api.LimitSpec).
func (s LimitSpec) MarshalJSON() ([]byte, error) {
	w := api.LimitSpec{
		Algorithm:       s.Algorithm,
		MaxInFlight:     s.MaxInFlight,
		TTL:             durPtr(s.TTL),
		Shadow:          s.Shadow,
		MaxReserved:     s.MaxReserved,
		Expiry:          durPtr(s.Expiry),
		MaxBurstSeconds: (*api.Float)(s.MaxBurstSeconds),
		Warmup:          durPtr(s.Warmup),
		ColdFactor:      (*api.Float)(s.ColdFactor),
		BurstRatio:      (*api.Float)(s.BurstRatio),
		Strictness:      (*api.Float)(s.Strictness),
	}
	if s.Algorithm != "concurrency" {
		r := api.Float(s.Rate)
		w.Rate = &r
	}
	if s.Per != 0 {
		w.Per = s.Per.String()
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes the spec fields of a limit.
func (s *LimitSpec) UnmarshalJSON(b []byte) error {
	var w api.LimitSpec
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	return s.fromAPI(&w)
}

// fromAPI sets s from the API's form of a spec.
func (s *LimitSpec) fromAPI(w *api.LimitSpec) error {
	*s = LimitSpec{
		Algorithm:       w.Algorithm,
		MaxInFlight:     w.MaxInFlight,
		Shadow:          w.Shadow,
		MaxReserved:     w.MaxReserved,
		MaxBurstSeconds: (*float64)(w.MaxBurstSeconds),
		ColdFactor:      (*float64)(w.ColdFactor),
		BurstRatio:      (*float64)(w.BurstRatio),
		Strictness:      (*float64)(w.Strictness),
	}
	var err error
	if w.Per != "" {
		if s.Per, err = time.ParseDuration(w.Per); err != nil {
			return fmt.Errorf("field \"per\": %w", err)
		}
	}
	if s.Expiry, err = parseDurPtr("expiry", w.Expiry); err != nil {
		return err
	}
	if s.Warmup, err = parseDurPtr("warmup", w.Warmup); err != nil {
		return err
	}
	if w.Rate != nil {
		s.Rate = float64(*w.Rate)
	}
	if s.TTL, err = parseDurPtr("ttl", w.TTL); err != nil {
		return err
	}
	return nil
}

// Limit is a limit as answered by the server.
type Limit struct {
	// Name is the limit's name.
	Name string
	// LimitSpec is its configuration; the options of its algorithm are set.
	LimitSpec
	// Version is the raft index of the configuration.
	Version uint64
	// IntervalNanos is the compiled stable interval per permit.
	IntervalNanos int64
	// Counters since the limit was created (GetLimit, ListLimits only):
	// reserves answered as grants and their permits (a refund does not
	// lower them), reserves answered as refusals, ExpiredRequests among
	// them (grants whose permit expired before their answer left, with
	// their ExpiredPermits), the permits settlements refunded and charged,
	// and NetPermits = GrantedPermits + ExpiredPermits - RefundedPermits +
	// ChargedPermits, what the limit's rate was charged.
	GrantedRequests uint64
	GrantedPermits  uint64
	RefusedRequests uint64
	ExpiredRequests uint64
	ExpiredPermits  uint64
	RefundedPermits uint64
	ChargedPermits  uint64
	NetPermits      uint64
	// Shadow-mode counters (GetLimit, ListLimits only): grants made in
	// shadow mode, and those of them the limit would have refused, or made
	// wait, had it been enforced.
	ShadowGranted     uint64
	ShadowWouldRefuse uint64
	ShadowWouldWait   uint64
	// Created (PutLimit only) is true if the limit did not exist.
	Created bool
	// Leased (GetLimit, ListLimits only) is true for a leased limit,
	// whose permits worker sidecars lease (PutLeasePolicy); LeasePool is
	// then its pool's policy and how many leases hold permits. MarshalJSON
	// leaves both out.
	Leased    bool
	LeasePool *LimitLeasePolicy
}

// LimitLeasePolicy is a leased limit's pool policy in GetLimit and
// ListLimits (api.LimitLeasePolicy).
type LimitLeasePolicy = api.LimitLeasePolicy

// UnmarshalJSON decodes a limit answer (api.Limit, or api.LimitPut).
func (l *Limit) UnmarshalJSON(b []byte) error {
	var w struct {
		api.Limit
		Created bool `json:"created"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	c := w.LimitCounters
	*l = Limit{Name: w.Name, Version: w.Version, IntervalNanos: w.IntervalNanos, GrantedRequests: c.GrantedRequests,
		GrantedPermits: c.GrantedPermits, RefusedRequests: c.RefusedRequests, ExpiredRequests: c.ExpiredRequests,
		ExpiredPermits: c.ExpiredPermits, RefundedPermits: c.RefundedPermits, ChargedPermits: c.ChargedPermits,
		NetPermits: c.NetPermits, Created: w.Created, Leased: w.Leased, LeasePool: w.LeasePolicy,
		ShadowGranted: c.ShadowGranted, ShadowWouldRefuse: c.ShadowWouldRefuse, ShadowWouldWait: c.ShadowWouldWait}
	return l.LimitSpec.fromAPI(&w.LimitSpec)
}

// MarshalJSON encodes a limit as the server does.
func (l Limit) MarshalJSON() ([]byte, error) {
	spec, err := l.LimitSpec.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(spec, &m); err != nil {
		return nil, err
	}
	m["name"], m["version"], m["interval_ns"] = l.Name, l.Version, l.IntervalNanos
	m["granted_requests"], m["granted_permits"], m["refused_requests"] = l.GrantedRequests, l.GrantedPermits, l.RefusedRequests
	m["expired_requests"], m["expired_permits"] = l.ExpiredRequests, l.ExpiredPermits
	m["refunded_permits"], m["charged_permits"], m["net_permits"] = l.RefundedPermits, l.ChargedPermits, l.NetPermits
	m["shadow"] = l.Shadow
	if l.Shadow || l.ShadowGranted != 0 || l.ShadowWouldRefuse != 0 || l.ShadowWouldWait != 0 {
		m["shadow_granted"], m["shadow_would_refuse"], m["shadow_would_wait"] = l.ShadowGranted, l.ShadowWouldRefuse, l.ShadowWouldWait
	}
	if l.Algorithm == "concurrency" {
		delete(m, "interval_ns")
	}
	return json.Marshal(m)
}

// Server is one member of the raft configuration (api.Server).
type Server = api.Server

// Promotion is the leader's view of a joined non-voter (api.Promotion).
type Promotion = api.Promotion

// Status is a node's view of itself (GET /v1/status; api.Status).
type Status = api.Status

// Cluster is the answer to GET /v1/cluster (api.Cluster).
type Cluster = api.Cluster

func limitPath(name string) string { return "/v1/limits/" + url.PathEscape(name) }

// PutLimit creates or replaces limit name.
func (c *Client) PutLimit(ctx context.Context, name string, spec LimitSpec) (Limit, error) {
	var l Limit
	err := c.call(ctx, http.MethodPut, limitPath(name), spec, &l)
	return l, err
}

// GetLimit returns limit name (ErrNotFound if absent).
func (c *Client) GetLimit(ctx context.Context, name string) (Limit, error) {
	var l Limit
	err := c.call(ctx, http.MethodGet, limitPath(name), nil, &l)
	return l, err
}

// listAllPage is how many limits ListLimits asks for at once: the most a
// page holds.
const listAllPage = 10_000

// ListLimits returns all limits, sorted by name, read page by page
// (ListLimitsPage, 10 000 at a time): each page is read at one instant,
// the pages one after the other. A register of a million templated keys
// is a hundred pages and hundreds of megabytes: list a template's keys
// with ListLimitsPage and a prefix instead.
func (c *Client) ListLimits(ctx context.Context) ([]Limit, error) {
	var all []Limit
	q := LimitsQuery{Size: listAllPage}
	for {
		page, next, err := c.ListLimitsPage(ctx, q)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if next == "" || next <= q.After { // done, or a server that does not page
			return all, nil
		}
		q.After = next
	}
}

// LimitsQuery selects a page of limits for ListLimitsPage: at most Size
// limits (1 to 10 000; 0 means api.DefaultLimitsPage) whose names start
// with Prefix ("" for any) and sort after After ("" from the first).
type LimitsQuery struct {
	Prefix string
	After  string
	Size   int
}

// ListLimitsPage returns one page of limits, sorted by name, and the
// After of the next page: "" when no more limits with the prefix follow.
// A register of many limits (templated keys) is listed page by page:
//
//	q := client.LimitsQuery{Prefix: "acct:"}
//	for {
//		page, next, err := c.ListLimitsPage(ctx, q)
//		...
//		if next == "" { break }
//		q.After = next
//	}
func (c *Client) ListLimitsPage(ctx context.Context, q LimitsQuery) ([]Limit, string, error) {
	v := url.Values{}
	v.Set("prefix", q.Prefix)
	if q.After != "" {
		v.Set("after", q.After)
	}
	if q.Size != 0 {
		v.Set("limit", strconv.Itoa(q.Size))
	}
	var out struct {
		Limits    []Limit `json:"limits"`
		NextAfter string  `json:"next_after"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/limits?"+v.Encode(), nil, &out)
	return out.Limits, out.NextAfter, err
}

// DeleteLimit removes limit name and reports whether it existed.
func (c *Client) DeleteLimit(ctx context.Context, name string) (existed bool, err error) {
	var out struct {
		Existed bool `json:"existed"`
	}
	err = c.call(ctx, http.MethodDelete, limitPath(name), nil, &out)
	return out.Existed, err
}

// ForceDeleteLimit removes limit name even if it is leased and leases
// still hold permits of it (DeleteLimit is then refused with 409:
// workers could still be spending them), and reports whether it existed.
func (c *Client) ForceDeleteLimit(ctx context.Context, name string) (existed bool, err error) {
	var out struct {
		Existed bool `json:"existed"`
	}
	err = c.call(ctx, http.MethodDelete, limitPath(name)+"?force=true", nil, &out)
	return out.Existed, err
}

// Status returns the status of the first server that answers.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.call(ctx, http.MethodGet, "/v1/status", nil, &st)
	return st, err
}

// StatusOf returns the status of one server ("host:port" or a base URL),
// without failover. With TLS, an "http://" URL (as a status lists its
// peers) is reached over https.
func (c *Client) StatusOf(ctx context.Context, server string) (Status, error) {
	if c.tls != nil {
		server = strings.TrimPrefix(server, "http://")
	}
	base, err := baseURL(server, c.tls != nil)
	if err != nil {
		return Status{}, err
	}
	resp, err := c.attempt(ctx, base, http.MethodGet, "/v1/status", nil, 0)
	if err != nil {
		err = fmt.Errorf("client: status of %s: %w", base, err)
		if hint := wrongPortHint(ctx, base, err); hint != "" {
			return Status{}, &hintedError{msg: err.Error() + "; " + hint, hint: hint, err: err}
		}
		return Status{}, err
	}
	if resp.code != http.StatusOK {
		return Status{}, resp.apiError()
	}
	var st Status
	if err := jsonUnmarshal(resp.body, &st); err != nil {
		return Status{}, fmt.Errorf("client: cannot decode the status of %s: %w", base, err)
	}
	return st, nil
}

// Cluster returns the raft configuration as seen by the first server that
// answers.
func (c *Client) Cluster(ctx context.Context) (Cluster, error) {
	var cl Cluster
	err := c.call(ctx, http.MethodGet, "/v1/cluster", nil, &cl)
	return cl, err
}

// Joined is the answer to a join (api.JoinAnswer): Voter is false for a
// server that was added (or joined before and is still awaiting
// promotion), true for one that votes already.
type Joined = api.JoinAnswer

// Join adds server id with raft address raftAddr ("host:port") to the
// cluster as a non-voter: the leader makes it a voter once it has caught
// up over the cluster's network (Cluster and StatusOf show its progress
// until then). A join while the cluster holds as many non-voters as it
// allows is refused with 409 (an *APIError).
func (c *Client) Join(ctx context.Context, id, raftAddr string) (Joined, error) {
	var j Joined
	err := c.call(ctx, http.MethodPost, "/v1/cluster/join", struct {
		ID       string `json:"id"`
		RaftAddr string `json:"raft_addr"`
	}{id, raftAddr}, &j)
	return j, err
}

// TransferLeadership asks the leader to hand its leadership to voter to
// (any other voter if to is ""). A failure to connect moves on to the next
// server; any other failure is returned, not retried: a transfer repeated
// after an ambiguous failure could move leadership twice.
func (c *Client) TransferLeadership(ctx context.Context, to string) error {
	body, err := jsonMarshal(struct {
		To string `json:"to,omitempty"`
	}{to})
	if err != nil {
		return fmt.Errorf("%w: encoding the request: %v", ErrInvalid, err)
	}
	const path = "/v1/cluster/transfer-leadership"
	return c.failover(ctx, "POST "+path, func(server string) (attemptOutcome, error) {
		r, err := c.attempt(ctx, server, http.MethodPost, path, body, 0)
		switch {
		case err != nil && isDialError(err):
			return attemptUndelivered, err
		case err != nil:
			return attemptDone, fmt.Errorf("client: transfer of leadership through %s: %w (it may have happened)", server, err)
		case r.code == http.StatusServiceUnavailable:
			return attemptRetry, r.apiError() // no leader to transfer from yet
		case r.code < 200 || r.code > 299:
			return attemptDone, r.apiError()
		}
		return attemptDone, nil
	})
}

// RemoveServer removes server id from the raft configuration.
func (c *Client) RemoveServer(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/v1/cluster/servers/"+url.PathEscape(id), nil, nil)
}

func jsonMarshal(v any) ([]byte, error)   { return json.Marshal(v) }
func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
