package node

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
)

// TestReceiptsCountSinceTheNewestEarlierTerm: a takeover in term T counts
// from the newest receipt of a term before T, never from its own term's
// entries.
func TestReceiptsCountSinceTheNewestEarlierTerm(t *testing.T) {
	clock, real := &manualClock{}, &manualClock{}
	r := newReceipts(clock, real) // the start: term 0 at 0
	step := func(d time.Duration) { clock.advance(d); real.advance(d) }
	step(time.Second)
	r.note(3) // at 1 s
	step(time.Second)
	r.note(2) // an older term re-sent at 2 s
	step(time.Second)
	r.note(4) // this node's own term at 3 s
	step(time.Second)
	since := func(term uint64) (time.Duration, bool) {
		x, ok := r.lastBefore(term)
		return time.Duration(min(clock.NowNanos()-x.clockNanos, real.NowNanos()-x.realNanos)), ok
	}
	if _, ok := r.lastBefore(0); ok {
		t.Error("a receipt before term 0")
	}
	for _, c := range []struct {
		term uint64
		want time.Duration
	}{
		{term: 1, want: 4 * time.Second}, // the start
		{term: 3, want: 2 * time.Second}, // term 2 at 2 s, newer than the start
		{term: 4, want: 2 * time.Second}, // term 2 at 2 s is newer than term 3 at 1 s
		{term: 5, want: time.Second},     // term 4 at 3 s
	} {
		if got, ok := since(c.term); !ok || got != c.want {
			t.Errorf("since the last receipt before term %d: %v %v, want %v", c.term, got, ok, c.want)
		}
	}
	for term := uint64(10); term < 10+2*receiptTerms; term++ {
		step(time.Millisecond)
		r.note(term)
	}
	if len(r.latest) != receiptTerms || r.latest[0].term != 10+receiptTerms {
		t.Errorf("kept %d receipts from term %d, want the newest %d", len(r.latest), r.latest[0].term, receiptTerms)
	}
	// A snapshot installed after many terms (term 0) is the newest
	// receipt: it must be kept, since the one before it would count more
	// time than has provably passed since the snapshot's stamps.
	step(time.Second)
	r.note(0)
	step(time.Second)
	if got, ok := since(100); !ok || got != time.Second {
		t.Errorf("after a snapshot: %v %v, want 1s since the snapshot", got, ok)
	}
}

// TestNewLeaderCountsTheElection: when the leader is killed, its successor
// continues the cluster time from the last applied stamp plus the time
// since it received that entry, so the election (and the idle time before
// it) mints permits instead of being lost; and the timeline still never
// runs ahead of real time since the last stamp. Fails with the old
// takeover (base = the last applied time), which counts nothing of the
// election.
func TestNewLeaderCountsTheElection(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1, Per: 100 * time.Millisecond, MaxReserved: 5, Expiry: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: "s", Config: cfg}); return err })
	beforeStamp := time.Now()
	if res, err := l.Reserve(ctx, fsm.Reserve{Limit: "s", Permits: 1}); err != nil || res.Status != fsm.Granted {
		t.Fatalf("reserve: %+v %v", res, err)
	}
	last := l.fsm.LastNowNanos()
	c.kill(l.ID())
	killed := time.Now() // nothing of the old term arrives after this
	nl := c.leader()
	read := time.Now()
	stamp, _, ok := nl.stampForApply()
	after := time.Now()
	if !ok {
		t.Fatal("new leader cannot stamp")
	}
	counted := time.Duration(stamp.Nanos - last)
	// The receipt reads two clocks and the count takes the smaller
	// difference, so a preemption between the two readings costs what the
	// scheduler makes it cost: under CI's -race load it cost 1.8 ms once.
	// Allow 20 ms: the takeover this test guards against counts nothing of
	// an election of about a second.
	if least := read.Sub(killed) - 20*time.Millisecond; counted < least {
		t.Errorf("the new leader counted %v since the last stamp; at least %v (kill to takeover, less 20 ms) has provably passed", counted, least)
	}
	if most := after.Sub(beforeStamp); counted > most {
		t.Errorf("the new leader counted %v since the last stamp, more than the %v of real time since it was read", counted, most)
	}
	t.Logf("election: %v from the kill to the new leader's stamp; %v counted", read.Sub(killed), counted)
}

// TestRestoredSnapshotIsAReceipt: a snapshot installed from the leader is
// state taken in at the instant of the restore. A follower that lagged,
// caught up by a snapshot and then took over would otherwise count its
// whole lag as time that passed, its timeline ahead of real time (11 s
// here instead of 1).
func TestRestoredSnapshotIsAReceipt(t *testing.T) {
	clock, real := &manualClock{}, &manualClock{}
	r := newReceipts(clock, real)
	step := func(d time.Duration) { clock.advance(d); real.advance(d) }
	step(time.Second)
	r.note(5)
	step(10 * time.Second) // lagging: the cluster moves on without this node
	var buf bytes.Buffer
	if _, err := fsm.New().WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	if err := (receiptFSM{fsm.New(), r}).Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	step(time.Second)
	x, ok := r.lastBefore(7)
	if got := time.Duration(real.NowNanos() - x.realNanos); !ok || got != time.Second {
		t.Fatalf("a takeover would count %v since the newest receipt (found %t), want 1s: the snapshot's install", got, ok)
	}
}
