package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/permitd/permitd/jepsen-lite/history"
	"github.com/permitd/permitd/jepsen-lite/runner/cluster"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/wait"
)

// The transfer nemesis (kind FaultTransfer, variant a-b-a). Through its
// window it finds the leader A, hands the leadership to another node B
// (POST /v1/cluster/transfer-leadership {"to":B}), waits until B leads,
// holds for 300–900 ms, hands it back to A, waits, holds, and again, as
// long as a round trip still fits in the window. The request goes
// alternately to the leader itself and to a third node, which forwards
// it. Each transfer is a nemesis operation of its own in the history (on
// the fault's auxiliary process): ok when the new leader was seen
// leading, fail for a refusal (4xx: nothing changed), info otherwise.

// TransferRecord is one leadership transfer.
type TransferRecord struct {
	// From is the node that led, To the node the leadership was handed to.
	From string `json:"from"`
	To   string `json:"to"`
	// Via is the node the request was sent to.
	Via string `json:"via"`
	// StartNanos is when it was asked for, EndNanos when To was seen
	// leading (or the attempt gave up).
	StartNanos int64 `json:"start_ns"`
	EndNanos   int64 `json:"end_ns"`
	// Outcome is ok, fail or info (as in the history).
	Outcome string `json:"outcome"`
	// Term is To's term once it led.
	Term uint64 `json:"term,omitempty"`
	// Error says why it failed or was not seen done.
	Error string `json:"error,omitempty"`
}

// transferSettle bounds the wait for the new leader to be seen leading.
const transferSettle = 3 * time.Second

// beginTransfer starts a transfer fault's loop in the background; end
// stops it (after the transfer in progress).
func (nm *Nemesis) beginTransfer(ctx context.Context, i int, ev Event, af *activeFault) {
	rec := af.rec
	proc := nm.auxProcess(i)
	until := nm.start.Add(ev.Until)
	if a := nm.leader(ctx, rec); a != nil {
		rec.Targets = []string{a.ID} // A, the leader it starts from
		rec.Notes = append(rec.Notes, "leadership "+a.ID+" → another node → back, until the window's end")
	}
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	af.launch = func() {
		go func() {
			defer close(done)
			rng := rand.New(rand.NewPCG(ev.Pick, 0x7472616e73666572))
			for round := 0; bctx.Err() == nil; round++ {
				// A round trip takes two transfers and two holds: start one
				// only if it fits before the window's end.
				if time.Until(until) < 2*time.Second {
					return
				}
				a := nm.leader(bctx, rec)
				if a == nil || bctx.Err() != nil {
					return
				}
				others := without(nm.cl.UpNodes(), a)
				if len(others) == 0 {
					nm.recordNote(rec, "no other running node to hand the leadership to")
					return
				}
				b := others[(ev.Pick+uint64(round))%uint64(len(others))]
				if !nm.transferOnce(bctx, proc, rec, a, b, round) {
					_ = wait.Sleep(bctx, 500*time.Millisecond)
					continue
				}
				_ = wait.Sleep(bctx, time.Duration(300+rng.IntN(601))*time.Millisecond)
				if bctx.Err() != nil {
					// Hand it back even at the window's end: the fault is A→B→A.
					nm.transferOnce(context.WithoutCancel(bctx), proc, rec, b, a, round)
					return
				}
				nm.transferOnce(bctx, proc, rec, b, a, round)
				_ = wait.Sleep(bctx, time.Duration(300+rng.IntN(601))*time.Millisecond)
			}
		}()
	}
	af.stop = func() { cancel(); <-done }
}

// transferOnce hands the leadership from to to (through from on odd
// rounds, through a third node on even ones when there is one), records
// it, and reports whether to was seen leading.
func (nm *Nemesis) transferOnce(ctx context.Context, proc int, rec *Record, from, to *cluster.Node, round int) bool {
	via := from
	if round%2 == 0 {
		for _, n := range nm.cl.UpNodes() {
			if n != from && n != to {
				via = n
				break
			}
		}
	}
	tr := TransferRecord{From: from.ID, To: to.ID, Via: via.ID}
	inv, err := nm.hw.Invoke(proc, "", history.FNemesis, "", history.NemesisValue{Fault: FaultTransfer, Targets: []string{to.ID},
		Detail: fmt.Sprintf("leadership %s → %s, asked through %s", from.ID, to.ID, via.ID)})
	if err != nil {
		nm.recordError(rec, err.Error())
		return false
	}
	tr.StartNanos = inv.TimeNanos
	outcome, detail := history.Info, ""
	if err := nm.ct.Transfer(ctx, via, to.ID); err != nil {
		tr.Error = err.Error()
		if c := cluster.AnswerCode(err); c >= 400 && c < 500 {
			outcome = history.Fail
		}
		detail = err.Error()
	} else {
		deadline := time.Now().Add(transferSettle)
		for {
			sts := nm.ct.Statuses(ctx, nm.cl.Nodes, 500*time.Millisecond)
			if id, term := cluster.LeaderOf(sts); id == to.ID {
				outcome, tr.Term = history.OK, term
				detail = fmt.Sprintf("%s leads in term %d", to.ID, term)
				break
			}
			if time.Now().After(deadline) || wait.Sleep(ctx, 50*time.Millisecond) != nil {
				detail = fmt.Sprintf("transferred, but %s was not seen leading within %v", to.ID, transferSettle)
				tr.Error = detail
				break
			}
		}
	}
	comp, err := nm.hw.Complete(inv, outcome, "", "", history.NemesisValue{Fault: FaultTransfer, Targets: []string{to.ID}, Detail: detail})
	if err != nil {
		nm.recordError(rec, err.Error())
	}
	tr.EndNanos, tr.Outcome = comp.TimeNanos, string(outcome)
	nm.mu.Lock()
	rec.Transfers = append(rec.Transfers, tr)
	nm.mu.Unlock()
	nm.logf("transfer %s → %s via %s: %s %s", from.ID, to.ID, via.ID, outcome, detail)
	return outcome == history.OK
}
