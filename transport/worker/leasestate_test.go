package worker

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/client"
)

const sec = 1000 * ms

// exampleParams are those of leaseState's worked example: TTL 2 s, margin
// 200 ms, renewal every 1 s, retry every 250 ms, steal grace 4 s,
// unreachable after 500 ms of silence.
func exampleParams() leaseParams {
	return leaseParams{limit: "api", holder: "h", group: "g", weight: 1, ttlNanos: 2 * sec, marginNanos: 200 * ms,
		renewNanos: sec, retryNanos: 250 * ms, stealGraceNanos: 4 * sec, unreachableAfterNanos: 500 * ms, idPrefix: "w."}
}

// lin is what happens at a step: the state is asked what to do (next,
// send, returnCall), an answer comes back to the last call (answer, or
// returnAnswer when the last call was a return), or callers and peers act
// on the grant (spend, give away, receive, ask).
type lin struct {
	kind string
	res  client.LeaseGrant
	err  error
	n    int64
}

func next() lin                     { return lin{kind: "next"} }
func send() lin                     { return lin{kind: "send"} }
func ret() lin                      { return lin{kind: "return"} }
func ans(res client.LeaseGrant) lin { return lin{kind: "answer", res: res} }
func fail(err error) lin            { return lin{kind: "answer", err: err} }
func spend(n int64) lin             { return lin{kind: "spend", n: n} }
func give(n int64) lin              { return lin{kind: "give", n: n} }
func take(n int64) lin              { return lin{kind: "take", n: n} }
func ask(n int64) lin               { return lin{kind: "ask", n: n} }
func look() lin                     { return lin{kind: "look"} }
func granted(id, epoch uint64, permits int64, expiresIn time.Duration) client.LeaseGrant {
	return client.LeaseGrant{Status: client.LeaseGranted, LeaseID: id, Epoch: epoch, Permits: permits, ExpiresIn: expiresIn, ShareMilliPerSec: 100_000}
}

// lview is what every step checks of the state afterwards.
type lview struct {
	leaseID, epoch uint64
	// spendable is what the grant holds for callers at now; usableUntil
	// its local expiry (0: no grant).
	spendable, usableUntil int64
	nextCall               int64
	// failsClosed: a caller with no permit and no steal round to come
	// fails closed now.
	failsClosed bool
}

// lwant is a step's expectation: the action (next, send, return), the
// event and error (answer; for a return's answer: done and the error),
// and the state.
type lwant struct {
	act   leaseAction
	ev    leaseEvent
	errIs error
	ret   returnStep
	view  lview
}

type lstep struct {
	now  int64
	in   lin
	want lwant
}

// runSteps plays steps on s, failing at the first that differs.
func runSteps(t *testing.T, s *leaseState, steps []lstep) {
	t.Helper()
	var last leaseAction
	for i, st := range steps {
		where := fmt.Sprintf("step %d at %v (%s)", i, time.Duration(st.now), st.in.kind)
		switch st.in.kind {
		case "next", "send", "return":
			var a leaseAction
			switch st.in.kind {
			case "next":
				a = s.next(st.now)
			case "send":
				a = s.send(st.now)
			default:
				a = s.returnCall(st.now)
			}
			if a != st.want.act {
				t.Fatalf("%s: action\n got %+v\nwant %+v", where, a, st.want.act)
			}
			if a.op >= opLease {
				last = a
			}
		case "answer":
			if last.op == opReturn {
				got := s.returnAnswer(st.now, last, st.in.res, st.in.err)
				if got.done != st.want.ret.done || got.retryAtNanos != st.want.ret.retryAtNanos || !matches(got.err, st.want.errIs) {
					t.Fatalf("%s: return step %+v, want done %v, retry at %v, error matching %v", where, got, st.want.ret.done, time.Duration(st.want.ret.retryAtNanos), st.want.errIs)
				}
				break
			}
			o := s.answer(st.now, last, st.in.res, st.in.err)
			if o.event != st.want.ev || !matches(o.err, st.want.errIs) {
				t.Fatalf("%s: outcome %v (error %v), want %v (error matching %v)", where, o.event, o.err, st.want.ev, st.want.errIs)
			}
		case "spend", "give":
			if s.spendable(st.now) < st.in.n {
				t.Fatalf("%s: %d permits, only %d spendable", where, st.in.n, s.spendable(st.now))
			}
			if st.in.kind == "spend" {
				s.cur.debit(st.in.n)
			} else {
				s.cur.stolenOut += st.in.n
			}
		case "take":
			s.stolenIn(st.in.n)
		case "ask":
			s.meter.add(st.in.n)
		case "look":
		default:
			t.Fatalf("%s: unknown input", where)
		}
		got := lview{leaseID: s.leaseID, epoch: s.epoch, spendable: s.spendable(st.now), nextCall: s.nextCallNanos,
			failsClosed: s.failClosed(st.now, false) != nil}
		if s.cur != nil {
			got.usableUntil = s.cur.expiryNanos
		}
		if got != st.want.view {
			t.Fatalf("%s: state\n got %+v\nwant %+v", where, got, st.want.view)
		}
	}
}

// matches reports whether err matches want (want nil: err is nil).
func matches(err, want error) bool {
	if want == nil {
		return err == nil
	}
	return errors.Is(err, want)
}

// The requests the steps expect.
func leaseReq(demand int64, id string) client.LeaseRequest {
	return client.LeaseRequest{Holder: "h", Group: "g", Weight: 1, DemandMilliPerSec: demand, TTL: 2 * time.Second, RequestID: id}
}

func renewAct(at int64, id, epoch uint64, spent, out, kept, in, demand int64, reqID string) leaseAction {
	return leaseAction{op: opRenew, atNanos: at, leaseID: id, epoch: epoch,
		report: client.LeaseReport{Spent: spent, StolenOut: out, Kept: kept, StolenIn: in, DemandMilliPerSec: demand, TTL: 2 * time.Second, RequestID: reqID}}
}

var (
	errNotDelivered = fmt.Errorf("test: %w", client.ErrNotDelivered)
	err404          = &client.APIError{Server: "test", StatusCode: http.StatusNotFound, Message: `limit "api" not found`}
	err400          = &client.APIError{Server: "test", StatusCode: http.StatusBadRequest, Message: "not leased"}
)

// TestLeaseStateWorkedExample replays the worked example of leaseState's
// documentation, step by step.
func TestLeaseStateWorkedExample(t *testing.T) {
	s := newLeaseState(exampleParams())
	const max = client.MaxDemandMilliPerSec
	runSteps(t, &s, []lstep{
		{0, next(), lwant{act: leaseAction{op: opLease, lease: leaseReq(max, "w.1")}, view: lview{failsClosed: false}}},
		{5 * ms, next(), lwant{act: leaseAction{op: opNone}}}, // under way: nothing more
		{10 * ms, ans(granted(7, 1, 100, 2*time.Second)), lwant{ev: evGranted, view: lview{7, 1, 100, 1800 * ms, sec, false}}},
		{10 * ms, ans(granted(7, 1, 100, 2*time.Second)), lwant{ev: evIgnored, view: lview{7, 1, 100, 1800 * ms, sec, false}}}, // a replay changes nothing
		{500 * ms, ask(70), lwant{view: lview{7, 1, 100, 1800 * ms, sec, false}}},
		{600 * ms, spend(60), lwant{view: lview{7, 1, 40, 1800 * ms, sec, false}}},
		{700 * ms, give(10), lwant{view: lview{7, 1, 30, 1800 * ms, sec, false}}},
		{800 * ms, take(5), lwant{view: lview{7, 1, 30, 1800 * ms, sec, false}}},
		{999 * ms, next(), lwant{act: leaseAction{op: opWait, atNanos: sec}, view: lview{7, 1, 30, 1800 * ms, sec, false}}},
		// 70 asked over 1 s: 70/s plus 10 % headroom.
		// The renewal keeps the 30 left (its share, 100/s, would spend
		// 80 until the grant's usable-until at 1.8 s): callers go on
		// spending them while it is in flight.
		{sec, next(), lwant{act: renewAct(sec, 7, 1, 60, 10, 30, 5, 77_000, "w.2"), view: lview{7, 1, 30, 1800 * ms, sec, false}}},
		{1010 * ms, spend(4), lwant{view: lview{7, 1, 26, 1800 * ms, sec, false}}},
		// The new grant's 100 permits count the 30 kept, 4 of them spent.
		{1020 * ms, ans(granted(7, 2, 100, 1990*time.Millisecond)), lwant{ev: evGranted, view: lview{7, 2, 96, 2790 * ms, 2 * sec, false}}},
		{1500 * ms, spend(16), lwant{view: lview{7, 2, 80, 2790 * ms, 2 * sec, false}}},
		// 70 asked over the last two periods (2 s). Kept: 100/s until 2.79 s.
		{2 * sec, next(), lwant{act: renewAct(2*sec, 7, 2, 20, 0, 79, 0, 38_500, "w.3"), view: lview{7, 2, 79, 2790 * ms, 2 * sec, false}}},
		{2100 * ms, fail(errAnswerLost), lwant{ev: evFailed, errIs: errAnswerLost, view: lview{7, 2, 79, 2790 * ms, 2350 * ms, false}}},
		{2200 * ms, spend(9), lwant{view: lview{7, 2, 70, 2790 * ms, 2350 * ms, false}}},
		{2350 * ms, next(), lwant{act: renewAct(2350*ms, 7, 2, 20, 0, 79, 0, 38_500, "w.3"), view: lview{7, 2, 70, 2790 * ms, 2350 * ms, false}}},
		// The first w.3 may have been applied: an undelivered resend proves
		// nothing about it, so (7,2) stays closed and w.3 is resent as it was.
		{2400 * ms, fail(errNotDelivered), lwant{ev: evFailed, errIs: client.ErrNotDelivered, view: lview{7, 2, 70, 2790 * ms, 2650 * ms, false}}},
		// Silent since w.3 left at 2 s: until UnreachableAfter (500 ms) a
		// caller finding no permit waits, from then on it fails closed
		// unless a steal round is to come (failClosed(now, false) != nil).
		{2499 * ms, look(), lwant{view: lview{7, 2, 70, 2790 * ms, 2650 * ms, false}}},
		{2500 * ms, look(), lwant{view: lview{7, 2, 70, 2790 * ms, 2650 * ms, true}}},
		{2650 * ms, next(), lwant{act: renewAct(2650*ms, 7, 2, 20, 0, 79, 0, 38_500, "w.3"), view: lview{7, 2, 70, 2790 * ms, 2650 * ms, true}}},
		{2700 * ms, fail(errNotDelivered), lwant{ev: evFailed, errIs: client.ErrNotDelivered, view: lview{7, 2, 70, 2790 * ms, 2950 * ms, true}}},
		{2789 * ms, look(), lwant{view: lview{7, 2, 70, 2790 * ms, 2950 * ms, true}}},
		{2790 * ms, look(), lwant{view: lview{7, 2, 0, 2790 * ms, 2950 * ms, true}}},
		{2950 * ms, next(), lwant{act: renewAct(2950*ms, 7, 2, 20, 0, 79, 0, 38_500, "w.3"), view: lview{7, 2, 0, 2790 * ms, 2950 * ms, true}}},
		{3 * sec, ans(client.LeaseGrant{Status: client.LeaseFenced, LeaseID: 7, Epoch: 2}), lwant{ev: evFenced, view: lview{nextCall: 3 * sec}}},
		// The window since the last report is under RetryEvery: the last
		// measurement (0).
		{3 * sec, next(), lwant{act: leaseAction{op: opLease, atNanos: 3 * sec, lease: leaseReq(0, "w.4")}, view: lview{nextCall: 3 * sec}}},
	})
	if c := s.counters; c.leases != 1 || c.renewals != 1 || c.fenced != 1 || c.registerFails != 3 || c.leasedPermits != 170 || c.expiredUnusedPermits != 71 {
		t.Errorf("counters %+v", c)
	}
}

// TestLeaseStateAnswers covers each kind of answer to a lease and a renewal.
func TestLeaseStateAnswers(t *testing.T) {
	const max = client.MaxDemandMilliPerSec
	held := lview{7, 1, 100, 1800 * ms, sec, false} // after the first grant at 10 ms
	first := []lstep{
		{0, next(), lwant{act: leaseAction{op: opLease, lease: leaseReq(max, "w.1")}}},
		{10 * ms, ans(granted(7, 1, 100, 2*time.Second)), lwant{ev: evGranted, view: held}},
	}
	// Nothing spent: the renewal keeps what the share (100/s) spends
	// until the usable-until (1.8 s), 80 permits, and credits 20.
	renew1 := lstep{sec, next(), lwant{act: renewAct(sec, 7, 1, 0, 0, 80, 0, 0, "w.2"), view: lview{7, 1, 80, 1800 * ms, sec, false}}}
	refusal := func(retryAfter time.Duration) client.LeaseGrant {
		return client.LeaseGrant{Status: client.LeaseRefused, RetryAfter: retryAfter, Detail: "the limit holds too many leases"}
	}
	tests := []struct {
		name  string
		steps []lstep
	}{
		{"refused: retry after RetryAfter", []lstep{
			{0, next(), lwant{act: leaseAction{op: opLease, lease: leaseReq(max, "w.1")}}},
			{10 * ms, ans(refusal(time.Second)), lwant{ev: evRefused, errIs: errLeaseRefused, view: lview{nextCall: 1010 * ms, failsClosed: true}}},
			{1009 * ms, next(), lwant{act: leaseAction{op: opWait, atNanos: 1010 * ms}, view: lview{nextCall: 1010 * ms, failsClosed: true}}},
			// A new request: the refused one was answered.
			{1010 * ms, next(), lwant{act: leaseAction{op: opLease, atNanos: 1010 * ms, lease: leaseReq(max, "w.2")}, view: lview{nextCall: 1010 * ms, failsClosed: true}}},
			{1020 * ms, ans(granted(7, 1, 100, 2*time.Second)), lwant{ev: evGranted, view: lview{7, 1, 100, 2810 * ms, 2010 * ms, false}}},
		}},
		{"refused: RetryAfter below RetryEvery waits RetryEvery", []lstep{
			{0, next(), lwant{act: leaseAction{op: opLease, lease: leaseReq(max, "w.1")}}},
			{10 * ms, ans(refusal(time.Millisecond)), lwant{ev: evRefused, errIs: ErrNoPermits, view: lview{nextCall: 260 * ms, failsClosed: true}}},
		}},
		{"refused: RetryAfter above the TTL waits a TTL", []lstep{
			{0, next(), lwant{act: leaseAction{op: opLease, lease: leaseReq(max, "w.1")}}},
			{10 * ms, ans(refusal(time.Minute)), lwant{ev: evRefused, errIs: ErrNoPermits, view: lview{nextCall: 2010 * ms, failsClosed: true}}},
		}},
		{"lease rejected (404): retry after RenewEvery", []lstep{
			{0, next(), lwant{act: leaseAction{op: opLease, lease: leaseReq(max, "w.1")}}},
			{10 * ms, fail(err404), lwant{ev: evRefused, errIs: client.ErrNotFound, view: lview{nextCall: 1010 * ms, failsClosed: true}}},
		}},
		{"lease answer lost: the same request again", []lstep{
			{0, next(), lwant{act: leaseAction{op: opLease, lease: leaseReq(max, "w.1")}}},
			{10 * ms, fail(errAnswerLost), lwant{ev: evFailed, errIs: errAnswerLost, view: lview{nextCall: 260 * ms, failsClosed: false}}},
			{260 * ms, next(), lwant{act: leaseAction{op: opLease, atNanos: 260 * ms, lease: leaseReq(max, "w.1")}, view: lview{nextCall: 260 * ms, failsClosed: false}}},
			// The register replays its first decision: the grant counts
			// from the retry's send time.
			{270 * ms, ans(client.LeaseGrant{Status: client.LeaseGranted, LeaseID: 7, Epoch: 1, Permits: 100, ExpiresIn: 1990 * time.Millisecond, Duplicate: true}),
				lwant{ev: evGranted, view: lview{7, 1, 100, 2050 * ms, 1260 * ms, false}}},
		}},
		{"lease not delivered: a new request", []lstep{
			{0, next(), lwant{act: leaseAction{op: opLease, lease: leaseReq(max, "w.1")}}},
			{10 * ms, fail(errNotDelivered), lwant{ev: evFailed, errIs: client.ErrNotDelivered, view: lview{nextCall: 260 * ms, failsClosed: false}}},
			{260 * ms, next(), lwant{act: leaseAction{op: opLease, atNanos: 260 * ms, lease: leaseReq(max, "w.2")}, view: lview{nextCall: 260 * ms, failsClosed: false}}},
		}},
		{"lease lost, then not delivered: the same request (the first may have been applied)", []lstep{
			{0, next(), lwant{act: leaseAction{op: opLease, lease: leaseReq(max, "w.1")}}},
			{10 * ms, fail(errAnswerLost), lwant{ev: evFailed, errIs: errAnswerLost, view: lview{nextCall: 260 * ms, failsClosed: false}}},
			{260 * ms, next(), lwant{act: leaseAction{op: opLease, atNanos: 260 * ms, lease: leaseReq(max, "w.1")}, view: lview{nextCall: 260 * ms, failsClosed: false}}},
			{270 * ms, fail(errNotDelivered), lwant{ev: evFailed, errIs: client.ErrNotDelivered, view: lview{nextCall: 520 * ms, failsClosed: false}}},
			{520 * ms, next(), lwant{act: leaseAction{op: opLease, atNanos: 520 * ms, lease: leaseReq(max, "w.1")}, view: lview{nextCall: 520 * ms, failsClosed: true}}},
		}},
		{"lease replayed fenced (the grant expired before the retry arrived): lease again at once", []lstep{
			{0, next(), lwant{act: leaseAction{op: opLease, lease: leaseReq(max, "w.1")}}},
			{10 * ms, fail(errAnswerLost), lwant{ev: evFailed, errIs: errAnswerLost, view: lview{nextCall: 260 * ms, failsClosed: false}}},
			{260 * ms, next(), lwant{act: leaseAction{op: opLease, atNanos: 260 * ms, lease: leaseReq(max, "w.1")}, view: lview{nextCall: 260 * ms, failsClosed: false}}},
			{600 * ms, ans(client.LeaseGrant{Status: client.LeaseFenced, LeaseID: 7, Epoch: 1, Duplicate: true, Detail: "the grant answered to this request_id expired before the retry arrived"}),
				lwant{ev: evFenced, view: lview{nextCall: 600 * ms}}}, // callers wait for the lease due now
			{600 * ms, next(), lwant{act: leaseAction{op: opLease, atNanos: 600 * ms, lease: leaseReq(max, "w.2")}, view: lview{nextCall: 600 * ms}}},
		}},
		{"a replayed grant already expired: renew at once", append(first[:1:1],
			lstep{3 * sec, ans(client.LeaseGrant{Status: client.LeaseGranted, LeaseID: 7, Epoch: 1, Permits: 100, ExpiresIn: -1, Duplicate: true}),
				lwant{ev: evGranted, view: lview{7, 1, 0, 0, 3 * sec, false}}},
			lstep{3 * sec, next(), lwant{act: renewAct(3*sec, 7, 1, 0, 0, 0, 0, 0, "w.2"), view: lview{7, 1, 0, 0, 3 * sec, false}}},
		)},
		{"renewal fenced: lease again at once", append(first[:2:2], renew1,
			lstep{1010 * ms, ans(client.LeaseGrant{Status: client.LeaseFenced, LeaseID: 7, Epoch: 1}), lwant{ev: evFenced, view: lview{nextCall: 1010 * ms}}},
			lstep{1010 * ms, next(), lwant{act: leaseAction{op: opLease, atNanos: 1010 * ms, lease: leaseReq(0, "w.3")}, view: lview{nextCall: 1010 * ms}}},
		)},
		{"renewal rejected (400): drop the lease, retry after RetryEvery", append(first[:2:2], renew1,
			lstep{1010 * ms, fail(err400), lwant{ev: evRefused, errIs: client.ErrInvalid, view: lview{nextCall: 1260 * ms, failsClosed: true}}},
			lstep{1260 * ms, next(), lwant{act: leaseAction{op: opLease, atNanos: 1260 * ms, lease: leaseReq(0, "w.3")}, view: lview{nextCall: 1260 * ms, failsClosed: true}}},
		)},
		{"renewal answered returned: drop the lease", append(first[:2:2], renew1,
			lstep{1010 * ms, ans(client.LeaseGrant{Status: client.LeaseReturned, LeaseID: 7}), lwant{ev: evRefused, errIs: ErrNoPermits, view: lview{nextCall: 1260 * ms, failsClosed: true}}},
		)},
		{"renewal not delivered: the grant reopens, the stolen-in count returns", append(first[:2:2],
			lstep{500 * ms, take(4), lwant{view: held}},
			lstep{sec, next(), lwant{act: renewAct(sec, 7, 1, 0, 0, 80, 4, 0, "w.2"), view: lview{7, 1, 80, 1800 * ms, sec, false}}},
			lstep{1005 * ms, spend(6), lwant{view: lview{7, 1, 74, 1800 * ms, sec, false}}},
			// The 6 kept permits spent are simply spent of the reopened grant.
			lstep{1010 * ms, fail(errNotDelivered), lwant{ev: evFailed, errIs: client.ErrNotDelivered, view: lview{7, 1, 94, 1800 * ms, 1260 * ms, false}}},
			lstep{1100 * ms, take(1), lwant{view: lview{7, 1, 94, 1800 * ms, 1260 * ms, false}}},
			lstep{1260 * ms, next(), lwant{act: renewAct(1260*ms, 7, 1, 6, 0, 54, 5, 0, "w.3"), view: lview{7, 1, 54, 1800 * ms, 1260 * ms, false}}},
		)},
		{"renewal lost, then not delivered: the grant stays closed, the same request", append(first[:2:2], renew1,
			lstep{1010 * ms, fail(errAnswerLost), lwant{ev: evFailed, errIs: errAnswerLost, view: lview{7, 1, 80, 1800 * ms, 1260 * ms, false}}},
			lstep{1260 * ms, next(), lwant{act: renewAct(1260*ms, 7, 1, 0, 0, 80, 0, 0, "w.2"), view: lview{7, 1, 80, 1800 * ms, 1260 * ms, false}}},
			lstep{1270 * ms, fail(errNotDelivered), lwant{ev: evFailed, errIs: client.ErrNotDelivered, view: lview{7, 1, 80, 1800 * ms, 1520 * ms, false}}},
			lstep{1520 * ms, next(), lwant{act: renewAct(1520*ms, 7, 1, 0, 0, 80, 0, 0, "w.2"), view: lview{7, 1, 80, 1800 * ms, 1520 * ms, true}}},
			lstep{1800 * ms, look(), lwant{view: lview{7, 1, 0, 1800 * ms, 1520 * ms, true}}}, // kept until the usable-until only
		)},
		{"an answer to no call is ignored", append(first[:2:2],
			lstep{20 * ms, fail(errNotDelivered), lwant{ev: evIgnored, view: held}},
		)},
		{"send: a renewal before it is due", append(first[:2:2],
			lstep{100 * ms, send(), lwant{act: renewAct(100*ms, 7, 1, 0, 0, 100, 0, 0, "w.2"), view: lview{7, 1, 100, 1800 * ms, sec, false}}},
		)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newLeaseState(exampleParams())
			runSteps(t, &s, tt.steps)
		})
	}
}

// TestLeaseStateReturn covers the return at Stop: the report it carries,
// retries with the same request, and giving up once the lease has expired
// at the register.
func TestLeaseStateReturn(t *testing.T) {
	const max = client.MaxDemandMilliPerSec
	held := lview{7, 1, 100, 1800 * ms, sec, false}
	first := []lstep{
		{0, next(), lwant{act: leaseAction{op: opLease, lease: leaseReq(max, "w.1")}}},
		{10 * ms, ans(granted(7, 1, 100, 2*time.Second)), lwant{ev: evGranted, view: held}},
		{100 * ms, spend(30), lwant{view: lview{7, 1, 70, 1800 * ms, sec, false}}},
		{200 * ms, give(20), lwant{view: lview{7, 1, 50, 1800 * ms, sec, false}}},
		{300 * ms, take(3), lwant{view: lview{7, 1, 50, 1800 * ms, sec, false}}},
	}
	returnAct := func(at int64, spent, out, in int64, id string) leaseAction {
		return leaseAction{op: opReturn, atNanos: at, leaseID: 7, epoch: 1, report: client.LeaseReport{Spent: spent, StolenOut: out, StolenIn: in, RequestID: id}}
	}
	closed := lview{7, 1, 0, 1800 * ms, sec, false}
	tests := []struct {
		name  string
		steps []lstep
		// credited: what the register credited back, counted once, only
		// from an answer that says so (permitd_worker_credited_permits_total).
		credited int64
	}{
		{"no lease: nothing to return", []lstep{{0, ret(), lwant{act: leaseAction{op: opNone}}}}, 0},
		{"returned", append(first[:5:5],
			lstep{400 * ms, ret(), lwant{act: returnAct(400*ms, 30, 20, 3, "w.2"), view: closed}},
			lstep{410 * ms, ans(client.LeaseGrant{Status: client.LeaseReturned, LeaseID: 7, CreditedPermits: 50}), lwant{ret: returnStep{done: true}, view: lview{nextCall: sec}}},
			lstep{420 * ms, ret(), lwant{act: leaseAction{op: opNone}, view: lview{nextCall: sec}}},
		), 50},
		{"fenced: nothing left to return", append(first[:5:5],
			lstep{400 * ms, ret(), lwant{act: returnAct(400*ms, 30, 20, 3, "w.2"), view: closed}},
			lstep{410 * ms, ans(client.LeaseGrant{Status: client.LeaseFenced, LeaseID: 7}), lwant{ret: returnStep{done: true}, view: lview{nextCall: sec}}},
		), 0},
		{"answer lost: the same return again, until the lease expired at the register", append(first[:5:5],
			lstep{400 * ms, ret(), lwant{act: returnAct(400*ms, 30, 20, 3, "w.2"), view: closed}},
			lstep{410 * ms, fail(errAnswerLost), lwant{ret: returnStep{retryAtNanos: 660 * ms}, view: closed}},
			lstep{660 * ms, ret(), lwant{act: returnAct(660*ms, 30, 20, 3, "w.2"), view: closed}},
			// The last good answer was at 10 ms: the lease expired at the
			// register by 2.010 s.
			lstep{2010 * ms, fail(errNotDelivered), lwant{ret: returnStep{done: true}, errIs: client.ErrNotDelivered, view: closed}},
		), 0},
		{"rejected: the lease is dropped", append(first[:5:5],
			lstep{400 * ms, ret(), lwant{act: returnAct(400*ms, 30, 20, 3, "w.2"), view: closed}},
			lstep{410 * ms, fail(err404), lwant{ret: returnStep{done: true}, errIs: client.ErrNotFound, view: lview{nextCall: sec}}},
		), 0},
		// A renewal without an answer may have been applied (the register
		// then holds epoch 2): it is sent again as it was, and the return
		// names the grant its answer installs. (Returning epoch 1 instead
		// was answered fenced, and the lease stayed open until its TTL.)
		{"a renewal without an answer: sent again, then its grant returned with the kept permits spent and what came in since", append(first[:5:5],
			lstep{sec, next(), lwant{act: renewAct(sec, 7, 1, 30, 20, 50, 3, 0, "w.2"), view: lview{7, 1, 50, 1800 * ms, sec, false}}},
			lstep{1010 * ms, fail(errAnswerLost), lwant{ev: evFailed, errIs: errAnswerLost, view: lview{7, 1, 50, 1800 * ms, 1260 * ms, false}}},
			lstep{1050 * ms, spend(7), lwant{view: lview{7, 1, 43, 1800 * ms, 1260 * ms, false}}},
			lstep{1100 * ms, take(2), lwant{view: lview{7, 1, 43, 1800 * ms, 1260 * ms, false}}},
			lstep{1200 * ms, ret(), lwant{act: renewAct(1200*ms, 7, 1, 30, 20, 50, 3, 0, "w.2"), view: lview{7, 1, 43, 1800 * ms, 1260 * ms, false}}},
			// The dedup table answers the first copy's grant: the 7 kept
			// permits spent are its first.
			lstep{1210 * ms, ans(granted(7, 2, 100, 2*time.Second)), lwant{ev: evGranted, view: lview{7, 2, 93, 3000 * ms, 2200 * ms, false}}},
			lstep{1220 * ms, ret(), lwant{act: leaseAction{op: opReturn, atNanos: 1220 * ms, leaseID: 7, epoch: 2,
				report: client.LeaseReport{Spent: 7, StolenIn: 2, RequestID: "w.3"}}, view: lview{7, 2, 0, 3000 * ms, 2200 * ms, false}}},
			lstep{1230 * ms, ans(client.LeaseGrant{Status: client.LeaseReturned, LeaseID: 7, CreditedPermits: 93}), lwant{ret: returnStep{done: true}, view: lview{nextCall: 2200 * ms}}},
		), 93},
		{"a renewal without an answer, fenced when sent again: nothing left to return", append(first[:5:5],
			lstep{sec, next(), lwant{act: renewAct(sec, 7, 1, 30, 20, 50, 3, 0, "w.2"), view: lview{7, 1, 50, 1800 * ms, sec, false}}},
			lstep{1010 * ms, fail(errAnswerLost), lwant{ev: evFailed, errIs: errAnswerLost, view: lview{7, 1, 50, 1800 * ms, 1260 * ms, false}}},
			lstep{1200 * ms, ret(), lwant{act: renewAct(1200*ms, 7, 1, 30, 20, 50, 3, 0, "w.2"), view: lview{7, 1, 50, 1800 * ms, 1260 * ms, false}}},
			lstep{1210 * ms, ans(client.LeaseGrant{Status: client.LeaseFenced, LeaseID: 7}), lwant{ev: evFenced, view: lview{nextCall: 1210 * ms}}},
			lstep{1220 * ms, ret(), lwant{act: leaseAction{op: opNone}, view: lview{nextCall: 1210 * ms}}},
		), 0},
		{"a lease without an answer: sent again, then the lease it opened returned", []lstep{
			{0, next(), lwant{act: leaseAction{op: opLease, lease: leaseReq(max, "w.1")}}},
			{10 * ms, fail(errAnswerLost), lwant{ev: evFailed, errIs: errAnswerLost, view: lview{nextCall: 260 * ms}}},
			{100 * ms, ret(), lwant{act: leaseAction{op: opLease, atNanos: 100 * ms, lease: leaseReq(max, "w.1")}, view: lview{nextCall: 260 * ms}}},
			{110 * ms, ans(granted(7, 1, 100, 2*time.Second)), lwant{ev: evGranted, view: lview{7, 1, 100, 1900 * ms, 1100 * ms, false}}},
			{120 * ms, ret(), lwant{act: returnAct(120*ms, 0, 0, 0, "w.2"), view: lview{7, 1, 0, 1900 * ms, 1100 * ms, false}}},
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newLeaseState(exampleParams())
			runSteps(t, &s, tt.steps)
			if got := s.counters.creditedPermits; got != tt.credited {
				t.Errorf("credited permits counted %d, want %d", got, tt.credited)
			}
		})
	}
}

// TestLeaseStateCountsCreditsOfGrants: a granting answer that credits
// permits back adds them to the credited counter
// (permitd_worker_credited_permits_total), and its permits to the leased
// one.
func TestLeaseStateCountsCreditsOfGrants(t *testing.T) {
	s := newLeaseState(exampleParams())
	act := s.next(0)
	g := granted(7, 1, 100, 2*time.Second)
	g.CreditedPermits = 12
	s.answer(10*ms, act, g, nil)
	if got := s.counters.creditedPermits; got != 12 {
		t.Fatalf("credited permits counted %d after a grant crediting 12, want 12", got)
	}
	if got := s.counters.leasedPermits; got != 100 {
		t.Fatalf("leased permits counted %d after a grant of 100, want 100", got)
	}
}

// TestLeaseStateFailsClosed checks when a caller that finds no permit
// fails closed, and when a worker short of permits may steal: a silence
// of the register shorter than UnreachableAfter (500 ms here) is waited
// out, whether its calls fail or one is under way.
func TestLeaseStateFailsClosed(t *testing.T) {
	s := newLeaseState(exampleParams())
	if err := s.failClosed(0, true); err != nil {
		t.Fatalf("before any call: %v, want to wait for the lease", err)
	}
	s.next(0)
	s.answer(5*ms, leaseAction{op: opLease}, client.LeaseGrant{}, errNotDelivered)
	if err := s.failClosed(499*ms, false); err != nil {
		t.Fatalf("never granted, silent for 499 ms: %v, want to wait", err)
	}
	if err := s.failClosed(500*ms, true); !errors.Is(err, ErrRegisterUnreachable) || !errors.Is(err, ErrNoPermits) {
		t.Fatalf("never granted, silent for 500 ms: %v, want ErrRegisterUnreachable (no steal grace without a grant)", err)
	}
	if _, ok := s.stealHorizon(5 * ms); ok {
		t.Fatalf("never granted: may steal")
	}
	s.next(260 * ms)
	s.answer(270*ms, leaseAction{op: opLease, atNanos: 260 * ms}, granted(7, 1, 100, 2*time.Second), nil)
	tests := []struct {
		now      int64
		stealing bool
		err      error
		horizon  int64
		maySteal bool
	}{
		// Granted at 270 ms, due for renewal at 1.260 s, round trip 10 ms.
		{500 * ms, false, nil, 770 * ms, true},
		{1260 * ms, false, nil, 10 * ms, true},
	}
	for _, tt := range tests {
		if err := s.failClosed(tt.now, tt.stealing); !matches(err, tt.err) {
			t.Errorf("at %v: failClosed = %v, want %v", time.Duration(tt.now), err, tt.err)
		}
		if h, ok := s.stealHorizon(tt.now); h != tt.horizon || ok != tt.maySteal {
			t.Errorf("at %v: stealHorizon = %v, %v; want %v, %v", time.Duration(tt.now), time.Duration(h), ok, time.Duration(tt.horizon), tt.maySteal)
		}
	}
	// A renewal sent at 1.260 s and still under way: wait for it at first
	// (nothing to fail); steal one renewal period ahead once it has taken
	// a renewal period (its grant expired meanwhile, at 2.060 s: the
	// register may be electing a leader); fail closed once the register
	// has been silent for UnreachableAfter (from 1.760 s) and no steal
	// round is to come.
	a := s.next(1260 * ms)
	for _, tt := range []struct {
		now      int64
		stealing bool
		err      error
		horizon  int64
		maySteal bool
	}{
		{1500 * ms, false, nil, 0, false},
		{1759 * ms, false, nil, 0, false},
		{1760 * ms, true, nil, 0, false},
		{1760 * ms, false, ErrRegisterUnreachable, 0, false},
		{2260 * ms, true, nil, sec, true},
		{2900 * ms, false, ErrRegisterUnreachable, sec, true},
	} {
		if err := s.failClosed(tt.now, tt.stealing); !matches(err, tt.err) {
			t.Errorf("renewal under way at %v: failClosed = %v, want %v", time.Duration(tt.now), err, tt.err)
		}
		if h, ok := s.stealHorizon(tt.now); h != tt.horizon || ok != tt.maySteal {
			t.Errorf("renewal under way at %v: stealHorizon = %v, %v; want %v, %v", time.Duration(tt.now), time.Duration(h), ok, time.Duration(tt.horizon), tt.maySteal)
		}
	}
	// The renewal fails at 1.270 s (cut off): steal one renewal period
	// ahead within the grace (270 ms + 4 s); wait until the register has
	// been silent for UnreachableAfter (since 1.260 s), then fail closed
	// when no steal round is to come, and at once after the grace.
	s.answer(1270*ms, a, client.LeaseGrant{}, errNotDelivered)
	cut := []struct {
		now      int64
		stealing bool
		err      error
		horizon  int64
		maySteal bool
	}{
		{1270 * ms, true, nil, sec, true},
		{1270 * ms, false, nil, sec, true},
		{1759 * ms, false, nil, sec, true},
		{1760 * ms, true, nil, sec, true},
		{1760 * ms, false, ErrRegisterUnreachable, sec, true},
		{4269 * ms, true, nil, sec, true},
		{4270 * ms, true, ErrRegisterUnreachable, 0, false},
	}
	for _, tt := range cut {
		if err := s.failClosed(tt.now, tt.stealing); !matches(err, tt.err) {
			t.Errorf("cut off at %v: failClosed = %v, want %v", time.Duration(tt.now), err, tt.err)
		}
		if h, ok := s.stealHorizon(tt.now); h != tt.horizon || ok != tt.maySteal {
			t.Errorf("cut off at %v: stealHorizon = %v, %v; want %v, %v", time.Duration(tt.now), time.Duration(h), ok, time.Duration(tt.horizon), tt.maySteal)
		}
	}
	if err := s.failClosed(1760*ms, false); err == nil || !strings.Contains(err.Error(), "no answer for 500ms (unreachable after 500ms)") {
		t.Errorf("fail-closed error %q does not say how long the register has been silent", err)
	}
	// Any answer ends the silence: a refusal is an answer.
	s.next(1520 * ms)
	s.answer(1530*ms, leaseAction{op: opRenew, atNanos: 1520 * ms}, client.LeaseGrant{Status: client.LeaseFenced, LeaseID: 7, Epoch: 1}, nil)
	if err := s.failClosed(1800*ms, false); err != nil || s.silentNanos(1800*ms) != 0 {
		t.Errorf("after a fenced answer: failClosed = %v, silent %v; want to wait, not silent", err, time.Duration(s.silentNanos(1800*ms)))
	}
}

// shortTTLParams are those of `permitd worker --ttl 400ms`: margin 50 ms
// (the minimum default), renewal every 200 ms, retry every 50 ms, steal
// grace 800 ms, and the default UnreachableAfter (3 s).
func shortTTLParams() leaseParams {
	return leaseParams{limit: "api", holder: "h", group: "g", weight: 1, ttlNanos: 400 * ms, marginNanos: 50 * ms,
		renewNanos: 200 * ms, retryNanos: 50 * ms, stealGraceNanos: 800 * ms, unreachableAfterNanos: int64(DefaultUnreachableAfter), idPrefix: "w."}
}

// TestLeaseStateElectionIsNotUnreachable is issue 36's worker at --ttl
// 400ms through a register election: its renewal's calls fail (each
// given up after TTL - margin = 350 ms, retried every 50 ms) while the
// grant it reports on is spent and expired. As long as the register has
// been silent for less than UnreachableAfter (3 s, whatever the TTL) a
// caller that finds no permit waits (a sidecar answers 429 with
// Retry-After); only a longer silence fails closed with
// ErrRegisterUnreachable (503). Nothing is ever spendable but the grant
// before its usable-until. Before UnreachableAfter, the first failed call
// made every caller without a permit fail closed (steal rounds aside),
// 350 ms into an election of the usual length (0.7-1.5 s).
func TestLeaseStateElectionIsNotUnreachable(t *testing.T) {
	const max = client.MaxDemandMilliPerSec
	const ttl = 400 * time.Millisecond
	leaseReq := func(at, demand int64, id string) leaseAction {
		return leaseAction{op: opLease, atNanos: at, lease: client.LeaseRequest{Holder: "h", Group: "g", Weight: 1, DemandMilliPerSec: demand, TTL: ttl, RequestID: id}}
	}
	renew := func(at int64, id uint64, spent, kept int64, reqID string) leaseAction {
		return leaseAction{op: opRenew, atNanos: at, leaseID: id, epoch: 1,
			report: client.LeaseReport{Spent: spent, Kept: kept, TTL: ttl, RequestID: reqID}}
	}
	// Granted 80 permits at 5 ms (usable until 350 ms, renewed at 200
	// ms), all spent by 100 ms; the renewal leaves at 200 ms, keeping
	// nothing, and the register's leader dies with it.
	start := []lstep{
		{0, next(), lwant{act: leaseReq(0, max, "w.1")}},
		{5 * ms, ans(granted(7, 1, 80, ttl)), lwant{ev: evGranted, view: lview{7, 1, 80, 350 * ms, 200 * ms, false}}},
		{100 * ms, spend(80), lwant{view: lview{7, 1, 0, 350 * ms, 200 * ms, false}}},
		{200 * ms, next(), lwant{act: renew(200*ms, 7, 80, 0, "w.2"), view: lview{7, 1, 0, 350 * ms, 200 * ms, false}}},
	}
	// failing returns the steps of the renewal's calls failing from 550
	// ms (the first given up after 350 ms) until until: each is sent
	// again as it was 50 ms after the last failed (the first may have
	// been applied) and fails 350 ms later. A caller finding no permit
	// waits while the register has been silent (since 200 ms) for less
	// than 3 s, and fails closed from 3.2 s on.
	failing := func(until int64) []lstep {
		var steps []lstep
		for at := int64(550 * ms); at <= until; at += 400 * ms {
			steps = append(steps,
				lstep{at, fail(errAnswerLost), lwant{ev: evFailed, errIs: errAnswerLost, view: lview{7, 1, 0, 350 * ms, at + 50*ms, at >= 3200*ms}}},
				lstep{at + 50*ms, next(), lwant{act: renew(at+50*ms, 7, 80, 0, "w.2"), view: lview{7, 1, 0, 350 * ms, at + 50*ms, at+50*ms >= 3200*ms}}})
		}
		return steps
	}
	tests := []struct {
		name  string
		steps []lstep
	}{
		{"an election of 1.5 s: the callers wait throughout", slices.Concat(start, failing(1350*ms), []lstep{
			{1699 * ms, look(), lwant{view: lview{7, 1, 0, 350 * ms, 1400 * ms, false}}},
			// The new leader (its timeline counts the election) answers
			// the call sent at 1.4 s: the lease expired at the register.
			{1700 * ms, ans(client.LeaseGrant{Status: client.LeaseFenced, LeaseID: 7, Epoch: 1}), lwant{ev: evFenced, view: lview{nextCall: 1700 * ms}}},
			{1700 * ms, next(), lwant{act: leaseReq(1700*ms, 0, "w.3"), view: lview{nextCall: 1700 * ms}}},
			{1710 * ms, ans(granted(8, 1, 40, ttl)), lwant{ev: evGranted, view: lview{8, 1, 40, 2050 * ms, 1900 * ms, false}}},
			// The next renewal is left unanswered: the silence counts from
			// its send (1.9 s), not from the last answer (1.71 s).
			{1900 * ms, next(), lwant{act: renew(1900*ms, 8, 0, 15, "w.4"), view: lview{8, 1, 15, 2050 * ms, 1900 * ms, false}}},
			{4899 * ms, look(), lwant{view: lview{8, 1, 0, 2050 * ms, 1900 * ms, false}}},
			{4900 * ms, look(), lwant{view: lview{8, 1, 0, 2050 * ms, 1900 * ms, true}}},
		})},
		{"silent for 3 s: unreachable", slices.Concat(start, failing(3350*ms), []lstep{
			{3199 * ms, look(), lwant{view: lview{7, 1, 0, 350 * ms, 3400 * ms, false}}},
			{3200 * ms, look(), lwant{view: lview{7, 1, 0, 350 * ms, 3400 * ms, true}}},
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newLeaseState(shortTTLParams())
			runSteps(t, &s, tt.steps)
		})
	}
}
