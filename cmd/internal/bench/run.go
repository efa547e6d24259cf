package bench

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/cmd/internal/httplite"
	"github.com/permitd/permitd/transport/wire"
)

// run.go: the run loop of permitd bench. Closed loop: --concurrency
// workers, each sending its next reserve when the last returns. Open loop:
// reserves start every 1/--open-rate s whatever the latency, at most
// --concurrency outstanding, and latency counts from the scheduled start
// (no coordinated omission); over the binary protocol without a
// goroutine per request (open.go). The requests sent during the
// measured --duration, after --warmup, are measured, each counted once
// when its answer comes, however late (benchRecorder).

// Run runs a closed or an open loop of reserves (b.Mode) against
// b.Servers, creating the limits first with b.Create, and reports what it
// measured. It fails if the limits cannot be created, a connection cannot
// be dialled, or the run ends before its warm-up does.
func Run(ctx context.Context, b Config) (Result, error) {
	if len(b.Servers) == 0 {
		return Result{}, errors.New("--servers is empty")
	}
	hc := benchHTTPClient(b.Concurrency, b.TLS)
	if b.Create {
		for _, name := range b.limitNames() {
			bl := b
			bl.Limit = name
			if err := createLimit(ctx, hc, b.Servers, bl); err != nil {
				return Result{}, err
			}
		}
	}
	leaderBefore, termBefore := benchLeader(ctx, hc, b.Servers, b)
	r := newRun(b)
	if err := r.dial(); err != nil {
		r.close()
		return Result{}, err
	}
	defer r.close()
	runCtx, cancel := context.WithTimeout(ctx, wire.AddNanos(b.Warmup, b.Duration))
	defer cancel()
	r.rec.measureFrom = time.Now().Add(b.Warmup)
	stages := startStages(runCtx, hc, b, r.rec.measureFrom)
	switch {
	case r.openBinary():
		if err := openLoopBinary(runCtx, openLoopParams{b: b, conns: r.openConns, payload: r.binaryPayload(), rec: r.rec, fail: r.rec.fail}); err != nil {
			return Result{}, err
		}
	case b.Mode == "closed":
		r.closedLoop(runCtx)
	default:
		r.openLoop(runCtx)
	}
	// Every measured request has been answered (or given up on, as an
	// error): the counts are final and add up.
	elapsed := time.Since(r.rec.measureFrom)
	if elapsed <= 0 {
		return Result{}, errors.New("run ended before the warm-up did")
	}
	res := r.rec.result(b, elapsed)
	res.Stages, res.StagesError = stages.finish(ctx, hc, b, r.rec.mean())
	res.LeaderBefore, res.TermBefore = leaderBefore, termBefore
	res.LeaderAfter, res.TermAfter = benchLeader(ctx, hc, b.Servers, b)
	return res, nil
}

// run is one run's state: its settings, what it measured, the request
// IDs it sends and the binary connections it shares.
type run struct {
	b   Config
	rec *benchRecorder
	// idPrefix makes the request IDs unique across runs too: the
	// register remembers IDs for 10 minutes and would answer a reused one
	// with its first decision.
	idPrefix string
	idSeq    atomic.Int64
	// path is the reserve's HTTP path.
	path string
	// Connections: over HTTP, closed loop, one per worker and server; open
	// loop, a pool per server (newConns). Over the binary protocol every
	// worker shares --binary-conns pipelined connections per server
	// (shared), except the open loop, which has its own sender (open.go)
	// on openConns.
	openConns []net.Conn
	shared    [][]*wire.Conn
	connSeq   atomic.Int64
}

// newRun is a run of b, not yet dialled.
func newRun(b Config) *run {
	r := &run{b: b, rec: &benchRecorder{maxRequests: b.MaxRequests}, idPrefix: "b" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-",
		path: "/v1/limits/" + b.Limit + "/reserve"}
	if b.Limits > 0 {
		r.path = "/v1/reserve"
	}
	return r
}

// openBinary reports whether the run is the open loop over the binary
// protocol.
func (r *run) openBinary() bool { return r.b.Mode == "open" && r.b.Protocol == "binary" }

// dial opens the binary connections the run shares (none over HTTP).
func (r *run) dial() error {
	switch {
	case r.openBinary():
		for k := 0; k < r.b.BinaryConns; k++ {
			cs, err := dialBinaryRaw(r.b.Servers, r.b.TLS, r.b.Token)
			if err != nil {
				return err
			}
			r.openConns = append(r.openConns, cs...)
		}
	case r.b.Protocol == "binary":
		for k := 0; k < r.b.BinaryConns; k++ {
			cs, err := dialBinary(r.b.Servers, r.b.TLS, r.b.Token)
			if err != nil {
				return err
			}
			r.shared = append(r.shared, cs)
		}
	}
	return nil
}

// close closes the binary connections.
func (r *run) close() {
	for _, c := range r.openConns {
		c.Close()
	}
	for _, cs := range r.shared {
		for _, c := range cs {
			c.Close()
		}
	}
}

// requestID is the next request ID, or "" without --request-ids.
func (r *run) requestID() string {
	if !r.b.RequestIDs {
		return ""
	}
	return r.idPrefix + strconv.FormatInt(r.idSeq.Add(1), 10)
}

// binaryPayload gives the open loop over the binary protocol the reserve
// of request i: the same frame every time, or with --request-ids each
// with its own ID.
func (r *run) binaryPayload() func(int) []byte {
	w := wire.Reserve{Limit: r.b.Limit, Permits: r.b.Permits, MaxWaitNanos: int64(r.b.MaxWait)}
	same := wire.EncodeReserve(w)
	if !r.b.RequestIDs && r.b.Keys == 0 {
		return func(int) []byte { return same }
	}
	return func(int) []byte {
		w.RequestID = r.requestID()
		w.Limit = r.b.keyName()
		return wire.EncodeReserve(w)
	}
}

// newConns returns a connection to each server: a share of the binary
// connections, or a keep-alive HTTP connection of its own.
func (r *run) newConns() []benchConn {
	b := r.b
	cs := make([]benchConn, len(b.Servers))
	for i, s := range b.Servers {
		if r.shared != nil {
			cs[i] = binaryBenchConn{c: r.shared[int(r.connSeq.Add(1))%len(r.shared)][i], r: wire.Reserve{Limit: b.Limit, Permits: b.Permits, MaxWaitNanos: int64(b.MaxWait)},
				name: b.keyNames()}
			continue
		}
		var header []string
		if b.Token != "" {
			header = append(header, "Authorization: Bearer "+b.Token)
		}
		cs[i] = httpBenchConn{c: httplite.NewTLS(s, 10*time.Second, b.TLS, header...), path: r.path, permits: b.Permits, maxWait: b.MaxWait,
			multi: b.multiPrefix(), name: b.keyNames()}
	}
	return cs
}

// one sends one reserve on c and, when it is measured, counts its
// answer; it returns the reserve's latency and whether it was admitted
// (granted or refused: its latency is to be recorded).
func (r *run) one(c benchConn, buf *bytes.Buffer, measured bool) (time.Duration, bool) {
	id := r.requestID()
	start := time.Now()
	code, overloaded, err := c.reserve(buf, id)
	lat := time.Since(start)
	if !measured {
		return lat, false
	}
	return lat, r.rec.answer(code, overloaded, err, r.rec.fail)
}

// closedLoop runs --concurrency workers, each sending its next reserve
// when the last returns, until runCtx ends or --max-requests measured
// requests are sent; each waits for its last answer.
func (r *run) closedLoop(runCtx context.Context) {
	var wg sync.WaitGroup
	for w := 0; w < r.b.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			conns := r.newConns()
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			lats := make([]time.Duration, 0, 4096)
			for i := w; runCtx.Err() == nil; i++ {
				measured, ok := r.rec.admit()
				if !ok {
					break
				}
				if lat, admitted := r.one(conns[i%len(conns)], &buf, measured); admitted {
					lats = append(lats, lat)
				}
			}
			r.rec.record(lats)
		}()
	}
	wg.Wait()
}

// openLoop starts a reserve every 1/--open-rate s, each on a goroutine
// and a connection set of a pool, with at most --concurrency
// outstanding, until runCtx ends or --max-requests measured requests are
// sent, and waits for their answers; latency counts from the scheduled
// start.
func (r *run) openLoop(runCtx context.Context) {
	sem := make(chan struct{}, r.b.Concurrency)
	pool := make(chan []benchConn, r.b.Concurrency)
	for k := 0; k < r.b.Concurrency; k++ {
		pool <- r.newConns()
	}
	defer func() {
		for k := 0; k < r.b.Concurrency; k++ {
			for _, c := range <-pool {
				c.Close()
			}
		}
	}()
	interval := time.Duration(wire.FloatNanos(float64(time.Second) / r.b.OpenRate))
	next := time.Now()
	var wg sync.WaitGroup
	var lmu sync.Mutex
	var lats []time.Duration
	for i := 0; runCtx.Err() == nil; i++ {
		next = next.Add(interval)
		scheduled := next
		if r.rec.full() || !sleepUntil(runCtx, scheduled) || !acquire(runCtx, sem) {
			break
		}
		measured, ok := r.rec.admit()
		if !ok {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var buf bytes.Buffer
			conns := <-pool
			_, admitted := r.one(conns[i%len(conns)], &buf, measured)
			pool <- conns
			lat := time.Since(scheduled)
			if admitted {
				lmu.Lock()
				lats = append(lats, lat)
				lmu.Unlock()
			}
		}()
	}
	wg.Wait()
	r.rec.record(lats)
}

// sleepUntil waits until t; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// acquire takes a slot of sem; false if ctx ended first.
func acquire(ctx context.Context, sem chan struct{}) bool {
	select {
	case sem <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}
