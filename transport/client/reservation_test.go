package client

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// dropAnswer closes the connection without an answer: the request may or
// may not have been decided (an ambiguous failure).
func dropAnswer(_ int, w http.ResponseWriter, _ *http.Request) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
	}
}

// TestReserveManyAndSettleKeepTheirRequestIDAcrossRetries: the README's
// promise that a reserve carries an idempotency key it reuses on retries
// after ambiguous failures, for the reservation form and its settlement:
// without it, a retry after a lost answer would be decided twice (permits
// spent twice, an in-flight hold leaked until its TTL), or a settlement
// that took effect would be answered 409 on its retry.
func TestReserveManyAndSettleKeepTheirRequestIDAcrossRetries(t *testing.T) {
	drop := &scripted{reply: dropAnswer}
	good := &scripted{reply: granted(5)}
	c := newClient(t, []string{host(serve(t, drop)), host(serve(t, good))}, WithClock(newFakeClock()))
	r, err := c.ReserveMany(context.Background(), []Want{{"a", 1}, {"b", 2}}, ReserveOptions{MaxWait: time.Second})
	if err != nil || !r.Granted {
		t.Fatalf("ReserveMany after a lost answer: %+v, %v", r, err)
	}
	if a, b := drop.IDs(), good.IDs(); len(a) != 1 || len(b) != 1 || a[0] == "" || a[0] != b[0] || r.RequestID != a[0] {
		t.Fatalf("reserve sent request IDs %q, then %q on the retry (the grant says %q): want one non-empty ID, reused", a, b, r.RequestID)
	}

	drop = &scripted{reply: dropAnswer}
	good = &scripted{reply: func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"refunded":[],"charged":[]}`)
	}}
	c = newClient(t, []string{host(serve(t, drop)), host(serve(t, good))}, WithClock(newFakeClock()))
	if _, err := c.Settle(context.Background(), "7", []Want{{"a", 1}}); err != nil {
		t.Fatalf("Settle after a lost answer: %v", err)
	}
	if a, b := drop.IDs(), good.IDs(); len(a) != 1 || len(b) != 1 || a[0] == "" || a[0] != b[0] {
		t.Fatalf("settle sent request IDs %q, then %q on the retry: want one non-empty ID, reused", a, b)
	}
}
