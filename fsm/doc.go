// Package fsm is permitd's replicated state machine: the hashicorp/raft FSM
// that holds the named limits and their pacers (package bucket), the tables
// of request IDs and client sessions, the lease book of leased limits, and
// the reservations, with the queues of those that wait for an in-flight cap.
//
// # Commands
//
// Every log entry is a compact binary command (see encode.go for the byte
// layout), in the manner of consul's FSM: byte 0 is the CommandType, byte 1
// the EncodingVersion, then the leader's Stamp (its cluster time and the
// term its timeline began in), then the command:
//
//   - CmdPutLimit creates a limit or replaces its configuration. With the
//     same algorithm the pacer is reconfigured and keeps its debt (permits
//     already reserved stay reserved); with another algorithm it starts
//     afresh, except that a fresh in-flight cap counts every live hold of
//     a reservation on its name (reservation.go, "Holds": holds survive
//     algorithm changes, deletes and re-creations). The limit's Version
//     becomes the raft index of the put.
//   - CmdDeleteLimit removes a limit and its state.
//   - CmdReserveBatch carries 1 to MaxBatchReserves reserves, each with the
//     cluster time it reached the leader (Reserve.ArrivedNanos, non-
//     decreasing in the batch), decided in order, each at its own arrival.
//     Applying a batch gives exactly the results (and the state) of
//     applying its reserves one per entry, each stamped at its arrival:
//     batching is only a way to share one fsync, never an instant.
//   - CmdNoop only advances the cluster time.
//   - CmdOpenSession opens a client session (see Deduplication).
//   - CmdPutLeasePolicy, CmdLease, CmdRenew and CmdReturn keep the lease
//     book (see Leases below).
//   - CmdLeaseBatch carries 1 to MaxBatchLeaseCommands lease, renew and
//     return commands, each with its arrival, decided like the reserves
//     of a CmdReserveBatch: exactly as if applied one per entry, each
//     stamped at its arrival (leaseops.go).
//   - CmdSettle and CmdRelease settle a reservation's real cost and free
//     its in-flight permits (see Reservations below). A reserve in the
//     reservation form travels in a CmdReserveBatch like any other.
//   - CmdExpiredGrants reports grants whose answers left as refusals
//     (see Counters below).
//   - CmdWithdraw withdraws, by its request ID, a reserve that waits in an
//     in-flight cap's queue (see Waiting below).
//   - CmdPutTemplate and CmdDeleteTemplate keep the templates: a reserve
//     naming "prefix:key" creates that limit from its template (unless it
//     is answered Invalid or Busy, which leave no key: templateundo.go),
//     and Apply drops it again once idle and at rest (template.go; the
//     rule and its argument are in README.md).
//
// The Append functions validate before encoding (reject before replicate):
// an entry they produce always decodes. Decode validates again, and every
// value has exactly one encoding (shortest varints, canonical configs, no
// trailing bytes), so an entry that decodes re-encodes to the same bytes.
//
// # Failures
//
// Apply distinguishes, like consul, two kinds of failure. An entry that does
// not decode, or is invalid, was never produced by this package: it is a bug
// or corruption, and skipping or half-applying it could make replicas
// diverge, so Apply panics with the index and the reason (the node stops
// loudly). Domain outcomes are values: a refused reserve, an unknown limit,
// more permits than the limit's configuration can ever grant
// (ReserveResult.Status Refused, UnknownLimit, Invalid), and a reconfigure
// the pacer cannot perform (PutResult.Detail).
//
// # Cluster time
//
// Time is an argument, never read from a clock. Each entry carries the
// leader's stamp; Apply clamps it to the timeline, now = max(lastNow,
// stamp), and remembers it. The timeline starts at 0 and never goes
// backwards, so an entry stamped by a leader whose clock is behind is
// decided at the latest time already seen: a grant can be later than the
// leader meant, never earlier. LastNowNanos lets a new leader continue the
// timeline from the last applied entry. raft.Log.AppendedAt is never used.
//
// A stamp is trusted only in the term it was read in: if the entry was
// appended in another term (raft.Log.Term differs from Stamp.Term: its
// leader stamped it, lost the leadership and won it back before raft took
// the entry), its time came from an earlier timeline that kept counting
// while others led from the last applied time, and max(lastNow, stamp)
// would move cluster time ahead of real time. Apply then decides the whole
// entry at lastNow: no time passed.
//
// Results are relative to the cluster time their reserve was decided at:
// WaitNanos, ExpiresInNanos and RetryAfterNanos are durations, never
// instants, so client clocks do not matter. The result also says that time
// (NowNanos) and whether it is the reserve's own arrival stamp (OnArrival),
// for the leader, which re-expresses the durations relative to the moment
// it sends the answer (package node, answer.go); neither is replicated.
// A strict grant of n permits also gives SpacingNanos, the interval: its
// permits are usable one by one, at at, at+I, ..., never together.
//
// # Deduplication
//
// A reserve may carry one of two idempotency keys; a reserve with a known
// key reserves nothing and gets the recorded outcome with Duplicate=true,
// its times re-expressed relative to the later entry's time (the wait
// shrinks, the expiry runs out: ExpiresInNanos = -1 once it passed).
//
// A request ID is remembered for DedupWindowNanos of cluster time. The
// table holds at most MaxDedupEntries IDs; when it is full, a reserve with
// a new ID is answered Busy (RetryAfterNanos: when the oldest ID ages out)
// instead of forgetting an ID younger than the window, so that a retry
// within the window is always recognised: the window is real, and the
// table admits at most MaxDedupEntries new IDs per window. Lease commands
// keep their IDs in a second table that forgets its oldest when full
// (MaxLeaseDedupEntries): a forgotten renew or return is fenced by its
// epoch anyway. The two tables share one ID space: an ID used by another
// kind of command answers Invalid.
//
// A client session (sessions.go) keeps, per client, only the outcomes of
// its requests in flight: the client numbers its reserves and says up to
// where it received the answers. A retry is recognised as long as the
// session lives (SessionIdleNanos after its last reserve), in memory
// proportional to requests in flight, whatever the request rate. A
// reserve of a session that is not open, or that another owner opened
// (Reserve.Owner is not OpenSession.Owner), is answered SessionExpired
// and decides, records and touches nothing. A session closes only by expiry, never to make room
// for other clients: when the table (MaxSessions sessions,
// MaxSessionResults outcomes) or the owner's quota (OpenSession.PerOwner)
// is full, a new session is refused, and a reserve whose outcome cannot
// be recorded is answered Busy without being decided, each with the time
// the least recently used session expires.
//
// Every outcome is recorded, refusals and unknown limits included: a key
// names one decision, and a client that wants a new decision uses a new
// key. A replayed grant always has an expiry, so that a late retry never
// uses a permit arbitrarily late: the fresh answer's (an enforced strict
// grant's, or the earliest of a reservation's enforced parts'), or, when
// the fresh answer had none (the other algorithms, and every grant made
// in shadow mode, which is answered at once and never refused), one
// replay period after its time: the interval, an in-flight cap's hold
// TTL, the shortest of the reserve's limits'. The outcome stores the
// expiry when it is decided, so a replay keeps it whatever happens to the
// limits afterwards (shadow mode switched off, another algorithm, a delete
// and re-create). The reachable-state walk checks every replay against
// its first answer (walkaudit_test.go). Only an infinite bursty rate,
// whose permits cost nothing, has no replay period.
//
// Both ID tables are queues in insertion order, which is log order, so
// eviction pops from their heads, driven only by the cluster time of the
// entry being applied and by their sizes; sessions are lists in order of
// last activity, closed from the head only by their age. All replicas
// forget the same keys at the same entry.
//
// # Determinism
//
// Apply is a pure function of (state, entry): no clock, randomness, map
// iteration, goroutine or I/O. Replicated numbers are integers; names are
// kept sorted; the dedup table is ordered. Two FSMs fed the same log have
// byte-identical snapshots, which StateHash (SHA-256 of the snapshot) lets
// replicas compare.
//
// # Snapshots
//
// Snapshot encodes the whole state under the lock; Persist only writes the
// bytes. The format (see snapshot.go) is a magic and format version, the
// cluster time and applied index, the templates, the configs the limits
// run (each once), the limits sorted by name (name, version, the index of
// its config, counters, pacer state), the two ID tables in eviction order, the
// sessions in order of activity, the lease book (pools sorted by limit
// name, leases by ID), and a CRC-32C of everything before it. Restore checks the checksum, every bound and
// invariant (sorted unique names, canonical configs that build pacers,
// pacer states they accept, IDs unique, in time order and inside the
// retention window; sessions inside their idle window; lease accounts that
// balance, live leases unexpired, one active lease per holder), accepts
// only a snapshot that re-encodes to exactly its own bytes, and replaces
// the state only if all of that holds; otherwise it returns an error
// wrapping ErrDecode and changes nothing.
//
// Restore accepts every state Apply can reach, including the transient
// ones that follow a reconfiguration: for up to a lease TTL after a
// leased limit's rate was lowered, a lease may hold a share computed at
// the old rate, above the new capacity. The reachable-state walk of the
// tests (walk_test.go) takes a snapshot after every step of seeded random
// sequences of every command (templates and their keys included) and
// checks that it restores, re-encodes to the same bytes, and continues
// exactly as the original; it also checks that the counters and replays
// agree with the answers (see Counters), and every templated key's bound
// across its drops.
//
// # Leases
//
// Per-request consensus costs a Raft round trip per permit. For high rates
// a limit is leased instead: workers (holders, organised in groups) lease a
// share of its permits for a TTL, spend them locally, and renew. Raft
// traffic is then proportional to renewals, not to permits.
//
// A limit is either linearized or leased, never both: CmdPutLeasePolicy
// with Leased=true gives it a lease pool, after which reserves on it are
// Invalid ("limit is leased"); Leased=false removes the pool again, but only
// once no lease holds permits. So no permit is handed out by both paths. A
// new pool starts empty and mints from the later of now and the earliest
// time the limit's pacer would grant its next permit, so that permits the
// pacer already reserved ahead are not minted again. A limit can be leased
// if its interval I is at most MaxLeasedIntervalNanos (one permit per 60 s;
// not an infinite rate); a put that would break that on a leased limit is
// refused (PutResult.Detail).
//
// The pool keeps whole permits in four accounts, and after every entry
//
//	minted = free + outstanding + settled
//
// (FSM.LeaseAccounts). Permits are minted only by the passage of cluster
// time, one per I (a put that changes I mints up to its time at the old
// I, then restarts the minting clock at the new one), and only while free < C (BurstPermits; default one second of
// permits, at least 1): a permit not minted because the pool was full is
// not counted, the minting clock restarts. A grant moves permits from free
// to outstanding, never more than free and never taking outstanding above
// O (MaxOutstandingPermits; default one second of permits). A holder's
// report settles them: spent permits are settled; permits it gave to other
// holders (stolen out) stay outstanding, lingering, until the expiry of the
// grant they came from, then are settled; the rest is credited back to
// free. A grant that reaches its expiry unreported is settled whole (as
// expired): it is never credited back, since its holder may have spent it.
//
// Commands (each with an optional request ID, deduplicated like reserves
// in the same table; an ID used by another kind of command answers Invalid):
//
//   - CmdLease opens a lease for Holder in Group with a Weight, a reported
//     demand and a TTL (MinLeaseTTLNanos..MaxLeaseTTLNanos): the lease gets
//     the next ID (1, 2, 3, ... over all limits, never reused), epoch 1,
//     and a first grant. A holder holds at most one live lease per limit
//     (a second is Refused and told the first's ID and epoch), and a limit
//     at most MaxLeasesPerLimit.
//   - CmdRenew, with the lease's ID and current epoch, reports the current
//     grant (spent, stolen out, stolen in) and the holder's new demand; the
//     grant is settled as above and a new one issued under epoch+1 for the
//     new TTL. A renew whose epoch is not the current one, or of a lease
//     that expired or was returned, is Fenced and changes nothing but a counter (so is a
//     retry sent without its request ID after the first copy was applied:
//     the epoch has moved on). A report of more than the grant is Invalid.
//     A renew may also keep permits (KeptPermits, the in-flight
//     allowance): unspent permits of the grant its holder goes on spending
//     while the renewal is in flight, so that a renewal held up by an
//     election does not take from it what it has not spent. They are neither
//     settled nor credited: they stay outstanding and become the first
//     permits of the new grant, which is max(kept, the grant the renewal
//     would have got had it reported them unspent).
//   - CmdReturn reports the current grant the same way and closes the lease.
//
// Expiry is on cluster time only: at the start of every Apply, every grant
// with expiresAt <= now (on every limit) is settled and its lease closed.
// A new leader continues the cluster timeline from the last applied entry
// (and Apply clamps time), so it treats every outstanding lease as live
// until its TTL has run out on the continued timeline; time lost in an
// election only makes leases last longer, never shorter.
//
// # Shares
//
// A grant's size comes from a fair division of the rate r = 10^12/I
// milli-permits per second (FairShares): weighted max-min fairness over the
// groups with a live lease, each group's demand being the sum of its
// leases' last reported demands and its weight the one carried by its
// newest lease; then max-min with equal weights among the leases of the
// group. A group that wants less than its fair share gets what it wants,
// the rest is split among the others by weight. Shares are recomputed at
// every lease and renewal from the current demands, so a group whose
// holders stop renewing stops counting once their leases expire: its share
// returns to the others, its unreported permits are settled, and minting
// refills the free pool (no capacity stays stranded longer than a TTL). A
// lease with share s and TTL t is granted at most
//
//	min(free, O - outstanding, floor((s*h + carry) / (r*I))),  h = min(t, O*I)
//
// its fraction s/r of the permits minted in h; the fair grants of all
// leases add up to at most O, and the carry (remainder) lets a share worth
// less than a permit per grant earn one every few grants.
//
// When the rate is saturated the free pool holds little more than what
// was minted since the previous renewal, and dividing it first come, first
// served would follow the order of the renewals, not the shares. So each
// lease also has an entitlement: its share's fraction of every permit the
// pool mints accrues into it (in whole permits, with a remainder), up to
// its fair grant rounded up; the net intake of a grant (the grant minus
// what the renewal credited back) is taken out of it, and may exceed it
// only by what the pool holds beyond the other active leases'
// entitlements. Accruing from minted permits rather than from elapsed
// time keeps the claims within what was minted for them, so the pool is
// divided by the shares even when the fleet renews too slowly for the
// full rate and minting stops at C between renewals: a lease that always
// renews last still finds its part. A lease that joins takes over its
// share's fraction of every other lease's entitlement (the sum stays the
// same), so it is not left empty until its first renewal, and the others'
// shares, the rates at which they accrue until they renew, shrink by the
// same fraction, so that a fleet that starts together does not accrue at
// the stale shares of its first grants (cedeTo). A lease whose grants came late catches up at its next renewals, a lease that gives permits away
// (stolen out) takes them out of its own entitlement, a silent holder's
// claim (at most one fair grant) lapses with its lease, and over any span
// each lease takes at most its fraction of what was minted plus one fair
// grant plus what nobody else claimed (leasegrant.go, grant).
//
// # The over-grant bound
//
// Let I be the limit's interval, C and O its effective BurstPermits and
// MaxOutstandingPermits. Then in any window of real time of length W, the
// permits spent by all holders of the limit together number at most
//
//	C + O + floor(W/I) + 1
//
// Why: only free and outstanding permits can still be spent, and their sum
// never exceeds C + O (minting stops at free = C, grants stop at
// outstanding = O, every other change moves permits between the two or
// settles them; a kept permit never leaves outstanding while its holder
// may spend it: it moves from the reported grant into the next, so the
// in-flight allowance changes neither the argument nor the bound). The permits spent in a window were in that sum just before
// the first entry of the window, or were minted by the window's entries;
// mint instants are at least I apart, and by assumption 1 the window's
// entries span at most W of cluster time, so at most floor(W/I) + 1 permits
// are minted for it beyond what the first entry could add under the cap C.
// The TTL does not appear: it bounds how long a permit stays spendable, not
// how many are; O plays the role that r*TTL plays in the usual statement (a
// fleet that renews every P needs O >= r*P, and C >= r*P, to run at the
// full rate).
//
// The bound holds under these assumptions:
//
//  1. Cluster time never runs faster than real time: for two entries
//     stamped at real times t1 <= t2, now2 - now1 <= t2 - t1 (node's
//     timeline, invariant 2 of the architecture).
//  2. A holder spends a grant's permits only after receiving the grant,
//     only before sending the renew or return that reports on it (except
//     the permits that renew keeps: those until the renew's answer
//     arrives, which makes them part of the new grant), and only before
//     TTL - margin has passed on its own clock since it sent the request
//     that obtained the answer (ExpiresInNanos for a replayed Duplicate),
//     where its clock's rate error is at most margin/TTL. The leader
//     stamps an entry after receiving the request.
//  3. Stolen permits keep the donor's expiry: a taker spends them only
//     before the donor's deadline, counted from when the taker asked; the
//     donor reports them as stolen out (never as unspent) and gives away
//     nothing of a grant after reporting it.
//  4. The limit's I, C and O do not change during the window or in the
//     MaxLeaseTTLNanos before it (a change can lower C + O below permits
//     already outstanding; use the larger values across a change), and the
//     limit is not deleted and re-created meanwhile (deleting a leased limit
//     forgets its leases while their holders may still spend until expiry).
//     Switching a limit between linearized and leased adds, once, what the
//     other mode had already handed out.
//
// Lost messages lose permits (a grant whose answer is lost expires
// unspent), they never create any.
//
// # Reservations
//
// A reserve in the reservation form (Reserve.Track; multi.go) names one to
// MaxReserveParts limits, each once, and is decided in one entry at one
// cluster time now:
//
//  1. Every limit exists, is not leased, and can grant its part (n_i <=
//     MaxPermits; a strict limit takes 1 permit when the reserve names
//     several limits, because its permits are served one interval apart).
//     Otherwise the reserve is UnknownLimit or Invalid.
//  2. t* = the latest Query_i(now, n_i) over the enforced (not shadow)
//     rate limits: the earliest time every one of them can serve its part
//     (bucket/doc.go, "Serving at a chosen time", defines "can serve n at
//     t" per algorithm). If t* - now > max wait, the reserve is Refused
//     with RetryAfter t* - now and Blocking the limit that set t*. An
//     enforced in-flight cap serves its part only now: when the part does
//     not fit now, or earlier reserves wait on the cap, the cap blocks the
//     reserve, which then waits in the cap's queue if its max wait is not
//     0 (Queued; see Waiting below) or is Refused naming the cap.
//  3. Each enforced limit commits its part served at exactly t*
//     (ReserveAt), rate limits first, in-flight caps last (their holds
//     counted from now until t* + TTL). If one refuses (a strict limit's
//     MaxReserved does not reach t*), the parts already committed are
//     restored byte for byte and the reserve is Refused, naming it.
//     Shadow limits are decided, each on its own, only now.
//
// So a refused reserve changes no limit's pacer (TestRefusedMultiLimit-
// ChangesNothing; the reachable-state walk checks it after every refused
// tracked reserve). A granted one is, on every limit, a grant that limit
// could have made alone for a request arriving at t*: by bucket's
// argument each limit's own bound holds over the grants of single and
// multi-limit reserves together. No partial grant exists at any entry
// boundary: the parts are committed inside one Apply.
//
// A granted reservation is kept (reservation.go) until FinalAtNanos: its
// settle window after t* (default one minute, at most ten), or its last
// in-flight hold's expiry if later; then it is forgotten, at the same
// entry on every replica, and a settlement or release of it is
// SettleUnknown. At most MaxReservations live at once; beyond that a
// reserve in the reservation form is Busy, not recorded.
//
// # Settlements
//
// A settlement (settle.go) says how many permits of each limit were
// actually used. It applies once per reservation: a retry with the same
// request ID is answered with the first result; any other settlement of a
// settled reservation is SettleConflict; another owner's is
// SettleForbidden; a limit the reservation does not hold, or an overrun of
// an in-flight cap, is SettleInvalid; and then nothing changes. Per limit:
//
//   - Used fewer than reserved, on a rate limit: the unused permits are
//     refunded only if the limit's pacer is still exactly the state the
//     grant left (the same pacer incarnation, bornIndex, and no change
//     since: seq). The pacer is then restored to its state before the
//     grant and the grant made again for the actual permits at the same
//     now and t*, so the limit is exactly as if the reserve had asked for
//     what it used, and every bound holds over the permits used. If
//     anything touched the pacer since, returning them is not sound in
//     general (a bursty limit that refilled in between would hand the same
//     idle time out twice; a strict limit would serve a later slot twice),
//     except within a slack: a Bursty limit (bucket.Refunder) gives back
//     as many as the smallest slack of the grants and charges made since
//     allows, each slack lowered by the refunds already made of grants
//     before it (settle.go, "Late refunds"; the proof is bucket/doc.go's
//     "Late refunds"). Under load that is up to MaxStored/I permits crossing any one grant.
//     The other algorithms, and whatever a slack does not cover, lose the
//     unused permits.
//   - Used fewer than reserved, on an in-flight cap: the difference is
//     released at once (nothing, if the hold already expired).
//   - Used more than reserved, on a rate limit: the overrun is charged
//     (bucket.Scheduler.Charge): a debt that delays later grants by what
//     the extra permits cost. The permits were used before the register
//     heard of them, so a window containing those uses may exceed the
//     limit's bound by the overrun; over any window that starts after the
//     charge the bound holds again, counting the charge as a grant served
//     at the next free time (bucket/doc.go). A reserve that never under-
//     estimates never needs a charge.
//
// A release frees the in-flight permits a reservation still holds, and
// gives them to the reserves waiting for them (Waiting below); a second
// release, or one after the holds expired, frees nothing and changes
// nothing (fenced by the hold's expiry). A hold belongs to its
// reservation, not to the limit's configuration: it counts against the
// in-flight cap of its name from its grant until it is released or
// expires, across puts that change the algorithm and back, deletes and
// re-creations (reservation.go, "Holds"), and a release frees it whatever
// the limit is meanwhile.
//
// Shadow mode (PutLimit.Shadow): every reserve on the limit is decided by
// its pacer as usual, with the caller's max wait, and counted (shadow
// grants, would-refuse, would-wait: only while in shadow mode), but
// answered Granted at once, without an expiry (a replay has one: see
// Deduplication); in a multi-limit reserve a shadow limit never sets t*.
// Its pacer sees only the grants it would have made, so the counters say
// what enforcement would have done to the same traffic.
//
// # Counters
//
// Every limit counts, since it was created, the reserves on it as their
// answers left the register (LimitInfo): grants and their permits,
// refusals, grants made in shadow mode, and what settlements refunded or
// charged (counted apart: a refund never lowers the permits granted;
// NetPermits is what the limit's rate was charged). A refusal is not a
// grant, and one kind of refusal is decided outside the log: the node
// that sends an answer subtracts the time it held it (package node), and
// a grant whose first permit expired meanwhile leaves as a refusal. Apply
// cannot see that (the departure time is not in the log, and the counters
// must be the same on every replica), so the node reports it in a later
// entry, CmdExpiredGrants, naming the grant by the index of the entry
// that decided it and the limits and permits it granted; Apply then
// counts it as expired: a refusal, not a grant (expiredgrants.go). Such a
// grant's slots stay spent, and its counters are those of a grant until
// the report is applied, or for good if the node fails before sending it.
// The reachable-state walk checks after every step that every limit's
// counters equal the tally of the answers it received.
//
// # Waiting
//
// An in-flight cap of M permits is a semaphore: a reserve in the
// reservation form that names it takes n permits if they fit, and
// otherwise waits, up to its max wait, for holds to be released or to
// lapse. Waiting is replicated state: the register keeps a first-in,
// first-out queue of waiting reserves, each a reservation record in the
// waiting state (its ID given on arrival, its deadline arrival + max
// wait), and decides each of them later, in the log:
//
//   - On arrival (decideTracked), a reserve is granted at once as before
//     (t* the latest Query of its limits, every cap fitting its part now)
//     unless a cap it names blocks it: its part does not fit in what the
//     cap has left beyond the permits it holds and those that the
//     reserves waiting on it ask for (no barging: the queue is fair, as a
//     fair semaphore's: no reserve takes permits an earlier one waits
//     for). A blocked reserve whose rate limits alone could serve it
//     within its max wait, and whose max wait is not 0, joins the queue
//     of every limit it names and is answered Queued; otherwise it is
//     refused at once, as before.
//   - A waiting reserve fits a cap when its part fits in what the cap has
//     left beyond the permits it holds and those that the reserves
//     waiting on it earlier ask for: so a reserve that waits for another
//     cap keeps its share of this one, and no more (later ones take the
//     rest rather than idle behind it). It is granted, at instant g, as
//     soon as it fits every cap it names: t* = max(g, the Query of each
//     rate limit it names at g), its
//     rate parts are committed served at t*, its caps' holds from g until
//     t* + TTL (as a fresh grant decided at g would be). If t* is past its
//     deadline it is refused instead, naming that rate limit: its rate
//     slots are decided only now, never moved earlier than their pacers
//     allow at g.
//   - g is the instant its slot came free: the cluster time of the release
//     or settlement that freed it, of the put that raised the cap, or of
//     the lapse of a hold (its expiry: the earliest TTL expiry). A reserve
//     still waiting at its deadline is refused then (Blocking the cap).
//     A put or delete of a limit it names, or a lease policy on one,
//     decides it again at that entry: an unknown or leased limit resolves
//     it as UnknownLimit or Invalid, a limit that is no longer a cap no
//     longer blocks it. Releasing a waiting reservation withdraws it
//     (Refused), and so does a CmdWithdraw naming its request ID (a node
//     whose client went away sends it; with a grace, one that spares a
//     reserve whose request ID was retried within it).
//   - A queue is bounded (waitqueue.go): at most MaxWaitersPerLimit
//     reserves wait naming one limit, and at most MaxWaitersPerOwner of
//     them are one owner's (a token's; without tokens only the first
//     bound applies). A reserve that would wait beyond is answered Busy,
//     naming the bound, with the time until one of those waiters may
//     leave the queue; it changes nothing and is not recorded.
//
// Lapses and deadlines happen at instants that no entry carries. Every
// entry therefore first decides, in order of their instants, the events
// between the previous entry's time and its own (advanceWaiters), each
// at its own instant g: exactly what an entry applied at g would have
// decided, since nothing else happened in between. So the outcome of a
// waiting reserve does not depend on which entries happen to come after
// it, only on the commands and their times (TestWaitersIgnoreNoops), and
// an answer is never given before an entry has decided it: the leader
// writes a no-op at each instant an event is due (package node, waker.go)
// and answers the waiting client once the entry that decided it is
// applied (the decisions of each entry: TakeWaiterDecisions).
//
// A decided waiter is recorded like any reserve: its request ID enters
// the dedup table with the decision, recorded at g; while it waits, a
// replay of its request ID is answered Queued with its reservation ID
// (so that the node waits for the same decision) and the table keeps
// room for it. Apply answers a waiting reserve Queued (never an answer
// for a client); each entry's decisions are read, relative to a cluster
// time of that entry, with TakeWaiterDecisions (not replicated). A
// waiting reservation is in snapshots (flag 4 of its record, with its
// request ID and settle window), so a restored copy decides it exactly as
// the original.
//
// Safety.
//
// The cap's bound (bucket/concurrency.go, "Bound") holds unchanged: every
// grant on a cap, at arrival or from the queue, is decided at an instant
// g at which the cap's pacer has seen nothing after g (events are
// decided in order of their instants, before the entry that follows
// them), and it is made only if its permits fit under MaxInFlight at g,
// counting every hold not lapsed at g; the proof of the bound uses only
// that. A client never counts a hold as its own for longer than the
// register does: the decision gives the hold's expiry E relative to a
// cluster time of the entry that decided it; the leader subtracts the time
// its timeline counted since then, which is never more than the real time
// since (the timeline runs no faster), so E is at least the rest after
// the answer leaves; a follower that forwarded the reserve counts that
// rest from its sending of the call plus the time the leader held it, not
// from the answer's arrival (package node, answer.go: else the way back
// would lengthen it); and the client counts the rest the node answers
// from its request's sending plus the time the node held the request
// (held_ns), which is no later than the node's answer.
//
// Each rate limit's bound holds too: a waiting reserve reserves nothing
// on a rate limit while it waits; at g it is a grant the limit could
// have made alone for a request arriving at t* >= Query(g, n), which is
// bucket's "Serving at a chosen time".
//
// A worked example.
//
// Cap 1, TTL 2 s; A, B and C reserve it (max wait 5 s each, for B and C):
//
//	time    entry                  queue    outcome
//	0       reserve A              -        A granted, hold until 2 s
//	5 ms    reserve B              B        B queued, deadline 5.005 s
//	10 ms   reserve C              B C      C queued, deadline 5.01 s
//	100 ms  release A              C        A frees 1; B granted at 100 ms,
//	                                        hold until 2.1 s
//	2.1 s   no-op (B's hold lapses)  -      C granted at 2.1 s, hold until 4.1 s
//
// Without the queue, B was granted on arrival for 2 s (when A's hold would
// lapse), A's release at 100 ms freed a slot nobody took, and C was
// refused until 4 s.
//
// # Concurrency
//
// raft calls Apply, Snapshot and Restore from one goroutine. The read
// methods (Limit, Limits, AppliedIndex, LastNowNanos, DedupEntries,
// StateHash, Leases, LeasePool, LeaseAccounts) may be called from any
// goroutine; a sync.RWMutex orders them with Apply, which holds the write
// lock for one entry.
//
// # Files
//
// Each file opens with what it owns. By concept:
//
//   - the machine: fsm.go (the state, Apply, the read, snapshot and
//     restore API);
//   - commands and log entries: command.go (types and payloads),
//     validate.go (bounds and checks), encode.go and decode.go (entries),
//     primitives.go (the byte-level encodings entries and snapshots are
//     built of);
//   - limits: limit.go (a limit, its put, delete and reserves), names.go
//     (the limits in name order, and those in shadow mode or leased),
//     limitspage.go and limitnames.go (reads of many limits), result.go
//     (what Apply answers to them), expiredgrants.go (Counters),
//     template.go (templates, their keys and the drop of idle ones);
//   - deduplication: dedup.go (request IDs), sessions.go and
//     sessiontable.go (client sessions);
//   - leases: lease.go (vocabulary and views), leasebook.go (the book and
//     how it changes), leasegrant.go and shares.go (the size of a grant),
//     leaseops.go (the commands as Apply decides them), leasecodec.go
//     (their log entries);
//   - reservations: multi.go (deciding a reserve in the reservation form),
//     reservation.go (the table and its holds), settle.go (settlements,
//     releases, late refunds), waitqueue.go and waiters.go (Waiting);
//   - snapshots: snapshot.go (layout, header, limits), dedupsnapshot.go,
//     sessionsnapshot.go, leasesnapshot.go, reservationsnapshot.go.
package fsm

// doc.go holds only the package comment above, the package's design essay
// (the model, the bounds and their proofs), hence its length.
