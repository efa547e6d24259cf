// Package bucket is the pacing math of permitd: four rate-limiting
// algorithms and an in-flight cap (Concurrency) as pure, deterministic
// functions of their state and of the time they are given.
//
// # The model
//
// A limit hands out permits at a rate: Rate permits per Per, which Compile
// turns into an interval I = ceil(Per/Rate) nanoseconds, rounded up so that
// the limit is never faster than configured. The simplest pacer remembers
// when it last handed out a permit and makes the next caller wait until I
// has passed. Everything in this package is a refinement of that one idea,
// and every refinement answers the same question differently: what should
// happen to time nobody used?
//
//   - Strict forgets it. The state is one register,
//     the next free slot; a permit is never closer than I to the previous
//     one, however long the limit was idle. This is what an API that counts
//     requests per interval, and remembers no past under-utilisation,
//     requires. Slots may be reserved ahead of now, up to a bound, and a
//     permit expires if it is not used soon after its slot.
//   - Bursty (Guava's SmoothBursty) remembers up to MaxBurstSeconds of it as
//     stored permits, served without waiting: after an idle second at 5
//     permits per second, 5 permits go at once.
//   - WarmingUp (Guava's SmoothWarmingUp) remembers it too, but serves
//     stored permits slower than fresh ones: a limiter that was idle is
//     cold, and ramps up to its stable rate over the warm-up period.
//   - Hybrid (the EngineBlock limiter, documents 000 and 001) counts it in a
//     waiting pool of nanoseconds and lets callers who are behind schedule
//     catch up, no faster than BurstRatio times the rate.
//   - Concurrency has no rate, so no unused time: it caps the permits held
//     at once at MaxInFlight, each held from its grant until it is
//     released or its HoldTTL passes (so that a crashed caller cannot
//     leak capacity).
//
// Bursty and WarmingUp share Guava's second idea: they remember the time
// of the next request rather than of the last one. A request is served at
// that time, however many permits it takes, and pushes it forward by what
// the permits cost; the request after it pays. A request for 100 permits at
// one per second on an idle limiter is served at once, and the next one 100
// seconds later. That is why a request with maxWait is granted iff the next
// free time is at most maxWait away, whatever its size.
//
// # A worked example
//
// Take one permit every 6 seconds, a limit created at 2 s, and requests at
// 2 s, 8 s, 13 s, 14 s and two at 40 s, none willing to wait.
//
//	t     strict (MaxReserved 0)     bursty (MaxBurstSeconds 6)
//	2 s   granted at 2 s             granted at 2 s (store empty, next 8 s)
//	8 s   granted at 8 s             granted at 8 s (next 14 s)
//	13 s  refused, retry at 14 s     refused with maxWait 0, next at 14 s
//	14 s  granted at 14 s            granted at 14 s (next 20 s)
//	40 s  granted at 40 s            granted at 40 s, from the store (6 s
//	                                 stored: next stays at 40 s)
//	40 s  refused, retry at 46 s     granted at 40 s (store empty, next 46 s)
//
// Neither serves the 13 s request at 13 s: it would be only 5 s after the
// last. They differ after the idle time from 20 s to 40 s: strict
// forgot it, bursty stored one permit's worth (6 s) and spends it at once.
//
// # Time, integers and determinism
//
// Pacers never read a clock: every call takes now, an int64 nanosecond on a
// timeline the caller defines, which starts at the origin given to New (as
// Guava's limiter starts at its construction: a bursty limit created and
// left idle stores permits from then on); a now smaller than one already
// seen counts as the largest seen. Every decision is computed on integers, the compiled
// fields of Config; floats appear only in Config.Spec, for display, and in
// Compile. Sums and products saturate at the int64 bounds rather than wrap
// (an unreachable time is math.MaxInt64, never the past). Stored permits
// are fixed point: stored time, permits times I, exact for whole permits.
// States and configs encode to fixed big-endian layouts that start with a
// version and the algorithm (a Concurrency state: a count, then that many
// holds); the same calls give the same bytes on every architecture.
//
// A Reserve that refuses changes nothing: it returns the earliest time a
// request made now could be served (Decision.AtNanos), as Query does.
//
// # Serving at a chosen time
//
// Every pacer of this package is a Scheduler: ReserveAt(now, n, t) grants
// n permits served at a time t the caller chooses, and Charge(now, n)
// takes permits that were used without a grant.
//
// A pacer can serve n at t, decided at now, when t >= Query(now, n), the
// time a request made now would be served:
//
//	Strict     t >= max(nextFree, now), and the grant leaves at most
//	           MaxReserved slots after now: ceil((t-now)/I) - 1 + n <=
//	           MaxReserved, counted from now (not from t)
//	Bursty     t >= nextFree as of now
//	WarmingUp  t >= nextFree as of now
//	Hybrid     t >= max(now, FillNanos) + the wait for n*I tokens
//	Concurrency  t >= the earliest time the holds not lapsed by then
//	           leave room for n under MaxInFlight (holds count from
//	           their decision), and all holds together stay within
//	           MaxInFlightLimit (ConcurrencyPacer.Admits says both)
//
// and the grant's end stays before the end of the int64 timeline. A grant
// leaves exactly the state a Reserve(t, n, 0) would leave had the request
// arrived at t (Strict skips the slots before t, Bursty and WarmingUp store
// the idle time up to t, Hybrid fills its pools up to t), except that the
// pacer's clock stays at now. Every later grant is served at or after the
// new next free time, which is at least t, so served times stay
// non-decreasing, and the grant is one the algorithm could have made by
// itself. The derivations under "Bounds" use only these two facts, so
// grants made by ReserveAt keep the algorithm's own bound.
//
// A request under several limits is granted on all of them together at
// t* = max over the limits of Query_i(now, n_i), each limit then committed
// with ReserveAt(now, n_i, t*). (The register, package fsm, grants a
// Concurrency part only when it fits at now, and otherwise lets the
// request wait for a release in its own queue: Query_i of a cap is then
// now, and the rate limits are asked when the cap frees.) Since t* >= Query_i(now, n_i), every limit
// can serve its n_i at t* (Strict may still refuse for MaxReserved), and
// each limit's own bound holds for it as above: waiting for the slowest
// limit never lets a faster one serve more than it would alone.
//
// A charge is debt: the n permits are taken at now as a grant served at
// the next free time whatever the wait (and, for Strict, whatever
// MaxReserved; n may exceed MaxPermits), so that later grants are delayed
// by what the permits cost: n intervals for Strict and for Bursty with an
// empty store; Bursty and WarmingUp spend stored permits first; Hybrid
// draws its pools first and pushes FillNanos by the rest, without crediting
// that time to any pool. Counted over grants and charged permits together,
// the bounds still hold with each charge counted at the time it is taken:
// as n slots from the next free time (Strict), as a grant of n served then
// (Bursty, WarmingUp: n_last may then be a charge's n), and, for Hybrid,
// whose bound has no n_last term, in tokens: what the pools paid at
// max(now, FillNanos), the debt one token per nanosecond as its time
// passes. (Counted as n permits at one instant, a charge of more than
// the pools hold would exceed Hybrid's bound in a window of length 0.) A
// charge that cannot be represented fails with ErrOverflow and changes
// nothing.
//
// # Late refunds
//
// A caller that reserved more than it used may give the rest back. Right
// after the grant that is exact: restore the state before it and grant
// what was used. After later grants it is not, in general: a Strict slot
// given back sits between slots already handed out, and a Bursty pacer
// that refilled its store in between would hand the same idle time out
// twice. Bursty (a Refunder) can still give back part of it, within a
// slack.
//
// Write P = nextFree - storedNanos. The Bursty bound rests on three facts:
// a grant of n raises P by exactly n*I; accrual of idle time sets P to
// max(P, now - MaxStoredNanos), so it never lowers P; and a grant served
// at a finds a - MaxStoredNanos <= P <= a. Call the slack of a grant (or
// a charge) served at a the room in the lower fact: P - (a -
// MaxStoredNanos) = MaxStoredNanos - stored, the store as of a
// (GrantSlackNanos).
//
// Claim: giving back r permits of a grant g, by lowering P by r*I now, is
// the history in which g had asked for r fewer, provided r*I is at most
// the slack of every grant and charge made after g. Proof: in that
// history P is r*I lower from g on. At each later grant j, the accrual
// max(P - r*I, a_j - MaxStoredNanos) equals P - r*I, since the slack of j
// is at least r*I; so the history evolves exactly r*I lower, every grant
// keeps a_j - MaxStoredNanos <= P - r*I <= a_j at its own served time,
// and its state now is the pacer's after the refund. The bound's
// derivation uses those facts and one more: grants are served in the
// order they are made (a_1 <= ... <= a_L), so that the last grant of a
// window by time is also the last by P. Refund therefore lowers nextFree
// only down to the served time of the latest grant or charge (and not
// below now): had it gone lower, the next grant could be served before a
// grant made earlier, whose few permits would then close a window that a
// large grant's permits fill (1/s, MaxStored 2 s: 2 permits at 0, 1 at
// 2 s, the 2 refunded, then 10 served at 1 s: 11 in [1 s, 2 s] against a
// bound of 4). The rest goes to the store up to MaxStoredNanos, which
// keeps nextFree - stored = P - r*I and nextFree >= the latest served
// time; time beyond the cap is lost, which only leaves P higher, as a
// charge would. Several refunds compose:
// each is such a history for the one before, so the slack of a grant after
// g counts down by every refund of a grant before it (the caller keeps
// that account: fsm's refund marks).
//
// So the permits that can come back, after later grants, are at most
// MaxStoredNanos/I at any instant: a limit whose store is empty under
// load has that much slack at every grant, and the refunds of grants
// queued before any one grant share it. An idle one has less (its store
// is full: slack 0), as it should: its next grants are already served
// from that idle time.
//
// # Bounds
//
// Each algorithm states the most permits it serves in any window of length
// W (the grants whose AtNanos fall in the window), with I the interval and
// n_last the size of the window's last grant:
//
//	Strict     floor(W/I) + 1 permit slots; each slot >= I after the previous
//	Bursty     floor((W + MaxStoredNanos)/I) + n_last
//	WarmingUp  floor(W/I) + n_last
//	Hybrid     floor((A + B + W + floor(B*W/A)) / I), A and B the pool sizes
//	Concurrency  MaxInFlight permits held at any instant (served, neither
//	             lapsed nor released), whatever W: a cap, not a rate
//
// The derivations are in the doc comments of StrictPacer, BurstyPacer,
// WarmingUpPacer, HybridPacer and ConcurrencyPacer.
package bucket
