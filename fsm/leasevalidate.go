package fsm

import (
	"fmt"
)

// leasevalidate.go: the checks a lease command passes before it is
// replicated (names, weight, demand, TTL, report and pool capacities
// within the bounds of lease.go). Whether the limit exists and is leased,
// and whether a report fits its grant, is decided by Apply.

// Validate reports whether p can be replicated. The error wraps
// ErrInvalidCommand.
func (p LeasePolicy) Validate() error {
	if err := validateName(p.Limit); err != nil {
		return err
	}
	if err := validatePoolPermits(p.Limit, "burst", p.BurstPermits); err != nil {
		return err
	}
	if err := validatePoolPermits(p.Limit, "max outstanding", p.MaxOutstandingPermits); err != nil {
		return err
	}
	if !p.Leased && (p.BurstPermits != 0 || p.MaxOutstandingPermits != 0) {
		return fmt.Errorf("%w: lease policy of limit %q: burst %d and max outstanding %d permits with leasing off (allowed: both 0 when Leased is false)",
			ErrInvalidCommand, p.Limit, p.BurstPermits, p.MaxOutstandingPermits)
	}
	return nil
}

func validatePoolPermits(limit, what string, v int64) error {
	if v < 0 || v > MaxLeasePoolPermits {
		return fmt.Errorf("%w: lease policy of limit %q: %s %d permits (allowed: 0 for the default, or 1-%d)",
			ErrInvalidCommand, limit, what, v, MaxLeasePoolPermits)
	}
	return nil
}

// Validate reports whether q can be replicated: valid names, weight,
// demand, TTL and request ID. Whether the limit exists and is leased is
// decided by Apply. The error wraps ErrInvalidCommand.
func (q Lease) Validate() error {
	if err := validateName(q.Limit); err != nil {
		return err
	}
	if err := validateLabel("holder", q.Limit, q.Holder); err != nil {
		return err
	}
	if err := validateLabel("group", q.Limit, q.Group); err != nil {
		return err
	}
	if q.Weight < 1 || q.Weight > MaxLeaseWeight {
		return fmt.Errorf("%w: lease on limit %q: weight %d (allowed: 1-%d)", ErrInvalidCommand, q.Limit, q.Weight, MaxLeaseWeight)
	}
	if err := validateDemand("lease", q.Limit, q.DemandMilliPermitsPerSec); err != nil {
		return err
	}
	if err := validateTTL("lease", q.Limit, q.TTLNanos); err != nil {
		return err
	}
	return validateRequestID(q.RequestID)
}

// Validate reports whether q can be replicated. The error wraps
// ErrInvalidCommand.
func (q Renew) Validate() error {
	if err := validateName(q.Limit); err != nil {
		return err
	}
	if err := q.Report.validate("renew"); err != nil {
		return err
	}
	if q.KeptPermits < 0 {
		return fmt.Errorf("%w: renew of lease %d on limit %q: kept %d permits (allowed: >= 0)", ErrInvalidCommand, q.LeaseID, q.Limit, q.KeptPermits)
	}
	if err := validateDemand("renew", q.Limit, q.DemandMilliPermitsPerSec); err != nil {
		return err
	}
	if err := validateTTL("renew", q.Limit, q.TTLNanos); err != nil {
		return err
	}
	return validateRequestID(q.RequestID)
}

// Validate reports whether q can be replicated. The error wraps
// ErrInvalidCommand.
func (q Return) Validate() error {
	if err := validateName(q.Limit); err != nil {
		return err
	}
	if err := q.Report.validate("return"); err != nil {
		return err
	}
	return validateRequestID(q.RequestID)
}

// validateLabel checks a holder or group name: the characters of a limit
// name.
func validateLabel[T ~string | ~[]byte](what, limit string, v T) error {
	if err := validateName(v); err != nil {
		return fmt.Errorf("%w: lease on limit %q: %s name %q is not valid (allowed: 1-%d characters of A-Z a-z 0-9 _ . : -)",
			ErrInvalidCommand, limit, what, string(v), MaxNameLen)
	}
	return nil
}

func validateDemand(cmd, limit string, v int64) error {
	if v < 0 || v > MaxDemandMilliPermitsPerSec {
		return fmt.Errorf("%w: %s on limit %q: demand %d milli-permits/s (allowed: 0-%d)", ErrInvalidCommand, cmd, limit, v, MaxDemandMilliPermitsPerSec)
	}
	return nil
}

func validateTTL(cmd, limit string, v int64) error {
	if v < MinLeaseTTLNanos || v > MaxLeaseTTLNanos {
		return fmt.Errorf("%w: %s on limit %q: TTL %dns (allowed: %d-%d ns)", ErrInvalidCommand, cmd, limit, v, MinLeaseTTLNanos, MaxLeaseTTLNanos)
	}
	return nil
}

// validate checks r's numbers (its limit name is checked by the caller).
func (r Report) validate(cmd string) error {
	if r.LeaseID < 1 || r.Epoch < 1 {
		return fmt.Errorf("%w: %s on limit %q: lease %d epoch %d (allowed: both >= 1)", ErrInvalidCommand, cmd, r.Limit, r.LeaseID, r.Epoch)
	}
	if r.SpentPermits < 0 || r.StolenOutPermits < 0 || r.StolenInPermits < 0 {
		return fmt.Errorf("%w: %s of lease %d on limit %q: spent %d, stolen out %d, stolen in %d permits (allowed: >= 0)",
			ErrInvalidCommand, cmd, r.LeaseID, r.Limit, r.SpentPermits, r.StolenOutPermits, r.StolenInPermits)
	}
	return nil
}
