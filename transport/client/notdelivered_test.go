package client

import (
	"context"
	"errors"
	"net/http"
	"testing"
)

// TestNotDelivered: ErrNotDelivered is wrapped only when no attempt got as
// far as an open connection.
func TestNotDelivered(t *testing.T) {
	drop := func() string {
		return host(serve(t, &scripted{reply: func(_ int, w http.ResponseWriter, _ *http.Request) {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close() // the request was read: it may have been applied
			}
		}}))
	}
	busy := func() string { return host(serve(t, &scripted{reply: unavailable})) }
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		servers []string
		ctx     context.Context
		want    bool
	}{
		{"all refused", []string{deadServer(t), deadServer(t)}, context.Background(), true},
		{"context ended before any attempt", []string{host(serve(t, &scripted{reply: granted(0)}))}, cancelled, true},
		{"refused and 503", []string{deadServer(t), busy()}, context.Background(), false},
		{"refused and dropped after the request", []string{deadServer(t), drop()}, context.Background(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, tt.servers, WithClock(newFakeClock()), WithRounds(2))
			_, err := c.Reserve(tt.ctx, "a", 1, 0)
			if err == nil {
				t.Fatal("reserve succeeded, want an error")
			}
			if got := errors.Is(err, ErrNotDelivered); got != tt.want {
				t.Errorf("errors.Is(%v, ErrNotDelivered) = %v, want %v", err, got, tt.want)
			}
			if tt.ctx == context.Background() && !errors.Is(err, ErrUnavailable) {
				t.Errorf("err %v does not wrap ErrUnavailable", err)
			}
		})
	}
}
