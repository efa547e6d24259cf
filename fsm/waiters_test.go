package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// waitStep is one step of a waiters step table: at cluster time at, a
// reserve by caller who (of the parts, with max wait), a release of who's
// reservation, a put, or a no-op; want is the command's own answer and
// decided the waiter decisions the entry made, each written "who granted
// at T (hold until E)" or "who refused (blocking)".
type waitStep struct {
	at      time.Duration
	who     string
	op      string // "reserve", "release", "withdraw", "withdraw-force", "withdraw-grace" (2 s), "noop", "put", "delete", "settle"
	parts   []Part
	maxWait time.Duration
	put     func(t *testing.T) PutLimit
	want    string
	decided []string
}

// runWaitSteps runs a step table on a fresh register with limits puts.
func runWaitSteps(t *testing.T, h *harness, steps []waitStep) {
	t.Helper()
	ids := map[string]uint64{}
	names := map[uint64]string{}
	for i, s := range steps {
		now := int64(s.at)
		got := ""
		switch s.op {
		case "reserve":
			q := tracked(int64(s.maxWait), s.parts...)
			q.RequestID = "req-" + s.who
			res := h.reserve1(now, q)
			if res.ReservationID != 0 {
				ids[s.who], names[res.ReservationID] = res.ReservationID, s.who
			}
			got = describeReserve(h, names, res)
			if res.ReservationID == 0 {
				got = s.who + got
			}
		case "release":
			rel := h.releaseCmd(now, Release{Reservation: ids[s.who]})
			got = fmt.Sprintf("released %d", rel.Released)
			if rel.Detail != "" {
				got = "withdrawn"
			}
		case "withdraw", "withdraw-force", "withdraw-grace":
			c := Withdraw{RequestID: "req-" + s.who, Force: s.op == "withdraw-force"}
			if s.op == "withdraw-grace" {
				c.GraceNanos = int64(2 * time.Second)
			}
			b, err := AppendWithdraw(nil, at(now), c)
			if err != nil {
				t.Fatal(err)
			}
			rel := h.apply(b).(ReleaseResult)
			got = fmt.Sprintf("status %d released %d", rel.Status, rel.Released)
		case "settle":
			st := h.settleCmd(now, Settle{Reservation: ids[s.who]})
			got = fmt.Sprintf("settle status %d", st.Status)
		case "noop":
			h.noop(now)
			got = "noop"
		case "put":
			b, err := AppendPut(nil, at(now), s.put(t))
			if err != nil {
				t.Fatal(err)
			}
			h.apply(b)
			got = "put"
		case "delete":
			h.del(now, s.parts[0].Limit)
			got = "delete"
		}
		var decided []string
		for _, d := range h.f.TakeWaiterDecisions() {
			r := d.Result
			r.ReservationID = d.Reservation
			decided = append(decided, describeReserve(h, names, r))
		}
		if got != s.want || !slices.Equal(decided, s.decided) {
			t.Fatalf("step %d: at %v %s %s %v: answered %q deciding %q, want %q deciding %q",
				i, s.at, s.who, s.op, s.parts, got, decided, s.want, s.decided)
		}
	}
}

// describeReserve writes a reserve's answer (or a waiter's decision) in
// absolute cluster times, naming the caller by its reservation.
func describeReserve(h *harness, names map[uint64]string, res ReserveResult) string {
	who := names[res.ReservationID]
	switch res.Status {
	case Granted:
		rv := h.f.st.reservations.byID[res.ReservationID]
		var hold int64
		for _, p := range rv.parts {
			if p.holdExpiresAtNanos != 0 {
				hold = p.holdExpiresAtNanos
			}
		}
		s := fmt.Sprintf("%s granted at %v", who, time.Duration(rv.decidedAtNanos))
		if rv.servedAtNanos != rv.decidedAtNanos {
			s += fmt.Sprintf(" served %v", time.Duration(rv.servedAtNanos))
		}
		if res.Duplicate {
			s += " (replay)"
		}
		return s + fmt.Sprintf(" hold until %v", time.Duration(hold))
	case Queued:
		s := fmt.Sprintf("%s queued until %v", who, time.Duration(res.NowNanos+res.RetryAfterNanos))
		if res.Duplicate {
			s += " (replay)"
		}
		return s
	case Refused:
		return fmt.Sprintf("%s refused (%s) retry at %v", who, res.Blocking, time.Duration(res.NowNanos+res.RetryAfterNanos))
	case UnknownLimit:
		return who + " unknown limit"
	case Invalid:
		return who + " invalid"
	}
	return fmt.Sprintf("%s status %d", who, res.Status)
}

const msec = time.Millisecond

// TestWaitersGrantedByReleaseThenByLapse is the scenario: cap 1,
// TTL 2 s. B queued behind A is granted by A's release at 100 ms (not at
// A's TTL), and C, queued behind B, when B's hold lapses at 2.1 s.
func TestWaitersGrantedByReleaseThenByLapse(t *testing.T) {
	h := newHarness(t)
	h.put(0, "cap", concurrency(t, 1, 2*time.Second))
	c1 := []Part{{"cap", 1}}
	runWaitSteps(t, h, []waitStep{
		{at: 0, who: "A", op: "reserve", parts: c1, want: "A granted at 0s hold until 2s"},
		{at: 5 * msec, who: "B", op: "reserve", parts: c1, maxWait: 5 * time.Second, want: "B queued until 5.005s"},
		{at: 10 * msec, who: "C", op: "reserve", parts: c1, maxWait: 5 * time.Second, want: "C queued until 5.01s"},
		{at: 100 * msec, who: "A", op: "release", want: "released 1",
			decided: []string{"B granted at 100ms hold until 2.1s"}},
		{at: 2 * time.Second, op: "noop", want: "noop"},
		{at: 2500 * msec, op: "noop", want: "noop",
			decided: []string{"C granted at 2.1s hold until 4.1s"}},
		{at: 2600 * msec, who: "C", op: "release", want: "released 1"},
	})
}

// TestWaitersStepTable: a waiter that nothing frees is refused at its
// deadline; the queue is first in, first out (no barging, even by a
// smaller request that would fit); a replay of a waiting reserve's
// request ID joins the same wait, and after the decision replays it; a
// release withdraws a waiter, a settlement of one is a conflict; a put
// that raises the cap grants the heads, a delete resolves the rest.
func TestWaitersStepTable(t *testing.T) {
	h := newHarness(t)
	h.put(0, "cap", concurrency(t, 2, 10*time.Second))
	c1, c2 := []Part{{"cap", 1}}, []Part{{"cap", 2}}
	runWaitSteps(t, h, []waitStep{
		{at: 0, who: "A", op: "reserve", parts: c1, want: "A granted at 0s hold until 10s"},
		{at: 0, who: "B", op: "reserve", parts: c2, maxWait: time.Second, want: "B queued until 1s"},
		// C's one permit would fit, but B waits ahead of it for both: C
		// may retry at B's deadline (1 s), before A's hold lapses.
		{at: 0, who: "C", op: "reserve", parts: c1, maxWait: 0, want: "C refused (cap) retry at 1s"},
		{at: 0, who: "D", op: "reserve", parts: c1, maxWait: 5 * time.Second, want: "D queued until 5s"},
		{at: 500 * msec, who: "D", op: "reserve", parts: c1, maxWait: 5 * time.Second, want: "D queued until 5s (replay)"},
		{at: 600 * msec, who: "D", op: "settle", want: fmt.Sprintf("settle status %d", SettleConflict)},
		// B's deadline passes at 1 s: refused then, and D, now the head,
		// fits at once.
		{at: 1500 * msec, op: "noop", want: "noop",
			decided: []string{"B refused (cap) retry at 10s", "D granted at 1s hold until 11s"}},
		{at: 1600 * msec, who: "D", op: "reserve", parts: c1, maxWait: 5 * time.Second, want: "D granted at 1s (replay) hold until 11s"},
		{at: 2 * time.Second, who: "E", op: "reserve", parts: c1, maxWait: 5 * time.Second, want: "E queued until 7s"},
		{at: 2 * time.Second, who: "F", op: "reserve", parts: c1, maxWait: 5 * time.Second, want: "F queued until 7s"},
		{at: 2 * time.Second, who: "G", op: "reserve", parts: c1, maxWait: 5 * time.Second, want: "G queued until 7s"},
		{at: 3 * time.Second, who: "F", op: "release", want: "withdrawn", decided: []string{"F refused (cap) retry at 3.000000001s"}},
		{at: 4 * time.Second, op: "put", put: func(t *testing.T) PutLimit { return PutLimit{Name: "cap", Config: concurrency(t, 3, 10*time.Second)} },
			want: "put", decided: []string{"E granted at 4s hold until 14s"}},
		{at: 5 * time.Second, op: "delete", parts: c1, want: "delete", decided: []string{"G unknown limit"}},
	})
}

// TestWaiterBlockedElsewhereLeavesTheRestOfACap: a reserve waiting on
// two caps, blocked by one (c), keeps its share of the other (e) and no
// more: later reserves take e's other slots at once instead of idling
// behind it (its one permit on e stays free for it), wait when only its
// share is left, and are told to retry when something may change (a
// lapse, or the deadline of the reserve ahead), not a nanosecond later.
// When c frees, it is granted its share of e at once.
func TestWaiterBlockedElsewhereLeavesTheRestOfACap(t *testing.T) {
	h := newHarness(t)
	h.put(0, "c", concurrency(t, 1, time.Minute))
	h.put(0, "e", concurrency(t, 2, time.Minute))
	c1, e1 := []Part{{"c", 1}}, []Part{{"e", 1}}
	runWaitSteps(t, h, []waitStep{
		{at: 0, who: "A", op: "reserve", parts: c1, want: "A granted at 0s hold until 1m0s"},
		{at: 0, who: "W", op: "reserve", parts: []Part{{"c", 1}, {"e", 1}}, maxWait: 50 * time.Second, want: "W queued until 50s"},
		{at: msec, who: "X", op: "reserve", parts: e1, want: "X granted at 1ms hold until 1m0.001s"},
		{at: 2 * msec, who: "Y", op: "reserve", parts: e1, maxWait: 10 * time.Second, want: "Y queued until 10.002s"},
		{at: 3 * msec, who: "Z", op: "reserve", parts: e1, want: "Z refused (e) retry at 50s"},
		{at: 4 * msec, who: "X", op: "release", want: "released 1", decided: []string{"Y granted at 4ms hold until 1m0.004s"}},
		{at: 5 * msec, who: "A", op: "release", want: "released 1", decided: []string{"W granted at 5ms hold until 1m0.005s"}},
	})
}

// TestWaiterWithRateLimits: a waiter that also names a rate limit is
// granted when its cap frees, its rate part served at the rate limit's
// own next time from then (never earlier than its pacer allows), or
// refused when that is past its deadline.
func TestWaiterWithRateLimits(t *testing.T) {
	h := newHarness(t)
	h.put(0, "cap", concurrency(t, 1, 10*time.Second))
	h.put(0, "rpm", strict(t, 1, 5)) // one a second, five ahead
	runWaitSteps(t, h, []waitStep{
		{at: 0, who: "A", op: "reserve", parts: []Part{{"cap", 1}}, want: "A granted at 0s hold until 10s"},
		{at: 0, who: "B", op: "reserve", parts: []Part{{"cap", 1}, {"rpm", 1}}, maxWait: 3 * time.Second, want: "B queued until 3s"},
		{at: 0, who: "C", op: "reserve", parts: []Part{{"cap", 1}, {"rpm", 1}}, maxWait: 3500 * msec, want: "C queued until 3.5s"},
		// rpm's slots 0 s to 2 s are taken meanwhile.
		{at: 0, who: "R", op: "reserve", parts: []Part{{"rpm", 1}}, want: "R granted at 0s hold until 0s"},
		{at: 0, who: "S", op: "reserve", parts: []Part{{"rpm", 1}}, maxWait: time.Second, want: "S granted at 0s served 1s hold until 0s"},
		{at: 0, who: "T", op: "reserve", parts: []Part{{"rpm", 1}}, maxWait: 2 * time.Second, want: "T granted at 0s served 2s hold until 0s"},
		// A's release frees the cap at 500 ms: B's rpm slot is 3 s, in
		// time; the cap's hold counts from the decision.
		{at: 500 * msec, who: "A", op: "release", want: "released 1", decided: []string{"B granted at 500ms served 3s hold until 13s"}},
		// B's release lets C in, whose rpm slot (4 s) is past its
		// deadline: refused naming rpm, and nothing reserved on rpm.
		{at: 600 * msec, who: "B", op: "release", want: "released 1", decided: []string{"C refused (rpm) retry at 4s"}},
		{at: 600 * msec, who: "U", op: "reserve", parts: []Part{{"rpm", 1}}, maxWait: 4 * time.Second, want: "U granted at 600ms served 4s hold until 0s"},
	})
}

// TestWaitersIgnoreNoops: the decisions on waiting reserves do not depend
// on which entries come between the commands (a no-op at a lapse or a
// deadline, or none): the same commands with and without no-ops inserted
// at random times grant and refuse the same reserves at the same cluster
// times.
func TestWaitersIgnoreNoops(t *testing.T) {
	type decision struct {
		id                  uint64
		status              ReserveStatus
		decidedAt, servedAt int64
		holdExpiry          int64
		blocking            string
	}
	run := func(seed uint64, noops bool) []decision {
		rng := rand.New(rand.NewPCG(seed, 7))
		noopRng := rand.New(rand.NewPCG(seed, 8))
		h := newHarness(t)
		h.put(0, "cap", concurrency(t, 2, time.Second))
		h.put(0, "rate", bursty(t, 20))
		var out []decision
		var ids []uint64
		take := func() {
			for _, d := range h.f.TakeWaiterDecisions() {
				x := decision{id: d.Reservation, status: d.Result.Status}
				if rv, ok := h.f.st.reservations.byID[d.Reservation]; ok && d.Result.Status == Granted {
					x.decidedAt, x.servedAt = rv.decidedAtNanos, rv.servedAtNanos
					for _, p := range rv.parts {
						x.holdExpiry = max(x.holdExpiry, p.holdExpiresAtNanos)
					}
				}
				// (A refusal's retry time is relative to the entry that
				// decided it, and at least a nanosecond after it.)
				x.blocking = d.Result.Blocking
				out = append(out, x)
			}
		}
		now := int64(0)
		for range 300 {
			next := now + rng.Int64N(int64(200*time.Millisecond))
			if noops && noopRng.IntN(2) == 0 {
				h.noop(now + noopRng.Int64N(next-now+1))
				take()
			}
			now = next
			switch p := rng.IntN(10); {
			case p < 6:
				parts := []Part{{"cap", 1 + rng.Int64N(2)}}
				if rng.IntN(3) == 0 {
					parts = append(parts, Part{"rate", 1 + rng.Int64N(5)})
				}
				res := h.reserve1(now, tracked(rng.Int64N(int64(2*time.Second)), parts...))
				if res.ReservationID != 0 {
					ids = append(ids, res.ReservationID)
				}
			case len(ids) > 0:
				h.releaseCmd(now, Release{Reservation: ids[rng.IntN(len(ids))]})
			}
			take()
		}
		h.noop(now + int64(10*time.Second))
		take()
		slices.SortFunc(out, func(a, b decision) int { return int(a.id) - int(b.id) })
		return out
	}
	granted := 0
	for seed := range uint64(40) {
		without, with := run(seed, false), run(seed, true)
		if !reflect.DeepEqual(without, with) {
			for i := range min(len(without), len(with)) {
				if without[i] != with[i] {
					t.Fatalf("seed %d: the decisions differ with no-ops between the commands, first: without %+v, with %+v", seed, without[i], with[i])
				}
			}
			t.Fatalf("seed %d: %d decisions without no-ops, %d with", seed, len(without), len(with))
		}
		for _, d := range without {
			if d.status == Granted {
				granted++
			}
		}
	}
	if granted < 200 {
		t.Fatalf("weak test: only %d waiters granted", granted)
	}
}

// TestWithdrawByRequestID: a node withdraws, by request ID, a waiting
// reserve whose client went away: it leaves the queue (refused, and a
// replay says so); once granted, only a forced withdrawal (a request ID
// nobody else knows) releases it.
func TestWithdrawByRequestID(t *testing.T) {
	h := newHarness(t)
	h.put(0, "cap", concurrency(t, 1, 10*time.Second))
	c1 := []Part{{"cap", 1}}
	runWaitSteps(t, h, []waitStep{
		{at: 0, who: "A", op: "reserve", parts: c1, want: "A granted at 0s hold until 10s"},
		{at: 0, who: "B", op: "reserve", parts: c1, maxWait: 5 * time.Second, want: "B queued until 5s"},
		{at: 0, who: "C", op: "reserve", parts: c1, maxWait: 5 * time.Second, want: "C queued until 5s"},
		{at: time.Second, who: "B", op: "withdraw", want: fmt.Sprintf("status %d released 0", Settled),
			decided: []string{"B refused (cap) retry at 1.000000001s"}},
		{at: 2 * time.Second, who: "B", op: "reserve", parts: c1, maxWait: 5 * time.Second, want: "B refused (cap) retry at 2.000000001s"},
		{at: 3 * time.Second, who: "A", op: "release", want: "released 1", decided: []string{"C granted at 3s hold until 13s"}},
		{at: 4 * time.Second, who: "C", op: "withdraw", want: fmt.Sprintf("status %d released 0", SettleUnknown)},
		{at: 4 * time.Second, who: "D", op: "reserve", parts: c1, maxWait: 0, want: "D refused (cap) retry at 13s"},
		{at: 5 * time.Second, who: "C", op: "withdraw-force", want: fmt.Sprintf("status %d released 1", Settled)},
		{at: 5 * time.Second, who: "E", op: "reserve", parts: c1, maxWait: 0, want: "E granted at 5s hold until 15s"},
	})
}

// TestWithdrawGraceSparesARetriedReserve: a withdrawal with a grace (what
// a node sends a while after its client went away) spares a waiting
// reserve whose request ID was retried within the grace before it (the
// client came back, at this node or another: it keeps its place, and is
// granted in turn), and withdraws one that was not, or was retried
// longer ago. A withdrawal without a grace withdraws a retried reserve
// as before.
func TestWithdrawGraceSparesARetriedReserve(t *testing.T) {
	h := newHarness(t)
	h.put(0, "cap", concurrency(t, 1, 10*time.Second))
	c1 := []Part{{"cap", 1}}
	runWaitSteps(t, h, []waitStep{
		{at: 0, who: "A", op: "reserve", parts: c1, want: "A granted at 0s hold until 10s"},
		{at: 0, who: "B", op: "reserve", parts: c1, maxWait: 20 * time.Second, want: "B queued until 20s"},
		{at: 0, who: "C", op: "reserve", parts: c1, maxWait: 20 * time.Second, want: "C queued until 20s"},
		{at: time.Second, who: "B", op: "reserve", parts: c1, maxWait: 20 * time.Second, want: "B queued until 20s (replay)"},
		{at: 2 * time.Second, who: "B", op: "withdraw-grace", want: fmt.Sprintf("status %d released 0", SettleConflict)},
		{at: 2 * time.Second, who: "C", op: "withdraw-grace", want: fmt.Sprintf("status %d released 0", Settled),
			decided: []string{"C refused (cap) retry at 2.000000001s"}},
		{at: 3 * time.Second, who: "A", op: "release", want: "released 1", decided: []string{"B granted at 3s hold until 13s"}},
		{at: 3 * time.Second, who: "D", op: "reserve", parts: c1, maxWait: 20 * time.Second, want: "D queued until 23s"},
		{at: 4 * time.Second, who: "D", op: "reserve", parts: c1, maxWait: 20 * time.Second, want: "D queued until 23s (replay)"},
		{at: 6*time.Second + 1, who: "D", op: "withdraw-grace", want: fmt.Sprintf("status %d released 0", Settled),
			decided: []string{"D refused (cap) retry at 6.000000002s"}},
		{at: 7 * time.Second, who: "E", op: "reserve", parts: c1, maxWait: 20 * time.Second, want: "E queued until 27s"},
		{at: 7 * time.Second, who: "E", op: "reserve", parts: c1, maxWait: 20 * time.Second, want: "E queued until 27s (replay)"},
		{at: 7 * time.Second, who: "E", op: "withdraw", want: fmt.Sprintf("status %d released 0", Settled),
			decided: []string{"E refused (cap) retry at 7.000000001s"}},
	})
	for _, c := range []Withdraw{{RequestID: "x", Force: true, GraceNanos: 1}, {RequestID: "x", GraceNanos: -1}, {RequestID: "x", GraceNanos: MaxWithdrawGraceNanos + 1}} {
		if _, err := AppendWithdraw(nil, at(0), c); !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("AppendWithdraw(%+v) = %v, want ErrInvalidCommand", c, err)
		}
	}
	b, err := AppendWithdraw(nil, at(0), Withdraw{RequestID: "x", Owner: "o", GraceNanos: MaxWithdrawGraceNanos})
	if e, derr := Decode(b); err != nil || derr != nil || e.Withdraw != (Withdraw{RequestID: "x", Owner: "o", GraceNanos: MaxWithdrawGraceNanos}) {
		t.Errorf("a withdrawal with a grace decodes to %+v (%v, %v)", e.Withdraw, err, derr)
	}
}

// TestWaitingSnapshotMutations: a state with reserves waiting on two caps
// (with request IDs, on several limits) snapshots and restores to the
// same bytes, and the restored copy decides them exactly as the original;
// every single-bit mutation of the snapshot (checksum fixed) is rejected
// or accepted as exactly its bytes, and an accepted one goes on applying
// releases, puts and time without failing.
func TestWaitingSnapshotMutations(t *testing.T) {
	h := newHarness(t)
	h.put(0, "a", concurrency(t, 1, 10*time.Second))
	h.put(0, "b", concurrency(t, 2, 5*time.Second))
	h.put(0, "r", bursty(t, 10))
	first := h.reserve1(0, tracked(0, Part{"a", 1}, Part{"b", 2}))
	q1 := tracked(3*sec, Part{"a", 1}, Part{"r", 2})
	q1.RequestID = "w1"
	q2 := tracked(8*sec, Part{"b", 1})
	q2.Owner = "o"
	h.reserve(sec, q1, q2)
	h.reserve(sec+sec/2, q1) // retried: a withdrawal with a grace spares it
	if h.f.Waiting() != 2 {
		t.Fatalf("%d waiting, want 2", h.f.Waiting())
	}
	snap := snapshotBytes(t, h.f)
	twin := New()
	if err := restore(twin, snap); err != nil {
		t.Fatal(err)
	}
	if again := snapshotBytes(t, twin); !bytes.Equal(again, snap) {
		t.Fatal("the restored copy snapshots to other bytes")
	}
	next := func(f *FSM, index uint64) []WaiterDecision {
		b, _ := AppendRelease(nil, at(2*sec), Release{Reservation: first.ReservationID})
		f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: b})
		f.Apply(&raft.Log{Index: index + 1, Term: 1, Type: raft.LogCommand, Data: AppendNoop(nil, at(20*sec))})
		return f.TakeWaiterDecisions()
	}
	want, got := next(h.f, 100), next(twin, 100)
	if len(want) != 2 || !reflect.DeepEqual(want, got) {
		t.Fatalf("decisions after the release: original %+v, restored %+v (want 2, equal)", want, got)
	}
	restoreMutations(t, snap, func(f *FSM) {
		next(f, 100)
		b, _ := AppendPut(nil, at(30*sec), PutLimit{Name: "a", Config: bursty(t, 1)})
		f.Apply(&raft.Log{Index: 102, Term: 1, Type: raft.LogCommand, Data: b})
		b, _ = AppendPut(nil, at(30*sec), PutLimit{Name: "a", Config: concurrency(t, 1, time.Second)})
		f.Apply(&raft.Log{Index: 103, Term: 1, Type: raft.LogCommand, Data: b})
	})
}
