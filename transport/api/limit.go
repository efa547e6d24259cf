package api

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// limit.go: a limit as the API writes it, in requests (PUT
// /v1/limits/{name}) and answers (GET, PUT, the list). The server reads a
// request with its own strict decoder (every field records its presence,
// null is refused); what it answers, and what the Go client sends and
// reads, are these types.

// LimitSpec is a limit's configuration: the body of PUT
// /v1/limits/{name}, and the configuration in every answer that shows a
// limit. Only the options of its algorithm are set (the server rejects
// another algorithm's even when zero); durations are Go duration strings.
type LimitSpec struct {
	// Algorithm is "strict", "bursty", "warmup", "hybrid" or
	// "concurrency".
	Algorithm string `json:"algorithm"`
	// Rate is the permits per Per (absent from a concurrency limit's
	// request; 0 in its answers).
	Rate *Float `json:"rate,omitempty"`
	// Per is Rate's period ("1s" when absent; no period for concurrency).
	Per string `json:"per,omitempty"`
	// MaxReserved and Expiry (strict): permits that may be reserved
	// ahead, and how long after its time a permit may be used.
	MaxReserved *int64  `json:"max_reserved,omitempty"`
	Expiry      *string `json:"expiry,omitempty"`
	// MaxBurstSeconds (bursty): seconds of permits stored while idle.
	MaxBurstSeconds *Float `json:"max_burst_seconds,omitempty"`
	// Warmup and ColdFactor (warmup): the warm-up period, and the cold
	// interval over the stable one.
	Warmup     *string `json:"warmup,omitempty"`
	ColdFactor *Float  `json:"cold_factor,omitempty"`
	// BurstRatio and Strictness (hybrid): the catch-up speed relative to
	// the rate, and the pacing mode.
	BurstRatio *Float `json:"burst_ratio,omitempty"`
	Strictness *Float `json:"strictness,omitempty"`
	// MaxInFlight and TTL (concurrency): permits held at once, and how
	// long a permit is held unless released.
	MaxInFlight *int64  `json:"max_in_flight,omitempty"`
	TTL         *string `json:"ttl,omitempty"`
	// Shadow: every reserve is decided and counted but granted at once.
	Shadow bool `json:"shadow"`
}

// LimitConfig is what every answer that shows a limit says of its
// configuration: its name, its spec, the version of the configuration
// (the raft index that put it) and the compiled stable interval per
// permit.
type LimitConfig struct {
	Name string `json:"name"`
	LimitSpec
	Version       uint64 `json:"version"`
	IntervalNanos int64  `json:"interval_ns"`
}

// LimitCounters are a limit's counters since it was created, as
// fsm.LimitInfo defines them: reserves as their answers left (an expired
// grant answered 429 is a refusal), permits granted, and refunds and
// charges apart (NetPermits = GrantedPermits + ExpiredPermits -
// RefundedPermits + ChargedPermits, what the rate was charged).
type LimitCounters struct {
	GrantedRequests uint64 `json:"granted_requests"`
	GrantedPermits  uint64 `json:"granted_permits"`
	RefusedRequests uint64 `json:"refused_requests"`
	ExpiredRequests uint64 `json:"expired_requests"`
	ExpiredPermits  uint64 `json:"expired_permits"`
	RefundedPermits uint64 `json:"refunded_permits"`
	ChargedPermits  uint64 `json:"charged_permits"`
	NetPermits      uint64 `json:"net_permits"`
	// Shadow mode: grants made in shadow mode, and those of them that
	// enforcement would have refused, or made wait.
	ShadowGranted     uint64 `json:"shadow_granted"`
	ShadowWouldRefuse uint64 `json:"shadow_would_refuse"`
	ShadowWouldWait   uint64 `json:"shadow_would_wait"`
}

// LimitLeasePolicy is a leased limit's pool policy in a limit's answer:
// the effective C and O, what the policy set (0: the default), and how
// many leases hold permits.
type LimitLeasePolicy struct {
	BurstPermits          int64 `json:"burst_permits"`
	MaxOutstandingPermits int64 `json:"max_outstanding_permits"`
	BurstSpec             int64 `json:"burst_permits_set"`
	MaxOutstandingSpec    int64 `json:"max_outstanding_permits_set"`
	Leases                int   `json:"leases"`
}

// Limit is the answer to GET /v1/limits/{name}, and each entry of GET
// /v1/limits: the configuration, the counters, what the limit holds now,
// and whether the limit is leased (its pool's policy then).
type Limit struct {
	LimitConfig
	LimitCounters
	// InFlightPermits (concurrency) is the permits its live holds keep
	// now; 0 for the other algorithms (and from older servers).
	InFlightPermits int64 `json:"in_flight_permits"`
	// OpenReservations is how many live reservations (POST /v1/reserve)
	// name the limit and are not settled yet (0 from older servers).
	OpenReservations int               `json:"open_reservations"`
	Leased           bool              `json:"leased"`
	LeasePolicy      *LimitLeasePolicy `json:"lease_policy,omitempty"`
}

// LimitPut is the answer to PUT /v1/limits/{name}: the configuration put,
// and whether the limit was created (201) or replaced (200).
type LimitPut struct {
	LimitConfig
	Created bool `json:"created"`
}

// Limits is the answer to GET /v1/limits, sorted by name. A page (the
// request named prefix, after or limit) that more limits with the prefix
// follow has NextAfter, the last limit's name: ask again with
// after=NextAfter for the next page.
type Limits struct {
	Limits    []Limit `json:"limits"`
	NextAfter string  `json:"next_after,omitempty"`
}

// DefaultLimitsPage is the page size of GET /v1/limits when the request
// names prefix or after but no limit.
const DefaultLimitsPage = 1000

// Float is a float64 that encodes non-finite values as the strings
// "+Inf", "-Inf" and "NaN" instead of failing, and decodes them (and JSON
// numbers) back.
type Float float64

// MarshalJSON implements json.Marshaler.
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsInf(v, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Inf"`), nil
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *Float) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("api: not a number: %q", s)
		}
		*f = Float(v)
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = Float(v)
	return nil
}
