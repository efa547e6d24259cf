package fsm

import (
	"fmt"
)

// validate.go: the checks a command passes before it is replicated, in
// its Append function and again in Decode: the bounds of what a command
// carries and every command's Validate.

// Bounds on everything a command carries. They are part of the replicated
// encoding: Decode rejects a command that exceeds them, so they never grow
// without a new EncodingVersion.
const (
	// MaxNameLen is the longest limit name, in bytes. Names are 1 to
	// MaxNameLen characters of [A-Za-z0-9_.:-].
	MaxNameLen = 128
	// MaxRequestIDLen is the longest request ID, in bytes. An empty ID means
	// the reserve is not deduplicated.
	MaxRequestIDLen = 64
	// MaxBatchReserves is the most reserves one CmdReserveBatch may carry.
	MaxBatchReserves = 65536
	// MaxConfigBytes is the longest encoded bucket.Config a CmdPutLimit or
	// a snapshot may carry.
	MaxConfigBytes = 4096
)

// nameChars reports, for every byte, whether it may appear in a limit name.
var nameChars = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "_.:-" {
		t[c] = true
	}
	return t
}()

// ValidateName reports whether name is a valid limit name: 1 to MaxNameLen
// characters of [A-Za-z0-9_.:-]. The error wraps ErrInvalidCommand.
func ValidateName(name string) error {
	return validateName(name)
}

// validateName is ValidateName for strings and byte slices, so that Decode
// can validate a name before allocating it.
func validateName[T ~string | ~[]byte](name T) error {
	if len(name) == 0 || len(name) > MaxNameLen {
		return fmt.Errorf("%w: limit name is %d bytes long (allowed: 1-%d characters of A-Z a-z 0-9 _ . : -)",
			ErrInvalidCommand, len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if !nameChars[name[i]] {
			return fmt.Errorf("%w: limit name %q has byte %q at offset %d (allowed: 1-%d characters of A-Z a-z 0-9 _ . : -)",
				ErrInvalidCommand, string(name), name[i], i, MaxNameLen)
		}
	}
	return nil
}

// ValidateRequestID reports whether id is a valid request ID: at most
// MaxRequestIDLen bytes (any bytes; empty means no deduplication). The error
// wraps ErrInvalidCommand.
func ValidateRequestID(id string) error {
	return validateRequestID(id)
}

func validateRequestID[T ~string | ~[]byte](id T) error {
	if len(id) > MaxRequestIDLen {
		return fmt.Errorf("%w: request id is %d bytes long (allowed: 0-%d bytes)",
			ErrInvalidCommand, len(id), MaxRequestIDLen)
	}
	return nil
}

// Validate reports whether r can be replicated: a valid limit name, Permits
// >= 1, MaxWaitNanos >= 0, at most one of a valid RequestID and a valid
// Session, and an Owner only with Track or a Session. Whether the limit
// exists and can grant that many permits, and whether the session is open
// for the owner, is decided by Apply, not here. The error wraps
// ErrInvalidCommand.
func (r Reserve) Validate() error {
	if err := validateName(r.Limit); err != nil {
		return err
	}
	return validateReserveNumbers(&r)
}

// validateReserveNumbers checks the fields of a reserve other than its name.
func validateReserveNumbers(r *Reserve) error {
	if r.Permits < 1 {
		return fmt.Errorf("%w: reserve on limit %q asks for %d permits (allowed: >= 1)",
			ErrInvalidCommand, r.Limit, r.Permits)
	}
	if r.MaxWaitNanos < 0 {
		return fmt.Errorf("%w: reserve on limit %q has max wait %dns (allowed: >= 0)",
			ErrInvalidCommand, r.Limit, r.MaxWaitNanos)
	}
	if err := validateRequestID(r.RequestID); err != nil {
		return err
	}
	if err := r.Session.validate(r.Limit, r.RequestID != ""); err != nil {
		return err
	}
	return r.validateTracked()
}

// validateTracked checks the reservation-form fields and the owner: an
// owner of at most MaxOwnerLen bytes, only with Track or a session; no
// other reservation-form field without Track; with it no session, at most
// MaxReserveParts limits, each named once with >= 1 permits, and a settle
// window of 0..MaxSettleWindowNanos.
func (r *Reserve) validateTracked() error {
	if len(r.Owner) > MaxOwnerLen {
		return fmt.Errorf("%w: owner is %d bytes long (allowed: 0-%d)", ErrInvalidCommand, len(r.Owner), MaxOwnerLen)
	}
	if !r.Track {
		if len(r.Also) > 0 || r.SettleWithinNanos != 0 || (r.Owner != "" && r.Session.ID == 0) {
			return fmt.Errorf("%w: reserve on limit %q has more limits, a settle window or an owner but is not in the reservation form (allowed: only with Track; an owner also with a session)",
				ErrInvalidCommand, r.Limit)
		}
		return nil
	}
	switch {
	case r.Session.ID != 0:
		return fmt.Errorf("%w: reserve on limit %q in the reservation form has a session (allowed: a request id, or no key)", ErrInvalidCommand, r.Limit)
	case 1+len(r.Also) > MaxReserveParts:
		return fmt.Errorf("%w: reserve names %d limits (allowed: 1-%d)", ErrInvalidCommand, 1+len(r.Also), MaxReserveParts)
	case r.SettleWithinNanos < 0 || r.SettleWithinNanos > MaxSettleWindowNanos:
		return fmt.Errorf("%w: settle window %dns (allowed: 0 for the default of %dns, up to %dns)",
			ErrInvalidCommand, r.SettleWithinNanos, DefaultSettleWindowNanos, MaxSettleWindowNanos)
	}
	for i, p := range r.Also {
		if err := validateName(p.Limit); err != nil {
			return err
		}
		if p.Permits < 1 {
			return fmt.Errorf("%w: reserve asks for %d permits of limit %q (allowed: >= 1)", ErrInvalidCommand, p.Permits, p.Limit)
		}
		if p.Limit == r.Limit || partList(r.Also[:i]).index(p.Limit) >= 0 {
			return fmt.Errorf("%w: reserve names limit %q twice (allowed: each limit once)", ErrInvalidCommand, p.Limit)
		}
	}
	return nil
}

// partList is a list of limits and permits.
type partList []Part

// index returns the position of the part on limit name, or -1.
func (ps partList) index(name string) int {
	for i := range ps {
		if ps[i].Limit == name {
			return i
		}
	}
	return -1
}

// Validate reports whether c can be replicated: a reservation ID >= 1, a
// valid request ID and owner, at most MaxReserveParts actual uses, each on
// a valid limit named once, with >= 0 permits. The error wraps
// ErrInvalidCommand.
func (c Settle) Validate() error {
	if err := validateReservationRef(c.Reservation, c.Owner); err != nil {
		return err
	}
	if err := validateRequestID(c.RequestID); err != nil {
		return err
	}
	if len(c.Actual) > MaxReserveParts {
		return fmt.Errorf("%w: settlement names %d limits (allowed: 0-%d)", ErrInvalidCommand, len(c.Actual), MaxReserveParts)
	}
	return validateParts(c.Actual, "settlement", "says it used", 0)
}

// validateParts checks the parts of a command (what, e.g. "settlement"):
// each on a valid limit, named once, with at least minPermits permits
// (verb says what the command says of them in an error).
func validateParts(parts []Part, what, verb string, minPermits int64) error {
	for i, p := range parts {
		if err := validateName(p.Limit); err != nil {
			return err
		}
		if p.Permits < minPermits {
			return fmt.Errorf("%w: %s %s %d permits of limit %q (allowed: >= %d)", ErrInvalidCommand, what, verb, p.Permits, p.Limit, minPermits)
		}
		if partList(parts[:i]).index(p.Limit) >= 0 {
			return fmt.Errorf("%w: %s names limit %q twice (allowed: each limit once)", ErrInvalidCommand, what, p.Limit)
		}
	}
	return nil
}

// Validate reports whether c can be replicated: a reservation ID >= 1 and
// an owner of at most MaxOwnerLen bytes. The error wraps
// ErrInvalidCommand.
func (c Release) Validate() error {
	return validateReservationRef(c.Reservation, c.Owner)
}

// Validate reports whether c can be replicated: a request ID of 1 to
// MaxRequestIDLen allowed bytes and an owner of at most MaxOwnerLen bytes.
// The error wraps ErrInvalidCommand.
func (c Withdraw) Validate() error {
	if c.RequestID == "" {
		return fmt.Errorf("%w: withdraw without a request id (allowed: the request id of a waiting reserve)", ErrInvalidCommand)
	}
	if err := validateRequestID(c.RequestID); err != nil {
		return err
	}
	if len(c.Owner) > MaxOwnerLen {
		return fmt.Errorf("%w: owner is %d bytes long (allowed: 0-%d)", ErrInvalidCommand, len(c.Owner), MaxOwnerLen)
	}
	if c.GraceNanos < 0 || c.GraceNanos > MaxWithdrawGraceNanos || (c.Force && c.GraceNanos != 0) {
		return fmt.Errorf("%w: withdraw grace %dns, force %v (allowed: 0 to %d ns, and 0 with force)", ErrInvalidCommand, c.GraceNanos, c.Force, MaxWithdrawGraceNanos)
	}
	return nil
}

func validateReservationRef(id uint64, owner string) error {
	if id == 0 {
		return fmt.Errorf("%w: reservation id 0 (allowed: >= 1, as a grant returned it)", ErrInvalidCommand)
	}
	if len(owner) > MaxOwnerLen {
		return fmt.Errorf("%w: owner is %d bytes long (allowed: 0-%d)", ErrInvalidCommand, len(owner), MaxOwnerLen)
	}
	return nil
}

// validate checks a session reference: none (ID 0, and then Seq and
// AckedBelow 0 too), or ID >= 1 and 1 <= AckedBelow <= Seq, and not
// together with a request ID.
func (s SessionRef) validate(limit string, hasRequestID bool) error {
	switch {
	case s.ID == 0 && (s.Seq != 0 || s.AckedBelow != 0):
		return fmt.Errorf("%w: reserve on limit %q has seq %d and acked below %d without a session (allowed: both 0 without a session id)",
			ErrInvalidCommand, limit, s.Seq, s.AckedBelow)
	case s.ID == 0:
		return nil
	case hasRequestID:
		return fmt.Errorf("%w: reserve on limit %q has both a request id and session %d (allowed: at most one of the two)",
			ErrInvalidCommand, limit, s.ID)
	case s.Seq < 1 || s.AckedBelow < 1 || s.AckedBelow > s.Seq:
		return fmt.Errorf("%w: reserve on limit %q in session %d has seq %d and acked below %d (allowed: 1 <= acked below <= seq)",
			ErrInvalidCommand, limit, s.ID, s.Seq, s.AckedBelow)
	}
	return nil
}

// validateBatchLen checks the number of reserves in one batch.
func validateBatchLen(n uint64) error {
	if n < 1 || n > MaxBatchReserves {
		return fmt.Errorf("%w: batch of %d reserves (allowed: 1-%d)", ErrInvalidCommand, n, MaxBatchReserves)
	}
	return nil
}

// The checks a lease command passes before it is replicated (names,
// weight, demand, TTL, report and pool capacities within the bounds of
// lease.go). Whether the limit exists and is leased, and whether a report
// fits its grant, is decided by Apply.

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

// Validate checks the command's kind and payload, as the single-command
// Append functions do.
func (c *LeaseCommand) Validate() error {
	switch c.Kind {
	case CmdLease:
		return c.Lease.Validate()
	case CmdRenew:
		return c.Renew.Validate()
	case CmdReturn:
		return c.Return.Validate()
	}
	return fmt.Errorf("%w: lease command kind %d (allowed: %d lease, %d renew, %d return)", ErrInvalidCommand, c.Kind, CmdLease, CmdRenew, CmdReturn)
}

func validateLeaseBatchLen(n uint64) error {
	if n < 1 || n > MaxBatchLeaseCommands {
		return fmt.Errorf("%w: batch of %d lease commands (allowed: 1-%d)", ErrInvalidCommand, n, MaxBatchLeaseCommands)
	}
	return nil
}

// Validate checks the owner's length and the quota's range.
func (o OpenSession) Validate() error {
	if len(o.Owner) > MaxOwnerLen {
		return fmt.Errorf("%w: session owner is %d bytes long (allowed: 0-%d)", ErrInvalidCommand, len(o.Owner), MaxOwnerLen)
	}
	if o.PerOwner < 0 || o.PerOwner > MaxSessions {
		return fmt.Errorf("%w: %d sessions per owner (allowed: 0 for no quota, up to %d)", ErrInvalidCommand, o.PerOwner, MaxSessions)
	}
	return nil
}
