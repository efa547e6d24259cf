package node

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/fsm"
)

// TestStatusBreaksReservesDownByStage: a leader's Status.ReserveStages
// covers every reserve it committed, each stage is counted once per
// reserve, a stall between the apply and the answers (testHoldAnswers, as
// a slow hand-off would be) lands in AnswerNanos, and the stages never
// add up to more than the callers waited. A follower counts none.
func TestStatusBreaksReservesDownByStage(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 20*time.Second)
	retryNoLeader(t, func() error {
		_, err := l.PutLimit(ctx, fsm.PutLimit{Name: "api", Config: strictConfig(t, time.Microsecond, 1000)})
		return err
	})
	const stall, count = 5 * time.Millisecond, 10
	l.testHoldAnswers = func() { time.Sleep(stall) }
	before := l.Status().ReserveStages
	var waited time.Duration
	for range count {
		start := time.Now()
		if _, err := l.Reserve(ctx, fsm.Reserve{Limit: "api", Permits: 1, MaxWaitNanos: int64(time.Second)}); err != nil {
			t.Fatal(err)
		}
		waited += time.Since(start)
	}
	after := l.Status().ReserveStages
	if got := after.Reserves - before.Reserves; got != count {
		t.Fatalf("the stages cover %d reserves (%d unmeasured); want the %d reserved", got, after.Unmeasured-before.Unmeasured, count)
	}
	stages := map[string]uint64{
		"batch wait":         after.BatchWaitNanos - before.BatchWaitNanos,
		"raft queue":         after.RaftQueueNanos - before.RaftQueueNanos,
		"log append":         after.LogAppendNanos - before.LogAppendNanos,
		"replicate & commit": after.ReplicateCommitNanos - before.ReplicateCommitNanos,
		"apply":              after.ApplyNanos - before.ApplyNanos,
		"answer":             after.AnswerNanos - before.AnswerNanos,
	}
	var sum uint64
	for name, ns := range stages {
		sum += ns
		if ns == 0 && name != "batch wait" && name != "raft queue" {
			t.Errorf("stage %s: 0 ns over %d reserves; want more (it does work)", name, count)
		}
	}
	if stages["answer"] < uint64(count*stall) {
		t.Errorf("answer stage %v over %d reserves stalled %v each after their apply; want at least %v", time.Duration(stages["answer"]), count, stall, count*stall)
	}
	// The answer stage ends when the batch has handed its answers back,
	// which its caller may see (and stop its watch) a moment before: a
	// tenth of slack, far below what counting a stage twice would add.
	if sum > uint64(waited)+uint64(waited)/10 {
		t.Errorf("the stages add up to %v; the callers waited %v in all: a stage counts more than its reserves' time", time.Duration(sum), waited)
	}
	for _, n := range c.nodes {
		if n != l && n.Status().ReserveStages.Reserves != 0 {
			t.Errorf("follower %s breaks down %d reserves; want 0 (only a leader submits reserve entries)", n.ID(), n.Status().ReserveStages.Reserves)
		}
	}
}

// TestStagesOfALostSlotAreUnmeasured: an entry whose slot was taken by
// a later index, or never applied, is counted as unmeasured, not as time.
func TestStagesOfALostSlotAreUnmeasured(t *testing.T) {
	s := newReserveStages()
	s.stored([]*raft.Log{{Index: 5}}, 100, 200)
	s.applied(5, 300, 400)
	s.addEntry(5, 3, 30, 50, 500)
	got := s.read()
	if got.Reserves != 3 || got.BatchWaitNanos != 30 || got.RaftQueueNanos != 150 || got.LogAppendNanos != 300 ||
		got.ReplicateCommitNanos != 300 || got.ApplyNanos != 300 || got.AnswerNanos != 300 {
		t.Fatalf("one entry of 3 reserves: %+v; want each stage counted 3 times", got)
	}
	s.stored([]*raft.Log{{Index: 6}}, 100, 200) // never applied
	s.addEntry(6, 2, 0, 50, 500)
	s.stored([]*raft.Log{{Index: 7 + stageRing}}, 100, 200)
	s.applied(7+stageRing, 300, 400)
	s.addEntry(7, 4, 0, 50, 500) // its slot was reused
	if after := s.read(); after.Reserves != 3 || after.Unmeasured != 6 || after.ApplyNanos != 300 {
		t.Fatalf("after two entries that lost their times: %+v; want 3 reserves measured as before and 6 unmeasured", after)
	}
}
