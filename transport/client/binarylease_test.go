package client

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// TestBinaryLeaseCommands: with WithBinaryLeases, Lease, Renew and Return
// travel as the binary protocol's commands with every field, and their
// answers map as the HTTP API's do (granted, refused and fenced with the
// HTTP API's wording, returned); an unknown limit is an *APIError 404.
func TestBinaryLeaseCommands(t *testing.T) {
	var mu sync.Mutex
	var seen []any
	s := serveBinaryWith(t, &binServer{lease: func(op byte, p []byte) (byte, []byte) {
		mu.Lock()
		defer mu.Unlock()
		switch op {
		case wire.OpLease:
			q, err := wire.DecodeLeaseOpen(p)
			seen = append(seen, q)
			if err != nil || q.Limit == "nope" {
				return wire.CodeNotFound, []byte(`limit "nope" not found`)
			}
			if q.Holder == "busy" {
				return wire.CodeOK, wire.EncodeLeaseResult(wire.LeaseResult{Status: wire.LeaseRefused, LeaseID: 3, Epoch: 4, RetryAfterNanos: 7e8})
			}
			return wire.CodeOK, wire.EncodeLeaseResult(wire.LeaseResult{Status: wire.LeaseGranted, LeaseID: 9, Epoch: 1, Permits: 40, ExpiresInNanos: q.TTLNanos, ShareMilli: 20_000})
		case wire.OpRenew:
			q, _ := wire.DecodeLeaseRenew(p)
			seen = append(seen, q)
			if q.Epoch != 1 {
				return wire.CodeOK, wire.EncodeLeaseResult(wire.LeaseResult{Status: wire.LeaseFenced, Detail: "epoch 5 is not the lease's current epoch 2"})
			}
			return wire.CodeOK, wire.EncodeLeaseResult(wire.LeaseResult{Status: wire.LeaseGranted, LeaseID: 9, Epoch: 2, Permits: 41, ExpiresInNanos: q.TTLNanos, CreditedPermits: 2, Duplicate: true})
		default:
			q, _ := wire.DecodeLeaseReturn(p)
			seen = append(seen, q)
			return wire.CodeOK, wire.EncodeLeaseResult(wire.LeaseResult{Status: wire.LeaseReturned, LeaseID: 9, Epoch: 2, CreditedPermits: 5})
		}
	}})
	c, err := New([]string{s.addr}, WithBinaryLeases())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	g, err := c.Lease(ctx, "llm", LeaseRequest{Holder: "w1", Group: "batch", Weight: 2, DemandMilliPerSec: 5000, TTL: 2 * time.Second, RequestID: "l-1"})
	if err != nil || g.Status != LeaseGranted || g.LeaseID != 9 || g.Permits != 40 || g.ExpiresIn != 2*time.Second || g.ShareMilliPerSec != 20_000 ||
		g.RequestID != "l-1" || g.SentAt.IsZero() || g.ReceivedAt.Before(g.SentAt) {
		t.Fatalf("Lease = %+v, %v", g, err)
	}
	r, err := c.Renew(ctx, "llm", 9, 1, LeaseReport{Spent: 30, StolenOut: 3, StolenIn: 1, Kept: 4, DemandMilliPerSec: 6000, TTL: time.Second})
	if err != nil || r.Status != LeaseGranted || r.Epoch != 2 || r.Permits != 41 || r.CreditedPermits != 2 || !r.Duplicate || r.RequestID == "" {
		t.Fatalf("Renew = %+v, %v", r, err)
	}
	f, err := c.Renew(ctx, "llm", 9, 5, LeaseReport{TTL: time.Second})
	if err != nil || f.Status != LeaseFenced || f.Detail != `renew on limit "llm": epoch 5 is not the lease's current epoch 2` {
		t.Fatalf("stale Renew = %+v, %v", f, err)
	}
	ref, err := c.Lease(ctx, "llm", LeaseRequest{Holder: "busy", Group: "batch", TTL: time.Second})
	if err != nil || ref.Status != LeaseRefused || ref.RetryAfter != 700*time.Millisecond || !strings.Contains(ref.Detail, "refused; retry after 700ms") {
		t.Fatalf("refused Lease = %+v, %v", ref, err)
	}
	ret, err := c.Return(ctx, "llm", 9, 2, LeaseReport{Spent: 36})
	if err != nil || ret.Status != LeaseReturned || ret.CreditedPermits != 5 {
		t.Fatalf("Return = %+v, %v", ret, err)
	}
	var apiErr *APIError
	if _, err := c.Lease(ctx, "nope", LeaseRequest{Holder: "w1", Group: "batch", TTL: time.Second}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("Lease on an unknown limit: %v, want a 404 APIError", err)
	}
	mu.Lock()
	defer mu.Unlock()
	wantOpen := wire.LeaseOpen{Limit: "llm", Holder: "w1", Group: "batch", Weight: 2, DemandMilli: 5000, TTLNanos: int64(2 * time.Second), RequestID: "l-1"}
	if seen[0] != wantOpen {
		t.Errorf("lease sent %+v, want %+v", seen[0], wantOpen)
	}
	renew := seen[1].(wire.LeaseRenew)
	if renew.Limit != "llm" || renew.LeaseID != 9 || renew.Epoch != 1 || renew.Spent != 30 || renew.StolenOut != 3 || renew.StolenIn != 1 ||
		renew.Kept != 4 || renew.DemandMilli != 6000 || renew.TTLNanos != int64(time.Second) || renew.RequestID != r.RequestID {
		t.Errorf("renew sent %+v (answer %+v)", renew, r)
	}
}

// TestBinaryLeaseFailsOverWithTheSameRequestID: a node without a leader
// moves a renewal to the next server with its request ID unchanged, so
// the register's deduplication can make a retry the first decision.
func TestBinaryLeaseFailsOverWithTheSameRequestID(t *testing.T) {
	var mu sync.Mutex
	var ids []string
	record := func(p []byte) string {
		q, _ := wire.DecodeLeaseRenew(p)
		mu.Lock()
		defer mu.Unlock()
		ids = append(ids, q.RequestID)
		return q.RequestID
	}
	down := serveBinaryWith(t, &binServer{lease: func(_ byte, p []byte) (byte, []byte) {
		record(p)
		return wire.CodeNoLeader, []byte("no leader")
	}})
	up := serveBinaryWith(t, &binServer{lease: func(_ byte, p []byte) (byte, []byte) {
		record(p)
		return wire.CodeOK, wire.EncodeLeaseResult(wire.LeaseResult{Status: wire.LeaseGranted, LeaseID: 1, Epoch: 2, Permits: 1, ExpiresInNanos: 1e9})
	}})
	c, err := New([]string{down.addr, up.addr}, WithBinaryLeases())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := c.Renew(context.Background(), "llm", 1, 1, LeaseReport{Spent: 1, TTL: time.Second})
	if err != nil || g.Status != LeaseGranted {
		t.Fatalf("Renew = %+v, %v", g, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 || ids[0] != ids[1] || ids[0] != g.RequestID {
		t.Fatalf("request IDs sent %v, answer's %q: want the same one twice", ids, g.RequestID)
	}
}
