package testhooks

import (
	"context"
	"errors"
	"github.com/permitd/permitd/transport/sidecar"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/client"
)

// countingRegister answers every call as granted and counts them.
type countingRegister struct{ calls atomic.Int64 }

func (r *countingRegister) Lease(context.Context, string, client.LeaseRequest) (client.LeaseGrant, error) {
	r.calls.Add(1)
	return client.LeaseGrant{Status: client.LeaseGranted}, nil
}

func (r *countingRegister) Renew(context.Context, string, uint64, uint64, client.LeaseReport) (client.LeaseGrant, error) {
	r.calls.Add(1)
	return client.LeaseGrant{Status: client.LeaseGranted}, nil
}

func (r *countingRegister) Return(context.Context, string, uint64, uint64, client.LeaseReport) (client.LeaseGrant, error) {
	r.calls.Add(1)
	return client.LeaseGrant{Status: client.LeaseReturned}, nil
}

func TestWorkerFaultHooks(t *testing.T) {
	inner := &countingRegister{}
	reg := NewFaultyRegister(inner)
	h := WithWorkerFaultHooks(http.NotFoundHandler(), reg)
	do := func(method, body string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, "/v1/debug/faults", strings.NewReader(body)))
		return rec.Code, rec.Body.String()
	}
	ctx := context.Background()
	if _, err := reg.Renew(ctx, "l", 1, 1, client.LeaseReport{}); err != nil || inner.calls.Load() != 1 {
		t.Fatalf("no fault: %v, %d calls", err, inner.calls.Load())
	}
	if code, body := do("POST", `{"register":"sometimes"}`); code != 400 || !strings.Contains(body, "drop") {
		t.Fatalf("bad mode: %d %s", code, body)
	}
	if code, body := do("POST", `{"register":"drop"}`); code != 200 || !strings.Contains(body, `"drop"`) {
		t.Fatalf("drop: %d %s", code, body)
	}
	if _, err := reg.Lease(ctx, "l", client.LeaseRequest{}); !errors.Is(err, client.ErrNotDelivered) {
		t.Fatalf("drop: %v, want ErrNotDelivered", err)
	}
	if code, _ := do("POST", `{"register":"blackhole"}`); code != 200 {
		t.Fatalf("blackhole: %d", code)
	}
	bctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err := reg.Return(bctx, "l", 1, 1, client.LeaseReport{})
	cancel()
	if err == nil || errors.Is(err, client.ErrNotDelivered) || bctx.Err() == nil {
		t.Fatalf("blackhole: %v (ctx %v), want an ambiguous error after the context ended", err, bctx.Err())
	}
	if code, body := do("DELETE", ""); code != 200 || !strings.Contains(body, `"none"`) || !strings.Contains(body, `"dropped":2`) {
		t.Fatalf("heal: %d %s", code, body)
	}
	if _, err := reg.Renew(ctx, "l", 1, 1, client.LeaseReport{}); err != nil || inner.calls.Load() != 2 {
		t.Fatalf("healed: %v, %d calls (none may reach the register while cut off)", err, inner.calls.Load())
	}
}

// fakeSidecarWorker grants every TryAcquire and counts the permits.
type fakeSidecarWorker struct {
	sidecar.Worker
	spent atomic.Int64
}

func (w *fakeSidecarWorker) TryAcquire(n int64, _ time.Duration) (bool, error) {
	w.spent.Add(n)
	return true, nil
}

func TestDoubleSpenderHandsOutTwice(t *testing.T) {
	inner := &fakeSidecarWorker{}
	d := &DoubleSpender{Worker: inner}
	for range 10 {
		if ok, err := d.TryAcquire(1, 0); !ok || err != nil {
			t.Fatalf("TryAcquire: %v %v", ok, err)
		}
	}
	if got := inner.spent.Load(); got != 5 {
		t.Fatalf("10 grants spent %d permits of the worker, want 5 (each handed out twice)", got)
	}
}
