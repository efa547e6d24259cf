package node

import (
	"errors"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
)

// TestReservationsThroughAFollower: a multi-limit reserve, its settlement
// and its release made on a follower travel to the leader and back with
// their reservation ID, blocking limit and settlement details, and the
// register's refusals come back as the right errors.
func TestReservationsThroughAFollower(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 20*time.Second)
	f := c.followers(l)[0]
	put := func(name string, s bucket.Spec) {
		cfg, err := bucket.Compile(s)
		if err != nil {
			t.Fatal(err)
		}
		retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: name, Config: cfg}); return err })
	}
	put("tpm", bucket.Spec{Algorithm: bucket.Bursty, Rate: 1000})
	put("cap", bucket.Spec{Algorithm: bucket.Concurrency, MaxInFlight: 1, HoldTTL: time.Minute})

	q := fsm.Reserve{Limit: "tpm", Permits: 100, Also: []fsm.Part{{Limit: "cap", Permits: 1}}, Track: true, RequestID: "multi-1", Owner: "alice"}
	res, err := f.Reserve(ctx, q)
	if err != nil || res.Status != fsm.Granted || res.ReservationID == 0 {
		t.Fatalf("multi-limit reserve on a follower: %+v, %v; want granted with a reservation", res, err)
	}
	again, err := f.Reserve(ctx, q)
	if err != nil || !again.Duplicate || again.ReservationID != res.ReservationID {
		t.Fatalf("retry: %+v, %v; want the same reservation replayed", again, err)
	}
	q2 := fsm.Reserve{Limit: "cap", Permits: 1, Track: true, Owner: "alice"}
	refused, err := f.Reserve(ctx, q2)
	if err != nil || refused.Status != fsm.Refused || refused.Blocking != "cap" {
		t.Fatalf("full cap: %+v, %v; want refused, blocking cap", refused, err)
	}
	if _, err := f.Settle(ctx, fsm.Settle{Reservation: res.ReservationID, Owner: "bob"}); !errors.Is(err, ErrForbidden) {
		t.Errorf("settle by another owner: %v, want ErrForbidden", err)
	}
	s, err := f.Settle(ctx, fsm.Settle{Reservation: res.ReservationID, Owner: "alice", RequestID: "settle-1",
		Actual: []fsm.Part{{Limit: "tpm", Permits: 40}}})
	if err != nil || len(s.Parts) != 2 || s.Parts[0].Actual != 40 {
		t.Fatalf("settle: %+v, %v", s, err)
	}
	if _, err := f.Settle(ctx, fsm.Settle{Reservation: res.ReservationID, Owner: "alice", RequestID: "settle-2"}); !errors.Is(err, ErrConflict) {
		t.Errorf("second settlement: %v, want ErrConflict", err)
	}
	rel, err := f.Release(ctx, fsm.Release{Reservation: res.ReservationID, Owner: "alice"})
	if err != nil || rel.Released != 1 {
		t.Fatalf("release: %+v, %v; want 1 released", rel, err)
	}
	if _, err := f.Release(ctx, fsm.Release{Reservation: 999, Owner: "alice"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("release of an unknown reservation: %v, want ErrNotFound", err)
	}
	if got, err := f.Reserve(ctx, q2); err != nil || got.Status != fsm.Granted {
		t.Errorf("after the release: %+v, %v; want granted", got, err)
	}
	unknown := fsm.Reserve{Limit: "tpm", Permits: 1, Also: []fsm.Part{{Limit: "nope", Permits: 1}}, Track: true}
	if _, err := f.Reserve(ctx, unknown); !errors.Is(err, ErrNotFound) {
		t.Errorf("reserve naming an unknown limit: %v, want ErrNotFound", err)
	}
}

// TestExpiredTrackedGrantFreesItsHolds: a reservation whose grant expired
// before its answer could leave (answered as a refusal) is settled at 0 in
// the background, so its in-flight permit is free long before its TTL.
func TestExpiredTrackedGrantFreesItsHolds(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 20*time.Second)
	put := func(name string, s bucket.Spec) {
		cfg, err := bucket.Compile(s)
		if err != nil {
			t.Fatal(err)
		}
		retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: name, Config: cfg}); return err })
	}
	// Strict permits that expire a nanosecond after their slot: every
	// grant has expired by the time its answer leaves.
	put("rps", bucket.Spec{Algorithm: bucket.Strict, Rate: 1000, MaxReserved: 10, Expiry: time.Nanosecond})
	put("cap", bucket.Spec{Algorithm: bucket.Concurrency, MaxInFlight: 1, HoldTTL: time.Hour})
	res, err := l.Reserve(ctx, fsm.Reserve{Limit: "rps", Permits: 1, Also: []fsm.Part{{Limit: "cap", Permits: 1}}, Track: true})
	if err != nil || res.Status != fsm.Refused {
		t.Fatalf("reserve: %+v, %v; want a refusal (the grant expired before its answer)", res, err)
	}
	waitFor(t, 10*time.Second, "the expired grant's hold to be freed", func() bool {
		got, err := l.Reserve(ctx, fsm.Reserve{Limit: "cap", Permits: 1, Track: true})
		return err == nil && got.Status == fsm.Granted
	})
}
