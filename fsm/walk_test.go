package fsm

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/bucket"
)

// The reachable-state walk: seeded random sequences of every command the
// register accepts — puts that raise and lower rates, change algorithms and
// options, deletes and re-creates, lease policies on and off and with new
// capacities, leases, renews, returns (valid, stale, over-reported),
// reserve batches with fresh and repeated request IDs, noops, and time that
// jumps forward, stands still or is stamped behind the timeline. After
// every step it checks that the state
//
//   - keeps the lease book's conservation and indexes (checkBook),
//   - closed no live session and keeps its session table's lists and
//     counts, and answered another owner's reserve of a session as a
//     session not open, changing nothing (walk_sessions_test.go),
//   - keeps every in-flight cap's bound at every instant, by the
//     register's live reservations, across puts, algorithm changes,
//     deletes and re-creations (checkCapBound, walk_caps_test.go),
//   - snapshots to bytes that restore into a fresh FSM, and that the
//     restored copy snapshots to exactly the same bytes,
//   - and, continued with the same next command, answers exactly as the
//     original does (the restored copy then replaces the previous twin, so
//     every step's snapshot is continued from).
//
// A failure prints its seed and step; -walk.seed=N replays one seed.

var (
	walkSeeds = flag.Int("walk.seeds", 400, "number of seeds the reachable-state walk runs")
	walkSteps = flag.Int("walk.steps", 250, "steps per seed of the reachable-state walk")
	walkSeed  = flag.Int64("walk.seed", -1, "run only this seed of the reachable-state walk")
)

func TestReachableStateWalk(t *testing.T) {
	seeds := make([]uint64, 0, *walkSeeds)
	if *walkSeed >= 0 {
		seeds = append(seeds, uint64(*walkSeed))
	} else {
		for s := range *walkSeeds {
			seeds = append(seeds, uint64(s))
		}
	}
	kinds := map[string]int{}
	for _, seed := range seeds {
		w := newWalker(t, seed)
		for step := range *walkSteps {
			labels := w.step()
			for _, l := range labels {
				kinds[l]++
			}
			kind := labels[0]
			if t.Failed() {
				t.Fatalf("seed %d step %d (%s) failed; replay with: go test ./fsm -run TestReachableStateWalk -walk.seed=%d -walk.steps=%d",
					seed, step, kind, seed, step+1)
			}
		}
	}
	t.Logf("templated keys: %d created (%d re-created after a drop), %d dropped (%d compared with a register that keeps them), %d steps checked a key's bound across a drop, %d reserves answered keys full",
		kinds["key-created"], kinds["key-recreated"], kinds["key-dropped"], kinds["key-dropped-compared"], kinds["key-bound-across-drop"], kinds["keys-full"])
	if *walkSeed < 0 {
		// Guard against a walk that no longer reaches what it is meant to.
		for _, k := range walkKinds {
			if kinds[k] == 0 {
				t.Errorf("weak walk: no %q step in %v", k, kinds)
			}
		}
	}
}

// walkKinds names every kind of step the walk takes.
var walkKinds = []string{
	"put-new", "put-rate", "put-algorithm", "delete", "policy-on", "policy-capacity", "policy-off",
	"lease", "renew", "renew-kept", "renew-overkept", "renew-stale", "return", "reserve", "reserve-replay", "noop",
	"open-session", "session-replay", "session-expired", "stale-stamp",
	"time-jump", "time-back", "lease-batch",
	"lease-granted", "renew-granted", "returned", "fenced", "reserve-granted", "reserve-refused",
	"tracked", "tracked-granted", "tracked-refused", "settle", "settled", "settle-refund", "settle-charge",
	"settle-replay", "settle-conflict", "settle-forbidden", "release", "released", "put-shadow",
	"cap-carried", "queued", "queued-replay", "waiter-granted", "waiter-refused", "withdrawn",
	"withdraw-id", "withdrawn-id", "handed-over", "waiters-full", "withdraw-kept",
}

// walker drives one FSM and its twin (restored from the previous step's
// snapshot) with the same commands.
type walker struct {
	t     *testing.T
	seed  uint64
	rng   *rand.Rand
	f     *FSM
	twin  *FSM
	index uint64
	now   int64
	// live are the grants the walk knows of, by lease ID: what a renew or
	// return reports on.
	live map[uint64]LeaseResult
	// ids are request IDs already used, so that some commands repeat one.
	ids []string
	seq int
	// fresh makes an empty FSM with the walk's dedup retention.
	fresh func() *FSM
	// term is the raft term entries are appended in; staleTerm, when not
	// 0, the term the next entry was stamped in (an entry that waited
	// across a change of leadership).
	term, staleTerm uint64
	// sessions are the sessions the walk opened, with their next seq and
	// acknowledgement; uses are the reserves of sessions in the entry
	// being built (walk_sessions_test.go).
	sessions []walkSession
	uses     []walkSessionUse
	// reservations are reservation IDs granted to the walk, with their
	// owners (the last 32).
	reservations []walkReservation
	// lastSettle is the walk's latest settlement, which it retries now
	// and then.
	lastSettle *Settle
	// audit is what the answers promised (walkaudit_test.go).
	audit walkAudit
	// steps counts the steps taken; ledger records the enforced in-flight
	// holds granted (walk_caps_test.go).
	steps  int
	ledger capLedger
	// waiters are the reservations waiting in caps' queues, as the walk
	// saw them queued (walk_waiters_test.go); capHeavy (every third seed)
	// makes most limits in-flight caps and most tracked reserves wait.
	waiters  map[uint64]walkWaiter
	capHeavy bool
	// grantedIDs are the request IDs of the latest tracked grants that
	// hold in-flight permits, which tracked reserves now and then retry.
	grantedIDs []string
	// justRetried is the request ID of a waiting reserve the previous
	// step retried: the next step may withdraw it (the node whose client
	// went away, after the client's retry).
	justRetried string
	// keyAudit follows the templated keys (walk_templates_test.go);
	// keeper, on every fifth seed, is a register that keeps every key,
	// fed the same log, which must answer alike.
	keyAudit keyAudit
	keeper   *FSM
}

// walkReservation is a reservation the walk was granted.
type walkReservation struct {
	id    uint64
	owner string
	parts []Part
}

// walkSession is a client session of the walk, with its owner.
type walkSession struct {
	id, nextSeq, acked uint64
	owner              string
}

// stamp returns the stamp of the next entry: the walk's time in the
// current term, or in an older one.
func (w *walker) stamp() Stamp {
	if w.staleTerm != 0 {
		return Stamp{Nanos: w.now, Term: w.staleTerm}
	}
	return Stamp{Nanos: w.now, Term: w.term}
}

var walkNames = []string{"a", "b", "c"}

// newWalker starts a walk. Every fourth seed runs an FSM with a small dedup
// table (16 IDs for 30 s), so that eviction by size and by age is walked
// too.
func newWalker(t *testing.T, seed uint64) *walker {
	w := &walker{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x5eed)), live: map[uint64]LeaseResult{}, term: 1, audit: newWalkAudit()}
	w.fresh = New
	if seed%4 == 0 {
		w.fresh = func() *FSM { return newFSM(int64(30*time.Second), 16) }
	}
	if smallSessions(seed) {
		w.fresh = func() *FSM { return New().withSessionCaps(walkMaxSessions, walkMaxSessionResults) }
	}
	w.capHeavy = seed%3 == 1
	if smallQueues(seed) {
		base := w.fresh
		w.fresh = func() *FSM { return base().withWaiterCaps(walkMaxWaiters, walkMaxOwnerWaiters) }
	}
	w.f, w.twin = w.fresh(), w.fresh()
	if keepsKeys(seed) {
		w.keeper = w.fresh().keepingIdleKeys()
	}
	return w
}

// step applies one random command to both FSMs, compares their answers,
// then checks the state and makes the twin a restored copy of it. It
// returns labels of what the step did: the command first, then how time
// moved and the outcome, when the walk counts them.
func (w *walker) step() []string {
	w.t.Helper()
	moved := w.advance()
	w.staleTerm = 0
	switch p := w.rng.IntN(100); {
	case p < 3:
		w.term++ // a new leader
	case p < 6 && w.term > 1:
		w.staleTerm = w.term - 1 - w.rng.Uint64N(w.term-1)
	}
	w.uses = w.uses[:0]
	kind, data := w.command()
	w.justRetried = ""
	labels := []string{kind}
	if moved != "" {
		labels = append(labels, moved)
	}
	if w.staleTerm != 0 {
		labels = append(labels, "stale-stamp")
	}
	if CommandType(data[0]) == CmdLeaseBatch {
		labels = append(labels, "lease-batch")
	}
	w.index++
	l := &raft.Log{Index: w.index, Term: w.term, Type: raft.LogCommand, Data: data}
	before, lastReservation := w.trackedStates(data), w.f.st.reservations.lastID
	live, limits, used := w.liveSessions(), w.sessionLimitStates(data), w.sessionsUsed()
	limitsBefore := w.auditLimits()
	capsBefore := w.caps()
	keysBefore := w.keyStates()
	got := w.f.Apply(l)
	w.fixCreatedKeys(limitsBefore, l.Index)
	if len(w.f.st.decided) == 0 {
		// (Waiters granted by the entry before its command change limits.)
		w.checkRefusedChangesNothing(kind, data, got, before, lastReservation)
		w.checkUndecidedChangesNothing(kind, got, limits)
	}
	w.checkKeeper(kind, l, got)
	w.checkNoLiveSessionClosed(kind, live)
	if l := w.checkSessionUses(kind, got, used); l != "" {
		labels = append(labels, l)
	}
	w.steps++
	labels = append(labels, w.checkCapBound(kind, w.steps, capsBefore)...)
	twin := w.twin.Apply(&raft.Log{Index: l.Index, Term: l.Term, Type: l.Type, Data: data})
	if !reflect.DeepEqual(got, twin) {
		w.t.Errorf("seed %d: %s: the FSM answered %+v, its copy restored from the previous snapshot %+v", w.seed, kind, got, twin)
		return labels
	}
	decided, twinDecided := w.f.TakeWaiterDecisions(), w.twin.TakeWaiterDecisions()
	if !reflect.DeepEqual(decided, twinDecided) {
		w.t.Errorf("seed %d: %s: the FSM decided waiters %+v, its copy restored from the previous snapshot %+v", w.seed, kind, decided, twinDecided)
		return labels
	}
	if outcome := w.observe(data, got); outcome != "" {
		labels = append(labels, outcome)
	}
	// The waiters' decisions are answers too: tallied before the audit
	// compares the counters with the answers, and before the keys the
	// entry drops go (the waiters were decided first).
	waiterGrants := w.waiterGrants(decided)
	labels = append(labels, w.checkWaiters(kind, l.Index, decided, capsBefore, limitsBefore)...)
	labels = append(labels, w.keyLifecycle(data, got, keysBefore, l.Index)...)
	labels = append(labels, w.auditKeyBounds(data, got, waiterGrants)...)
	labels = append(labels, w.auditStep(l.Index, data, got, limitsBefore)...)
	checkBook(w.t, w.f, false)
	checkSessionTable(w.t, w.f)
	checkConfigTable(w.t, w.f)
	snap := snapshotBytes(w.t, w.f)
	next := w.fresh()
	if err := restore(next, snap); err != nil {
		w.t.Errorf("seed %d: %s: the snapshot taken after it does not restore: %v", w.seed, kind, err)
		return labels
	}
	checkConfigTable(w.t, next)
	if again := snapshotBytes(w.t, next); !bytes.Equal(again, snap) {
		w.t.Errorf("seed %d: %s: the restored copy snapshots to other bytes", w.seed, kind)
		return labels
	}
	if tw := snapshotBytes(w.t, w.twin); !bytes.Equal(tw, snap) {
		w.t.Errorf("seed %d: %s: the copy restored from the previous snapshot diverged", w.seed, kind)
		return labels
	}
	w.twin = next
	return labels
}

// command picks the next command and encodes it.
func (w *walker) command() (string, []byte) {
	r := w.rng
	name := w.pickName()
	var (
		b   []byte
		err error
	)
	kind := ""
	if r.IntN(40) == 0 {
		return w.expiredGrants()
	}
	if r.IntN(20) == 0 {
		return w.templateCommand()
	}
	if w.justRetried != "" {
		if k, b, ok := w.withdrawRetried(); ok {
			return k, b
		}
	}
	switch p := r.IntN(100); {
	case p < 10:
		kind = "put-new"
		if _, ok := w.f.Limit(name); ok {
			kind = "put-algorithm"
		}
		put := PutLimit{Name: name, Config: w.randomConfig(w.algorithm()), Shadow: r.IntN(6) == 0}
		if put.Shadow {
			kind = "put-shadow"
		}
		b, err = AppendPut(nil, w.stamp(), put)
	case p < 20:
		kind = "put-rate"
		info, ok := w.f.Limit(name)
		alg := w.algorithm()
		if ok {
			alg = info.Config.Spec.Algorithm
		}
		b, err = AppendPut(nil, w.stamp(), PutLimit{Name: name, Config: w.randomConfig(alg), Shadow: ok && info.Shadow && r.IntN(3) > 0})
	case p < 24:
		kind = "delete"
		b, err = AppendDelete(nil, w.stamp(), DeleteLimit{Name: name, Force: r.IntN(2) == 0})
	case p < 30:
		kind = "policy-on"
		pol := LeasePolicy{Limit: name, Leased: true}
		if _, ok := w.f.LeasePool(name); ok {
			kind = "policy-capacity"
		}
		if r.IntN(2) == 0 {
			pol.BurstPermits = 1 + r.Int64N(200)
			pol.MaxOutstandingPermits = 1 + r.Int64N(200)
		}
		b, err = AppendLeasePolicy(nil, w.stamp(), pol)
	case p < 33:
		kind = "policy-off"
		b, err = AppendLeasePolicy(nil, w.stamp(), LeasePolicy{Limit: name})
	case p < 45:
		kind = "lease"
		holder := fmt.Sprintf("h%d", r.IntN(6))
		b, err = AppendLease(nil, w.stamp(), Lease{Limit: name, Holder: holder, Group: fmt.Sprintf("g%d", r.IntN(3)),
			Weight: 1 + r.Int64N(3), DemandMilliPermitsPerSec: r.Int64N(2_000_000), TTLNanos: w.ttl(), RequestID: w.requestID()})
	case p < 62:
		kind = "renew"
		g, ok := w.anyGrant()
		if !ok {
			return w.noop()
		}
		spent, out := w.report(g)
		q := Renew{Report: Report{Limit: w.limitOf(g), LeaseID: g.LeaseID, Epoch: g.Epoch, SpentPermits: spent, StolenOutPermits: out, StolenInPermits: r.Int64N(3)}, DemandMilliPermitsPerSec: r.Int64N(2_000_000), TTLNanos: w.ttl(), RequestID: w.requestID()}
		switch left := g.Permits - spent - out; {
		case r.IntN(10) == 0:
			kind = "renew-overkept"
			q.KeptPermits = max(0, left) + 1 + r.Int64N(3)
		case left > 0 && r.IntN(2) == 0:
			kind = "renew-kept"
			q.KeptPermits = 1 + r.Int64N(left)
		}
		if r.IntN(8) == 0 {
			kind = "renew-stale"
			q.Epoch += uint64(1 + r.IntN(2))
		}
		b, err = AppendRenew(nil, w.stamp(), q)
	case p < 67:
		kind = "return"
		g, ok := w.anyGrant()
		if !ok {
			return w.noop()
		}
		spent, out := w.report(g)
		b, err = AppendReturn(nil, w.stamp(), Return{Report: Report{Limit: w.limitOf(g), LeaseID: g.LeaseID, Epoch: g.Epoch, SpentPermits: spent, StolenOutPermits: out}, RequestID: w.requestID()})
	case p < 78:
		return w.tracked()
	case p < 84:
		return w.settle()
	case p < 87:
		return w.release()
	case p < 95:
		kind = "reserve"
		n := 1 + r.IntN(4)
		rs := make([]Reserve, n)
		st := w.stamp()
		for i := range rs {
			rs[i] = Reserve{Limit: w.pickName(), Permits: 1 + r.Int64N(4), MaxWaitNanos: w.maxWait()}
			if len(w.sessions) > 0 && r.IntN(3) == 0 {
				rs[i].Session, rs[i].Owner = w.sessionRef(i)
			} else {
				rs[i].RequestID = w.requestID()
			}
			if r.IntN(2) == 0 {
				w.now += r.Int64N(int64(50 * time.Millisecond)) // arrivals spread over the batch
			}
			rs[i].ArrivedNanos = w.now
		}
		b, err = AppendReserveBatch(nil, st, rs)
	case p < 97:
		return w.openSession()
	default:
		return w.noop()
	}
	if err != nil {
		w.t.Fatalf("seed %d: %s: encoding failed: %v", w.seed, kind, err)
	}
	if e, _ := Decode(b); (e.Type == CmdLease || e.Type == CmdRenew || e.Type == CmdReturn) && r.IntN(3) == 0 {
		b = w.leaseBatch(e)
	}
	return kind, b
}

// leaseBatch turns lease command e into a CmdLeaseBatch that carries it
// first, arrived at the walk's time, then up to two renewals or returns
// of known grants (perhaps of the same lease: the later one is then
// fenced), each arriving a little later or at the same time.
func (w *walker) leaseBatch(e Entry) []byte {
	r := w.rng
	cs := []LeaseCommand{{Kind: e.Type, Lease: e.Lease, Renew: e.Renew, Return: e.Return, ArrivedNanos: w.now}}
	for range r.IntN(3) {
		g, ok := w.anyGrant()
		if !ok {
			break
		}
		if r.IntN(2) == 0 {
			w.now += r.Int64N(int64(50 * time.Millisecond))
		}
		spent, out := w.report(g)
		rep := Report{Limit: w.limitOf(g), LeaseID: g.LeaseID, Epoch: g.Epoch, SpentPermits: spent, StolenOutPermits: out}
		c := LeaseCommand{Kind: CmdReturn, Return: Return{Report: rep, RequestID: w.requestID()}, ArrivedNanos: w.now}
		if r.IntN(3) > 0 {
			c = LeaseCommand{Kind: CmdRenew, Renew: Renew{Report: rep, DemandMilliPermitsPerSec: r.Int64N(2_000_000), TTLNanos: w.ttl(), RequestID: w.requestID()}, ArrivedNanos: w.now}
		}
		cs = append(cs, c)
	}
	b, err := AppendLeaseBatch(nil, e.Stamp, cs)
	if err != nil {
		w.t.Fatalf("seed %d: encoding a lease batch: %v", w.seed, err)
	}
	return b
}

func (w *walker) noop() (string, []byte) { return "noop", AppendNoop(nil, w.stamp()) }

// advance moves the walk's clock: mostly small steps, sometimes none,
// sometimes a jump of minutes (past TTLs and the dedup window), sometimes a
// stamp behind the timeline (which Apply clamps). It names the jumps.
func (w *walker) advance() string {
	r := w.rng
	switch p := r.IntN(100); {
	case p < 10:
	case p < 85:
		w.now += r.Int64N(int64(300 * time.Millisecond))
	case p < 93:
		w.now += r.Int64N(int64(20 * time.Second))
	case p < 97:
		w.now += int64(time.Duration(1+r.IntN(12)) * time.Minute)
		return "time-jump"
	default:
		w.now = max(w.now-r.Int64N(int64(2*time.Second)), 0)
		return "time-back"
	}
	return ""
}

// randomConfig draws a config of algorithm a: rates from one per minute to
// a million per second, with the algorithm's options varied.
func (w *walker) randomConfig(a bucket.Algorithm) bucket.Config {
	r := w.rng
	rates := []float64{1.0 / 60, 0.5, 1, 3, 10, 250, 1000, 5000, 1e6}
	pers := []time.Duration{time.Second, 6 * time.Second, time.Minute, 100 * time.Millisecond}
	s := bucket.Spec{Algorithm: a, Rate: rates[r.IntN(len(rates))], Per: pers[r.IntN(len(pers))]}
	switch a {
	case bucket.Strict:
		s.MaxReserved = r.Int64N(4)
		if r.IntN(2) == 0 {
			s.Expiry = time.Duration(1 + r.Int64N(int64(time.Second)))
		}
	case bucket.Bursty:
		s.MaxBurstSeconds = []float64{0, 0.5, 1, 10}[r.IntN(4)]
	case bucket.WarmingUp:
		s.Warmup = time.Duration(1 + r.Int64N(int64(20*time.Second)))
		s.ColdFactor = []float64{0, 1, 2, 7}[r.IntN(4)]
	case bucket.Concurrency:
		s = bucket.Spec{Algorithm: a, MaxInFlight: 1 + r.Int64N(6), HoldTTL: time.Duration(r.Int64N(int64(30 * time.Second)))}
		if smallQueues(w.seed) {
			// Caps that fill, and stay full: their queues fill too.
			s.MaxInFlight, s.HoldTTL = 1, time.Duration(r.Int64N(int64(5*time.Minute)))
		}
	case bucket.Hybrid:
		s.BurstRatio = []float64{0, 1, 1.5, 3}[r.IntN(4)]
		if s.BurstRatio <= 1 && r.IntN(2) == 0 {
			s.Strictness = []float64{0.5, 0.125, 1}[r.IntN(3)]
			if s.Strictness == 1 {
				s.BurstRatio = 0
			}
		}
	}
	c, err := bucket.Compile(s)
	if err != nil {
		w.t.Fatalf("seed %d: Compile(%+v): %v", w.seed, s, err)
	}
	return c
}

func (w *walker) ttl() int64 {
	return MinLeaseTTLNanos + w.rng.Int64N(int64(3*time.Second))
}

func (w *walker) maxWait() int64 {
	if w.rng.IntN(2) == 0 {
		return 0
	}
	return w.rng.Int64N(int64(10 * time.Second))
}

// requestID returns "" a third of the time, a used ID an eighth of the
// time, and a new one otherwise.
func (w *walker) requestID() string {
	r := w.rng
	switch p := r.IntN(24); {
	case p < 8:
		return ""
	case p < 11 && len(w.ids) > 0:
		return w.ids[r.IntN(len(w.ids))]
	}
	w.seq++
	id := fmt.Sprintf("id-%d", w.seq)
	w.ids = append(w.ids, id)
	if len(w.ids) > 64 {
		w.ids = w.ids[1:]
	}
	return id
}

// sessionRef draws a reference in one of the walk's sessions for the
// reserve at place i of the batch, and its sender: usually the session's
// owner, with the next request, sometimes a retry of an earlier one, the
// acknowledgement moving forward now and then; sometimes another owner
// (foreignRef).
func (w *walker) sessionRef(i int) (SessionRef, string) {
	r := w.rng
	ws := &w.sessions[r.IntN(len(w.sessions))]
	if r.IntN(6) == 0 {
		return w.foreignRef(i, ws)
	}
	if r.IntN(3) == 0 && ws.nextSeq > ws.acked {
		ws.acked += r.Uint64N(ws.nextSeq - ws.acked + 1)
	}
	seq, fresh := ws.nextSeq, true
	if r.IntN(5) == 0 && seq > 1 {
		seq, fresh = 1+r.Uint64N(seq-1), false // a retry, maybe of an acknowledged one
	} else {
		ws.nextSeq++
	}
	w.uses = append(w.uses, walkSessionUse{i: i, id: ws.id, fresh: fresh})
	return SessionRef{ID: ws.id, Seq: seq, AckedBelow: min(max(ws.acked, 1), seq)}, ws.owner
}

// anyGrant returns a known grant (live or not: the register decides).
func (w *walker) anyGrant() (LeaseResult, bool) {
	if len(w.live) == 0 {
		return LeaseResult{}, false
	}
	ids := make([]uint64, 0, len(w.live))
	for id := range w.live {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return w.live[ids[w.rng.IntN(len(ids))]], true
}

// limitOf finds the limit a grant's lease is on (the walk keeps it in the
// result's Detail field, which granted results do not use).
func (w *walker) limitOf(g LeaseResult) string { return g.Detail }

// report draws a report on grant g: usually within it, sometimes over it
// (which the register must refuse as Invalid).
func (w *walker) report(g LeaseResult) (spent, out int64) {
	r := w.rng
	if r.IntN(12) == 0 {
		return g.Permits + 1, 0
	}
	if g.Permits == 0 {
		return 0, 0
	}
	spent = r.Int64N(g.Permits + 1)
	out = r.Int64N(g.Permits - spent + 1)
	return spent, out
}

// observe records what the answer tells the walk (grants to report on) and
// names the outcome when it is one the walk must reach.
func (w *walker) observe(data []byte, res any) string {
	e, err := Decode(data)
	if err != nil {
		w.t.Fatalf("seed %d: decoding the walk's own entry: %v", w.seed, err)
	}
	switch v := res.(type) {
	case LeaseResult:
		return w.observeLease(LeaseCommand{Kind: e.Type, Lease: e.Lease, Renew: e.Renew, Return: e.Return}, v)
	case []LeaseResult:
		outcome := ""
		for i, lr := range v {
			if o := w.observeLease(e.LeaseBatch[i], lr); outcome == "" {
				outcome = o
			}
		}
		return outcome
	case SessionResult:
		return w.observeOpen(data, v)
	case SettleResult:
		return w.observeSettle(v)
	case ReleaseResult:
		if e.Type == CmdWithdraw {
			if l := w.checkWithdrawGrace(e.Withdraw, v, w.f.st.lastNowNanos); l != "" {
				return l
			}
		}
		if v.Status == Settled && !v.Duplicate && v.Released > 0 {
			return "released"
		}
		if v.Status == Settled && v.Detail != "" && e.Type == CmdWithdraw {
			return "withdrawn-id"
		}
		if v.Status == Settled && v.Detail != "" {
			return "withdrawn"
		}
	case []ReserveResult:
		tracked := ""
		for i, rr := range v {
			if e.Reserves[i].Track {
				// Every tracked result is observed (a grant or a queued
				// reserve is recorded); the first outcome names the step.
				o := w.observeTracked(e.Reserves[i], rr)
				if tracked == "" {
					tracked = o
				}
				if o == "waiters-full" {
					w.checkBusyNotRecorded(e.Reserves, i)
				}
				if len(v) == 1 {
					w.checkArrivalBlocked(e.Reserves[i], rr)
				}
				continue
			}
			if tracked != "" {
				return tracked
			}
			switch {
			case rr.Status == Busy && e.Reserves[i].Session.ID != 0:
				return "session-busy"
			case rr.Status == SessionExpired:
				return "session-expired"
			case rr.Duplicate && e.Reserves[i].Session.ID != 0:
				return "session-replay"
			case rr.Duplicate:
				return "reserve-replay"
			case rr.Status == Granted && e.Reserves[i].Permits > 1:
				return "reserve-granted"
			case rr.Status == Refused:
				return "reserve-refused"
			}
		}
		return tracked
	}
	return ""
}

// observeLease notes what lease command c's result v tells of the live
// grants, and names its outcome.
func (w *walker) observeLease(c LeaseCommand, v LeaseResult) string {
	switch v.Status {
	case LeaseGranted:
		v.Detail = c.Limit()
		w.live[v.LeaseID] = v
		if v.Duplicate {
			return ""
		}
		if c.Kind == CmdLease {
			return "lease-granted"
		}
		return "renew-granted"
	case LeaseReturned:
		delete(w.live, v.LeaseID)
		return "returned"
	case LeaseFenced:
		if c.Kind == CmdRenew {
			delete(w.live, c.Renew.LeaseID)
		}
		return "fenced"
	}
	return ""
}

// walkAlgorithms is how many algorithms the walk's puts draw from.
const walkAlgorithms = 5

// walkOwners are the owners tracked reserves and settlements name.
var walkOwners = []string{"", "o1", "o2"}

// tracked draws a batch of one or two reserves in the reservation form,
// each on one to three distinct limits.
func (w *walker) tracked() (string, []byte) {
	r := w.rng
	st := w.stamp()
	rs := make([]Reserve, 1+r.IntN(2))
	for i := range rs {
		names := w.trackedNames()
		k := w.trackedParts(len(names))
		rs[i] = Reserve{Limit: names[0], Permits: w.trackedPermits(), MaxWaitNanos: w.trackedMaxWait(), RequestID: w.trackedRequestID(),
			Track: true, Owner: walkOwners[r.IntN(len(walkOwners))]}
		for _, n := range names[1:k] {
			rs[i].Also = append(rs[i].Also, Part{Limit: n, Permits: 1 + r.Int64N(3)})
		}
		if r.IntN(2) == 0 {
			rs[i].SettleWithinNanos = 1 + r.Int64N(int64(2*time.Minute))
		}
		rs[i].ArrivedNanos = w.now
	}
	b, err := AppendReserveBatch(nil, st, rs)
	if err != nil {
		w.t.Fatalf("seed %d: tracked: encoding failed: %v", w.seed, err)
	}
	return "tracked", b
}

// anyReservation returns a reservation the walk was granted, or an ID
// nobody was given.
func (w *walker) anyReservation() walkReservation {
	if len(w.reservations) == 0 || w.rng.IntN(10) == 0 {
		return walkReservation{id: 1 + w.rng.Uint64N(1000)}
	}
	return w.reservations[w.rng.IntN(len(w.reservations))]
}

// settle draws a settlement of a known reservation: some of its limits
// used fewer permits, some more, now and then by the wrong owner or a
// limit it does not hold, sometimes retried with a used request ID.
func (w *walker) settle() (string, []byte) {
	if w.capHeavy && w.rng.IntN(2) == 0 {
		return w.release()
	}
	r := w.rng
	if w.lastSettle != nil && r.IntN(4) == 0 {
		b, err := AppendSettle(nil, w.stamp(), *w.lastSettle) // a retry
		if err != nil {
			w.t.Fatalf("seed %d: settle: encoding failed: %v", w.seed, err)
		}
		return "settle", b
	}
	rv := w.anyReservation()
	c := Settle{Reservation: rv.id, RequestID: w.requestID(), Owner: rv.owner}
	w.lastSettle = &c
	if r.IntN(8) == 0 {
		c.Owner = walkOwners[r.IntN(len(walkOwners))]
	}
	for _, p := range rv.parts {
		if r.IntN(3) == 0 {
			continue
		}
		c.Actual = append(c.Actual, Part{Limit: p.Limit, Permits: r.Int64N(p.Permits + 3)})
	}
	if r.IntN(12) == 0 {
		c.Actual = append(c.Actual, Part{Limit: "zz", Permits: 1})
	}
	b, err := AppendSettle(nil, w.stamp(), c)
	if err != nil {
		w.t.Fatalf("seed %d: settle: encoding failed: %v", w.seed, err)
	}
	return "settle", b
}

// release draws a release of a known reservation.
func (w *walker) release() (string, []byte) {
	if kind, b, ok := w.withdrawByID(); ok {
		return kind, b
	}
	rv := w.anyReservation()
	if held, ok := w.holdingReservation(); ok {
		rv = held
	}
	if waiting, ok := w.waitingReservation(); ok {
		rv = waiting
	}
	owner := rv.owner
	if w.rng.IntN(8) == 0 {
		owner = walkOwners[w.rng.IntN(len(walkOwners))]
	}
	b, err := AppendRelease(nil, w.stamp(), Release{Reservation: rv.id, Owner: owner})
	if err != nil {
		w.t.Fatalf("seed %d: release: encoding failed: %v", w.seed, err)
	}
	return "release", b
}

// observeTracked notes a reservation granted to reserve q and names the
// outcome.
func (w *walker) observeTracked(q Reserve, rr ReserveResult) string {
	switch {
	case rr.Duplicate && rr.Status == Queued:
		w.retried(rr)
		return "queued-replay"
	case rr.Duplicate:
		// The first command with this request ID decided (perhaps an
		// untracked reserve): its answer is replayed as it was.
	case rr.Status == Queued:
		w.queued(q, rr)
		return "queued"
	case rr.Status == Granted && rr.ReservationID == 0:
		w.t.Errorf("seed %d: a tracked reserve was granted without a reservation id: %+v", w.seed, rr)
	case rr.Status == Granted:
		w.reservations = append(w.reservations, walkReservation{id: rr.ReservationID, owner: q.Owner, parts: q.Parts()})
		if len(w.reservations) > 32 {
			w.reservations = w.reservations[1:]
		}
		if q.RequestID != "" && rr.Holds {
			w.grantedIDs = append(w.grantedIDs, q.RequestID)
			if len(w.grantedIDs) > 16 {
				w.grantedIDs = w.grantedIDs[1:]
			}
		}
		return "tracked-granted"
	case rr.Status == Busy && rr.Detail != "" && !rr.Duplicate:
		return w.checkWaitersFull(q, rr)
	case rr.Status == Refused && rr.Blocking == "":
		w.t.Errorf("seed %d: a tracked reserve was refused without naming the blocking limit: %+v", w.seed, rr)
	case rr.Status == Refused:
		return "tracked-refused"
	}
	return ""
}

// observeSettle names a settlement's outcome.
func (w *walker) observeSettle(v SettleResult) string {
	switch v.Status {
	case Settled:
		if v.Duplicate {
			return "settle-replay"
		}
		for _, p := range v.Parts {
			if p.Refunded > 0 {
				return "settle-refund"
			}
			if p.Charged > 0 {
				return "settle-charge"
			}
		}
		return "settled"
	case SettleConflict:
		return "settle-conflict"
	case SettleForbidden:
		return "settle-forbidden"
	}
	return ""
}

// trackedStates returns, for an entry carrying one tracked reserve, the
// pacer states of the limits it names (nil otherwise).
func (w *walker) trackedStates(data []byte) map[string][]byte {
	e, err := Decode(data)
	if err != nil || e.Type != CmdReserveBatch || len(e.Reserves) != 1 || !e.Reserves[0].Track {
		return nil
	}
	states := map[string][]byte{}
	for _, p := range e.Reserves[0].Parts() {
		if l, ok := w.f.st.limits[p.Limit]; ok {
			states[p.Limit] = l.pacer.AppendState(nil)
		}
	}
	return states
}

// checkRefusedChangesNothing checks that a tracked reserve that was not
// granted left every limit it names as it was and made no reservation.
func (w *walker) checkRefusedChangesNothing(kind string, data []byte, got any, before map[string][]byte, lastReservation uint64) {
	if before == nil {
		return
	}
	rr := got.([]ReserveResult)[0]
	if rr.Status == Granted {
		return
	}
	queued := rr.Status == Queued && !rr.Duplicate // waits, reserving nothing yet
	for name, b := range before {
		l, ok := w.f.st.limits[name]
		if !ok || l.createdIndex == w.index {
			// Expired leases cannot delete a limit; a put would be
			// another entry; a key dropped at the entry's start is
			// created again at rest.
			continue
		}
		if after := l.pacer.AppendState(nil); !bytes.Equal(after, b) {
			w.t.Errorf("seed %d: %s: a tracked reserve answered %+v changed limit %q's state", w.seed, kind, rr, name)
		}
	}
	if w.f.st.reservations.lastID != lastReservation && !queued {
		w.t.Errorf("seed %d: %s: a tracked reserve answered %+v made a reservation", w.seed, kind, rr)
	}
}
