package node

import "time"

// callpool.go: the goroutines that serve pipelined calls (forward.go).
// A call served by a fresh goroutine grows that goroutine's stack on the
// way to the batcher (runtime.newstack was 8 % of a leader's CPU at a
// thousand binary renewals per second); a goroutine that served a call
// keeps its stack and waits callIdle for the next one before it exits.
// A call never waits for a goroutine: with none idle, a new one starts.

// callIdle is how long a serving goroutine waits for another call.
const callIdle = 10 * time.Second

// callPool hands calls to idle serving goroutines, starting new ones as
// needed.
type callPool struct {
	calls chan func()
	stop  <-chan struct{}
}

// newCallPool returns an empty pool whose idle goroutines exit when stop
// is closed.
func newCallPool(stop <-chan struct{}) *callPool {
	return &callPool{calls: make(chan func()), stop: stop}
}

// run runs call on an idle goroutine, or on a new one if none is idle.
func (p *callPool) run(call func()) {
	select {
	case p.calls <- call:
	default:
		go p.serve(call)
	}
}

// serve runs call, then the calls handed to it, until it has been idle
// for callIdle or the pool stops.
func (p *callPool) serve(call func()) {
	idle := time.NewTimer(callIdle)
	defer idle.Stop()
	for {
		call()
		idle.Reset(callIdle)
		select {
		case call = <-p.calls:
		case <-idle.C:
			return
		case <-p.stop:
			return
		}
	}
}
