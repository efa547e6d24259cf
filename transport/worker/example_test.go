package worker_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/server"
	"github.com/permitd/permitd/transport/server/fakestore"
	"github.com/permitd/permitd/transport/worker"
)

// Example runs one worker against a register reached through the Go
// client: the real HTTP handler over an in-process register (fakestore:
// the real fsm on a manual clock, moved by hand here).
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	store := fakestore.New()
	srv := httptest.NewServer(server.NewHandler(store, server.HandlerOptions{}))
	defer srv.Close()
	c, err := client.New([]string{srv.URL})
	if err != nil {
		fmt.Println(err)
		return
	}

	// A limit of 1000 permits per second, leased to workers.
	if _, err := c.PutLimit(ctx, "api", client.LimitSpec{Algorithm: "strict", Rate: 1000}); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := c.PutLeasePolicy(ctx, "api", client.LeasePolicy{Leased: true}); err != nil {
		fmt.Println(err)
		return
	}
	// The register mints permits as its clock runs: one second's worth.
	store.Advance(int64(time.Second))

	gossip := memberlist.DefaultLocalConfig()
	gossip.BindAddr, gossip.BindPort = "127.0.0.1", 0
	w, err := worker.New(worker.Config{Name: "w1", Group: "web", Limit: "api", Register: c, Gossip: gossip})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := w.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	for range 10 {
		if err := w.Acquire(ctx, 1); err != nil {
			fmt.Println(err)
			return
		}
	}
	st := w.Status()
	fmt.Printf("leased: %v, spent: %d\n", st.LeaseID != 0, st.SpentPermits)

	if err := w.Stop(ctx); err != nil {
		fmt.Println(err)
		return
	}
	pool, err := c.Leases(ctx, "api")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("after Stop: %d active leases, %d permits spent at the register\n", pool.ActiveLeases, pool.SpentPermits)
	// Output:
	// leased: true, spent: 10
	// after Stop: 0 active leases, 10 permits spent at the register
}
