package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// TestTemplates: PutTemplate creates and replaces, GetTemplate and
// ListTemplates read back what was put (with the keys live),
// DeleteTemplate answers the live keys, then GetTemplate is ErrNotFound
// and ListTemplates lists it Deleted with its live key;
// a reserve past the template's max keys is a refusal marked KeysFull
// naming the cap, with its retry time, and TryAcquire's error says so.
func TestTemplates(t *testing.T) {
	srv, _ := apiServer(t)
	c, err := New([]string{srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	burst := 1.0
	spec := TemplateSpec{LimitSpec: LimitSpec{Algorithm: "bursty", Rate: 10, MaxBurstSeconds: &burst}, Idle: time.Minute, MaxKeys: 1}
	tp, err := c.PutTemplate(ctx, "cust", spec)
	if err != nil || !tp.Created || tp.Prefix != "cust" || tp.Idle != time.Minute || tp.MaxKeys != 1 || tp.Rate != 10 {
		t.Fatalf("PutTemplate = %+v, %v", tp, err)
	}
	if tp, err := c.PutTemplate(ctx, "cust", spec); err != nil || tp.Created {
		t.Fatalf("PutTemplate again = %+v, %v; want replaced", tp, err)
	}
	if g, err := c.Reserve(ctx, "cust:a", 1, 0); err != nil || !g.Granted {
		t.Fatalf("Reserve on a new key = %+v, %v", g, err)
	}
	g, err := c.Reserve(ctx, "cust:b", 1, 0)
	if err != nil || g.Granted || !g.KeysFull || g.RetryAfter <= 0 || !strings.Contains(g.Refusal, "max keys") {
		t.Fatalf("Reserve past the cap = %+v, %v; want a KeysFull refusal naming the cap", g, err)
	}
	var refused *RefusedError
	if _, err := c.TryAcquire(ctx, "cust:c", 1, 0); !errors.As(err, &refused) || !refused.KeysFull || !errors.Is(err, ErrThrottled) {
		t.Fatalf("TryAcquire past the cap: %v, want a *RefusedError with KeysFull", err)
	}
	got, err := c.GetTemplate(ctx, "cust")
	if err != nil || got.LiveKeys != 1 || got.Algorithm != "bursty" || got.MaxBurstSeconds == nil || *got.MaxBurstSeconds != 1 {
		t.Fatalf("GetTemplate = %+v, %v", got, err)
	}
	if ts, err := c.ListTemplates(ctx); err != nil || len(ts) != 1 || ts[0].Prefix != "cust" || ts[0].Deleted {
		t.Fatalf("ListTemplates = %+v, %v", ts, err)
	}
	if d, err := c.DeleteTemplate(ctx, "cust"); err != nil || !d.Existed || d.LiveKeys != 1 {
		t.Fatalf("DeleteTemplate = %+v, %v", d, err)
	}
	if _, err := c.GetTemplate(ctx, "cust"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetTemplate after the delete: %v, want ErrNotFound", err)
	}
	if ts, err := c.ListTemplates(ctx); err != nil || len(ts) != 1 || ts[0].Prefix != "cust" || !ts[0].Deleted || ts[0].LiveKeys != 1 {
		t.Fatalf("ListTemplates after the delete = %+v, %v; want cust, deleted, with its live key", ts, err)
	}
}

// TestBinaryKeysFullIsARefusal: the binary protocol's KeysFull is the
// same refusal HTTP's 429 is: KeysFull set, the retry time, the cap named.
func TestBinaryKeysFullIsARefusal(t *testing.T) {
	s := serveBinary(t, func(q wire.Reserve) (byte, []byte) {
		return wire.CodeOK, wire.EncodeReserveResult(wire.ReserveResult{Status: wire.KeysFull, RetryAfterNanos: int64(3 * time.Second),
			Detail: `template "cust" holds 1 live keys (allowed: at most 1, its max keys)`})
	})
	c, err := New([]string{s.addr}, WithBinaryReserves(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := c.Reserve(context.Background(), "cust:b", 1, 0)
	if err != nil || g.Granted || !g.KeysFull || g.RetryAfter != 3*time.Second || !strings.Contains(g.Refusal, `limit "cust:b": no key created: template "cust"`) {
		t.Fatalf("Reserve = %+v, %v; want a KeysFull refusal", g, err)
	}
}
