package worker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/permitd/permitd/transport/client"
)

// stopFaults is a register whose next renewal (holdRenewal) is applied
// but answered only when release is closed, or never (an ambiguous error
// when its context ends, as the real client answers a canceled call), and
// whose next lease (loseLease) is applied and its answer lost. It counts
// the sends of each request ID.
type stopFaults struct {
	Register
	holdRenewal, loseLease atomic.Bool
	// held is closed when the held renewal has been applied.
	held, release chan struct{}

	mu    sync.Mutex
	sends map[string]int
}

func newStopFaults(r Register) *stopFaults {
	return &stopFaults{Register: r, held: make(chan struct{}), release: make(chan struct{}), sends: make(map[string]int)}
}

func (f *stopFaults) count(id string) {
	f.mu.Lock()
	f.sends[id]++
	f.mu.Unlock()
}

// Lease implements Register.
func (f *stopFaults) Lease(ctx context.Context, limit string, q client.LeaseRequest) (client.LeaseGrant, error) {
	f.count(q.RequestID)
	res, err := f.Register.Lease(ctx, limit, q)
	if err == nil && f.loseLease.CompareAndSwap(true, false) {
		return client.LeaseGrant{}, errAnswerLost
	}
	return res, err
}

// Renew implements Register.
func (f *stopFaults) Renew(ctx context.Context, limit string, id, epoch uint64, rep client.LeaseReport) (client.LeaseGrant, error) {
	f.count(rep.RequestID)
	res, err := f.Register.Renew(ctx, limit, id, epoch, rep)
	if err != nil || !f.holdRenewal.CompareAndSwap(true, false) {
		return res, err
	}
	close(f.held)
	select {
	case <-f.release:
		return res, nil
	case <-ctx.Done():
		return client.LeaseGrant{}, fmt.Errorf("test: renewal %s applied, its answer lost: %w", rep.RequestID, ctx.Err())
	}
}

// maxSends returns how often the most-sent request was sent.
func (f *stopFaults) maxSends() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.sends {
		n = max(n, c)
	}
	return n
}

// TestStopReturnsTheLeaseTheRegisterHolds: Stop returns the lease even
// when a renewal or the lease itself is without an answer at Stop, and its
// nil error means the register holds no lease of the worker's: the pool
// shows no active lease and one return right after Stop. It used to cancel
// a renewal under way, return the grant before it (answered fenced, since
// the register had applied the renewal) and say nil while the lease stayed
// open until its TTL; a lease without an answer was not returned at all.
func TestStopReturnsTheLeaseTheRegisterHolds(t *testing.T) {
	tests := []struct {
		name string
		// arm sets the fault up on the started worker; atStop runs once
		// the worker is stopping.
		arm    func(t *testing.T, f *stopFaults, w *Worker)
		atStop func(f *stopFaults)
		// sends is how often the most-sent request was sent.
		sends int
	}{
		{"a renewal under way at Stop is waited for", func(t *testing.T, f *stopFaults, w *Worker) {
			f.holdRenewal.Store(true)
			waitFor(t, 5*time.Second, "a renewal applied, its answer held", func() bool { return isClosed(f.held) })
		}, func(f *stopFaults) { close(f.release) }, 1},
		{"a renewal whose answer is lost is sent again", func(t *testing.T, f *stopFaults, w *Worker) {
			f.holdRenewal.Store(true)
			waitFor(t, 5*time.Second, "a renewal applied, its answer lost", func() bool {
				w.mu.Lock()
				defer w.mu.Unlock()
				return isClosed(f.held) && !w.lease.inFlight && w.lease.pendingRenew != nil
			})
		}, nil, 2},
		{"a lease whose answer is lost is sent again", func(t *testing.T, f *stopFaults, w *Worker) {
			// Start's lease was applied and its answer lost (loseLease is
			// set before Start): the retry is not due before Stop.
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.lease.leaseID != 0 || w.lease.pendingLease == nil {
				t.Fatalf("after Start with a lost answer: lease %d, pending %v; want none and a pending lease", w.lease.leaseID, w.lease.pendingLease)
			}
		}, nil, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := newFakeRegister(t, time.Now())
			reg.putLeased(testLimit, 1000, 300, 300)
			f := newStopFaults(reg)
			mlc := memberlist.DefaultLocalConfig()
			mlc.BindAddr, mlc.BindPort = "127.0.0.1", 0
			// Retries and renewals far apart: nothing but Stop settles
			// what the fault left.
			w, err := New(Config{Name: "stopper", Group: "g", Limit: testLimit, Register: f, Gossip: mlc,
				TTL: 10 * time.Second, RenewEvery: 100 * time.Millisecond, RetryEvery: 5 * time.Second, RequestTimeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			f.loseLease.Store(strings.HasPrefix(tt.name, "a lease"))
			if err := w.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			tt.arm(t, f, w)
			if tt.atStop != nil {
				go func() {
					for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
						w.mu.Lock()
						stopping := w.stopping
						w.mu.Unlock()
						if stopping {
							break
						}
					}
					tt.atStop(f)
				}()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := w.Stop(ctx); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			if p := reg.pool(testLimit); p.ActiveLeases != 0 || p.Returns != 1 {
				t.Errorf("after Stop: %d active leases, %d returns, %d fenced; want 0 active and 1 return (%+v)", p.ActiveLeases, p.Returns, p.Fenced, reg.leases(testLimit))
			}
			if got := f.maxSends(); got != tt.sends {
				t.Errorf("the most-sent request was sent %d times, want %d", got, tt.sends)
			}
		})
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
