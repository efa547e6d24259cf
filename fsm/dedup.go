package fsm

import (
	"time"
)

// dedup.go: the tables of request IDs, a reserve's and a lease command's:
// how an ID is remembered, found and forgotten. Apply consults them in
// fsm.go (state.reserve) and leaseops.go (state.leaseCommand); their
// snapshot section is in dedupsnapshot.go.

// Retention of request IDs. They are part of the replicated behaviour: every
// replica must forget the same IDs at the same entry, so changing them needs
// a new EncodingVersion.
const (
	// DedupWindowNanos is how long, in cluster time, a request ID is
	// remembered after its command was decided. A retry arriving later is
	// decided afresh.
	DedupWindowNanos = int64(10 * time.Minute)
	// MaxDedupEntries is the most reserve request IDs remembered at once.
	// When the table is full a reserve with a new ID is answered Busy
	// rather than forgetting an ID younger than DedupWindowNanos, so that
	// the window always holds: the table admits at most MaxDedupEntries
	// new reserve IDs per DedupWindowNanos (about 1 750 per second).
	// Sessions have no such limit on the rate.
	MaxDedupEntries = 1 << 20
	// MaxLeaseDedupEntries is the most lease-command request IDs
	// remembered at once; when full, the oldest is forgotten first. That
	// is safe for lease commands: a renew or return retried after its ID
	// was forgotten is fenced (the lease's epoch moved on), and a lease
	// retried so is refused, naming the lease its holder already holds.
	MaxLeaseDedupEntries = 1 << 18
)

// dedupRecord is one remembered request ID and the outcome of its reserve
// (outcome, in the reserve table) or of its lease command (lease, in the
// lease table).
type dedupRecord struct {
	id              string
	recordedAtNanos int64
	outcome
	lease *leaseOutcome
}

// dedupTable remembers request IDs in insertion order, which is log order,
// so recordedAtNanos never decreases from head to tail. Eviction pops from
// the head, driven only by the cluster time of the entry being applied and
// by the table's size: every replica evicts the same IDs at the same entry.
type dedupTable struct {
	windowNanos int64
	maxEntries  int
	// evict reports that a full table forgets its oldest ID to take a new
	// one (the lease table); otherwise a full table takes none (the
	// reserve table: state.requestIDsFull answers Busy first).
	evict bool
	// seqByID maps an ID to its sequence number; queue[seq-firstSeq] is its
	// record.
	seqByID map[string]uint64
	// queue[head:] are the live records, oldest first.
	queue    []dedupRecord
	head     int
	firstSeq uint64
}

func newDedupTable(windowNanos int64, maxEntries int, evict bool) dedupTable {
	return dedupTable{windowNanos: windowNanos, maxEntries: maxEntries, evict: evict, seqByID: make(map[string]uint64)}
}

// oldestAtNanos is when the oldest remembered ID was recorded (only for a
// non-empty table).
func (t *dedupTable) oldestAtNanos() int64 { return t.queue[t.head].recordedAtNanos }

// len is the number of remembered IDs.
func (t *dedupTable) len() int { return len(t.queue) - t.head }

// records returns the live records, oldest first. The slice aliases the
// table; it is valid until the next change.
func (t *dedupTable) records() []dedupRecord { return t.queue[t.head:] }

// lookup returns the record of id, or nil.
func (t *dedupTable) lookup(id string) *dedupRecord {
	seq, ok := t.seqByID[id]
	if !ok {
		return nil
	}
	return &t.queue[int(seq-t.firstSeq)]
}

// expire forgets every ID recorded DedupWindowNanos or more before nowNanos.
// Times are >= 0 (the FSM's clock starts at 0), so the subtraction cannot
// overflow.
func (t *dedupTable) expire(nowNanos int64) {
	for t.head < len(t.queue) && nowNanos-t.queue[t.head].recordedAtNanos >= t.windowNanos {
		t.popOldest()
	}
	if t.head == len(t.queue) && t.head > 0 {
		t.firstSeq += uint64(t.head)
		t.queue = t.queue[:0]
		t.head = 0
	}
}

// popOldest forgets the oldest record.
func (t *dedupTable) popOldest() {
	delete(t.seqByID, t.queue[t.head].id)
	t.queue[t.head] = dedupRecord{}
	t.head++
}

// add remembers rec, forgetting the oldest record first if the table is
// full and evicts (a table that does not evict must not be full). rec.id
// must not be in the table and rec.recordedAtNanos must not be before the
// newest record's.
func (t *dedupTable) add(rec dedupRecord) {
	if t.len() >= t.maxEntries {
		t.popOldest()
	}
	if len(t.queue) == cap(t.queue) && t.head > 0 && t.head >= len(t.queue)/2 {
		// Slide the live records down instead of growing: amortised O(1),
		// since at least as many records were popped as are copied.
		n := copy(t.queue, t.queue[t.head:])
		clear(t.queue[n:])
		t.queue = t.queue[:n]
		t.firstSeq += uint64(t.head)
		t.head = 0
	}
	t.seqByID[rec.id] = t.firstSeq + uint64(len(t.queue))
	t.queue = append(t.queue, rec)
}
