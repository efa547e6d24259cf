package bench

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// open.go: the open loop over the binary protocol, without a
// goroutine, a timer and a channel per request. A pacer wakes at most
// once per openBatchTick, writes every reserve that has come due since
// its last wake-up into the connections' buffers (round robin) and
// flushes each connection once; one reader per connection matches the
// answers to their scheduled starts by frame ID. So while slots are free
// the generator makes one write call per connection per tick, whatever
// the rate (more when a frame burst overflows the 64 KiB buffer, a TLS
// record or, at --concurrency outstanding, once per wait for a slot), and
// takes less of the CPU it may share with the nodes.

// openBatchTick is the pacer's shortest sleep: a reserve leaves at most
// this long after its scheduled start (its latency counts from that start).
const openBatchTick = time.Millisecond

// openDrainTimeout bounds the wait for the answers still outstanding when
// the run ends.
const openDrainTimeout = 10 * time.Second

// openWriteTimeout bounds one write to a node that stopped reading.
const openWriteTimeout = 10 * time.Second

// errAllConnsBroken ends an open loop whose every connection broke.
var errAllConnsBroken = errors.New("bench: every binary connection broke")

// openConn is one pipelined binary connection of the open loop: the pacer
// writes to it, its reader reads from it.
type openConn struct {
	nc    net.Conn
	bw    *bufio.Writer
	dirty bool // frames buffered since the last flush (pacer only)

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]pendingReq // frame ID → its request
	dead    bool                  // the reader has failed what was pending
	lostErr error                 // why, once dead
	broken  atomic.Bool           // no more frames: set before dead
	err     atomic.Value          // the write error that broke it, if one did
}

// pendingReq is a request outstanding on an openConn: its scheduled
// start, and whether it is measured (benchRecorder.admit).
type pendingReq struct {
	scheduled time.Time
	measured  bool
}

// openLoopParams are what openLoopBinary runs: the run's settings, its
// connections, the reserve of request i (payload), and where it counts
// the answers (rec) and a measured request that failed (fail).
type openLoopParams struct {
	b       Config
	conns   []net.Conn
	payload func(i int) []byte
	rec     *benchRecorder
	fail    func(error)
}

// openLoop is openLoopBinary's state: the connections, the slots of the
// --concurrency requests outstanding, and whether the run is closing (its
// drain over).
type openLoop struct {
	openLoopParams
	ocs     []*openConn
	sem     chan struct{}
	closing atomic.Bool
}

// openLoopBinary runs the open loop of p.b on p.conns until runCtx ends,
// then waits (at most openDrainTimeout) for the answers outstanding.
// p.payload gives the reserve of request i. Answers are counted in p.rec
// as the per-request loop counts them: those of the requests sent after
// the warm-up, whenever they arrive; a measured request whose connection
// broke, or that is still unanswered after the drain, is a request and an
// error. It returns
// errAllConnsBroken (wrapping the first failure) if every connection
// broke before the run's end.
func openLoopBinary(runCtx context.Context, p openLoopParams) error {
	l := &openLoop{openLoopParams: p, sem: make(chan struct{}, p.b.Concurrency)}
	for _, nc := range p.conns {
		l.ocs = append(l.ocs, &openConn{nc: nc, bw: bufio.NewWriterSize(nc, 64<<10), pending: make(map[uint64]pendingReq)})
	}
	var readers sync.WaitGroup
	for _, oc := range l.ocs {
		readers.Add(1)
		go func() {
			defer readers.Done()
			l.rec.record(oc.read(l.sem, l.rec, l.fail, &l.closing))
		}()
	}
	allBroken := l.pace(runCtx)
	l.flushAll()
	l.drain()
	for _, oc := range l.ocs {
		oc.nc.Close()
	}
	readers.Wait()
	if !allBroken {
		return nil
	}
	for _, oc := range l.ocs {
		if oc.lostErr != nil { // readers.Wait: no lock needed
			return fmt.Errorf("%w (first: %v)", errAllConnsBroken, oc.lostErr)
		}
	}
	return errAllConnsBroken
}

// pace sends every reserve at its scheduled start, those come due since
// its last wake-up at once, until runCtx ends, --max-requests measured
// requests are sent, or every connection broke (it then returns true).
func (l *openLoop) pace(runCtx context.Context) (allBroken bool) {
	interval := time.Duration(wire.FloatNanos(float64(time.Second) / l.b.OpenRate))
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	sent := 0
	for runCtx.Err() == nil {
		var stop bool
		if sent, stop, allBroken = l.sendDue(runCtx, start, interval, sent); stop {
			return allBroken
		}
		l.flushAll()
		wait := max(time.Until(start.Add(wire.MulNanos(time.Duration(sent+1), interval))), openBatchTick)
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-runCtx.Done():
		}
	}
	return false
}

// sendDue buffers every reserve scheduled (every interval from start) up
// to now, from request sent on, and returns the next request's number.
// stop says the loop must end: runCtx ended while it waited for a slot,
// --max-requests measured requests were sent, or (allBroken) every
// connection broke.
func (l *openLoop) sendDue(runCtx context.Context, start time.Time, interval time.Duration, sent int) (next int, stop, allBroken bool) {
	now := time.Now()
	for ; runCtx.Err() == nil; sent++ {
		scheduled := start.Add(wire.MulNanos(time.Duration(sent+1), interval))
		if scheduled.After(now) {
			break
		}
		if l.rec.full() || !l.slot(runCtx) {
			return sent, true, false
		}
		measured, ok := l.rec.admit()
		if !ok {
			<-l.sem
			return sent, true, false
		}
		oc, id := addPending(l.ocs, sent, pendingReq{scheduled: scheduled, measured: measured})
		if oc == nil {
			<-l.sem
			return sent, true, true
		}
		if !oc.dirty {
			// The deadline of the write this frame starts (a full
			// buffer writes by itself, before the flush).
			_ = oc.nc.SetWriteDeadline(time.Now().Add(openWriteTimeout))
		}
		oc.dirty = true
		if err := wire.WriteFrame(oc.bw, wire.Frame{ID: id, Kind: wire.OpReserve, Payload: l.payload(sent)}); err != nil {
			oc.fail(fmt.Errorf("bench: writing to %s: %w", oc.nc.RemoteAddr(), err))
		}
	}
	return sent, false, false
}

// slot takes one of the --concurrency slots. With none free it first
// sends what is buffered, whose answers free the slots, then waits for
// one; false if runCtx ended first.
func (l *openLoop) slot(runCtx context.Context) bool {
	select {
	case l.sem <- struct{}{}:
		return true
	default:
	}
	l.flushAll()
	select {
	case l.sem <- struct{}{}:
		return true
	case <-runCtx.Done():
		return false
	}
}

// flushAll writes what each live connection has buffered.
func (l *openLoop) flushAll() {
	for _, oc := range l.ocs {
		if !oc.dirty || oc.broken.Load() {
			continue
		}
		oc.dirty = false
		if err := oc.bw.Flush(); err != nil {
			oc.fail(fmt.Errorf("bench: writing to %s: %w", oc.nc.RemoteAddr(), err))
		}
	}
}

// drain waits for the answers outstanding, as the per-request loop does
// (the reader of a broken connection frees its slots at once), at most
// b.openDrain (openDrainTimeout if 0); then the run is closing, and the
// measured requests still unanswered count as requests and errors.
func (l *openLoop) drain() {
	drain := cmp.Or(l.b.openDrain, openDrainTimeout)
	deadline := time.Now().Add(drain)
	for len(l.sem) > 0 && time.Now().Before(deadline) {
		time.Sleep(openBatchTick)
	}
	l.closing.Store(true)
	if n := claimUnanswered(l.ocs); n > 0 {
		// Each is a request and an error (fail counts one).
		l.rec.requests.Add(int64(n - 1))
		l.rec.errs.Add(int64(n - 1))
		l.fail(fmt.Errorf("bench: %d requests unanswered %v after the run (outcome unknown)", n, drain))
	}
}

// addPending records request sent (req) as pending on the connection its turn
// picks, or the next one whose reader has not failed; it returns that
// connection and the request's frame ID, or nil when every connection
// has failed.
func addPending(ocs []*openConn, sent int, req pendingReq) (*openConn, uint64) {
	for k := range ocs {
		oc := ocs[(sent+k)%len(ocs)]
		if oc.broken.Load() {
			continue
		}
		oc.mu.Lock()
		if oc.dead {
			oc.mu.Unlock()
			continue
		}
		oc.nextID++
		id := oc.nextID
		oc.pending[id] = req
		oc.mu.Unlock()
		return oc, id
	}
	return nil, 0
}

// claimUnanswered takes the requests still pending on the connections
// whose readers have not failed them, once the drain is over, and returns
// how many of them are measured: each request is then either answered (its reader removed it
// first) or unanswered (taken here), never counted as both, even when an
// answer arrives as the drain gives up. A connection claimed here is dead
// to its reader, which then reports nothing of its own end.
func claimUnanswered(ocs []*openConn) int {
	n := 0
	for _, oc := range ocs {
		oc.mu.Lock()
		if !oc.dead {
			oc.dead = true
			n += measuredOf(oc.pending)
			clear(oc.pending)
		}
		oc.mu.Unlock()
	}
	return n
}

// fail marks the connection broken and closes it; its reader then fails
// the requests outstanding on it.
func (oc *openConn) fail(err error) {
	if oc.broken.CompareAndSwap(false, true) {
		oc.err.Store(err)
		oc.nc.Close()
	}
}

// measuredOf is how many of pending are measured.
func measuredOf(pending map[uint64]pendingReq) int {
	n := 0
	for _, p := range pending {
		if p.measured {
			n++
		}
	}
	return n
}

// read reads the answers on oc until it fails or closes, counting those
// of measured requests in rec (fail: one that failed); it returns the
// latencies of the admitted ones. When the connection fails, the
// measured requests outstanding on it are counted as requests and errors,
// unless the drain has claimed them first (claimUnanswered); a
// connection that fails after the drain only closes.
func (oc *openConn) read(sem chan struct{}, rec *benchRecorder, fail func(error), closing *atomic.Bool) []time.Duration {
	lats := make([]time.Duration, 0, 4096)
	br := bufio.NewReaderSize(oc.nc, 64<<10)
	for {
		f, err := wire.ReadFrame(br)
		if err != nil {
			oc.broken.Store(true)
			oc.nc.Close()
			if e, ok := oc.err.Load().(error); ok {
				err = e
			} else {
				err = fmt.Errorf("bench: reading from %s: %w", oc.nc.RemoteAddr(), err)
			}
			oc.mu.Lock()
			if oc.dead { // claimed by the drain, which counted its requests
				oc.mu.Unlock()
				return lats
			}
			oc.dead = true
			lost, measured := len(oc.pending), measuredOf(oc.pending)
			clear(oc.pending)
			err = fmt.Errorf("%w (%d requests outstanding, outcome unknown)", err, lost)
			oc.lostErr = err
			oc.mu.Unlock()
			if measured > 0 {
				// Each lost measured request is a request and an error.
				rec.requests.Add(int64(measured - 1))
				rec.errs.Add(int64(measured - 1))
				fail(err)
			} else {
				rec.note(err)
			}
			for range lost {
				<-sem
			}
			return lats
		}
		oc.mu.Lock()
		req, ok := oc.pending[f.ID]
		delete(oc.pending, f.ID)
		oc.mu.Unlock()
		if !ok {
			if !closing.Load() {
				rec.note(fmt.Errorf("bench: answer to frame %d from %s, which is not outstanding", f.ID, oc.nc.RemoteAddr()))
			}
			continue // else claimed by the drain as unanswered
		}
		if req.measured {
			code, overloaded, err := binaryAnswer(f.Kind, f.Payload)
			if rec.answer(code, overloaded, err, fail) {
				lats = append(lats, time.Since(req.scheduled))
			}
		}
		<-sem
	}
}
