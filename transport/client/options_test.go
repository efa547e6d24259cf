package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"
)

// countingTransport counts the requests it carries.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// TestWithHTTPClientCarriesTheCalls: the HTTP client WithHTTPClient gives
// carries the client's calls.
func TestWithHTTPClientCarriesTheCalls(t *testing.T) {
	s := &scripted{reply: granted(0)}
	tr := &countingTransport{}
	c := newClient(t, []string{host(serve(t, s))}, WithHTTPClient(&http.Client{Transport: tr}))
	if err := c.Acquire(context.Background(), "a", 1); err != nil {
		t.Fatal(err)
	}
	if s.Hits() != 1 || tr.n.Load() < 1 {
		t.Errorf("%d reserves served, %d requests through the given client: want 1 and at least 1", s.Hits(), tr.n.Load())
	}
}

// TestWithRandDrivesTheJitter: the backoff's jitter comes from the source
// WithRand gives: two sources seeded alike give the same sleeps, a source
// seeded otherwise other sleeps.
func TestWithRandDrivesTheJitter(t *testing.T) {
	sleeps := func(seed uint64) string {
		s := &scripted{}
		s.reply = func(hit int, w http.ResponseWriter, r *http.Request) {
			if hit <= 8 {
				refused(0)(hit, w, r)
				return
			}
			granted(0)(hit, w, r)
		}
		clk := newFakeClock()
		c := newClient(t, []string{host(serve(t, s))}, WithClock(clk), WithRand(rand.New(rand.NewPCG(seed, 1))))
		if err := c.Acquire(context.Background(), "a", 1); err != nil {
			t.Fatal(err)
		}
		if len(clk.Sleeps()) != 8 {
			t.Fatalf("%d sleeps, want 8: %v", len(clk.Sleeps()), clk.Sleeps())
		}
		return fmt.Sprint(clk.Sleeps())
	}
	a, b, other := sleeps(7), sleeps(7), sleeps(8)
	if a != b {
		t.Errorf("sources seeded alike, different sleeps:\n%s\n%s", a, b)
	}
	if a == other {
		t.Errorf("sources seeded otherwise, the same sleeps: %s", a)
	}
}
