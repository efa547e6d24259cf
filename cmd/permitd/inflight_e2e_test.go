package main

import (
	"context"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/client"
)

// TestReleaseWakesWaitingReserveOverHTTP: an agent, an in-flight cap of 1
// with a TTL of a minute; B reserves it over HTTP (the Go client) with a
// max wait of 20 s while A holds it, and the server holds B's answer until
// A's release frees the slot: B is granted right after the release (not
// at A's TTL), with a hold the client counts from its request's sending
// plus the time the server held it, and a grant it may use at once.
func TestReleaseWakesWaitingReserveOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := permitdUnderTest(t)
	a, _ := startLeadingLoneAgent(t, bin)
	cl, err := client.New([]string{a.httpAddr}, client.WithAttemptTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	one, ttl := int64(1), time.Minute
	if _, err := cl.PutLimit(ctx, "cap", client.LimitSpec{Algorithm: "concurrency", MaxInFlight: &one, TTL: &ttl}); err != nil {
		t.Fatal(err)
	}
	want := []client.Want{{Limit: "cap", Permits: 1}}
	ra, err := cl.ReserveMany(ctx, want, client.ReserveOptions{})
	if err != nil || !ra.Granted || !ra.Holds {
		t.Fatalf("A: %+v %v, want granted, holding", ra, err)
	}
	type answer struct {
		r   client.Reservation
		err error
	}
	waitB := make(chan answer, 1)
	go func() {
		// The client's attempt timeout (2 s) is shorter than the wait:
		// the client allows the attempt the max wait on top of it.
		r, err := cl.ReserveMany(ctx, want, client.ReserveOptions{MaxWait: 20 * time.Second})
		waitB <- answer{r, err}
	}()
	waitUntil(t, 10*time.Second, "B to wait in the cap's queue", func() bool {
		st, err := cl.Status(ctx)
		return err == nil && st.WaitingReserves == 1
	})
	select {
	case b := <-waitB:
		t.Fatalf("B answered %+v %v while A holds the only slot", b.r, b.err)
	default:
	}
	released := time.Now()
	if rel, err := cl.Release(ctx, ra.ID); err != nil || rel.Released != 1 {
		t.Fatalf("release of A: %+v %v", rel, err)
	}
	b := <-waitB
	if b.err != nil || !b.r.Granted || !b.r.Holds || b.r.Delay != 0 {
		t.Fatalf("B: %+v %v, want granted at once after the release", b.r, b.err)
	}
	if took := time.Since(released); took > 15*time.Second {
		t.Fatalf("B answered %v after A's release", took)
	}
	if b.r.Held <= 0 || b.r.Held > b.r.ReceivedAt.Sub(b.r.SentAt) {
		t.Fatalf("B's answer says the server held it %v (sent %v before it was received)", b.r.Held, b.r.ReceivedAt.Sub(b.r.SentAt))
	}
	if exp := b.r.ExpiresAt(); !exp.After(time.Now()) || exp.Sub(b.r.SentAt) > b.r.Held+ttl {
		t.Fatalf("B's hold expires at %v (sent at %v, held %v): not usable now, or longer than its TTL", exp, b.r.SentAt, b.r.Held)
	}
	if err := b.r.Wait(ctx); err != nil {
		t.Fatalf("B's grant cannot be used: %v", err)
	}
	if rel, err := cl.Release(ctx, b.r.ID); err != nil || rel.Released != 1 {
		t.Fatalf("release of B: %+v %v", rel, err)
	}
}
