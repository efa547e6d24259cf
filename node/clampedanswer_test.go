package node

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
)

// TestClampedGrantWithinRegisterWindow: a reserve that the register
// decides at a later cluster time than its own arrival (an entry stamped
// after it arrived reached the log first, while the reserve waited in the
// batcher behind a commit stalled for 150 ms, as a slow fsync would stall
// it) is answered within the register's window: its expiry and its
// in-flight hold's end, counted from the moment it leaves the leader (or,
// forwarded, the follower), never outlast the register's as the leader's
// timeline counts them right after the answer, and its wait never ends
// earlier. Counting the expiry from the apply instead lengthened it by
// everything between the later entry's stamp and the apply (the stall):
// the client then used a strict permit after its slot had expired, close
// to the next one (jepsen-lite's multi workload, seed 1008: two calls
// 16.7 ms apart on a limit that spaces them 25 ms). Checked for every
// kind of answer such a reserve gets (fresh and replayed, its request ID
// again in the same entry; on the leader and forwarded by a follower;
// the reserve whose commit stalled, decided at its own arrival) and for
// two kinds of later entry (a put of another limit, a release of an
// in-flight hold), each reserve naming a strict limit and an in-flight
// cap with room.
func TestClampedGrantWithinRegisterWindow(t *testing.T) {
	const stall = 150 * time.Millisecond
	c := newTestClusterWithConfig(t, 3, func(cfg *Config) { cfg.MaxInflight = 1 })
	l := c.leader()
	f := c.followers(l)[0]
	ctx := ctxTimeout(t, 60*time.Second)
	strict, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1, Per: 400 * time.Millisecond, MaxReserved: 8, Expiry: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	other, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1, Per: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: "other", Config: other}); return err })
	retryNoLeader(t, func() error {
		_, err := l.PutLimit(ctx, fsm.PutLimit{Name: "cap", Config: capConfig(t, 100, time.Second)})
		return err
	})

	var mu sync.Mutex
	var decided []fsm.ReserveResult // as the register decided them, before any shift
	l.testDecided = func(res fsm.ReserveResult) {
		mu.Lock()
		decided = append(decided, res)
		mu.Unlock()
	}
	var armed atomic.Bool
	stalled, laterDone := make(chan struct{}), make(chan struct{})
	l.testHoldAnswers = func() {
		if armed.CompareAndSwap(true, false) {
			close(stalled)
			<-laterDone
			time.Sleep(stall) // the stalled commit
		}
	}

	type answer struct {
		what      string
		res       fsm.ReserveResult
		err       error
		leaderNow int64 // the leader's timeline right after the answer
	}
	reserve := func(what string, n *Node, limit, id string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			res, err := n.Reserve(ctx, fsm.Reserve{Limit: limit, Permits: 1, MaxWaitNanos: int64(10 * time.Second), RequestID: id, Track: true,
				Also: []fsm.Part{{Limit: "cap", Permits: 1}}})
			now, _, _, _ := l.timeline.stamp()
			ch <- answer{what, res, err, now}
		}()
		return ch
	}
	vias := []struct {
		name string
		n    *Node
	}{{"the leader", l}, {"a follower", f}}
	laters := []struct {
		name string
		do   func(limit string) func() error // prepares, returns the later entry
	}{
		{"a put of another limit", func(string) func() error {
			return func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: "other", Config: other}); return err }
		}},
		{"a release of an in-flight hold", func(limit string) func() error {
			h, err := l.Reserve(ctx, capReserve("hold-"+limit, 0))
			if err != nil || h.Status != fsm.Granted {
				t.Fatalf("the hold to release: %+v %v", h, err)
			}
			return func() error {
				rel, err := l.Release(ctx, fsm.Release{Reservation: h.ReservationID})
				if err == nil && rel.Released != 1 {
					err = fmt.Errorf("released %+v", rel)
				}
				return err
			}
		}},
	}
	for _, later := range laters {
		for _, via := range vias {
			limit := fmt.Sprintf("s-%s-%d", via.n.cfg.ID, len(later.name))
			retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: limit, Config: strict}); return err })
			entry := later.do(limit)
			mu.Lock()
			decided = nil
			mu.Unlock()
			stalled, laterDone = make(chan struct{}), make(chan struct{})
			armed.Store(true)
			// R0's entry is applied, and its answer stalls with the only
			// commit slot.
			r0 := reserve("R0, whose commit stalls", l, limit, "r0-"+limit)
			<-stalled
			// R arrives and waits in the batcher for the slot, and so does
			// a replay of its request ID.
			r := reserve("R via "+via.name+", decided after "+later.name, via.n, limit, "r-"+limit)
			replay := reserve("a replay of R via "+via.name+", decided after "+later.name, via.n, limit, "r-"+limit)
			waitFor(t, 10*time.Second, "a reserve stamped and queued in the leader's batcher", func() bool { return len(l.batcher.in) > 0 })
			// An entry stamped after that reserve's arrival reaches the log
			// before it.
			if err := entry(); err != nil {
				t.Fatalf("%s: %v", later.name, err)
			}
			close(laterDone)
			answers := []answer{<-r0, <-r, <-replay}
			mu.Lock()
			raw := slices.Clone(decided)
			mu.Unlock()
			clamped := 0
			for _, a := range answers {
				if a.err != nil || a.res.Status != fsm.Granted || a.res.ExpiresInNanos <= 0 || a.res.HoldExpiresInNanos <= 0 {
					t.Fatalf("%s: %+v %v, want granted with an expiry and a hold", a.what, a.res, a.err)
				}
				var d *fsm.ReserveResult
				for i := range raw {
					if raw[i].ReservationID == a.res.ReservationID && raw[i].Duplicate == a.res.Duplicate {
						d = &raw[i]
					}
				}
				if d == nil {
					t.Fatalf("%s: the leader decided no reservation %d (duplicate %v): %+v", a.what, a.res.ReservationID, a.res.Duplicate, raw)
				}
				if !d.OnArrival {
					clamped++
				}
				// The register's window, in cluster time; the leader's
				// timeline reaches its ends no sooner than their distance
				// from leaderNow after the answer (it runs no faster than
				// real time).
				const tolerance = 10 * time.Millisecond
				for _, e := range []struct {
					what        string
					got, atNano int64
				}{{"use its permit", a.res.ExpiresInNanos, d.NowNanos + d.ExpiresInNanos}, {"keep its in-flight slot", a.res.HoldExpiresInNanos, d.NowNanos + d.HoldExpiresInNanos}} {
					if over := time.Duration(e.got - (e.atNano - a.leaderNow)); over > tolerance {
						t.Errorf("%s: the client may %s %v after the register stops counting it (told %v, the register's end is %v later; decided at its arrival: %v)",
							a.what, e.what, over, time.Duration(e.got), time.Duration(e.atNano-a.leaderNow), d.OnArrival)
					}
				}
				readyAt := d.NowNanos + d.WaitNanos
				if early := time.Duration((readyAt - a.leaderNow) - a.res.WaitNanos); early > tolerance {
					t.Errorf("%s: the permit is usable %v before its slot (wait %v, the slot is %v later)",
						a.what, early, time.Duration(a.res.WaitNanos), time.Duration(readyAt-a.leaderNow))
				}
			}
			if clamped == 0 {
				t.Fatalf("via %s, after %s: no reserve was decided after its arrival (%+v)", via.name, later.name, raw)
			}
		}
	}
}
