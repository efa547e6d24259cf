package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node/worker"
	"github.com/permitd/permitd/transport"
)

// Register fault modes of a worker's test hook (POST /v1/debug/faults
// {"register":MODE} on the sidecar, behind permitd worker --test-hooks).
const (
	// registerFaultNone: calls go through.
	registerFaultNone = "none"
	// registerFaultDrop: every call fails at once as never delivered
	// (worker.ErrNotDelivered, like a refused connection): the worker may
	// go on spending its open grant until its local expiry.
	registerFaultDrop = "drop"
	// registerFaultBlackhole: every call hangs until its context ends and
	// then fails with an ambiguous error (the register may have applied
	// it, as far as the worker knows): the worker stops spending the grant
	// the call reported on.
	registerFaultBlackhole = "blackhole"
)

// faultyRegister wraps a worker's register client with a test-only fault
// switch: jepsen-lite cuts a worker group from the register with it.
// Nothing reaches the register while a fault is set.
type faultyRegister struct {
	inner worker.Register
	mode  atomic.Value // string

	mu      sync.Mutex
	dropped uint64 // calls failed by the fault
}

var _ worker.Register = (*faultyRegister)(nil)

func newFaultyRegister(inner worker.Register) *faultyRegister {
	r := &faultyRegister{inner: inner}
	r.mode.Store(registerFaultNone)
	return r
}

// fault returns the error a call fails with under the current mode, or
// nil to let it through.
func (r *faultyRegister) fault(ctx context.Context, op string) error {
	mode, _ := r.mode.Load().(string)
	switch mode {
	case registerFaultDrop:
		r.count()
		return fmt.Errorf("permitd worker: %s: %w: test fault %q: the register is cut off", op, worker.ErrNotDelivered, mode)
	case registerFaultBlackhole:
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

func (r *faultyRegister) count() {
	r.mu.Lock()
	r.dropped++
	r.mu.Unlock()
}

// Lease implements worker.Register.
func (r *faultyRegister) Lease(ctx context.Context, limit string, q fsm.Lease) (fsm.LeaseResult, error) {
	if err := r.fault(ctx, "lease"); err != nil {
		return fsm.LeaseResult{}, err
	}
	return r.inner.Lease(ctx, limit, q)
}

// Renew implements worker.Register.
func (r *faultyRegister) Renew(ctx context.Context, limit string, q fsm.Renew) (fsm.LeaseResult, error) {
	if err := r.fault(ctx, "renew"); err != nil {
		return fsm.LeaseResult{}, err
	}
	return r.inner.Renew(ctx, limit, q)
}

// Return implements worker.Register.
func (r *faultyRegister) Return(ctx context.Context, limit string, q fsm.Return) (fsm.LeaseResult, error) {
	if err := r.fault(ctx, "return"); err != nil {
		return fsm.LeaseResult{}, err
	}
	return r.inner.Return(ctx, limit, q)
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

// withWorkerFaultHooks serves the worker's fault switch (testing only,
// behind permitd worker --test-hooks); jepsen-lite's worker-group
// partition uses it:
//
//	POST   /v1/debug/faults {"register":"drop"|"blackhole"|"none"}
//	DELETE /v1/debug/faults   heal: register calls go through
//	GET    /v1/debug/faults   the fault set now
func withWorkerFaultHooks(next http.Handler, r *faultyRegister) http.Handler {
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
		r.mode.Store(registerFaultNone)
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
		case registerFaultNone, registerFaultDrop, registerFaultBlackhole:
		case "":
			body.Register = registerFaultNone
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

// doubleSpender is the deliberately broken sidecar of permitd worker
// --test-double-lease (testing only): every permit the worker hands out
// is handed out twice, the second time without asking the worker. It
// exists so that jepsen-lite can show that it catches a lease bug.
type doubleSpender struct {
	transport.SidecarWorker
	owed atomic.Int64
}

// TryAcquire hands out owed permits first, then asks the worker and owes
// as many again.
func (d *doubleSpender) TryAcquire(n int64, maxWait time.Duration) (bool, error) {
	for {
		owed := d.owed.Load()
		if owed < n {
			break
		}
		if d.owed.CompareAndSwap(owed, owed-n) {
			return true, nil
		}
	}
	ok, err := d.SidecarWorker.TryAcquire(n, maxWait)
	if ok {
		d.owed.Add(n)
	}
	return ok, err
}
