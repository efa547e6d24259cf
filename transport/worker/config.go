package worker

import (
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"

	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/wire"
)

// Defaults of Config.
const (
	// DefaultTTL is the lease TTL asked of the register.
	DefaultTTL = 2 * time.Second
	// MinDefaultMargin is the smallest default Margin (the default is 10 %
	// of the TTL, at least this).
	MinDefaultMargin = 50 * time.Millisecond
	// DefaultStealBias is the fraction of its spare permits a donor keeps
	// for its own group when another group asks.
	DefaultStealBias = 0.5
	// NoStealBias, as Config.StealBias, selects a bias of 0: a donor gives
	// other groups its whole spare, like its own group.
	NoStealBias = -1.0
	// DefaultRejoinEvery is how often a worker that is alone, or one of the
	// few chosen to after the member count dropped, joins its seed list
	// again (see Worker's rejoin loop in gossip.go).
	DefaultRejoinEvery = 5 * time.Second
	// DefaultMaxStealPeers is how many peers one steal round asks at most.
	DefaultMaxStealPeers = 8
	// DefaultBurstRatio is the local pacer's catch-up speed relative to the
	// share. At 1.5 a saturated worker left without permits by a renewal
	// stuck in an election makes up a dry spell of a quarter period (the
	// most trimBacklog keeps) within half a period of its next grant; at
	// bucket's hybrid default of 1.1 it took 2.4 periods, and the next
	// renewal credited the spell's permits back unspent
	// (TestPacerMakesUpARenewalsDrySpell).
	DefaultBurstRatio = 1.5
	// DefaultUnreachableAfter is how long the register may leave a
	// worker's calls unanswered before the worker calls it unreachable
	// (Config.UnreachableAfter). With the agents' default raft timeouts
	// (500 ms heartbeat and election) a follower notices a dead leader
	// within 1 s and an election round takes 0.5-1 s: 3 s is six
	// election timeouts, above the longest election measured with them
	// (0.6-1.9 s from the kill to a ready leader), so that an election
	// of the register's usual length, and one split vote, is not called
	// an outage.
	DefaultUnreachableAfter = 3 * time.Second
	// MaxPeriod is the longest RetryEvery, RequestTimeout, StealTimeout,
	// StealGrace, RejoinEvery and UnreachableAfter a worker accepts (the
	// TTL, Margin and RenewEvery are below client.MaxLeaseTTL). Every
	// deadline the worker counts is a reading of its monotonic clock plus
	// at most one of these, so none of its sums can wrap around (a
	// StealGrace near math.MaxInt64 made the grace look over at once).
	MaxPeriod = 24 * time.Hour
)

// Config configures a Worker. Zero values select the defaults documented
// on each field.
type Config struct {
	// Name is the holder ID of the worker's lease and its memberlist node
	// name: unique in the fleet, 1 to client.MaxNameLen characters of
	// [A-Za-z0-9_.:-].
	Name string
	// Group is the worker's group (same characters). Shares are divided
	// between groups first, then among the workers of a group; stealing
	// prefers the own group.
	Group string
	// Weight is the group's weight in the division (1..client.MaxLeaseWeight;
	// 0 selects 1).
	Weight int64
	// Limit is the name of the leased limit.
	Limit string
	// Register is the permit register (required).
	Register Register

	// Gossip is the memberlist configuration: bind address and port, or a
	// Transport (tests use memberlist.MockNetwork). nil selects
	// memberlist.DefaultLANConfig(). The worker copies it and sets Name,
	// Delegate, Events and Logger; memberlist carries only discovery.
	Gossip *memberlist.Config
	// GossipKeys, if not nil, encrypts the gossip (see ParseGossipKeys):
	// every worker of the fleet must hold the primary key of the others.
	// It overrides Gossip's Keyring.
	GossipKeys *memberlist.Keyring
	// Join is the seed list: gossip addresses ("host:port") of other
	// workers. It is joined at Start, again every RejoinEvery while the
	// worker is alone, and, after the member count drops, by the (at most)
	// three members chosen to, every RejoinEvery until a seed answers or
	// the count is back.
	Join []string
	// RejoinEvery is the period of that check (0 selects
	// DefaultRejoinEvery).
	RejoinEvery time.Duration

	// TTL is the lease TTL asked of the register (client.MinLeaseTTL to
	// client.MaxLeaseTTL; 0 selects DefaultTTL).
	TTL time.Duration
	// Margin is subtracted from every deadline the worker counts on its
	// own clock: a grant is spent until TTL-Margin after its request was
	// sent. It covers the clock's rate error (at most Margin/TTL) and
	// scheduling delays between handing out a permit and its use. 0 selects
	// 10 % of TTL, at least MinDefaultMargin. TTL-Margin must exceed
	// RenewEvery.
	Margin time.Duration
	// RenewEvery is the renewal period (0 selects TTL/2). A grant is spent
	// from its answer until the next renewal is sent.
	RenewEvery time.Duration
	// RetryEvery is how soon a failed register call is retried, and how
	// often the worker checks whether it runs short (0 selects
	// RenewEvery/4, at least 5 ms).
	RetryEvery time.Duration
	// RequestTimeout bounds one register call (0 selects TTL - Margin:
	// a renewal caught in a register election keeps waiting for the new
	// leader rather than being sent again). A call that times out is
	// retried after RetryEvery with the same request ID.
	RequestTimeout time.Duration
	// UnreachableAfter is how long the register may leave the worker's
	// calls unanswered before the worker calls it unreachable (0 selects
	// DefaultUnreachableAfter, 3 s), whatever the TTL. The silence is
	// counted from the send of the first lease or renewal the register
	// has not answered since its last answer (a refusal or a fenced
	// answer is an answer), so the time between renewals, when the
	// worker does not ask, is not counted. Until then a caller that
	// finds no permit waits (TryAcquire returns false: a sidecar answers
	// 429 with Retry-After), as it does while a renewal is in flight;
	// from then on it fails closed with ErrRegisterUnreachable (503),
	// once stealing no longer helps. Either way nothing is spent but
	// what the worker holds under a live grant: only the error changes.
	UnreachableAfter time.Duration

	// StealBias is the fraction of a donor's spare permits it keeps for
	// its own group when another group asks: another group gets at most
	// (1-StealBias) of the spare, the own group all of it. 0 selects
	// DefaultStealBias; NoStealBias selects 0; otherwise 0 < StealBias <= 1.
	StealBias float64
	// StealTimeout is how long a steal request waits for its answer before
	// the next peer is asked (0 selects TTL/10, between 10 ms and 250 ms).
	// A late answer is still accepted.
	StealTimeout time.Duration
	// StealGrace is how long after its last good renewal a worker cut off
	// from the register may still take permits from peers (0 selects
	// 2*TTL). After that, and once its stolen permits are spent or
	// expired, it fails closed (with ErrRegisterUnreachable once the
	// register has been silent for UnreachableAfter; callers wait until
	// then).
	StealGrace time.Duration
	// MaxStealPeers is how many peers one steal round asks at most (0
	// selects DefaultMaxStealPeers).
	MaxStealPeers int

	// BurstRatio is the local pacer's catch-up speed relative to the share
	// (>= 1; 0 selects DefaultBurstRatio): a worker that fell behind spends
	// at most BurstRatio times its share until it has caught up.
	BurstRatio float64

	// Clock is the worker's monotonic clock (nil selects the process's,
	// wire.NewMonotonicClock): every deadline of the worker (a grant's
	// local expiry, a stolen lot's deadline, pacing) is measured on it.
	// Its rate error must stay below Margin/TTL (see the over-grant
	// bound).
	Clock wire.Clock
	// Logger receives the worker's logs (nil: none).
	Logger hclog.Logger
	// OnStats, if set, is called with the worker's counters after every
	// register answer (or failure), from the lease goroutine; it must not
	// block or call back into the worker.
	OnStats func(Stats)

	// stealFault, in tests, drops (drop) or delays a steal message from
	// one worker to another (reply: an answer, else a request).
	stealFault func(from, to string, reply bool) (drop bool, delay time.Duration)
	// onSpend, in tests, is called under the worker's lock at the instant
	// n permits of grant (leaseID, epoch) are handed out (stolen: from a
	// lot of a donor's grant; kept: kept by the renewal in flight, which
	// makes them part of grant epoch+1 if the register applies it).
	onSpend func(leaseID, epoch uint64, n int64, stolen, kept bool)
}

// settings is a Config with defaults resolved, in nanoseconds.
type settings struct {
	Config
	ttlNanos, marginNanos, renewNanos, retryNanos, requestNanos int64
	stealTimeoutNanos, stealGraceNanos, rejoinNanos             int64
	unreachableAfterNanos                                       int64
	stealBias                                                   float64
}

// resolve validates c and fills in the defaults.
func resolve(c Config) (settings, error) {
	s := settings{Config: c}
	bad := func(format string, args ...any) (settings, error) {
		return settings{}, invalidConfig(format, args...)
	}
	if s.Weight == 0 {
		s.Weight = 1
	}
	ttl := s.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	for _, n := range []struct{ what, v string }{{"limit name", c.Limit}, {"worker name", c.Name}, {"group name", c.Group}} {
		if err := client.ValidateName(n.what, n.v); err != nil {
			return bad("%v", err)
		}
	}
	if s.Weight < 1 || s.Weight > client.MaxLeaseWeight {
		return bad("weight %d (allowed: 1-%d)", s.Weight, client.MaxLeaseWeight)
	}
	if ttl < client.MinLeaseTTL || ttl > client.MaxLeaseTTL {
		return bad("TTL %v (allowed: %v to %v)", ttl, client.MinLeaseTTL, client.MaxLeaseTTL)
	}
	if c.Register == nil {
		return bad("no Register (required)")
	}
	s.ttlNanos = int64(ttl)
	s.marginNanos = int64(c.Margin)
	if c.Margin == 0 {
		s.marginNanos = max(s.ttlNanos/10, int64(MinDefaultMargin))
	}
	s.renewNanos = int64(c.RenewEvery)
	if c.RenewEvery == 0 {
		s.renewNanos = s.ttlNanos / 2
	}
	switch {
	case s.marginNanos <= 0 || s.marginNanos >= s.ttlNanos:
		return bad("margin %v with TTL %v (allowed: 0 < margin < TTL)", time.Duration(s.marginNanos), ttl)
	case s.renewNanos <= 0 || s.renewNanos >= s.ttlNanos-s.marginNanos:
		return bad("renew every %v with TTL %v and margin %v (allowed: 0 < renew every < TTL - margin, so that a grant is renewed before it expires)",
			time.Duration(s.renewNanos), ttl, time.Duration(s.marginNanos))
	}
	if err := s.resolvePeriods(c); err != nil {
		return settings{}, err
	}
	if err := s.resolveStealing(c); err != nil {
		return settings{}, err
	}
	if s.Clock == nil {
		s.Clock = wire.NewMonotonicClock()
	}
	if s.Logger == nil {
		s.Logger = hclog.NewNullLogger()
	}
	return s, nil
}

// invalidConfig is the error of a Config that resolve refuses.
func invalidConfig(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}

// resolvePeriods fills in the default periods of c that derive from the
// TTL and the renewal period s already holds, and checks them all.
func (s *settings) resolvePeriods(c Config) error {
	s.retryNanos = int64(c.RetryEvery)
	if c.RetryEvery == 0 {
		s.retryNanos = max(s.renewNanos/4, int64(5*time.Millisecond))
	}
	s.requestNanos = int64(c.RequestTimeout)
	if c.RequestTimeout == 0 {
		s.requestNanos = s.ttlNanos - s.marginNanos
	}
	s.stealTimeoutNanos = int64(c.StealTimeout)
	if c.StealTimeout == 0 {
		s.stealTimeoutNanos = min(max(s.ttlNanos/10, int64(10*time.Millisecond)), int64(250*time.Millisecond))
	}
	s.stealGraceNanos = int64(c.StealGrace)
	if c.StealGrace == 0 {
		s.stealGraceNanos = 2 * s.ttlNanos
	}
	s.rejoinNanos = int64(c.RejoinEvery)
	if c.RejoinEvery == 0 {
		s.rejoinNanos = int64(DefaultRejoinEvery)
	}
	s.unreachableAfterNanos = int64(c.UnreachableAfter)
	if c.UnreachableAfter == 0 {
		s.unreachableAfterNanos = int64(DefaultUnreachableAfter)
	}
	for _, d := range []struct {
		name string
		v    int64
	}{{"retry every", s.retryNanos}, {"request timeout", s.requestNanos}, {"steal timeout", s.stealTimeoutNanos},
		{"steal grace", s.stealGraceNanos}, {"rejoin every", s.rejoinNanos}, {"unreachable after", s.unreachableAfterNanos}} {
		if d.v <= 0 || d.v > int64(MaxPeriod) {
			return invalidConfig("%s %v (allowed: > 0 and at most %v, or 0 for the default)", d.name, time.Duration(d.v), MaxPeriod)
		}
	}
	return nil
}

// resolveStealing fills in and checks the settings of stealing and of the
// local pacer.
func (s *settings) resolveStealing(c Config) error {
	switch b := c.StealBias; {
	case b == 0:
		s.stealBias = DefaultStealBias
	case b == NoStealBias:
		s.stealBias = 0
	case b > 0 && b <= 1:
		s.stealBias = b
	default:
		return invalidConfig("steal bias %v (allowed: 0 for the default %v, NoStealBias (-1) for none, or 0 < bias <= 1)", b, DefaultStealBias)
	}
	if s.MaxStealPeers == 0 {
		s.MaxStealPeers = DefaultMaxStealPeers
	}
	if s.MaxStealPeers < 0 {
		return invalidConfig("max steal peers %d (allowed: >= 1, or 0 for the default %d)", c.MaxStealPeers, DefaultMaxStealPeers)
	}
	if s.BurstRatio == 0 {
		s.BurstRatio = DefaultBurstRatio
	}
	if math.IsNaN(s.BurstRatio) || math.IsInf(s.BurstRatio, 0) || s.BurstRatio < 1 {
		return invalidConfig("burst ratio %v (allowed: finite and >= 1, or 0 for the default %v)", c.BurstRatio, DefaultBurstRatio)
	}
	return nil
}
