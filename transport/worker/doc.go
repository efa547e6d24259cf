// Package worker is the worker side of permitd's leased path: a process
// that spends permits of a leased limit locally, without a Raft round trip
// per permit, and still keeps the fleet within the limit's over-grant
// bound.
//
// # Model
//
// A Worker is one holder (Config.Name) in one group (Config.Group) of one
// leased limit. It talks to three things:
//
//   - the register (Register: lease, renew, return; transport/client
//     implements it), the only source of truth about permits;
//   - its callers (Acquire, TryAcquire), to whom it hands out permits,
//     paced locally;
//   - its peers, found through memberlist, with whom it trades idle
//     permits (stealing). Gossip carries discovery only: node meta =
//     {group, name, steal address}; no permit count ever travels by gossip.
//
// # Leases
//
// At Start the worker opens a lease (fsm.Lease) reporting a demand, and
// gets a grant: Permits it may spend, its share of the rate, and
// ExpiresInNanos. Every RenewEvery (default TTL/2) it renews (fsm.Renew)
// with a report on the grant (spent, stolen out, stolen in) and its
// demand: the permits its callers asked for per second over the last two
// periods, plus 10 % headroom (see demandMeter), in milli-permits per
// second; if its callers were held back (waiting for pacing or for
// permits) for at least half of those periods, at least twice its share,
// so that closed-loop callers, which ask at the rate they are served,
// reach what they can spend in a few renewals instead of growing by 10 %
// per renewal. (The first lease, before anything is measured, claims the
// maximum: the first grants split the rate by weight.) The register settles the old grant and issues the next; fair
// shares (weighted max-min over groups, then over the leases of a group)
// follow the reported demands.
//
// The holder's deadline is measured on its own monotonic clock (Config.Clock)
// from BEFORE it sent the request:
//
//	localExpiry = sentAt + min(ExpiresInNanos, TTL) - Margin
//
// and a grant's permits are spent only after its answer arrived, only
// until localExpiry, and only until the renew or return that reports on it
// is sent (sending closes the grant; the renew's answer brings the next
// one) — except the permits the renew keeps: the in-flight allowance
// (fsm.Renew.KeptPermits), what the worker could spend at its share until
// localExpiry, at most what is left. Its callers go on spending those while
// the renewal is in flight (a renewal held up by an election does not
// leave them without permits); the register keeps them outstanding and
// makes them the first permits of the next grant, which counts those
// already spent. This is assumption 2 of the over-grant bound (fsm package
// doc): in any window of length W the fleet spends at most
// C + O + floor(W/I) + 1 permits of the limit.
//
// Every command carries a request ID. A call that fails without an answer
// is retried with the same ID and payload, so that a command applied once
// is answered from the register's dedup table (a replayed answer's expiry
// is counted from the retry's send time). A failure is ambiguous (the
// command may have been applied), so the grant stays closed, unless the
// Register says the request was never delivered (ErrNotDelivered) and no
// earlier send of it failed ambiguously: then the grant reopens and is
// spent until its local expiry. (ErrNotDelivered speaks of one send only:
// after an ambiguous one the register may have applied the request and
// credited the grant back, so the grant stays closed and the same request
// is resent.) A Fenced answer
// (the lease expired or the epoch moved on) makes the worker lease again.
//
// Cut off from the register, a worker keeps spending its unexpired grant
// (if its renewals were not delivered) and permits stolen from peers, for
// at most StealGrace after its last good renewal. A caller that finds no
// permit then waits (TryAcquire returns false, a sidecar answers 429 with
// Retry-After) as long as the register has left the worker's calls
// unanswered for less than UnreachableAfter (default 3 s, whatever the
// TTL), counted from the send of the first call it has not answered since
// its last answer: an election of the register's usual length is not an
// outage, however short the TTL. After that the worker fails closed:
// Acquire returns an error wrapping ErrNoPermits and
// ErrRegisterUnreachable that says how long the register has been silent
// and how long ago the last good renewal was (a sidecar answers 503).
// The rule changes only what a refusal says: in both cases nothing is
// spent beyond what the worker holds under a live grant.
//
// # Local pacing
//
// The permits are spread over time by a bucket hybrid pacer
// (bucket/hybrid.go) on the worker's monotonic clock, at the worker's share:
// a worker that fell behind catches up at BurstRatio (default 1.5) times
// the share, never beyond. The pacer only spreads; the grant's count (a
// plain counter under the worker's lock) is the hard cap, and permits are
// debited at the instant they are handed out, after the pacing wait.
//
// Why the share and not permits/(localExpiry - now): a grant holds about
// share*min(TTL, O*I) permits but is replaced after RenewEvery, when its
// unspent rest is credited back. Spreading it over its whole lifetime
// would spend TTL/(TTL-Margin) times the share (or less than the share
// when O*I < TTL), every worker would over-ask, the register's free pool
// would run dry and grants would go to whoever renews first instead of by
// the fair division. Paced at the share, a saturated worker spends exactly
// its share.
//
// A pacing wait of at most 200 µs (paceSlackNanos) is not slept: the
// permits are handed out up to that long before their slot (a timer sleep
// that short oversleeps, and a caller behind catches up at BurstRatio
// only, so sleeping for every slot of a share of tens of thousands per
// second would spend well below it). The slots still advance at the share.
//
// The catch-up is bounded to recent delays: at every grant, if more than a
// quarter of a renewal period is unclaimed (callers idle, asking less than
// the share, or no permits), the pacer starts afresh. Time left unclaimed
// under earlier grants was paid for by permits the renewals credited back;
// catching it up later, at a new share, would take more than the share
// for a long time.
//
// # Stealing
//
// A worker is short when what it may spend (open grant plus stolen lots)
// covers less than three quarters of its pace until its next grant, or
// less than what blocked callers wait for; a worker cut off from the
// register looks one period ahead and steals only within StealGrace of its
// last good renewal. It then asks peers, one at a time, members of its own
// group first, then other groups (each part in random order), over
// memberlist's reliable user messages (SendReliable / NotifyMsg): request
// {id, limit, from, group, want}, answer {id, limit, from, permits,
// validFor, donor lease and epoch}.
//
// The donor's spare is what its open grant holds beyond its own need: its
// pace (share, or its recent demand if lower) until the grant is replaced
// and over one more renewal period, plus what its blocked callers wait
// for. The extra period is a reserve: permits given away stay outstanding
// at the register until the grant's expiry, so when the limit's
// MaxOutstandingPermits binds they come out of the next grants. A
// saturated worker thus gives nothing, one whose callers went quiet nearly
// its whole grant. The own group may take all the spare; another group
// what is left after the donor keeps ceil(StealBias * spare) (StealBias
// default 0.5). The donor DEBITS ITSELF BEFORE SENDING (stolen out, under
// its lock) and measures validFor = its grant's local expiry - now on its
// own clock. The taker spends the lot until
// (the time it sent the request) + validFor: it starts counting before the
// donor measured, so its deadline is never later than the donor's
// (assumption 3 of the bound; counting from the receipt instead would add
// the answer's transit time). A lost request costs nothing, a lost answer
// loses the permits it carried, and an answer is accepted at most once
// (matched to its pending request), so nothing is ever duplicated. Steals
// are reported at the next renewal: StolenOut by the donor (the register
// keeps them outstanding until the donor's grant expires), StolenIn by the
// taker (informational).
//
// # Membership
//
// The worker joins Config.Join at Start and, every RejoinEvery (default
// 5 s), again while it is alone. When the member count drops, only the
// (at most) three members whose names hash lowest among the live ones join
// the seeds again, every RejoinEvery until a seed answers or the count is
// back (every member did: one
// departure in a fleet of N was N exchanges of the whole member list with
// each seed). So a half cut off from every seed for longer than memberlist
// gossips to the dead merges when the network heals; halves that each keep
// a seed are not merged by the rejoin.
//
// Small fleets should gossip with a short PushPullInterval: a join is
// spread by a few gossip retransmissions only, which a member of a small
// cluster can miss until the next push/pull (30 s by default).
// memberlist's MockNetwork works for a few workers (tests use it), but its
// transports hand packets over unbuffered channels, so two members
// answering each other's probes from their packet handlers can block each
// other for good; fleets in tests gossip on loopback instead.
//
// # Metrics
//
// Stats (and OnStats after every register answer) give the worker's
// counters for its limit and group: leased, spent, stolen in and out,
// credited back, expired unused, outstanding, current share; Status adds
// the lease, the grant and the members by group. sidecar.WorkerMetrics
// exports them to Prometheus (the sidecar serves them on GET /metrics).
//
// # Performance
//
// BenchmarkLeased (bench_test.go; go test -run '^$' -bench Leased
// -benchtime 3s ./transport/worker/) runs 8 workers, one closed-loop caller
// each, against the in-process register (a real fsm.FSM, one log entry
// per lease, renew or return). On the 2-vCPU development VM (median of 3):
// 5.5 million permits/s at one permit per Acquire on a 50 000 000/s limit,
// with 0.006 register entries per 1 000 permits; 100.4 % of a 200 000/s
// limit the workers saturate. The performance manual
// (cmd/internal/bench/README.md, "Leased path") has the table.
package worker
