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

// TestReservationHoldExpiresAt: a grant's hold ends, on the client's
// clock, at SentAt + Held + hold_expires_in_ns (the server counts it from
// the answer's departure, at least held_ns after the request was sent),
// apart from the strict permit's earlier expiry; a hold that lapsed
// already ends at SentAt; a reservation that holds nothing has no end;
// and a server that predates the field is taken at its expiry, never
// later than the hold's end.
func TestReservationHoldExpiresAt(t *testing.T) {
	answer := func(body string) *scripted {
		return &scripted{reply: func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, body)
		}}
	}
	cases := []struct {
		name, body string
		want       func(r Reservation) time.Time
	}{
		{"hold beyond the expiry", `{"granted":true,"wait_ns":0,"expires_in_ns":20000000,"reservation_id":"3","holds":true,"hold_expires_in_ns":2000000000,"held_ns":1500,"duplicate":false}`,
			func(r Reservation) time.Time { return r.SentAt.Add(1500 + 2*time.Second) }},
		{"lapsed", `{"granted":true,"wait_ns":0,"expires_in_ns":-1,"reservation_id":"3","holds":true,"hold_expires_in_ns":-1,"held_ns":0,"duplicate":true}`,
			func(r Reservation) time.Time { return r.SentAt }},
		{"no hold", `{"granted":true,"wait_ns":0,"expires_in_ns":20000000,"reservation_id":"3","holds":false,"hold_expires_in_ns":0,"held_ns":0,"duplicate":false}`,
			func(Reservation) time.Time { return time.Time{} }},
		{"an older server", `{"granted":true,"wait_ns":0,"expires_in_ns":20000000,"reservation_id":"3","holds":true,"held_ns":700,"duplicate":false}`,
			func(r Reservation) time.Time { return r.SentAt.Add(700 + 20*time.Millisecond) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, []string{host(serve(t, answer(tc.body)))})
			r, err := c.ReserveMany(context.Background(), []Want{{"rpm", 1}, {"cap", 1}}, ReserveOptions{MaxWait: time.Second})
			if err != nil || !r.Granted {
				t.Fatalf("ReserveMany: %+v, %v", r, err)
			}
			if got, want := r.HoldExpiresAt(), tc.want(r); !got.Equal(want) {
				t.Fatalf("HoldExpiresAt() = %v, want %v (%+v)", got, want, r)
			}
		})
	}
}
