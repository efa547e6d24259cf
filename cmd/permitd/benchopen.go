package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// benchopen.go: the open loop over the binary protocol, without a
// goroutine, a timer and a channel per request. A pacer wakes at most
// once per openBatchTick, writes every reserve that has come due since
// its last wake-up into the connections' buffers (round robin) and
// flushes each connection once; one reader per connection matches the
// answers to their scheduled starts by frame ID. So the generator makes
// one write system call per connection per tick, whatever the rate, and
// takes less of the CPU it shares with a cluster on the same machine.

// openBatchTick is the pacer's shortest sleep: a reserve leaves at most
// this long after its scheduled start (its latency counts from that start).
const openBatchTick = time.Millisecond

// openDrainTimeout bounds the wait for the answers still outstanding when
// the run ends.
const openDrainTimeout = 10 * time.Second

// openConn is one pipelined binary connection of the open loop: the pacer
// writes to it, its reader reads from it.
type openConn struct {
	nc    net.Conn
	bw    *bufio.Writer
	dirty bool // frames buffered since the last flush (pacer only)

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]time.Time // frame ID → scheduled start
	broken  atomic.Bool
	err     atomic.Value // the write error that broke it, if one did
}

// openLoopBinary runs the open loop of b on conns until runCtx ends, then
// waits (at most openDrainTimeout) for the answers outstanding. payload
// gives the reserve of request i. Answers are counted in rec as the
// per-request loop counts them: from when they arrive, while measuring.
func openLoopBinary(runCtx context.Context, b benchFlags, conns []net.Conn, payload func(i int) []byte, rec *benchRecorder, fail func(error)) {
	ocs := make([]*openConn, len(conns))
	for k, nc := range conns {
		ocs[k] = &openConn{nc: nc, bw: bufio.NewWriterSize(nc, 64<<10), pending: make(map[uint64]time.Time)}
	}
	sem := make(chan struct{}, b.concurrency)
	var closing atomic.Bool
	var readers sync.WaitGroup
	for _, oc := range ocs {
		readers.Add(1)
		go func() {
			defer readers.Done()
			rec.record(oc.read(runCtx, sem, rec, fail, &closing))
		}()
	}
	flushAll := func() {
		for _, oc := range ocs {
			if !oc.dirty || oc.broken.Load() {
				continue
			}
			oc.dirty = false
			_ = oc.nc.SetWriteDeadline(time.Now().Add(writeDeadline))
			if err := oc.bw.Flush(); err != nil {
				oc.fail(fmt.Errorf("bench: writing to %s: %w", oc.nc.RemoteAddr(), err))
			}
		}
	}
	interval := time.Duration(float64(time.Second) / b.openRate)
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	sent := 0
pace:
	for runCtx.Err() == nil {
		if b.maxRequests > 0 && rec.requests.Load() >= b.maxRequests {
			break
		}
		now := time.Now()
		for ; runCtx.Err() == nil; sent++ {
			scheduled := start.Add(time.Duration(sent+1) * interval)
			if scheduled.After(now) {
				break
			}
			select {
			case sem <- struct{}{}:
			default:
				// At --concurrency outstanding: send what is buffered,
				// whose answers free the slots, then wait for one.
				flushAll()
				select {
				case sem <- struct{}{}:
				case <-runCtx.Done():
					break pace
				}
			}
			oc := ocs[sent%len(ocs)]
			if oc.broken.Load() {
				if oc = liveConn(ocs, sent); oc == nil {
					<-sem
					break pace
				}
			}
			oc.mu.Lock()
			oc.nextID++
			id := oc.nextID
			oc.pending[id] = scheduled
			oc.mu.Unlock()
			if err := wire.WriteFrame(oc.bw, wire.Frame{ID: id, Kind: wire.OpReserve, Payload: payload(sent)}); err != nil {
				oc.fail(fmt.Errorf("bench: writing to %s: %w", oc.nc.RemoteAddr(), err))
				continue
			}
			oc.dirty = true
		}
		flushAll()
		wait := max(time.Until(start.Add(time.Duration(sent+1)*interval)), openBatchTick)
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-runCtx.Done():
		}
	}
	flushAll()
	// Wait for the answers outstanding, as the per-request loop does.
	deadline := time.Now().Add(openDrainTimeout)
	for len(sem) > 0 && time.Now().Before(deadline) && liveConn(ocs, 0) != nil {
		time.Sleep(openBatchTick)
	}
	if n := len(sem); n > 0 && liveConn(ocs, 0) != nil {
		fail(fmt.Errorf("bench: %d requests unanswered %v after the run (outcome unknown)", n, openDrainTimeout))
	}
	closing.Store(true)
	for _, oc := range ocs {
		oc.nc.Close()
	}
	readers.Wait()
}

// writeDeadline bounds one flush to a node that stopped reading.
const writeDeadline = 10 * time.Second

// liveConn is the first connection not broken, from index from on; nil
// when all are.
func liveConn(ocs []*openConn, from int) *openConn {
	for k := range ocs {
		if oc := ocs[(from+k)%len(ocs)]; !oc.broken.Load() {
			return oc
		}
	}
	return nil
}

// fail marks the connection broken and closes it; its reader then fails
// the requests outstanding on it.
func (oc *openConn) fail(err error) {
	if oc.broken.CompareAndSwap(false, true) {
		oc.err.Store(err)
		oc.nc.Close()
	}
}

// read reads the answers on oc until it fails or closes, counting each
// in rec; it returns the latencies of the admitted ones.
func (oc *openConn) read(runCtx context.Context, sem chan struct{}, rec *benchRecorder, fail func(error), closing *atomic.Bool) []time.Duration {
	lats := make([]time.Duration, 0, 4096)
	br := bufio.NewReaderSize(oc.nc, 64<<10)
	for {
		f, err := wire.ReadFrame(br)
		if err != nil {
			// Decided before the connection counts as broken: until
			// then the drain cannot end and set closing.
			report := !closing.Load()
			oc.broken.Store(true)
			oc.nc.Close()
			oc.mu.Lock()
			lost := len(oc.pending)
			clear(oc.pending)
			oc.mu.Unlock()
			for range lost {
				<-sem
			}
			if report {
				if e, ok := oc.err.Load().(error); ok {
					err = e
				}
				fail(fmt.Errorf("bench: reading from %s: %w (%d requests outstanding, outcome unknown)", oc.nc.RemoteAddr(), err, lost))
			}
			return lats
		}
		oc.mu.Lock()
		scheduled, ok := oc.pending[f.ID]
		delete(oc.pending, f.ID)
		oc.mu.Unlock()
		if !ok {
			fail(fmt.Errorf("bench: answer to frame %d from %s, which is not outstanding", f.ID, oc.nc.RemoteAddr()))
			continue
		}
		<-sem
		lat := time.Since(scheduled)
		if !rec.measuring.Load() || runCtx.Err() != nil {
			continue
		}
		rec.requests.Add(1)
		code, overloaded, err := binaryAnswer(f.Kind, f.Payload)
		switch {
		case err != nil:
			fail(err)
		case overloaded:
			rec.shed.Add(1)
		case code == 200:
			rec.granted.Add(1)
			lats = append(lats, lat)
		default:
			rec.refused.Add(1)
			lats = append(lats, lat)
		}
	}
}
