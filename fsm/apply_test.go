package fsm

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/bucket"
)

func TestApplySequence(t *testing.T) {
	h := newHarness(t)
	cfg := strict(t, 1, 0) // one per second, pessimistic
	if got, want := h.put(0, "api", cfg), (PutResult{Version: 1, Created: true}); got != want {
		t.Fatalf("put = %+v, want %+v", got, want)
	}
	info, ok := h.f.Limit("api")
	if !ok || info.Name != "api" || info.Version != 1 || info.Config.IntervalNanos != cfg.IntervalNanos {
		t.Fatalf("Limit(api) = %+v, %v", info, ok)
	}

	if got := h.reserve1(0, rsv("api", 1, 0, "")); got.Status != Granted || got.WaitNanos != 0 {
		t.Fatalf("first reserve = %+v, want Granted without waiting", got)
	}
	got := h.reserve1(0, rsv("api", 1, 0, ""))
	if got.Status != Refused || got.RetryAfterNanos < 1 || got.RetryAfterNanos > sec {
		t.Fatalf("second reserve at the same time = %+v, want Refused with RetryAfterNanos in [1, 1s]", got)
	}
	if got := h.reserve1(0, rsv("nope", 1, 0, "")); got != (ReserveResult{Status: UnknownLimit}) {
		t.Fatalf("reserve on a missing limit = %+v, want UnknownLimit", got)
	}
	if maxN := cfg.MaxPermits(); maxN < math.MaxInt64 {
		got := h.reserve1(0, rsv("api", maxN+1, sec, ""))
		if got.Status != Invalid || !strings.Contains(got.Detail, "at most") || !strings.Contains(got.Detail, `"api"`) {
			t.Fatalf("reserve of MaxPermits+1 = %+v, want Invalid with a Detail", got)
		}
	}
	if got := h.reserve1(sec, rsv("api", 1, 0, "")); got.Status != Granted || got.WaitNanos != 0 {
		t.Fatalf("reserve one interval later = %+v, want Granted without waiting", got)
	}
	info, _ = h.f.Limit("api")
	if info.GrantedRequests != 2 || info.GrantedPermits != 2 || info.RefusedRequests != 1 {
		t.Fatalf("counters = %+v, want 2 granted requests, 2 permits, 1 refused", info)
	}

	if got := h.del(sec, "api"); !got.Existed {
		t.Fatalf("delete = %+v, want Existed", got)
	}
	if _, ok := h.f.Limit("api"); ok {
		t.Fatalf("Limit(api) still found after delete")
	}
	if got := h.reserve1(sec, rsv("api", 1, 0, "")); got.Status != UnknownLimit {
		t.Fatalf("reserve after delete = %+v, want UnknownLimit", got)
	}
	if got := h.del(sec, "api"); got.Existed {
		t.Fatalf("second delete = %+v, want not Existed", got)
	}
	h.noop(2 * sec)
	if h.f.AppliedIndex() != h.index || h.f.LastNowNanos() != 2*sec {
		t.Fatalf("AppliedIndex %d LastNowNanos %d, want %d and %d", h.f.AppliedIndex(), h.f.LastNowNanos(), h.index, 2*sec)
	}

	for _, name := range []string{"b", "c", "a"} {
		h.put(3*sec, name, cfg)
	}
	var names []string
	for _, l := range h.f.Limits() {
		names = append(names, l.Name)
	}
	if !reflect.DeepEqual(names, []string{"a", "b", "c"}) {
		t.Fatalf("Limits() names = %v, want sorted [a b c]", names)
	}
}

// TestApplyMatchesPacer checks that every result is the pacer's decision
// expressed relative to the entry's time, and that a strict refusal says
// why when the max wait was not the reason (its max_reserved).
func TestApplyMatchesPacer(t *testing.T) {
	for _, tc := range []struct {
		desc string
		cfg  bucket.Config
	}{
		{"strict pessimistic", strict(t, 10, 0)},
		{"strict optimistic", strict(t, 10, 3)},
		{"bursty", bursty(t, 10)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			h := newHarness(t)
			h.put(0, "l", tc.cfg)
			ref, err := bucket.New(tc.cfg, 0)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			now := int64(0)
			for i := range 300 {
				now += rng.Int64N(sec / 5)
				n := 1 + rng.Int64N(min(3, tc.cfg.MaxPermits()))
				maxWait := []int64{0, sec / 10, sec}[rng.IntN(3)]
				d, err := ref.Reserve(now, n, maxWait)
				if err != nil {
					t.Fatalf("step %d: reference Reserve: %v", i, err)
				}
				want := expected(d, now)
				if !d.Granted && tc.cfg.Spec.Algorithm == bucket.Strict && d.AtNanos-now <= maxWait {
					// Refused although the slot was within the max wait:
					// the limit may not reserve that far ahead, and the
					// result says so.
					want.Detail = RefusedReservedAheadFull
					if tc.cfg.Spec.MaxReserved == 0 {
						want.Detail = RefusedNoReserveAhead
					}
				}
				if got := h.reserve1(now, rsv("l", n, maxWait, "")); got != want {
					t.Fatalf("step %d (now %d, n %d, maxWait %d): got %+v, want %+v", i, now, n, maxWait, got, want)
				}
			}
		})
	}
}

func TestReconfigure(t *testing.T) {
	h := newHarness(t)
	slow, fast := strict(t, 1, 10), strict(t, 2, 10)
	h.put(0, "api", slow)
	ref, err := bucket.New(slow, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		want, err := ref.Reserve(0, 1, 10*sec)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.reserve1(0, rsv("api", 1, 10*sec, "")); got != expected(want, 0) || got.Status != Granted {
			t.Fatalf("reserve = %+v, want %+v", got, expected(want, 0))
		}
	}

	// Same algorithm: the pacer is reconfigured and keeps its debt.
	if got := h.put(0, "api", fast); got != (PutResult{Version: 7}) {
		t.Fatalf("reconfiguring put = %+v, want version 7, not created", got)
	}
	if err := ref.Reconfigure(0, fast); err != nil {
		t.Fatal(err)
	}
	d, err := ref.Reserve(0, 1, 100*sec)
	if err != nil {
		t.Fatal(err)
	}
	got := h.reserve1(0, rsv("api", 1, 100*sec, ""))
	if got != expected(d, 0) || got.Status == Granted && got.WaitNanos == 0 {
		t.Fatalf("reserve after reconfigure = %+v, want %+v, not an immediate grant (debt kept)", got, expected(d, 0))
	}
	info, _ := h.f.Limit("api")
	if info.Version != 7 || info.Config.IntervalNanos != fast.IntervalNanos || info.GrantedRequests+info.RefusedRequests != 6 {
		t.Fatalf("after reconfigure Limit = %+v, want version 7, the fast interval, 6 decisions counted", info)
	}

	// Another algorithm: the state starts afresh, counters are kept.
	b := bursty(t, 1)
	if got := h.put(0, "api", b); got != (PutResult{Version: 9}) {
		t.Fatalf("algorithm-changing put = %+v", got)
	}
	fresh, err := bucket.New(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	d, err = fresh.Reserve(0, 1, 100*sec)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.reserve1(0, rsv("api", 1, 100*sec, "")); got != expected(d, 0) || got.WaitNanos != 0 {
		t.Fatalf("reserve after algorithm change = %+v, want %+v without waiting (fresh state)", got, expected(d, 0))
	}
	if info, _ := h.f.Limit("api"); info.GrantedRequests+info.RefusedRequests != 7 || info.Config.Spec.Algorithm != bucket.Bursty {
		t.Fatalf("after algorithm change Limit = %+v", info)
	}
}

// TestTimeClamp checks that an entry stamped before the latest applied time
// is decided at the latest time: a grant is never earlier.
func TestTimeClamp(t *testing.T) {
	cfg := strict(t, 1, 3)
	a, b := newHarness(t), newHarness(t)
	for _, h := range []*harness{a, b} {
		h.noop(-5 * sec) // the timeline starts at 0
		if got := h.f.LastNowNanos(); got != 0 {
			t.Fatalf("LastNowNanos after a negative stamp = %d, want 0", got)
		}
		h.put(10*sec, "api", cfg)
		h.reserve1(10*sec, rsv("api", 1, 10*sec, ""))
	}
	ra := a.reserve(5*sec, rsv("api", 1, 10*sec, ""), rsv("api", 1, 10*sec, ""))
	rb := b.reserve(10*sec, rsv("api", 1, 10*sec, ""), rsv("api", 1, 10*sec, ""))
	if !reflect.DeepEqual(ra, rb) {
		t.Fatalf("entry stamped 5s = %+v, want the results of 10s %+v", ra, rb)
	}
	a.noop(3 * sec)
	b.noop(10 * sec)
	if a.f.LastNowNanos() != 10*sec {
		t.Fatalf("LastNowNanos = %d after older stamps, want 10s", a.f.LastNowNanos())
	}
	if a.f.StateHash() != b.f.StateHash() {
		t.Fatalf("states differ after clamped and unclamped entries")
	}
}

func TestApplyPanicsOnBadEntry(t *testing.T) {
	good, err := AppendReserveBatch(nil, at(sec), []Reserve{rsv("api", 1, 0, "")})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc string
		data []byte
		want string
	}{
		{"empty", nil, "command type: truncated"},
		{"unknown type", []byte{0x7f, 2, 0, 0, 0, 0, 0, 0, 0, 0}, "unknown command type 127"},
		{"unknown version", []byte{byte(CmdNoop), 9, 0, 0, 0, 0, 0, 0, 0, 0}, "encoding version 9"},
		{"version 1", []byte{byte(CmdNoop), 1, 0, 0, 0, 0, 0, 0, 0, 0}, "encoding version 1"},
		{"trailing", append(clone(good), 0), "1 trailing bytes"},
		{"truncated", good[:len(good)-2], "truncated"},
		{"zero permits", func() []byte {
			b := clone(good)
			b[len(b)-4] = 0 // the permits varint of the only reserve (then max wait, arrival, key)
			return b
		}(), "0 permits"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			h := newHarness(t)
			h.put(0, "api", strict(t, 1, 0))
			h.reserve1(0, rsv("api", 1, 0, "id"))
			before := h.f.StateHash()
			msg := mustPanic(t, func() {
				h.f.Apply(&raft.Log{Index: 42, Term: 3, Type: raft.LogCommand, Data: tt.data})
			})
			if !strings.Contains(msg, "index 42") || !strings.Contains(msg, tt.want) {
				t.Fatalf("panic %q, want the index 42 and %q", msg, tt.want)
			}
			// The lock was released and nothing changed.
			if h.f.AppliedIndex() != 2 || h.f.StateHash() != before {
				t.Fatalf("state changed by an entry that panicked")
			}
			if got := h.reserve1(0, rsv("api", 1, 0, "id")); !got.Duplicate {
				t.Fatalf("FSM unusable after a panic: %+v", got)
			}
		})
	}
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// TestBatchEqualsSequential checks that one entry with k reserves gives the
// results and the state of k entries of one reserve, each stamped at its
// reserve's arrival time.
func TestBatchEqualsSequential(t *testing.T) {
	var rs []Reserve
	rng := rand.New(rand.NewPCG(7, 7))
	arrived := 2 * sec
	for i := range 200 {
		id := ""
		if i%3 == 0 {
			id = []string{"r1", "r2", "r3", "r4", "r5", "r6", "r7"}[rng.IntN(7)]
		}
		if rng.IntN(2) == 0 {
			arrived += rng.Int64N(30 * ms)
		}
		r := rsv([]string{"a", "b", "c", "missing"}[rng.IntN(4)], 1+rng.Int64N(2), []int64{0, sec / 2, 5 * sec}[rng.IntN(3)], id)
		r.ArrivedNanos = arrived
		rs = append(rs, r)
	}
	one, seq := newHarness(t), newHarness(t)
	for _, h := range []*harness{one, seq} {
		h.put(0, "a", strict(t, 50, 20))
		h.put(0, "b", strict(t, 3, 0))
		h.put(0, "c", compile(t, bucket.Spec{Algorithm: bucket.Hybrid, Rate: 100}))
		h.reserve1(sec, rsv("a", 1, 0, "r1"))
	}
	var got []ReserveResult
	for _, r := range rs {
		got = append(got, seq.reserve1(r.ArrivedNanos, r))
	}
	one.index = seq.index - 1 // the batch gets the index of the last single entry
	want := one.reserve(2*sec, rs...)
	if !reflect.DeepEqual(got, want) {
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("reserve %d: one at a time %+v, in a batch %+v", i, got[i], want[i])
			}
		}
		t.FailNow()
	}
	if one.f.StateHash() != seq.f.StateHash() {
		t.Fatalf("state after a batch differs from the state after the same reserves one at a time")
	}
	var granted, refused, dups int
	for _, r := range got {
		switch {
		case r.Duplicate:
			dups++
		case r.Status == Granted:
			granted++
		case r.Status == Refused:
			refused++
		}
	}
	if granted == 0 || refused == 0 || dups == 0 {
		t.Fatalf("weak test: %d granted, %d refused, %d duplicates", granted, refused, dups)
	}
}

// TestBatchArrivalsAreNotCollapsed: reserves that reached the leader spread
// out, batched into one entry, are decided at their arrival times, not at
// one instant. At half the rate of a hybrid limit with max wait 0, every
// one is granted; decided at the entry's single stamp, most would be
// refused.
func TestBatchArrivalsAreNotCollapsed(t *testing.T) {
	h := newHarness(t)
	h.put(0, "h", compile(t, bucket.Spec{Algorithm: bucket.Hybrid, Rate: 5000})) // I = 200 µs
	const perBatch, batches = 50, 20
	next := int64(0)
	refused := 0
	for range batches {
		rs := make([]Reserve, perBatch)
		for i := range rs {
			next += 400_000 // 2 500/s: half the rate
			rs[i] = Reserve{Limit: "h", Permits: 1, ArrivedNanos: next}
		}
		for _, r := range h.reserve(rs[0].ArrivedNanos, rs...) {
			if r.Status != Granted {
				refused++
			}
		}
	}
	if refused != 0 {
		t.Fatalf("%d of %d reserves at half the rate with max wait 0 refused, want 0", refused, perBatch*batches)
	}
	if h.f.LastNowNanos() != next {
		t.Fatalf("LastNowNanos = %d after the batches, want the last arrival %d", h.f.LastNowNanos(), next)
	}
}

// TestStampFromAnotherTermPassesNoTime: an entry stamped in one term and
// appended in another carries a time read from an earlier timeline; Apply
// decides it as if no time had passed since the last entry.
func TestStampFromAnotherTermPassesNoTime(t *testing.T) {
	h := newHarness(t)
	h.put(0, "s", strict(t, 0.5, 0)) // one permit per 2 s
	if got := h.reserve1(10*sec, rsv("s", 1, 0, "")); got.Status != Granted {
		t.Fatalf("first permit: %+v", got)
	}
	// Stamped at 20 s in term 1, appended in term 3: no time passes.
	b, err := AppendReserveBatch(nil, Stamp{Nanos: 20 * sec, Term: 1}, []Reserve{{Limit: "s", Permits: 1, ArrivedNanos: 25 * sec}})
	if err != nil {
		t.Fatal(err)
	}
	h.index++
	res := h.f.Apply(&raft.Log{Index: h.index, Term: 3, Type: raft.LogCommand, Data: b}).([]ReserveResult)
	if res[0].Status != Refused || res[0].NowNanos != 10*sec || res[0].RetryAfterNanos != 2*sec || res[0].OnArrival {
		t.Fatalf("reserve stamped in another term = %+v, want refused at 10 s, retry after 2 s, not on arrival", res[0])
	}
	if h.f.LastNowNanos() != 10*sec {
		t.Fatalf("LastNowNanos = %d, want 10 s: a stale stamp must not move the timeline", h.f.LastNowNanos())
	}
	// In its own term a reserve is decided on arrival, unless the timeline
	// is already past its stamp.
	b, _ = AppendReserveBatch(nil, Stamp{Nanos: 11 * sec, Term: 3}, []Reserve{
		{Limit: "s", Permits: 1, ArrivedNanos: 12 * sec}, {Limit: "s", Permits: 1, ArrivedNanos: 12 * sec}})
	h.index++
	res = h.f.Apply(&raft.Log{Index: h.index, Term: 3, Type: raft.LogCommand, Data: b}).([]ReserveResult)
	if !res[0].OnArrival || res[0].NowNanos != 12*sec || !res[1].OnArrival {
		t.Fatalf("reserves stamped in the entry's term = %+v, want decided on arrival at 12 s", res)
	}
	b, _ = AppendReserveBatch(nil, Stamp{Nanos: 11 * sec, Term: 3}, []Reserve{{Limit: "s", Permits: 1, ArrivedNanos: 11 * sec}})
	h.index++
	res = h.f.Apply(&raft.Log{Index: h.index, Term: 3, Type: raft.LogCommand, Data: b}).([]ReserveResult)
	if res[0].OnArrival || res[0].NowNanos != 12*sec {
		t.Fatalf("reserve stamped behind the timeline = %+v, want decided at 12 s, not on arrival", res[0])
	}
	// The same stamp in its own term is trusted.
	b = AppendNoop(nil, Stamp{Nanos: 20 * sec, Term: 3})
	h.index++
	h.f.Apply(&raft.Log{Index: h.index, Term: 3, Type: raft.LogCommand, Data: b})
	if h.f.LastNowNanos() != 20*sec {
		t.Fatalf("LastNowNanos = %d, want 20 s", h.f.LastNowNanos())
	}
}

// TestGrantSpacingAndReplayExpiry: a strict grant of n permits says how far
// apart they are; a replayed grant of an algorithm without expiry is
// usable for one interval after its time, and refused (expired) later.
func TestGrantSpacingAndReplayExpiry(t *testing.T) {
	h := newHarness(t)
	h.put(0, "s", strict(t, 1, 2))
	h.put(0, "b", bursty(t, 10)) // I = 100 ms
	if got := h.reserve1(0, rsv("s", 3, 0, "")); got.Status != Granted || got.WaitNanos != 0 || got.SpacingNanos != sec || got.ExpiresInNanos != sec/2 {
		t.Fatalf("strict grant of 3 = %+v, want at once, spaced 1 s, first expiring after 0.5 s", got)
	}
	fresh := h.reserve1(sec, rsv("b", 1, 0, "x"))
	if fresh.Status != Granted || fresh.ExpiresInNanos != 0 || fresh.SpacingNanos != 0 {
		t.Fatalf("fresh bursty grant = %+v, want no expiry, no spacing", fresh)
	}
	if got := h.reserve1(sec+50*ms, rsv("b", 1, 0, "x")); !got.Duplicate || got.Status != Granted || got.ExpiresInNanos != 50*ms {
		t.Fatalf("replay 50 ms later = %+v, want a duplicate expiring in 50 ms", got)
	}
	if got := h.reserve1(sec+100*ms, rsv("b", 1, 0, "x")); !got.Duplicate || got.ExpiresInNanos != -1 {
		t.Fatalf("replay one interval later = %+v, want expired (-1)", got)
	}
}

// TestRefusalForMaxReservedSaysSo: a strict limit without max_reserved
// refuses a reserve whose permit is within its max wait, and says why
// (naming the setting) instead of blaming the max wait; the decision is
// the pacer's all the same. A replay of that refusal is the first
// decision without the reason (which no snapshot keeps), on every replica
// alike; in the reservation form, the blocking limit's reason is given.
func TestRefusalForMaxReservedSaysSo(t *testing.T) {
	h := newHarness(t)
	h.put(0, "api", strict(t, 4, 0))
	h.put(0, "ahead", strict(t, 4, 1))
	if got := h.reserve1(0, rsv("api", 1, 0, "")); got.Status != Granted {
		t.Fatalf("first reserve = %+v, want a grant", got)
	}
	got := h.reserve1(sec/100, rsv("api", 1, 10*sec, "x"))
	if got.Status != Refused || got.Detail != RefusedNoReserveAhead || got.RetryAfterNanos != sec/4-sec/100 {
		t.Fatalf("reserve with max wait 10s = %+v, want a refusal for max_reserved 0 retrying in 240ms", got)
	}
	if !strings.Contains(got.Detail, "max_reserved") || !strings.Contains(got.Detail, "--max-reserved") {
		t.Errorf("detail %q does not name the setting", got.Detail)
	}
	if again := h.reserve1(sec/50, rsv("api", 1, 10*sec, "x")); again.Status != Refused || !again.Duplicate || again.Detail != "" {
		t.Errorf("replay = %+v, want the refusal without a reason", again)
	}
	if got := h.reserve1(sec/50, rsv("api", 1, sec/10, "")); got.Status != Refused || got.Detail != "" {
		t.Errorf("reserve with max wait 100ms = %+v, want a refusal for the max wait (no detail)", got)
	}
	for i, want := range []ReserveStatus{Granted, Granted, Refused} {
		got := h.reserve1(sec/50, rsv("ahead", 1, 10*sec, ""))
		if got.Status != want || (want == Refused) != (got.Detail == RefusedReservedAheadFull) {
			t.Fatalf("reserve %d on a limit of max_reserved 1 = %+v, want %v (refused: its max_reserved is taken)", i, got, want)
		}
	}
	multi := Reserve{Limit: "api", Permits: 1, MaxWaitNanos: 10 * sec, Track: true, Also: []Part{{Limit: "ahead", Permits: 1}}}
	if got := h.reserve1(sec/50, multi); got.Status != Refused || got.Blocking == "" || got.Detail == "" {
		t.Errorf("reservation = %+v, want a refusal naming the blocking limit and its max_reserved", got)
	}
}

// TestLimitTimelineStartsAtItsPut: README "A limit's timeline starts at the
// cluster time of the PUT that created it (or changed its algorithm)".
// A hybrid limit created (or switched to) at cluster time 1 h has no
// waiting pool of that hour, and a bursty one no stored permits at once.
func TestLimitTimelineStartsAtItsPut(t *testing.T) {
	const hour = int64(time.Hour)
	hyb := compile(t, bucket.Spec{Algorithm: bucket.Hybrid, Rate: 1, BurstRatio: 2})
	for _, tc := range []struct {
		name   string
		before *bucket.Config // nil: created at 1 h; else changed from it at 1 h
		cfg    bucket.Config
	}{
		{"create bursty", nil, bursty(t, 1)},
		{"create hybrid", nil, hyb},
		{"strict to bursty", ptr(strict(t, 1, 0)), bursty(t, 1)},
		{"strict to hybrid", ptr(strict(t, 1, 0)), hyb},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.before != nil {
				h.put(0, "api", *tc.before)
			}
			h.put(hour, "api", tc.cfg)
			ref, err := bucket.New(tc.cfg, hour)
			if err != nil {
				t.Fatal(err)
			}
			// At the put, 20 reserves of one permit, max_wait 0.
			now := hour
			for i := range 20 {
				d, err := ref.Reserve(now, 1, 0)
				if err != nil {
					t.Fatal(err)
				}
				if got := h.reserve1(now, rsv("api", 1, 0, "")); got != expected(d, now) {
					t.Fatalf("reserve %d = %+v, want %+v (a pacer whose timeline starts at the put)", i, got, expected(d, now))
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
