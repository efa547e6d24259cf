package worker

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/permitd/permitd/transport/client"
)

// solo starts one worker alone (loopback gossip) on limit "api" of 1000
// permits/s, C = O = 300, TTL 300 ms renewed every 150 ms.
func solo(t *testing.T, mod func(*Config)) (*Worker, *link, *fakeRegister) {
	t.Helper()
	reg := newFakeRegister(t, time.Now())
	reg.putLeased(testLimit, 1000, 300, 300)
	l := &link{r: reg}
	mlc := memberlist.DefaultLocalConfig()
	mlc.BindAddr, mlc.BindPort = "127.0.0.1", 0
	cfg := Config{Name: "solo", Group: "g", Limit: testLimit, Register: l, Gossip: mlc,
		TTL: 300 * time.Millisecond, RenewEvery: 150 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return w, l, reg
}

func TestLifecycle(t *testing.T) {
	reg := newFakeRegister(t, time.Now())
	reg.putLeased(testLimit, 1000, 300, 300)
	w, err := New(Config{Name: "w", Group: "g", Limit: testLimit, Register: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Acquire(context.Background(), 1); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Acquire before Start: %v, want ErrNotStarted", err)
	}
	if err := w.Stop(context.Background()); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Stop before Start: %v, want ErrNotStarted", err)
	}

	w, _, reg = solo(t, nil)
	if _, err := w.TryAcquire(0, 0); !errors.Is(err, ErrInvalidPermits) {
		t.Errorf("TryAcquire(0): %v, want ErrInvalidPermits", err)
	}
	// The first grant is a split of the rate among the claimants (here
	// one), as far as the pool has minted: a lease opened within a
	// millisecond of the policy finds nothing minted yet, and renewals
	// without callers report no demand. Acquire waits for permits, and its
	// asks raise the demand the next renewal reports.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for range 20 {
		if err := w.Acquire(ctx, 1); err != nil {
			t.Fatalf("Acquire: %v", err)
		}
	}
	st := w.Status()
	if st.LeaseID == 0 || st.SpentPermits != 20 || st.Members["g"][0] != "solo" {
		t.Errorf("status after 20 acquires: %+v", st)
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := w.Acquire(context.Background(), 1); !errors.Is(err, ErrStopped) {
		t.Errorf("Acquire after Stop: %v, want ErrStopped", err)
	}
	p := reg.pool(testLimit)
	if p.ActiveLeases != 0 || p.Returns != 1 || p.SpentPermits < 20 {
		t.Errorf("after Stop the pool shows %d active leases, %d returns, %d spent; want 0, 1, >= 20", p.ActiveLeases, p.Returns, p.SpentPermits)
	}
}

// TestAcquireWithoutABoundWaits: TryAcquire with a max wait of
// math.MaxInt64, and Acquire with a context whose deadline is centuries
// away, wait for permits like any long wait. The worker's deadline, its
// clock plus that wait, wrapped into the past: a worker without a permit
// at hand refused at once (false) and Acquire failed with
// context.DeadlineExceeded.
func TestAcquireWithoutABoundWaits(t *testing.T) {
	w, _, _ := solo(t, nil)
	far, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Duration(math.MaxInt64)))
	defer cancel()
	// 1000 permits/s with C = O = 300: 600 permits outrun the first
	// grants, so most calls wait for a renewal or the pacer.
	for i := range 600 {
		if i%2 == 0 {
			if ok, err := w.TryAcquire(1, time.Duration(math.MaxInt64)); !ok || err != nil {
				t.Fatalf("TryAcquire(1, math.MaxInt64) #%d = %v, %v; want a permit", i, ok, err)
			}
			continue
		}
		if err := w.Acquire(far, 1); err != nil {
			t.Fatalf("Acquire #%d with a deadline centuries away: %v", i, err)
		}
	}
}

func TestStartFailsWhenTheLimitCannotBeLeased(t *testing.T) {
	reg := newFakeRegister(t, time.Now())
	mlc := memberlist.DefaultLocalConfig()
	mlc.BindAddr, mlc.BindPort = "127.0.0.1", 0
	w, err := New(Config{Name: "w", Group: "g", Limit: "nope", Register: reg, Gossip: mlc})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); !errors.Is(err, ErrNoPermits) || !errors.Is(err, client.ErrNotFound) || !strings.Contains(err.Error(), `limit "nope" not found`) {
		t.Fatalf("Start on an unknown limit: %v, want ErrNoPermits and the register's 404", err)
	}
	if _, err := w.TryAcquire(1, 0); !errors.Is(err, ErrStopped) {
		t.Errorf("TryAcquire after a failed Start: %v, want ErrStopped", err)
	}
}

func TestFencedLeaseIsLeasedAgain(t *testing.T) {
	w, _, reg := solo(t, nil)
	first := w.Status()
	// Someone returns the worker's lease behind its back: its next renewal
	// is fenced, and it opens a new lease.
	if _, err := reg.Return(context.Background(), testLimit, first.LeaseID, first.Epoch, client.LeaseReport{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Second, "a new lease", func() bool { return w.Status().LeaseID != first.LeaseID && w.Status().LeaseID != 0 })
	if s := w.Stats(); s.Fenced != 1 || s.Leases != 2 {
		t.Errorf("fenced %d, leases %d; want 1, 2", s.Fenced, s.Leases)
	}
}

// cutOffSoon makes a solo worker call the register unreachable after a
// TTL of silence (300 ms) rather than the default 3 s: the tests that use
// it cut the register off for good.
func cutOffSoon(c *Config) { c.UnreachableAfter = c.TTL }

func TestLostAnswersAreRetriedWithTheSameRequest(t *testing.T) {
	w, l, reg := solo(t, cutOffSoon)
	waitFor(t, 2*time.Second, "a renewal", func() bool { return w.Stats().Renewals >= 1 })
	l.loseAnswers.Store(true)
	calls := l.calls.Load()
	waitFor(t, 2*time.Second, "two lost answers", func() bool { return l.calls.Load() >= calls+2 })
	// Its grant was reported: it spends nothing and, alone, fails closed.
	waitFor(t, 2*time.Second, "fail closed", func() bool {
		_, err := w.TryAcquire(1, 100*time.Millisecond)
		return errors.Is(err, ErrRegisterUnreachable)
	})
	l.loseAnswers.Store(false)
	waitFor(t, 2*time.Second, "renewing again", func() bool { return w.Status().LastError == "" })
	// Every granting answer the worker got stands for exactly one renewal
	// applied by the register, however many times it was retried.
	waitFor(t, 2*time.Second, "the register and the worker agree", func() bool {
		return reg.pool(testLimit).Renewals == w.Stats().Renewals
	})
	// Each lost answer is counted when its call gives up, which may come
	// after the register has seen the next call.
	waitFor(t, 2*time.Second, "the lost answers counted as failed calls", func() bool { return w.Stats().RegisterFails >= 2 })
}

func TestUndeliveredRenewalKeepsTheGrantUntilItsLocalExpiry(t *testing.T) {
	w, l, _ := solo(t, cutOffSoon)
	// Ask (about 200/s) until the measured demand brings a grant.
	waitFor(t, 2*time.Second, "a grant", func() bool {
		_, _ = w.TryAcquire(1, 5*time.Millisecond)
		return w.Status().GrantPermitsLeft > 10
	})
	l.cut.Store(true)
	cutAt := time.Now()
	// The renewal is not delivered: the grant reopens and is spent (at
	// its pace) until its local expiry, at most TTL - margin after it was
	// asked for, then the worker fails closed.
	spent := 0
	var failed error
	for failed == nil {
		ok, err := w.TryAcquire(1, 50*time.Millisecond)
		if ok {
			spent++
		}
		failed = err
		if time.Since(cutAt) > 2*time.Second {
			t.Fatal("still spending 2 s after the cut")
		}
	}
	if !errors.Is(failed, ErrNoPermits) || !errors.Is(failed, ErrRegisterUnreachable) || !strings.Contains(failed.Error(), "last good renewal was") {
		t.Errorf("cut off: %v, want ErrNoPermits + ErrRegisterUnreachable saying when the last good renewal was", failed)
	}
	if spent == 0 {
		t.Errorf("spent nothing after the cut: the undelivered renewal closed the grant")
	}
	if s := w.Status(); !s.CutOff {
		t.Errorf("status does not say cut off: %+v", s)
	}
	l.cut.Store(false)
	waitFor(t, 2*time.Second, "leasing again", func() bool { return !w.Status().CutOff && w.Status().GrantPermitsLeft > 0 })
}

func TestAcquireHonoursTheContextDeadline(t *testing.T) {
	w, _, _ := solo(t, nil)
	// A caller's ask makes the renewals report demand (see TestLifecycle).
	first, cancelFirst := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancelFirst()
	if err := w.Acquire(first, 1); err != nil {
		t.Fatalf("first Acquire: %v", err)
	}
	waitFor(t, 2*time.Second, "a grant", func() bool { return w.Status().GrantPermitsLeft > 0 })
	left := w.Status().GrantPermitsLeft
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	// More permits than the grant holds, and more than the pacing can
	// serve before the deadline.
	err := w.Acquire(ctx, left+1000)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire(%d) with a 20 ms deadline: %v, want DeadlineExceeded", left+1000, err)
	}
}

// TestStopDuringStartReturnsTheLease: a Stop that races a Start whose
// lease call is under way waits for it, then returns the lease it opened
// (it used to find no lease, and the lease stayed open until its TTL).
func TestStopDuringStartReturnsTheLease(t *testing.T) {
	reg := newFakeRegister(t, time.Now())
	reg.putLeased(testLimit, 1000, 300, 300)
	l := &link{r: reg}
	l.latency.Store(int64(50 * time.Millisecond))
	mlc := memberlist.DefaultLocalConfig()
	mlc.BindAddr, mlc.BindPort = "127.0.0.1", 0
	w, err := New(Config{Name: "racer", Group: "g", Limit: testLimit, Register: l, Gossip: mlc,
		TTL: 2 * time.Second, RenewEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- w.Start(context.Background()) }()
	waitFor(t, 5*time.Second, "the lease call under way", func() bool { return l.calls.Load() >= 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if err := <-started; err != nil {
		t.Errorf("Start: %v", err)
	}
	if p := reg.pool(testLimit); p.ActiveLeases != 0 || p.LeasesOpened != 1 || p.Returns != 1 {
		t.Errorf("after Stop: %d active leases, %d opened, %d returned; want 0, 1, 1", p.ActiveLeases, p.LeasesOpened, p.Returns)
	}
}
