package relay

import (
	"context"
	"fmt"

	"github.com/permitd/permitd/transport/wire"
)

// queued is one command waiting for a batch, and where its answer goes.
type queued struct {
	call  wire.LeaseCall
	reply func(wire.LeaseAnswer)
}

// batchBytesBudget bounds the commands' bytes of one batch, leaving room
// for the count and each command's operation and length within a client
// frame.
const batchBytesBudget = wire.MaxClientFrame - 64

// enqueue queues a command for the next batch and sends a batch if fewer
// than MaxInFlight are out; false (nothing queued) when the queue is full.
func (r *Relay) enqueue(q queued) bool {
	r.mu.Lock()
	if len(r.queue) >= r.cfg.MaxQueue {
		r.mu.Unlock()
		return false
	}
	r.queue = append(r.queue, q)
	r.commands.Add(1)
	batch := r.takeLocked()
	r.mu.Unlock()
	if batch != nil {
		go r.send(batch)
	}
	return true
}

// takeLocked takes the next batch off the queue if one may leave now (nil
// otherwise), counting it as sending.
func (r *Relay) takeLocked() []queued {
	if len(r.queue) == 0 || r.sending >= r.cfg.MaxInFlight || r.closed {
		return nil
	}
	n, size := 0, 0
	for n < len(r.queue) && n < wire.MaxLeaseBatch {
		size += len(r.queue[n].call.Payload) + 8
		if n > 0 && size > batchBytesBudget {
			break
		}
		n++
	}
	batch := make([]queued, n)
	copy(batch, r.queue)
	rest := copy(r.queue, r.queue[n:])
	clear(r.queue[rest:])
	r.queue = r.queue[:rest]
	r.sending++
	return batch
}

// send sends batch to the register, answers its commands, and sends the
// next batch if commands queued meanwhile.
func (r *Relay) send(batch []queued) {
	for batch != nil {
		r.answer(batch)
		r.mu.Lock()
		r.sending--
		batch = r.takeLocked()
		r.mu.Unlock()
	}
}

// answer makes one batch call and replies to each of its commands.
func (r *Relay) answer(batch []queued) {
	calls := make([]wire.LeaseCall, len(batch))
	for i, q := range batch {
		calls[i] = q.call
	}
	r.batches.Add(1)
	r.batched.Add(uint64(len(batch)))
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.BatchTimeout)
	answers, err := r.cfg.Upstream.LeaseBatch(ctx, calls)
	cancel()
	if err == nil && len(answers) != len(batch) {
		err = fmt.Errorf("%d answers to %d commands", len(answers), len(batch))
	}
	if err != nil {
		r.failures.Add(1)
		// The first failure after an answer is a warning (an election, a
		// node down, or the register refusing the relay: a token without
		// the worker role, a node without OpLeaseBatch); the ones after
		// it, until a batch is answered, are debug lines.
		if r.failing.Swap(true) {
			r.log.Debug("the register did not answer a batch", "commands", len(batch), "error", err)
		} else {
			r.log.Warn("the register did not answer a batch, or refused it: its workers retry at the register's nodes", "commands", len(batch), "error", err)
		}
		msg := []byte(fmt.Sprintf("relay: the register did not answer the batch, or refused it (outcome unknown: retry with the same request ID at another server): %v", err))
		for _, q := range batch {
			q.reply(wire.LeaseAnswer{Code: wire.CodeNoLeader, Payload: msg})
		}
		return
	}
	if r.failing.Swap(false) {
		r.log.Info("the register answers the relay's batches again")
	}
	for i, q := range batch {
		q.reply(answers[i])
	}
}
