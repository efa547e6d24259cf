package bucket

import (
	"errors"
	"fmt"
	"time"
)

// Algorithm names one pacing algorithm. Its numeric value is part of the
// replicated encoding and never changes.
type Algorithm uint8

// The pacing algorithms (see doc.go for what each does with unused time).
const (
	// Strict is the strict register (strict.go): a minimum spacing
	// between permits, bounded optimistic reservation and permit expiry.
	Strict Algorithm = 1
	// Bursty is Guava's SmoothBursty: idle time is stored as permits that are
	// served without waiting, up to MaxBurstSeconds of permits.
	Bursty Algorithm = 2
	// WarmingUp is Guava's SmoothWarmingUp: stored permits are served slower
	// than fresh ones, so that a cold limiter ramps up over the warm-up period.
	WarmingUp Algorithm = 3
	// Hybrid is the EngineBlock hybrid limiter: nanosecond tokens in active,
	// burst and waiting pools, with a burst ratio.
	Hybrid Algorithm = 4
	// Concurrency is an in-flight cap (concurrency.go): at most MaxInFlight
	// permits held at once, each held from its grant until it is released
	// or its hold TTL passes. It has no rate.
	Concurrency Algorithm = 5
)

// String returns the wire name of the algorithm ("strict", "bursty",
// "warmup", "hybrid", "concurrency"), or "unknown(N)".
func (a Algorithm) String() string {
	switch a {
	case Strict:
		return "strict"
	case Bursty:
		return "bursty"
	case WarmingUp:
		return "warmup"
	case Hybrid:
		return "hybrid"
	case Concurrency:
		return "concurrency"
	}
	return fmt.Sprintf("unknown(%d)", uint8(a))
}

// ParseAlgorithm maps a wire name to its Algorithm.
func ParseAlgorithm(name string) (Algorithm, error) {
	switch name {
	case "strict":
		return Strict, nil
	case "bursty":
		return Bursty, nil
	case "warmup":
		return WarmingUp, nil
	case "hybrid":
		return Hybrid, nil
	case "concurrency":
		return Concurrency, nil
	}
	return 0, fmt.Errorf("bucket: algorithm %q: %w (allowed: %s)", name, ErrInvalidAlgorithm, allowedAlgorithms)
}

// allowedAlgorithms lists the wire names, for error messages.
const allowedAlgorithms = "strict, bursty, warmup, hybrid, concurrency"

// Errors returned by this package. Every returned error wraps exactly one of
// these and says, in its text, what was wrong and what is allowed.
var (
	ErrInvalidAlgorithm = errors.New("unknown algorithm")
	ErrInvalidPermits   = errors.New("invalid permit count")
	ErrInvalidRate      = errors.New("invalid rate")
	ErrInvalidDuration  = errors.New("invalid duration")
	ErrInvalidOption    = errors.New("invalid option")
	ErrTooManyPermits   = errors.New("more permits than the limit can ever grant")
	ErrOverflow         = errors.New("value overflows int64 nanoseconds")
	ErrCorruptState     = errors.New("corrupt encoded state")
)

// Decision is the outcome of a reservation.
//
// When Granted, the permits may be used from AtNanos on (AtNanos >= the
// reservation's now; the caller waits AtNanos-now). If ExpiresAtNanos is not
// zero, a permit not used by then is wasted and must not be used.
//
// When refused, nothing was reserved and AtNanos is the earliest time at which
// the same request could be granted by a reservation with maxWait 0, as known
// now (another caller may take it first).
//
// A grant of n > 1 permits is usable together at AtNanos, except when
// SpacingNanos is not zero (Strict): permit j (0-based) is then usable from
// AtNanos + j*SpacingNanos until ExpiresAtNanos + j*SpacingNanos.
//
// For Concurrency, ExpiresAtNanos is when the grant's hold lapses (AtNanos
// plus the hold TTL): the permits count as in flight until then unless
// they are released earlier (Releaser), and ExpiresAtNanos names the hold
// to release.
type Decision struct {
	Granted        bool
	AtNanos        int64
	ExpiresAtNanos int64
	SpacingNanos   int64
}

// Pacer is one limit's algorithm and state. Time is always an argument:
// int64 nanoseconds on a timeline the caller defines, which must not go
// backwards between calls (a smaller now is treated as the largest now seen).
// A Pacer is not safe for concurrent use; Limiter wraps one for that.
//
// All methods are deterministic: the same sequence of calls on the same
// Config produces the same decisions and the same encoded bytes on every
// architecture.
type Pacer interface {
	// Config returns the configuration the pacer currently runs with.
	Config() Config
	// Reserve decides a request for n permits at now that is willing to
	// wait at most maxWaitNanos. It reserves only when it grants.
	Reserve(nowNanos, n, maxWaitNanos int64) (Decision, error)
	// Query returns, without changing any state, the earliest time at which
	// n permits could be granted.
	Query(nowNanos, n int64) (int64, error)
	// Reconfigure switches to c (same algorithm) at now, keeping what the
	// algorithm defines as carried over (debt already incurred, stored
	// permits scaled or capped to the new maximum).
	Reconfigure(nowNanos int64, c Config) error
	// AppendState appends the encoded state (not the config) to b.
	AppendState(b []byte) []byte
	// RestoreState replaces the state by the one encoded in b.
	RestoreState(b []byte) error
}

// Scheduler is what a multi-limit reserve and a settlement need of a
// pacer beyond Pacer: granting at a time chosen by the caller, and
// charging permits that were used without a grant. Every pacer of this
// package implements it (see doc.go, "Serving at a chosen time").
type Scheduler interface {
	// ReserveAt grants n permits served at exactly atNanos, decided at
	// now, if atNanos is at or after Query(now, n) and the algorithm's
	// own admission rules allow a grant served then (Strict: MaxReserved
	// counted from now); otherwise it refuses and changes nothing. The
	// state becomes what it would be had the request arrived at atNanos,
	// except that the pacer's clock stays at now: later requests made
	// before atNanos are served after it.
	ReserveAt(nowNanos, n, atNanos int64) (Decision, error)
	// Charge takes n >= 1 permits at now that were used without a grant
	// (a settled overrun): as a grant served at the pacer's next free time
	// whatever the wait, so that later grants are delayed by what the
	// permits cost. It fails, changing nothing, only when the charge
	// cannot be represented (the timeline would overflow) or the
	// algorithm cannot take charges (Concurrency).
	Charge(nowNanos, n int64) error
}

// Releaser is what a pacer that holds permits (Concurrency) offers beyond
// Pacer and Scheduler: giving held permits back before their hold lapses.
// The pacer does not know which reservation holds what; the caller (the
// replicated state machine) tracks it and names a hold by the
// ExpiresAtNanos of the grant that created it. Grants whose holds lapse at
// the same instant share one hold, so releasing one of them removes its
// permits from the shared hold.
type Releaser interface {
	// Release gives back up to n of the permits held by the hold expiring
	// at expiresAtNanos, at now, and returns how many it removed. It
	// removes nothing and changes nothing, returning 0, when that hold has
	// already lapsed (expiresAtNanos <= now: the permits came back by
	// themselves), when no hold lapses at expiresAtNanos, or when n <= 0.
	Release(nowNanos, expiresAtNanos, n int64) int64
	// Admits reports, changing nothing, whether ReserveAt(now, n, at)
	// would grant.
	Admits(nowNanos, n, atNanos int64) bool
}

// Refunder is a pacer that can take back unused permits of a grant that
// later grants already followed, within the slack its bound leaves
// (BurstyPacer; see doc.go, "Late refunds"). The caller records
// GrantSlackNanos before every grant and charge; a refund of permits
// granted before some of them may lower the pacer's debt by at most the
// smallest of their slacks, less what earlier refunds of grants before
// them already took.
type Refunder interface {
	// GrantSlackNanos returns, changing nothing, the slack of a grant or
	// charge served at atNanos (at or after Query(now, n)): how far the
	// pacer's debt could be lowered before the bound's lower invariant
	// fails at that grant.
	GrantSlackNanos(nowNanos, atNanos int64) int64
	// Refund takes back up to n permits at now, lowering the debt by at
	// most maxNanos without moving the next free time before
	// notBeforeNanos (the latest grant's or charge's served time, so
	// that grants stay served in the order they were made), and returns
	// how many it took back (0 when n <= 0, maxNanos < IntervalNanos or
	// the rate is infinite).
	Refund(nowNanos, n, maxNanos, notBeforeNanos int64) int64
}

// Spec is the user-facing description of a limit: rate permits per Per
// (Concurrency: MaxInFlight held at once, and no rate), plus the options of
// its algorithm. Compile validates it and turns it into a
// Config of integers. Options of another algorithm must be zero.
type Spec struct {
	Algorithm Algorithm
	// Rate is the number of permits per Per; > 0 and finite (Bursty also
	// accepts +Inf: no limit; Concurrency has no rate and requires 0).
	Rate float64
	// Per is the period Rate is counted over; > 0. Zero means one second
	// (Concurrency requires 0).
	Per time.Duration

	// MaxReserved (Strict) is how many permit slots may lie after now once a
	// request is granted (>= 0; see StrictPacer); 0 is pessimistic: a
	// request is granted only if it can be served at now exactly.
	MaxReserved int64
	// Expiry (Strict) is how long after its time a permit may still be used;
	// 0 selects the default, half an interval (see DefaultExpiryNanos).
	Expiry time.Duration

	// MaxBurstSeconds (Bursty) is how many seconds of permits may be stored
	// while idle; 0 selects the default 1.
	MaxBurstSeconds float64

	// Warmup (WarmingUp) is the warm-up period; > 0.
	Warmup time.Duration
	// ColdFactor (WarmingUp) is coldInterval/stableInterval; >= 1, 0 selects
	// the default 3.
	ColdFactor float64

	// BurstRatio (Hybrid) is the maximum catch-up speed relative to the rate;
	// >= 1, 0 selects the default 1.1.
	BurstRatio float64
	// Strictness (Hybrid) selects the hybrid pacer's mode (see
	// HybridPacer): 0 (default) average rate, catch-up at BurstRatio;
	// 1 strict, no burst; > 1 the burst ratio itself; 1/2^k (k = 1..62)
	// burst compensation, closing 1/2^k of the open gap at every fill.
	// Other values are rejected.
	Strictness float64

	// MaxInFlight (Concurrency) is the most permits held at once; 1 to
	// MaxInFlightLimit.
	MaxInFlight int64
	// HoldTTL (Concurrency) is how long a granted permit is held when it
	// is not released: a crashed caller's permits come back after it. > 0
	// and at most MaxHoldTTL; 0 selects DefaultHoldTTL.
	HoldTTL time.Duration
}

// Config is a compiled, validated Spec: the form that is replicated and on
// which every decision is computed, with integers only (nanoseconds and
// fixed-point permits). Floats appear only in the embedded Spec, kept for
// display; they are never used in a decision. Build a Config with Compile
// (on the edge, before anything is replicated); encode it with
// Config.AppendBinary and decode it with DecodeConfig, or DecodeCompiled
// to build and reconfigure pacers on it without compiling it again
// (Compiled).
type Config struct {
	// Spec is the specification this config was compiled from, with the
	// defaults filled in and the options of other algorithms zero, so that
	// Compile(c.Spec) == c.
	Spec Spec
	// IntervalNanos is the stable interval per permit, ceil(Per/Rate), so
	// that the effective rate never exceeds the configured one; 0 only for
	// an infinite Bursty rate and for Concurrency (no rate).
	IntervalNanos int64

	// ExpiryNanos (Strict) is how long after its slot a permit may still be
	// used: Spec.Expiry, or DefaultExpiryNanos(IntervalNanos) when that is 0.
	ExpiryNanos int64

	// MaxStoredNanos (Bursty, WarmingUp) is the most stored permits, kept as
	// stored time: stored permits times IntervalNanos. Bursty:
	// round(MaxBurstSeconds*1e9). WarmingUp: ThresholdNanos +
	// floor(2*Warmup*IntervalNanos/(IntervalNanos+ColdIntervalNanos)).
	MaxStoredNanos int64
	// ThresholdNanos (WarmingUp) is the stored time above which stored
	// permits cost more than the stable interval: floor(Warmup/2).
	ThresholdNanos int64
	// ColdIntervalNanos (WarmingUp) is the cost of the last stored permit of
	// a cold limiter: round(ColdFactor*IntervalNanos).
	ColdIntervalNanos int64

	// ActiveNanos (Hybrid) is the active pool size: max(IntervalNanos,
	// HybridMinActiveNanos).
	ActiveNanos int64
	// BurstNanos (Hybrid) is the burst pool size:
	// round(ActiveNanos*(BurstRatio-1)); 0 when pacing is strict.
	BurstNanos int64
	// CompensationShift (Hybrid) is k when Strictness is 1/2^k (burst
	// compensation closes 1/2^k of the waiting pool at every fill); 0
	// otherwise.
	CompensationShift uint8

	// Concurrency has no compiled field: MaxInFlight and HoldTTL (with its
	// default filled in) are read from Spec.
}

// Functions every algorithm file builds on (defined in config.go,
// compiled.go and encoding.go):
//
//	func Compile(s Spec) (Config, error)
//	func New(c Config, originNanos int64) (Pacer, error)
//	func (c Config) MaxPermits() int64            // largest n one request can ever be granted
//	func (c Config) AppendBinary(b []byte) ([]byte, error)
//	func DecodeConfig(b []byte) (Config, error)
