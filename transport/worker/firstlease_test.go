package worker

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/server"
	"github.com/permitd/permitd/transport/server/fakestore"
)

// slowFirstLease is the register through the Go client, except that the
// first lease is applied and its answer then lost while the register's
// clock runs past the grant's expiry: the register was slower than the
// worker's request timeout.
type slowFirstLease struct {
	*client.Client
	store   *fakestore.Store
	ttl     time.Duration
	first   atomic.Bool
	firstID atomic.Uint64
}

func (r *slowFirstLease) Lease(ctx context.Context, limit string, q client.LeaseRequest) (client.LeaseGrant, error) {
	g, err := r.Client.Lease(ctx, limit, q)
	if err == nil && r.first.CompareAndSwap(false, true) {
		r.firstID.Store(g.LeaseID)
		r.store.Advance(int64(2 * r.ttl))
		return client.LeaseGrant{}, fmt.Errorf("slow register: %w", context.DeadlineExceeded)
	}
	return g, err
}

// TestFirstLeaseAnsweredFencedIsLeasedAgain: a worker whose first lease
// was applied but answered only to a retry that arrived after the grant
// expired (the register answers such a replay "fenced") leases again at
// once, and Start succeeds; it used to treat the answer as a refusal and
// fail to start.
func TestFirstLeaseAnsweredFencedIsLeasedAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store := fakestore.New()
	srv := httptest.NewServer(server.NewHandler(store, server.HandlerOptions{}))
	t.Cleanup(srv.Close)
	c, err := client.New([]string{srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutLimit(ctx, testLimit, client.LimitSpec{Algorithm: "strict", Rate: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutLeasePolicy(ctx, testLimit, client.LeasePolicy{Leased: true}); err != nil {
		t.Fatal(err)
	}
	store.Advance(int64(time.Second))
	const ttl = 400 * time.Millisecond
	reg := &slowFirstLease{Client: c, store: store, ttl: ttl}
	mlc := memberlist.DefaultLocalConfig()
	mlc.BindAddr, mlc.BindPort = "127.0.0.1", 0
	w, err := New(Config{Name: "w1", Group: "g", Limit: testLimit, Register: reg, Gossip: mlc, TTL: ttl,
		RenewEvery: ttl / 2, RetryEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	waitFor(t, 2*time.Second, "a lease", func() bool { return w.Status().LeaseID != 0 })
	if st, s := w.Status(), w.Stats(); st.LeaseID == reg.firstID.Load() || s.Fenced != 1 || s.Leases != 1 {
		t.Errorf("lease %d, fenced %d, leases %d; want a second lease (not %d) after one fenced answer", st.LeaseID, reg.firstID.Load(), s.Fenced, s.Leases)
	}
	if err := w.Acquire(ctx, 1); err != nil {
		t.Errorf("Acquire: %v", err)
	}
}
