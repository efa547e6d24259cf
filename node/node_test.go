package node

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/bucket"
	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/wire"
)

func strictConfig(t *testing.T, interval time.Duration, maxReserved int64) bucket.Config {
	t.Helper()
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1, Per: interval, MaxReserved: maxReserved, Expiry: interval / 10})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return cfg
}

// grant is one permit as a client saw it: it may use the permit at useAt
// (receive time + wait); rtt bounds how late the answer was relative to the
// leader's decision.
type grant struct {
	useAt time.Time
	rtt   time.Duration
	via   string
}

// checkSpacing verifies that consecutive permits (by use time) are at
// least interval apart, less the round trip of the earlier one (the most the
// answer can have been delayed after the decision: node's doc.go,
// invariant 3, and answer.go).
func checkSpacing(t *testing.T, grants []grant, interval time.Duration) {
	t.Helper()
	sort.Slice(grants, func(i, j int) bool { return grants[i].useAt.Before(grants[j].useAt) })
	for i := 1; i < len(grants); i++ {
		gap := grants[i].useAt.Sub(grants[i-1].useAt)
		tol := max(grants[i-1].rtt, grants[i].rtt)
		if gap < interval-tol {
			t.Errorf("permits %d and %d only %v apart (interval %v, tolerance %v; via %s and %s)", i-1, i, gap, interval, tol, grants[i-1].via, grants[i].via)
		}
	}
}

// reserveLoop reserves single permits through nodes chosen by pick until
// stop is closed or n grants were collected, retrying ambiguous failures
// with the same request ID.
func reserveLoop(ctx context.Context, t *testing.T, c *testCluster, limit string, worker int, pick func(i int) *Node, stop <-chan struct{}, out chan<- grant) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		n := pick(i)
		if n == nil {
			continue
		}
		r := fsm.Reserve{Limit: limit, Permits: 1, MaxWaitNanos: int64(2 * time.Second), RequestID: fmt.Sprintf("w%d-%d", worker, i)}
		// A short attempt bounds the round trip, and with it the tolerance
		// of the spacing check; failed attempts are retried by the loop
		// with a new request ID (the old one may still be granted, unseen:
		// an unseen grant is never used, so it cannot break spacing).
		rctx, cancel := context.WithTimeout(ctx, attemptTimeout)
		sent := time.Now()
		res, err := n.Reserve(rctx, r)
		recv := time.Now()
		cancel()
		if err != nil {
			if errors.Is(err, ErrNoLeader) || errors.Is(err, ErrShutdown) {
				continue
			}
			t.Errorf("reserve via %s: %v", n.ID(), err)
			return
		}
		if res.Status != fsm.Granted {
			continue
		}
		select {
		case out <- grant{useAt: recv.Add(time.Duration(res.WaitNanos)), rtt: recv.Sub(sent), via: n.ID()}:
		case <-stop:
			return
		}
		// Honour the wait like a real client, so that reservations stay
		// bounded by MaxReserved.
		select {
		case <-time.After(time.Duration(res.WaitNanos)):
		case <-stop:
			return
		}
	}
}

// attemptTimeout bounds one reserve attempt in the spacing tests; it must be
// well below the interval for the check to mean something.
const attemptTimeout = 100 * time.Millisecond

// retryNoLeader retries op while it fails with ErrNoLeader (a leader change
// under a loaded test machine), for up to 10 s.
func retryNoLeader(t *testing.T, op func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := op()
		if err == nil {
			return
		}
		if !errors.Is(err, ErrNoLeader) || time.Now().After(deadline) {
			t.Fatalf("%v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestForwardingFromFollower(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 20*time.Second)
	f := c.followers(l)[0]
	// Grants expire 1 s after their time, not a tenth of the interval
	// (10 ms): a forwarded reserve's answer took longer than that on a
	// loaded CI run, and the test is about forwarding, not expiry.
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1, Per: 100 * time.Millisecond, MaxReserved: 5, Expiry: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	retryNoLeader(t, func() error { _, err := f.PutLimit(ctx, fsm.PutLimit{Name: "api", Config: cfg}); return err })
	info, err := f.Limit(ctx, "api")
	if err != nil || info.Name != "api" {
		t.Fatalf("read via follower: %+v %v", info, err)
	}
	res, err := f.Reserve(ctx, fsm.Reserve{Limit: "api", Permits: 1, MaxWaitNanos: int64(time.Second), RequestID: fmt.Sprintf("t%d-%d", 135, time.Now().UnixNano())})
	if err != nil || res.Status != fsm.Granted {
		t.Fatalf("reserve via follower: %+v %v", res, err)
	}
	// Invalid reserves through a follower are refused by the leader's
	// checks before its log: no entry is appended (an Invalid decision
	// would change neither count below).
	lastIndex := l.raft.LastIndex()
	_, err = f.Reserve(ctx, fsm.Reserve{Limit: "nope", Permits: 1, RequestID: fmt.Sprintf("t%d-%d", 139, time.Now().UnixNano())})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("reserve of unknown limit via follower: got %v, want ErrNotFound", err)
	}
	_, err = f.Reserve(ctx, fsm.Reserve{Limit: "api", Permits: 1000, RequestID: fmt.Sprintf("t%d-%d", 143, time.Now().UnixNano())})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("reserve of too many permits: got %v, want ErrInvalid", err)
	}
	if _, err := f.Reserve(ctx, fsm.Reserve{Limit: "api", Permits: 0, RequestID: fmt.Sprintf("t%d-%d", 147, time.Now().UnixNano())}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("reserve of 0 permits: got %v, want ErrInvalid", err)
	}
	if info, _ := l.fsm.Limit("api"); info.GrantedRequests+info.RefusedRequests != 1 {
		t.Fatalf("invalid reserves reached the register: %+v", info)
	}
	if got := l.raft.LastIndex(); got != lastIndex {
		t.Fatalf("invalid reserves reached the leader's log: last index %d, was %d", got, lastIndex)
	}
}

func TestLeaderKillGrantsNothingEarly(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 60*time.Second)
	const interval = 200 * time.Millisecond
	retryNoLeader(t, func() error {
		_, err := l.PutLimit(ctx, fsm.PutLimit{Name: "api", Config: strictConfig(t, interval, 4)})
		return err
	})
	stop := make(chan struct{})
	grants := make(chan grant, 1024)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reserveLoop(ctx, t, c, "api", w, func(i int) *Node {
				ids := c.ids
				return c.node(ids[(w+i)%len(ids)])
			}, stop, grants)
		}()
	}
	var got []grant
	collect := func(n int) {
		for len(got) < n {
			select {
			case g := <-grants:
				got = append(got, g)
			case <-ctx.Done():
				t.Fatalf("only %d grants before the deadline", len(got))
			}
		}
	}
	collect(10)
	c.kill(l.ID())
	killedAt := len(got)
	nl := c.leader()
	if nl.ID() == l.ID() {
		t.Fatal("killed leader still leads")
	}
	collect(killedAt + 15)
	close(stop)
	wg.Wait()
	close(grants)
	for g := range grants {
		got = append(got, g)
	}
	checkSpacing(t, got, interval)
	t.Logf("%d grants checked across a leader kill (%s → %s)", len(got), l.ID(), nl.ID())
}

func TestSkewedLeaderClockGrantsNothingEarly(t *testing.T) {
	for _, skew := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			c := newSkewedCluster(t, skew)
			l := c.leader()
			ctx := ctxTimeout(t, 30*time.Second)
			const interval = 100 * time.Millisecond
			retryNoLeader(t, func() error {
				_, err := l.PutLimit(ctx, fsm.PutLimit{Name: "api", Config: strictConfig(t, interval, 3)})
				return err
			})
			var got []grant
			take := func(n *Node, k int) {
				for i := 0; i < k; i++ {
					sent := time.Now()
					res, err := n.Reserve(ctx, fsm.Reserve{Limit: "api", Permits: 1, MaxWaitNanos: int64(time.Second), RequestID: fmt.Sprintf("%s-%d-%d-%d", n.ID(), len(got), i, time.Now().UnixNano())})
					recv := time.Now()
					if err != nil {
						t.Fatalf("reserve: %v", err)
					}
					if res.Status == fsm.Refused {
						// Back off as a client would, then retry.
						waitFor(t, 5*time.Second, "retry_after", func() bool { return time.Since(recv) >= time.Duration(res.RetryAfterNanos) })
						i--
						continue
					}
					got = append(got, grant{useAt: recv.Add(time.Duration(res.WaitNanos)), rtt: recv.Sub(sent), via: n.ID()})
				}
			}
			take(l, 3)
			// Every node's clock differs from every other's by at least an
			// hour: the next leader continues a timeline started elsewhere.
			old := l.ID()
			c.kill(old)
			l = c.leader()
			if l.ID() == old {
				t.Fatal("killed leader still leads")
			}
			take(l, 4)
			checkSpacing(t, got, interval)
		})
	}
}

// newSkewedCluster starts 3 nodes whose clocks are off by 0, skew and
// 2×skew.
func newSkewedCluster(t *testing.T, skew time.Duration) *testCluster {
	return newTestClusterWith(t, 3, func(id string) wire.Clock {
		k := map[string]time.Duration{"n1": 0, "n2": 1, "n3": 2}[id]
		sc, err := NewSkewedClock(wire.NewMonotonicClock(), skew*k, 1)
		if err != nil {
			t.Fatal(err)
		}
		return sc
	})
}

func TestFullRestartKeepsLimitsAndLastGrant(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 30*time.Second)
	const interval = 1500 * time.Millisecond
	retryNoLeader(t, func() error {
		_, err := l.PutLimit(ctx, fsm.PutLimit{Name: "slow", Config: strictConfig(t, interval, 1)})
		return err
	})
	sent := time.Now()
	res, err := l.Reserve(ctx, fsm.Reserve{Limit: "slow", Permits: 1, RequestID: fmt.Sprintf("t%d-%d", 264, time.Now().UnixNano())})
	recv := time.Now()
	if err != nil || res.Status != fsm.Granted {
		t.Fatalf("first reserve: %+v %v", res, err)
	}
	first := grant{useAt: recv.Add(time.Duration(res.WaitNanos)), rtt: recv.Sub(sent)}
	waitFor(t, 5*time.Second, "all replicas applied", func() bool {
		for _, id := range c.ids {
			if c.node(id).raft.AppliedIndex() < l.raft.AppliedIndex() {
				return false
			}
		}
		return true
	})
	for _, id := range c.ids {
		c.kill(id)
	}
	for _, id := range c.ids {
		c.start(id, nil)
	}
	l = c.leader()
	var info fsm.LimitInfo
	retryNoLeader(t, func() error {
		var err error
		info, err = l.Limit(ctx, "slow")
		return err
	})
	if info.GrantedRequests != 1 {
		t.Fatalf("counters lost: %+v", info)
	}
	sent = time.Now()
	res, err = l.Reserve(ctx, fsm.Reserve{Limit: "slow", Permits: 1, MaxWaitNanos: int64(3 * time.Second), RequestID: fmt.Sprintf("t%d-%d", 293, time.Now().UnixNano())})
	recv = time.Now()
	if err != nil || res.Status != fsm.Granted {
		t.Fatalf("reserve after restart: %+v %v", res, err)
	}
	second := grant{useAt: recv.Add(time.Duration(res.WaitNanos)), rtt: recv.Sub(sent)}
	checkSpacing(t, []grant{first, second}, interval)
}

func TestJoinAndRemove(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 30*time.Second)
	retryNoLeader(t, func() error {
		_, err := l.PutLimit(ctx, fsm.PutLimit{Name: "api", Config: strictConfig(t, time.Second, 1)})
		return err
	})
	c.ids = append(c.ids, "n4")
	c.dirs["n4"] = t.TempDir()
	n4 := c.start("n4", nil)
	retryNoLeader(t, func() error { _, err := c.followers(l)[0].Join(ctx, "n4", addrOf("n4")); return err })
	waitFor(t, 10*time.Second, "n4 to apply the limit", func() bool {
		_, ok := n4.fsm.Limit("api")
		return ok
	})
	waitFor(t, 10*time.Second, "4 voters", func() bool { return n4.voterCount() == 4 })
	retryNoLeader(t, func() error { return n4.Remove(ctx, "n4") })
	waitFor(t, 10*time.Second, "3 voters", func() bool { return l.voterCount() == 3 })
	if err := l.Remove(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("remove unknown: %v", err)
	}
}

func TestPartitionedLeaderRefusesAndMajorityServes(t *testing.T) {
	c := newTestCluster(t, 3)
	l := c.leader()
	ctx := ctxTimeout(t, 30*time.Second)
	// An expiry far above any commit latency: this test is about who
	// decides, not about how late a permit may be used.
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1, Per: 10 * time.Millisecond, MaxReserved: 10, Expiry: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: "api", Config: cfg}); return err })
	var addrs []string
	for _, id := range c.ids {
		addrs = append(addrs, addrOf(id))
	}
	c.sw.Isolate(addrOf(l.ID()), addrs)
	// Both asked at once, while the isolated node still believes it
	// leads: it grants nothing, and it answers no read either (reads are
	// linearizable: it cannot know that nothing was committed elsewhere,
	// and its barrier cannot commit).
	readErr := make(chan error, 1)
	go func() {
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if info, err := l.Limit(short, "api"); err == nil {
			readErr <- fmt.Errorf("answered %+v", info)
			return
		}
		readErr <- nil
	}()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = l.Reserve(short, fsm.Reserve{Limit: "api", Permits: 1})
	cancel()
	if err == nil {
		t.Fatal("an isolated leader granted a permit")
	}
	if err := <-readErr; err != nil {
		t.Fatalf("an isolated leader answered a read from its own state: %v", err)
	}
	var nl *Node
	waitFor(t, 10*time.Second, "a new leader in the majority", func() bool {
		for _, f := range c.followers(l) {
			if f.timeline.isActive() {
				nl = f
				return true
			}
		}
		return false
	})
	res, err := nl.Reserve(ctx, fsm.Reserve{Limit: "api", Permits: 1, MaxWaitNanos: int64(time.Second), RequestID: fmt.Sprintf("t%d-%d", 349, time.Now().UnixNano())})
	if err != nil || res.Status != fsm.Granted {
		t.Fatalf("majority reserve: %+v %v", res, err)
	}
	c.sw.Heal()
	waitFor(t, 10*time.Second, "old leader to follow", func() bool { return l.raft.State() == raft.Follower })
	if _, err := l.Limit(ctx, "api"); err != nil {
		t.Fatalf("read via healed old leader: %v", err)
	}
}

func TestConcurrentReservesAreBatched(t *testing.T) {
	var maxBatch atomic.Int64
	c := newTestClusterWithConfig(t, 3, func(cfg *Config) {
		cfg.OnBatch = func(size int, _ time.Duration) {
			for {
				m := maxBatch.Load()
				if int64(size) <= m || maxBatch.CompareAndSwap(m, int64(size)) {
					return
				}
			}
		}
	})
	l := c.leader()
	ctx := ctxTimeout(t, 30*time.Second)
	// An expiry of an hour: a strict permit of a microsecond's interval
	// expires (by default) half a microsecond after its slot, long before
	// any answer could reach a caller; this test is about batching.
	cfg, err := bucket.Compile(bucket.Spec{Algorithm: bucket.Strict, Rate: 1e6, Per: time.Second, MaxReserved: 1 << 20, Expiry: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: "fast", Config: cfg}); return err })
	var wg sync.WaitGroup
	var granted atomic.Int64
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				// A request ID lets the node retry across a leader change.
				res, err := l.Reserve(ctx, fsm.Reserve{Limit: "fast", Permits: 1, MaxWaitNanos: int64(time.Second), RequestID: fmt.Sprintf("b%d-%d", w, i)})
				if err != nil {
					t.Errorf("reserve: %v", err)
					return
				}
				if res.Status == fsm.Granted {
					granted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if granted.Load() != 64*20 {
		t.Fatalf("granted %d of %d", granted.Load(), 64*20)
	}
	if maxBatch.Load() < 2 {
		t.Fatalf("largest batch %d: concurrent reserves were not batched", maxBatch.Load())
	}
	t.Logf("largest batch: %d", maxBatch.Load())
}
