package node

import (
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/transport/api"
)

// stages.go: where a reserve's time goes on the leader
// (Status.ReserveStages). The log store and the FSM as raft sees them
// (timedLog, timedFSM) note, per log index, when the entry's storing
// began and ended and when its apply began and ended, in a ring of
// stageRing slots; the reserve batcher, once an entry it submitted is
// applied and its answers handed back, reads the entry's slot and adds
// each stage's time, once per reserve the entry carried, to cumulative
// counters. The cost is a few atomic stores per entry stored or applied
// and a few atomic adds per reserve entry: no lock, no allocation.
//
// Every time is read on this process's monotonic clock, in package node
// only (fsm and bucket never read a clock).

// stageRing is how many recent log indexes keep their times. An entry's
// slot is read right after its apply, so only an entry overtaken by
// stageRing others in between (never, with MaxInflight slots) loses its
// breakdown; it is then counted in ReserveStages.Unmeasured instead.
const stageRing = 1024

// stageSlot is one log index's times, in nanoseconds since the stages'
// base (0: not noted).
type stageSlot struct {
	index                                      atomic.Uint64
	storeStart, storeEnd, applyStart, applyEnd atomic.Int64
}

// reserveStages is a node's breakdown of its reserve entries' time.
type reserveStages struct {
	base time.Time
	ring [stageRing]stageSlot

	reserves, unmeasured                                    atomic.Uint64
	batchWait, raftQueue, logAppend, replicate, apply, hand atomic.Uint64
}

// newReserveStages returns an empty breakdown.
func newReserveStages() *reserveStages { return &reserveStages{base: time.Now()} }

// at is t in nanoseconds since the base; now is at(time.Now()).
func (s *reserveStages) at(t time.Time) int64 { return int64(t.Sub(s.base)) }
func (s *reserveStages) now() int64           { return int64(time.Since(s.base)) }

// stored notes that logs were stored between start and end.
func (s *reserveStages) stored(logs []*raft.Log, start, end int64) {
	for _, l := range logs {
		sl := &s.ring[l.Index%stageRing]
		sl.index.Store(0) // readers skip the slot while it changes
		sl.storeStart.Store(start)
		sl.storeEnd.Store(end)
		sl.applyStart.Store(0)
		sl.applyEnd.Store(0)
		sl.index.Store(l.Index)
	}
}

// applied notes that the entry at index was applied between start and
// end, if its storing was noted.
func (s *reserveStages) applied(index uint64, start, end int64) {
	sl := &s.ring[index%stageRing]
	if sl.index.Load() != index {
		return
	}
	sl.applyStart.Store(start)
	sl.applyEnd.Store(end)
}

// addEntry counts a reserve entry this node submitted as leader: size
// reserves, waitNanos their summed time from stamp to raft.Apply,
// submitted when raft.Apply was called, handed when the last of its
// answers was handed back; the stored and applied times come from the
// entry's slot. An entry whose slot was overwritten or is incomplete is
// counted in unmeasured only.
func (s *reserveStages) addEntry(index uint64, size int, waitNanos int64, submitted, handed int64) {
	sl := &s.ring[index%stageRing]
	storeStart, storeEnd := sl.storeStart.Load(), sl.storeEnd.Load()
	applyStart, applyEnd := sl.applyStart.Load(), sl.applyEnd.Load()
	if sl.index.Load() != index || storeStart == 0 || applyEnd == 0 {
		s.unmeasured.Add(uint64(size))
		return
	}
	n := int64(size)
	add := func(c *atomic.Uint64, d int64) { c.Add(uint64(max(d, 0) * n)) }
	s.batchWait.Add(uint64(max(waitNanos, 0)))
	add(&s.raftQueue, storeStart-submitted)
	add(&s.logAppend, storeEnd-storeStart)
	add(&s.replicate, applyStart-storeEnd)
	add(&s.apply, applyEnd-applyStart)
	add(&s.hand, handed-applyEnd)
	s.reserves.Add(uint64(size))
}

// read returns the totals in the API's form. They are read one after the
// other, so a reading taken while an entry is being counted may hold part
// of it; between readings seconds apart that is noise.
func (s *reserveStages) read() api.ReserveStages {
	return api.ReserveStages{
		Reserves:             s.reserves.Load(),
		Unmeasured:           s.unmeasured.Load(),
		BatchWaitNanos:       s.batchWait.Load(),
		RaftQueueNanos:       s.raftQueue.Load(),
		LogAppendNanos:       s.logAppend.Load(),
		ReplicateCommitNanos: s.replicate.Load(),
		ApplyNanos:           s.apply.Load(),
		AnswerNanos:          s.hand.Load(),
	}
}

// timedLog is the raft LogStore of a node: it notes when each batch of
// entries began and ended being stored (the leader's log append, with
// the receipt and the log cache), then returns.
type timedLog struct {
	raft.LogStore
	stages *reserveStages
}

// StoreLog implements raft.LogStore.
func (l timedLog) StoreLog(log *raft.Log) error {
	start := l.stages.now()
	if err := l.LogStore.StoreLog(log); err != nil {
		return err
	}
	l.stages.stored([]*raft.Log{log}, start, l.stages.now())
	return nil
}

// StoreLogs implements raft.LogStore.
func (l timedLog) StoreLogs(logs []*raft.Log) error {
	start := l.stages.now()
	if err := l.LogStore.StoreLogs(logs); err != nil {
		return err
	}
	l.stages.stored(logs, start, l.stages.now())
	return nil
}

// timedFSM is the FSM as raft sees it: it notes when each entry's apply
// began and ended (the register's decision, the observer and the waiters'
// hand-off: waiterFSM.Apply).
type timedFSM struct {
	countingFSM
}

// Apply implements raft.FSM.
func (f timedFSM) Apply(l *raft.Log) interface{} {
	s := f.n.stages
	start := s.now()
	res := f.countingFSM.Apply(l)
	s.applied(l.Index, start, s.now())
	return res
}

var _ raft.FSM = timedFSM{}
