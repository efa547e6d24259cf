package fsm

import (
	"crypto/sha256"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/hashicorp/raft"
)

// fsm.go: the FSM: the replicated state, Apply (the entry's cluster time
// first, then its command), how a reserve finds its session, its recorded
// outcome or its limit, and the read, snapshot and restore API.

// state is everything replicated: what snapshots hold and StateHash covers.
type state struct {
	// lastNowNanos is the cluster time of the latest applied entry, after
	// the clamp; it starts at 0 and never decreases.
	lastNowNanos int64
	appliedIndex uint64
	limits       map[string]*limit
	// configs holds the configs the limits run, shared (limitconfig.go;
	// derived from limits).
	configs configTable
	// names holds the keys of limits, sorted.
	names []string
	// dedup remembers reserve request IDs, leaseDedup lease-command IDs
	// (one ID space: an ID used by one kind is Invalid for the other).
	dedup      dedupTable
	leaseDedup dedupTable
	sessions   sessionTable
	// lastLeaseID is the ID of the latest lease opened (0 if none): lease
	// IDs are 1, 2, 3, ... over all limits, never reused.
	lastLeaseID uint64
	// expiries orders every lease of every limit by its next expiry
	// (derived from the limits' pools; rebuilt by Restore).
	expiries leaseHeap
	// reservations are the live reservations (reservation.go); waits
	// indexes those waiting in in-flight caps' queues (waiters.go).
	reservations reservationTable
	waits        waitQueues
	// templates by prefix, and the keys they created ordered for their
	// drop (template.go); dropKeys is false only in tests that compare
	// with a register that keeps every key, maxTemplatedKeys is
	// MaxTemplatedKeys except in tests.
	templates        map[string]*template
	keys             keyHeap
	dropKeys         bool
	maxTemplatedKeys int
	// decided are the decisions on waiting reservations made since they
	// were last taken (TakeWaiterDecisions). Not replicated: not in
	// snapshots, and a restored state starts without any.
	decided []WaiterDecision
	// keyChanges are the templated keys the latest applied entry created
	// or removed (AppliedKeyChanges). Not replicated, like decided.
	keyChanges []KeyChange
}

func newState(dedupWindowNanos int64, maxDedupEntries int) state {
	return state{
		limits:     make(map[string]*limit),
		configs:    make(configTable),
		dedup:      newDedupTable(dedupWindowNanos, maxDedupEntries, false),
		leaseDedup: newDedupTable(dedupWindowNanos, min(maxDedupEntries, MaxLeaseDedupEntries), true),
		sessions:   newSessionTable(MaxSessions, MaxSessionResults),

		reservations: newReservationTable(),
		waits:        newWaitQueues(),

		templates:        make(map[string]*template),
		dropKeys:         true,
		maxTemplatedKeys: MaxTemplatedKeys,
	}
}

// FSM is permitd's raft.FSM: the replicated set of limits and the dedup
// table. Apply, Snapshot and Restore are called by raft from one goroutine;
// the read methods may be called from any goroutine at any time.
type FSM struct {
	mu sync.RWMutex
	st state

	// Used only inside Apply (under mu): the decoded entry, reused, and the
	// name interner.
	scratch Entry
	intern  interner

	// Retention parameters of the dedup table: DedupWindowNanos and
	// MaxDedupEntries, except in tests.
	dedupWindowNanos int64
	maxDedupEntries  int
	// Bounds of the session table: MaxSessions and MaxSessionResults,
	// except in tests (withSessionCaps).
	maxSessions, maxSessionResults int
	// Bounds of the waiting reserves: MaxWaitersPerLimit and
	// MaxWaitersPerOwner, except in tests (withWaiterCaps).
	maxWaiters, maxOwnerWaiters int
}

var _ raft.FSM = (*FSM)(nil)

// New returns an empty FSM: no limits, cluster time 0, applied index 0.
func New() *FSM {
	return newFSM(DedupWindowNanos, MaxDedupEntries)
}

func newFSM(dedupWindowNanos int64, maxDedupEntries int) *FSM {
	return &FSM{
		st:                newState(dedupWindowNanos, maxDedupEntries),
		dedupWindowNanos:  dedupWindowNanos,
		maxDedupEntries:   maxDedupEntries,
		maxSessions:       MaxSessions,
		maxSessionResults: MaxSessionResults,
		maxWaiters:        MaxWaitersPerLimit,
		maxOwnerWaiters:   MaxWaitersPerOwner,
	}
}

// withSessionCaps bounds f's session table by maxSessions sessions and
// maxResults outcomes (1 <= maxSessions <= maxResults, at most the real
// bounds) instead of MaxSessions and MaxSessionResults, for tests that
// fill the table; f must be empty. It returns f.
func (f *FSM) withSessionCaps(maxSessions, maxResults int) *FSM {
	if maxSessions < 1 || maxResults < maxSessions || maxSessions > MaxSessions || maxResults > MaxSessionResults || f.st.appliedIndex != 0 {
		panic(fmt.Sprintf("fsm: session caps %d and %d on an FSM at index %d", maxSessions, maxResults, f.st.appliedIndex))
	}
	f.maxSessions, f.maxSessionResults = maxSessions, maxResults
	f.st.sessions.maxSessions, f.st.sessions.maxResults = maxSessions, maxResults
	return f
}

// Apply applies one committed log entry and returns its result:
// PutResult for CmdPutLimit, DeleteResult for CmdDeleteLimit,
// []ReserveResult (one per reserve, in order) for CmdReserveBatch,
// LeasePolicyResult for CmdPutLeasePolicy, LeaseResult for CmdLease,
// CmdRenew and CmdReturn, SessionResult for CmdOpenSession, SettleResult
// for CmdSettle, ReleaseResult for CmdRelease and CmdWithdraw,
// ExpiredGrantsResult for CmdExpiredGrants, nil for CmdNoop.
//
// The entry's time is clamped to the cluster timeline first:
// now = max(LastNowNanos(), entry.Stamp.Nanos) if the entry was stamped in
// the term it was appended in (l.Term), else now = LastNowNanos() (a stamp
// from an earlier term is not trusted: no time passes). Then request IDs
// older than DedupWindowNanos and idle sessions are forgotten, lease grants
// whose expiry is <= now are closed (on every limit), and the command is
// applied at now. The reserves of a batch are decided in order, each at
// the later of its own arrival time (Reserve.ArrivedNanos) and the
// timeline, which then moves to that time.
//
// An entry that does not decode or is invalid was never produced by the
// Append functions: it is a bug or corruption, and applying anything (or
// skipping it) could make replicas diverge, so Apply panics with an error
// naming the index and the reason, leaving the state unchanged. Domain
// outcomes (refused, unknown limit, too many permits) are results.
func (f *FSM) Apply(l *raft.Log) interface{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.intern.limits = f.st.limits
	put, err := decodeInto(l.Data, &f.scratch, &f.intern)
	if err != nil {
		panic(fmt.Errorf("fsm: cannot apply log entry at index %d (term %d): %w", l.Index, l.Term, err))
	}
	e := &f.scratch
	s := &f.st
	trusted := e.Stamp.Term == l.Term
	now := s.lastNowNanos
	if trusted {
		now = max(now, e.Stamp.Nanos)
	}
	clear(s.keyChanges)
	s.keyChanges = s.keyChanges[:0]
	s.advanceWaiters(now)
	s.lastNowNanos = now
	s.appliedIndex = l.Index
	s.dedup.expire(now)
	s.leaseDedup.expire(now)
	s.sessions.expire(now)
	s.expireLeases(now)
	s.reservations.expire(now)
	s.dropIdleKeys(now)

	switch e.Type {
	case CmdPutLimit:
		res := s.put(l.Index, now, &e.Put, put)
		s.kickWaiters(e.Put.Name, now)
		return res
	case CmdDeleteLimit:
		res := s.delete(now, &e.Delete)
		s.kickWaiters(e.Delete.Name, now)
		return res
	case CmdReserveBatch:
		results := make([]ReserveResult, len(e.Reserves))
		for i := range e.Reserves {
			r := &e.Reserves[i]
			if trusted && r.ArrivedNanos > s.lastNowNanos {
				// Later arrivals of the batch may be due to expire grants
				// and forget IDs, exactly as if applied one per entry.
				s.advanceTo(r.ArrivedNanos)
			}
			results[i] = s.reserve(s.lastNowNanos, r)
			results[i].OnArrival = trusted && r.ArrivedNanos == s.lastNowNanos
		}
		return results
	case CmdPutLeasePolicy:
		res := s.putLeasePolicy(now, &e.Policy)
		s.kickWaiters(e.Policy.Limit, now)
		return res
	case CmdLease:
		return s.lease(now, &e.Lease)
	case CmdRenew:
		return s.renew(now, &e.Renew)
	case CmdReturn:
		return s.returnLease(now, &e.Return)
	case CmdLeaseBatch:
		return s.applyLeaseBatch(trusted, e.LeaseBatch)
	case CmdOpenSession:
		return s.openSession(l.Index, now, &e.OpenSession)
	case CmdSettle:
		return s.settle(now, &e.Settle)
	case CmdRelease:
		return s.release(now, &e.Release)
	case CmdExpiredGrants:
		return s.countExpired(l.Index, e.ExpiredGrants)
	case CmdWithdraw:
		return s.withdrawByID(now, &e.Withdraw)
	case CmdPutTemplate:
		return s.putTemplate(&e.PutTemplate, put)
	case CmdDeleteTemplate:
		return s.deleteTemplate(&e.DeleteTemplate)
	}
	return nil // CmdNoop
}

// advanceTo moves the cluster time to nowNanos (> lastNowNanos) and
// expires what is due then: request IDs, sessions and leases.
func (s *state) advanceTo(nowNanos int64) {
	s.advanceWaiters(nowNanos)
	s.lastNowNanos = nowNanos
	s.dedup.expire(nowNanos)
	s.leaseDedup.expire(nowNanos)
	s.sessions.expire(nowNanos)
	s.expireLeases(nowNanos)
	s.reservations.expire(nowNanos)
}

// reserve decides one reserve at nowNanos: within its session, or
// answering a known request ID from the dedup table and recording a new
// one (Busy when the table cannot take a new one), or plainly.
func (s *state) reserve(nowNanos int64, r *Reserve) ReserveResult {
	if r.Session.ID != 0 {
		return s.reserveInSession(nowNanos, r)
	}
	if r.RequestID == "" {
		if r.Track && s.reservations.full() {
			o := s.reservationsBusy()
			return o.resultAt(nowNanos, false)
		}
		o := s.decide(nowNanos, r)
		return o.resultAt(nowNanos, false)
	}
	if rec := s.dedup.lookup(r.RequestID); rec != nil {
		return rec.resultAt(nowNanos, true)
	}
	if id, ok := s.waits.byRequestID[r.RequestID]; ok {
		// Still waiting: the same wait (the node waits for its decision),
		// retried now (Withdraw.GraceNanos).
		rv := s.reservations.byID[id]
		rv.wait.retriedAtNanos = nowNanos
		o := outcome{status: Queued, atNanos: rv.finalAtNanos, reservation: id}
		return o.resultAt(nowNanos, true)
	}
	if rec := s.leaseDedup.lookup(r.RequestID); rec != nil {
		return ReserveResult{Status: Invalid, Duplicate: true, NowNanos: nowNanos, Detail: boundDetail(fmt.Sprintf(
			"request id %q was used by a %s, not a reserve: use a new id for a new command", r.RequestID, opName(rec.lease.op)))}
	}
	if full, retryAt := s.requestIDsFull(); full {
		o := outcome{status: Busy, atNanos: retryAt}
		return o.resultAt(nowNanos, false)
	}
	if r.Track && s.reservations.full() {
		// Not recorded: a retry after the oldest reservation is final is
		// decided afresh.
		o := s.reservationsBusy()
		return o.resultAt(nowNanos, false)
	}
	o := s.decide(nowNanos, r)
	if o.status != Queued && o.status != Busy && o.status != KeysFull {
		// (Busy: a full queue of waiters, waitqueue.go; KeysFull: no room
		// for a templated key, template.go.)
		s.dedup.add(dedupRecord{id: r.RequestID, recordedAtNanos: nowNanos, outcome: o})
	}
	return o.resultAt(nowNanos, false)
}

// requestIDsFull reports that the table of reserve request IDs cannot take
// a new one, and when it may: a reserve waiting in an in-flight cap's
// queue keeps room for its ID, which enters the table when it is decided
// (waiters.go).
func (s *state) requestIDsFull() (bool, int64) {
	t := &s.dedup
	if t.len()+len(s.waits.byRequestID) < t.maxEntries {
		return false, 0
	}
	if t.len() > 0 {
		// When the oldest ID is forgotten (saturating: the end of the int64
		// timeline is never).
		return true, min(t.oldestAtNanos(), math.MaxInt64-t.windowNanos) + t.windowNanos
	}
	return true, s.waits.deadlines.rs[0].finalAtNanos
}

// decide decides a reserve on its limit at nowNanos (UnknownLimit if there
// is none), or on all its limits in the reservation form (multi.go).
func (s *state) decide(nowNanos int64, r *Reserve) outcome {
	if r.Track {
		return s.decideTracked(nowNanos, r)
	}
	_, existed := s.limits[r.Limit]
	l, o, ok := s.limitOrKey(r.Limit, nowNanos)
	if !ok {
		return o
	}
	if o = l.decide(nowNanos, r); !decidedOn(o) {
		// Invalid: the reserve changes no limit, and creates no key.
		if !existed {
			s.uncreateKey(l)
		}
		return o
	}
	s.touch(l, nowNanos)
	return o
}

// Limit returns a view of the limit called name, without its
// OpenReservations (always 0 here): the node's edge checks read it on
// every reserve and lease, and counting open reservations walks the whole
// reservation table. LimitView counts them.
func (f *FSM) Limit(name string) (LimitInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l, ok := f.st.limits[name]
	if !ok {
		return LimitInfo{}, false
	}
	return l.info(f.st.lastNowNanos, 0), true
}

// LimitView returns the full view of the limit called name, its
// OpenReservations counted (a walk of the reservation table: for reads by
// operators, not for a request's path).
func (f *FSM) LimitView(name string) (LimitInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l, ok := f.st.limits[name]
	if !ok {
		return LimitInfo{}, false
	}
	return l.info(f.st.lastNowNanos, f.st.reservations.openOf(name, f.st.lastNowNanos)), true
}

// Leased reports whether a limit called name exists and whether it is
// leased: what a lease command's edge check needs, without a LimitInfo.
func (f *FSM) Leased(name string) (exists, leased bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l, ok := f.st.limits[name]
	return ok, ok && l.pool != nil
}

// ReserveCheck reports whether a limit called name exists or a template
// would create it on a reserve (one read of the state: a key another
// reserve creates meanwhile is found one way or the other), whether it is
// leased, and the most permits one request can be granted
// (bucket.Config.MaxPermits): what a reserve's edge check needs, without
// building a LimitInfo (it runs on every reserve).
func (f *FSM) ReserveCheck(name string) (exists, leased bool, maxPermits int64) {
	f.mu.RLock()
	l, ok := f.st.limits[name]
	if !ok {
		t := f.st.templateOf(name)
		f.mu.RUnlock()
		if t == nil {
			return false, false, 0
		}
		return true, false, t.conf.maxPermits // a new key is never leased
	}
	leased, maxPermits = l.pool != nil, l.conf.maxPermits
	f.mu.RUnlock()
	return true, leased, maxPermits
}

// Limits returns a view of every limit, sorted by name.
func (f *FSM) Limits() []LimitInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]LimitInfo, 0, len(f.st.names))
	open := f.st.reservations.open(f.st.lastNowNanos)
	for _, name := range f.st.names {
		out = append(out, f.st.limits[name].info(f.st.lastNowNanos, open[name]))
	}
	return out
}

// AppliedIndex returns the raft index of the latest applied entry (or of
// the restored snapshot); 0 if none.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.appliedIndex
}

// LastNowNanos returns the cluster time of the latest applied entry after
// the clamp (0 if none). A new leader continues the timeline from here.
func (f *FSM) LastNowNanos() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.lastNowNanos
}

// DedupEntries returns how many request IDs are currently remembered.
func (f *FSM) DedupEntries() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.dedup.len()
}

// StateHash returns the SHA-256 of the snapshot encoding of the current
// state. Replicas that applied the same log agree on it byte for byte. It
// costs a full snapshot encoding.
func (f *FSM) StateHash() [32]byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return sha256.Sum256(f.st.appendSnapshot(make([]byte, 0, f.st.snapshotSizeHint())))
}

// Snapshot encodes the whole state under the lock (so that Persist, which
// raft runs concurrently with Apply, needs none). Its cost is linear in the
// state (about a second per hundred megabytes); Apply waits meanwhile, as it
// would anyway, since raft calls both from one goroutine.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &fsmSnapshot{data: f.st.appendSnapshot(make([]byte, 0, f.st.snapshotSizeHint()))}, nil
}

// Restore replaces the whole state by the snapshot read from rc, which it
// closes. The snapshot is validated completely before anything changes: on
// any error (wrapping ErrDecode for bad bytes) the state is left as it was.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("fsm: reading snapshot: %w", err)
	}
	st, err := decodeSnapshot(data, f.dedupWindowNanos, f.maxDedupEntries)
	if err != nil {
		return err
	}
	st.sessions.maxSessions, st.sessions.maxResults = f.maxSessions, f.maxSessionResults
	st.dropKeys, st.maxTemplatedKeys = f.st.dropKeys, f.st.maxTemplatedKeys
	st.waits.maxPerLimit, st.waits.maxPerOwner = f.maxWaiters, f.maxOwnerWaiters
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st = st
	f.scratch = Entry{}
	f.intern = interner{}
	return nil
}

// fsmSnapshot is an encoded snapshot, ready to be written.
type fsmSnapshot struct {
	data []byte
}

// Persist writes the snapshot to sink and closes it, or cancels it on error.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.data); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("fsm: writing snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("fsm: closing snapshot: %w", err)
	}
	return nil
}

// Release does nothing: the snapshot is a byte slice.
func (s *fsmSnapshot) Release() {}

// WriteSnapshot writes the snapshot encoding of the current state to w (a
// backup: Restore takes it back) and returns the applied index it covers.
// It encodes under the read lock, then writes without it.
func (f *FSM) WriteSnapshot(w io.Writer) (uint64, error) {
	f.mu.RLock()
	data := f.st.appendSnapshot(make([]byte, 0, f.st.snapshotSizeHint()))
	index := f.st.appliedIndex
	f.mu.RUnlock()
	if _, err := w.Write(data); err != nil {
		return 0, fmt.Errorf("fsm: writing snapshot: %w", err)
	}
	return index, nil
}
