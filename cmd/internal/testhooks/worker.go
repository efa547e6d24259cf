package testhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/permitd/permitd/transport/sidecar"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/worker"
)

// Register fault modes of a worker's test hook (POST /v1/debug/faults
// {"register":MODE} on the sidecar, behind permitd worker --test-hooks).
const (
	// RegisterFaultNone: calls go through.
	RegisterFaultNone = "none"
	// RegisterFaultDrop: every call fails at once as never delivered
	// (worker.ErrNotDelivered, like a refused connection): the worker may
	// go on spending its open grant until its local expiry.
	RegisterFaultDrop = "drop"
	// RegisterFaultBlackhole: every call hangs until its context ends and
	// then fails with an ambiguous error (the register may have applied
	// it, as far as the worker knows): the worker stops spending the grant
	// the call reported on.
	RegisterFaultBlackhole = "blackhole"
)

// FaultyRegister wraps a worker's register client with a test-only fault
// switch: jepsen-lite cuts a worker group from the register with it.
// Nothing reaches the register while a fault is set.
type FaultyRegister struct {
	inner worker.Register
	mode  atomic.Value // string

	mu      sync.Mutex
	dropped uint64 // calls failed by the fault
}

var _ worker.Register = (*FaultyRegister)(nil)

func NewFaultyRegister(inner worker.Register) *FaultyRegister {
	r := &FaultyRegister{inner: inner}
	r.mode.Store(RegisterFaultNone)
	return r
}

// fault returns the error a call fails with under the current mode, or
// nil to let it through.
func (r *FaultyRegister) fault(ctx context.Context, op string) error {
	mode, _ := r.mode.Load().(string)
	switch mode {
	case RegisterFaultDrop:
		r.count()
		return fmt.Errorf("permitd worker: %s: %w: test fault %q: the register is cut off", op, client.ErrNotDelivered, mode)
	case RegisterFaultBlackhole:
		r.count()
		t := time.NewTimer(10 * time.Second)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		return fmt.Errorf("permitd worker: %s (may have been applied): test fault %q: no answer from the register", op, mode)
	}
	return nil
}

func (r *FaultyRegister) count() {
	r.mu.Lock()
	r.dropped++
	r.mu.Unlock()
}

// SetFault sets the fault mode: RegisterFaultNone, RegisterFaultDrop or
// RegisterFaultBlackhole.
func (r *FaultyRegister) SetFault(mode string) { r.mode.Store(mode) }

// Lease implements worker.Register.
func (r *FaultyRegister) Lease(ctx context.Context, limit string, q client.LeaseRequest) (client.LeaseGrant, error) {
	if err := r.fault(ctx, "lease"); err != nil {
		return client.LeaseGrant{}, err
	}
	return r.inner.Lease(ctx, limit, q)
}

// Renew implements worker.Register.
func (r *FaultyRegister) Renew(ctx context.Context, limit string, id, epoch uint64, rep client.LeaseReport) (client.LeaseGrant, error) {
	if err := r.fault(ctx, "renew"); err != nil {
		return client.LeaseGrant{}, err
	}
	return r.inner.Renew(ctx, limit, id, epoch, rep)
}

// Return implements worker.Register.
func (r *FaultyRegister) Return(ctx context.Context, limit string, id, epoch uint64, rep client.LeaseReport) (client.LeaseGrant, error) {
	if err := r.fault(ctx, "return"); err != nil {
		return client.LeaseGrant{}, err
	}
	return r.inner.Return(ctx, limit, id, epoch, rep)
}

// workerFaultsBody is the body of the worker's POST /v1/debug/faults and
// the answer of every /v1/debug/faults request.
type workerFaultsBody struct {
	// Register is none, drop or blackhole.
	Register string `json:"register"`
	// Dropped counts the register calls failed by faults so far (answer
	// only).
	Dropped uint64 `json:"dropped,omitempty"`
}

// WithWorkerFaultHooks serves the worker's fault switch (testing only,
// behind permitd worker --test-hooks); jepsen-lite's worker-group
// partition uses it:
//
//	POST   /v1/debug/faults {"register":"drop"|"blackhole"|"none"}
//	DELETE /v1/debug/faults   heal: register calls go through
//	GET    /v1/debug/faults   the fault set now
func WithWorkerFaultHooks(next http.Handler, r *FaultyRegister) http.Handler {
	mux := http.NewServeMux()
	answer := func(w http.ResponseWriter) {
		mode, _ := r.mode.Load().(string)
		r.mu.Lock()
		d := r.dropped
		r.mu.Unlock()
		writeHookJSON(w, http.StatusOK, workerFaultsBody{Register: mode, Dropped: d})
	}
	mux.HandleFunc("GET /v1/debug/faults", func(w http.ResponseWriter, _ *http.Request) { answer(w) })
	mux.HandleFunc("DELETE /v1/debug/faults", func(w http.ResponseWriter, _ *http.Request) {
		r.SetFault(RegisterFaultNone)
		answer(w)
	})
	mux.HandleFunc("POST /v1/debug/faults", func(w http.ResponseWriter, req *http.Request) {
		const want = `want {"register":"none"|"drop"|"blackhole"}`
		var body workerFaultsBody
		dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, 4096))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			writeHookJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("body: %v (%s)", err, want)})
			return
		}
		switch body.Register {
		case RegisterFaultNone, RegisterFaultDrop, RegisterFaultBlackhole:
		case "":
			body.Register = RegisterFaultNone
		default:
			writeHookJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("register %q (%s)", body.Register, want)})
			return
		}
		r.mode.Store(body.Register)
		answer(w)
	})
	mux.Handle("/", next)
	return mux
}

// DoubleSpender is the deliberately broken sidecar of permitd worker
// --test-double-lease (testing only): every permit the worker hands out
// is handed out twice, the second time without asking the worker. It
// exists so that jepsen-lite can show that it catches a lease bug.
type DoubleSpender struct {
	sidecar.Worker
	owed atomic.Int64
}

// TryAcquire hands out owed permits first, then asks the worker and owes
// as many again.
func (d *DoubleSpender) TryAcquire(n int64, maxWait time.Duration) (bool, error) {
	for {
		owed := d.owed.Load()
		if owed < n {
			break
		}
		if d.owed.CompareAndSwap(owed, owed-n) {
			return true, nil
		}
	}
	ok, err := d.Worker.TryAcquire(n, maxWait)
	if ok {
		d.owed.Add(n)
	}
	return ok, err
}
