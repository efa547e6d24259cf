package fsm

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/bucket"
)

// templateConfigs are the configs the template tests draw from: every
// algorithm that rests (a hybrid without a burst pool).
func templateConfigs(t testing.TB) []bucket.Config {
	return []bucket.Config{
		compile(t, bucket.Spec{Algorithm: bucket.Strict, Rate: 1, MaxReserved: 6}),
		compile(t, bucket.Spec{Algorithm: bucket.Bursty, Rate: 1, MaxBurstSeconds: 8}),
		compile(t, bucket.Spec{Algorithm: bucket.WarmingUp, Rate: 2, Warmup: 6 * time.Second}),
		compile(t, bucket.Spec{Algorithm: bucket.Hybrid, Rate: 1, Per: 3 * time.Second, Strictness: 1}),
		compile(t, bucket.Spec{Algorithm: bucket.Concurrency, MaxInFlight: 2, HoldTTL: 3 * time.Second}),
	}
}

// mustEntry is an entry an Append function made without an error.
func mustEntry(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// templateLog draws a random log over templated keys: reserves (single,
// in the reservation form, with request IDs, replayed), settlements and
// releases, explicit puts and deletes of keys, lease policies on keys,
// re-puts of templates with their own config (other idle times and caps)
// and time that jumps by milliseconds, idle times and more. With
// deletes, templates are also deleted and put again with other configs.
func templateLog(t testing.TB, rng *rand.Rand, steps int, deletes bool) [][]byte {
	cfgs := templateConfigs(t)
	prefixes := []string{"t", "u", "v"}
	own := map[string]bucket.Config{"t": cfgs[rng.IntN(4)], "u": cfgs[rng.IntN(5)], "v": cfgs[4]}
	idle := func() int64 { return MinTemplateIdleNanos * int64(1+rng.IntN(3)) }
	now := int64(1 + rng.IntN(1e9))
	var log [][]byte
	for _, p := range prefixes {
		log = append(log, mustEntry(AppendPutTemplate(nil, at(now), PutTemplate{Prefix: p, Config: own[p], IdleNanos: idle(), MaxKeys: 1 << 10})))
	}
	key := func() string {
		if rng.IntN(12) == 0 {
			return "x"
		}
		return fmt.Sprintf("%s:k%d", prefixes[rng.IntN(len(prefixes))], rng.IntN(6))
	}
	var ids []string
	id := func() string {
		switch {
		case rng.IntN(3) == 0:
			return ""
		case len(ids) > 0 && rng.IntN(3) == 0:
			return ids[rng.IntN(len(ids))]
		}
		ids = append(ids, fmt.Sprintf("r%d", len(ids)))
		return ids[len(ids)-1]
	}
	log = append(log, mustEntry(AppendPut(nil, at(now), PutLimit{Name: "x", Config: cfgs[1]})))
	var reservations uint64 = 1
	var tracked [][]Part // the parts of the reserves in the reservation form
	for range steps {
		switch rng.IntN(10) {
		case 0: // time passes
			now += []int64{int64(time.Millisecond), MinTemplateIdleNanos, 3 * MinTemplateIdleNanos, 20 * MinTemplateIdleNanos}[rng.IntN(4)] * int64(1+rng.IntN(3))
			log = append(log, AppendNoop(nil, at(now)))
		case 1, 2, 3: // single reserves, spread
			var rs []Reserve
			for range 1 + rng.IntN(3) {
				now += rng.Int64N(int64(200 * time.Millisecond))
				r := Reserve{Limit: key(), Permits: 1 + rng.Int64N(3), MaxWaitNanos: rng.Int64N(int64(6 * time.Second)), RequestID: id(), ArrivedNanos: now}
				rs = append(rs, r)
			}
			log = append(log, mustEntry(AppendReserveBatch(nil, at(rs[0].ArrivedNanos), rs)))
		case 4, 5: // the reservation form
			now += rng.Int64N(int64(200 * time.Millisecond))
			r := Reserve{Limit: key(), Permits: 1, MaxWaitNanos: rng.Int64N(int64(time.Second)), RequestID: id(), Track: true, Owner: "o", ArrivedNanos: now,
				SettleWithinNanos: int64(time.Second) * int64(1+rng.IntN(10))}
			if other := key(); other != r.Limit && rng.IntN(2) == 0 {
				r.Also = []Part{{Limit: other, Permits: 1}}
			}
			log = append(log, mustEntry(AppendReserveBatch(nil, at(now), []Reserve{r})))
			reservations++
			tracked = append(tracked, r.Parts())
		case 6: // settle or release
			id := 1 + rng.Uint64N(reservations)
			switch {
			case rng.IntN(3) == 0:
				log = append(log, mustEntry(AppendRelease(nil, at(now), Release{Reservation: id, Owner: "o"})))
			case len(tracked) > 0 && rng.IntN(2) == 0:
				// One of the latest reservations, used in part or not at
				// all: a refund (the IDs are those of granted ones only, so
				// some miss).
				k := len(tracked) - 1 - rng.IntN(min(3, len(tracked)))
				id = max(1, reservations-uint64(len(tracked)-k)-uint64(rng.IntN(2)))
				var actual []Part
				for _, p := range tracked[k] {
					actual = append(actual, Part{Limit: p.Limit, Permits: rng.Int64N(2)})
				}
				log = append(log, mustEntry(AppendSettle(nil, at(now), Settle{Reservation: id, Owner: "o", Actual: actual})))
			default:
				log = append(log, mustEntry(AppendSettle(nil, at(now), Settle{Reservation: id, Owner: "o", Actual: []Part{{Limit: key(), Permits: rng.Int64N(2)}}})))
			}
		case 7: // an explicit put or delete of a key
			name := key()
			if rng.IntN(2) == 0 {
				log = append(log, mustEntry(AppendPut(nil, at(now), PutLimit{Name: name, Config: cfgs[rng.IntN(4)]})))
			} else {
				log = append(log, mustEntry(AppendDelete(nil, at(now), DeleteLimit{Name: name})))
			}
		case 8: // a template again
			p := prefixes[rng.IntN(len(prefixes))]
			switch {
			case deletes && rng.IntN(3) == 0:
				log = append(log, mustEntry(AppendDeleteTemplate(nil, at(now), DeleteTemplate{Prefix: p})))
			case deletes && rng.IntN(2) == 0:
				own[p] = cfgs[rng.IntN(5)]
				fallthrough
			default:
				// Small caps only with deletes: a cap is the one place where
				// dropping shows (it makes room).
				maxKeys := int64(1 << 10)
				if deletes {
					maxKeys = int64(4 + rng.IntN(8))
				}
				log = append(log, mustEntry(AppendPutTemplate(nil, at(now), PutTemplate{Prefix: p, Config: own[p], IdleNanos: idle(), MaxKeys: maxKeys})))
			}
		case 9: // a lease policy on a key
			log = append(log, mustEntry(AppendLeasePolicy(nil, at(now), LeasePolicy{Limit: key(), Leased: rng.IntN(2) == 0})))
		}
	}
	return log
}

// answers normalizes what Apply answered for the comparison of a register
// that drops idle keys with one that keeps them: everything a client
// sees, except whether a delete found the limit (a dropped key is gone:
// that is what dropping is).
func answers(v any) any {
	if d, ok := v.(DeleteResult); ok {
		d.Existed = false
		return d
	}
	return v
}

// TestDroppedKeyChangesNoAnswer: the same random logs applied to a
// register that drops idle keys and to one that keeps every key give the
// same answers, entry by entry (while templates keep their configs: a
// template deleted or changed changes its keys' answers by design). After
// every entry, the dropping register's snapshot restores to a copy that
// re-encodes to the same bytes and answers the next entry alike.
func TestDroppedKeyChangesNoAnswer(t *testing.T) {
	drops := 0
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 41))
		log := templateLog(t, rng, 400, false)
		a, b := newHarness(t), &harness{t: t, f: New().keepingIdleKeys()}
		for i, e := range log {
			twin := restoredTwin(t, a)
			ra, rb, rt := a.apply(e), b.apply(e), twin.apply(e)
			if !reflect.DeepEqual(answers(ra), answers(rb)) {
				t.Fatalf("seed %d entry %d (%d keys dropping, %d keeping): answers differ:\ndropping %+v\nkeeping  %+v",
					seed, i, a.f.st.keys.Len(), b.f.st.keys.Len(), ra, rb)
			}
			if !reflect.DeepEqual(ra, rt) || !bytes.Equal(snapshotBytes(t, a.f), snapshotBytes(t, twin.f)) {
				t.Fatalf("seed %d entry %d: the copy restored before it answers %+v, want %+v (or its state differs)", seed, i, rt, ra)
			}
		}
		drops += len(b.f.st.limits) - len(a.f.st.limits)
	}
	if drops < 60 {
		t.Fatalf("weak test: %d more limits kept than dropped over all seeds", drops)
	}
}

// TestTemplateWalk: random logs with templates deleted and put again with
// other configs keep every invariant: snapshots restore to the same bytes
// and the same next answers (above), the keys' counts per template equal
// the keys, every key is where the drop heap says, no key is leased or in
// shadow mode, and a deleted template is kept only while it has keys.
func TestTemplateWalk(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 42))
		log := templateLog(t, rng, 300, true)
		a := newHarness(t)
		for i, e := range log {
			twin := restoredTwin(t, a)
			ra, rt := a.apply(e), twin.apply(e)
			if !reflect.DeepEqual(ra, rt) {
				t.Fatalf("seed %d entry %d: restored copy answers %+v, want %+v", seed, i, rt, ra)
			}
			if msg := checkTemplates(&a.f.st); msg != "" {
				t.Fatalf("seed %d entry %d: %s", seed, i, msg)
			}
		}
	}
}

// checkTemplates checks the derived template state against the limits.
func checkTemplates(s *state) string {
	counts := map[string]int64{}
	for _, l := range s.limits {
		if !l.templated() {
			continue
		}
		p := l.name[:strings.IndexByte(l.name, ':')]
		counts[p]++
		if s.keyOf(l).l != l {
			return fmt.Sprintf("key %q is not where the heap says", l.name)
		}
		if l.pool != nil || l.shadow {
			return fmt.Sprintf("key %q is leased or in shadow mode", l.name)
		}
	}
	if len(s.keys.es) != int(sum(counts)) {
		return fmt.Sprintf("%d keys in the heap, %d templated limits", len(s.keys.es), sum(counts))
	}
	for p, tp := range s.templates {
		if tp.keys != counts[p] {
			return fmt.Sprintf("template %q counts %d keys, has %d", p, tp.keys, counts[p])
		}
		if !tp.active && tp.keys == 0 {
			return fmt.Sprintf("deleted template %q kept without keys", p)
		}
	}
	for p := range counts {
		if s.templates[p] == nil {
			return fmt.Sprintf("keys of prefix %q without a template", p)
		}
	}
	// The drop heap is behind by at most maxDropsPerEntry keys.
	late := 0
	for _, e := range s.keys.es {
		if e.dueAtNanos <= s.lastNowNanos {
			late++
		}
	}
	if late > 0 && s.dropKeys && late >= len(s.keys.es) && late > maxDropsPerEntry {
		return fmt.Sprintf("%d keys overdue", late)
	}
	return ""
}

func sum(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// TestTemplatedKeyIsCreatedAtRestAndDropped: a first reserve creates the
// key at rest (a bursty key's store is full), the key is dropped once idle
// and at rest, not before, and a pinned key (a live reservation names it)
// stays.
func TestTemplatedKeyIsCreatedAtRestAndDropped(t *testing.T) {
	h := newHarness(t)
	sec := int64(time.Second)
	cfg := compile(t, bucket.Spec{Algorithm: bucket.Bursty, Rate: 1, MaxBurstSeconds: 3})
	if res := h.apply(mustEntry(AppendPutTemplate(nil, at(sec), PutTemplate{Prefix: "cust", Config: cfg, IdleNanos: 10 * sec, MaxKeys: 10}))); res != (PutTemplateResult{Created: true}) {
		t.Fatalf("put template: %+v", res)
	}
	// A full store: 3 permits at once and a fourth served then (its
	// cost is paid by the next), the fifth waits a second.
	for i := range 4 {
		if r := h.reserve1(2*sec, rsv("cust:a", 1, 0, "")); r.Status != Granted || r.WaitNanos != 0 {
			t.Fatalf("reserve %d on a new key: %+v", i, r)
		}
	}
	if r := h.reserve1(2*sec, rsv("cust:a", 1, 0, "")); r.Status != Refused || r.RetryAfterNanos != sec {
		t.Fatalf("fifth reserve: %+v", r)
	}
	if r := h.reserve1(2*sec, rsv("other:a", 1, 0, "")); r.Status != UnknownLimit {
		t.Fatalf("a name without a template: %+v", r)
	}
	// The edge's check finds a live key, a key its template would create,
	// and no other, in one read.
	for name, want := range map[string]bool{"cust:a": true, "cust:new": true, "other:a": false, "cust": false} {
		if ok, leased, max := h.f.ReserveCheck(name); ok != want || leased || (ok && max != cfg.MaxPermits()) {
			t.Errorf("ReserveCheck(%q) = %v, %v, %d; want %v, not leased, the template's %d", name, ok, leased, max, want, cfg.MaxPermits())
		}
	}
	// Idle 10 s from its last reserve at 2 s, at rest from 5 s: kept at
	// 11.9 s, dropped at 12 s.
	h.noop(12*sec - 1)
	if _, ok := h.f.Limit("cust:a"); !ok {
		t.Fatalf("dropped before its idle time")
	}
	h.noop(12 * sec)
	if _, ok := h.f.Limit("cust:a"); ok {
		t.Fatalf("kept after its idle time, at rest")
	}
	// A reservation pins its key for its settle window.
	if r := h.reserve1(13*sec, Reserve{Limit: "cust:b", Permits: 1, Track: true, SettleWithinNanos: 60 * sec}); r.Status != Granted {
		t.Fatalf("tracked reserve: %+v", r)
	}
	h.noop(40 * sec)
	if _, ok := h.f.Limit("cust:b"); !ok {
		t.Fatalf("a key a live reservation names was dropped")
	}
	h.noop(73*sec + 1)
	h.noop(84 * sec)
	if _, ok := h.f.Limit("cust:b"); ok {
		t.Fatalf("key kept after its reservation ended")
	}
	// An explicit put makes a key explicit: never dropped.
	h.reserve1(85*sec, rsv("cust:c", 1, 0, ""))
	if res := h.put(86*sec, "cust:c", cfg); !res.Created {
		t.Fatalf("a put over a key at rest: %+v, want it created anew", res)
	}
	h.noop(1000 * sec)
	if _, ok := h.f.Limit("cust:c"); !ok {
		t.Fatalf("an explicit limit was dropped")
	}
}

// TestKeyCapsRefuseAndChangeNothing: past a template's MaxKeys and past
// the cap over all templates, a reserve (single or in the reservation
// form) is KeysFull, names the cap, carries a retry time and changes
// nothing: the state is the one a no-op at its time would leave.
func TestKeyCapsRefuseAndChangeNothing(t *testing.T) {
	sec := int64(time.Second)
	cfg := compile(t, bucket.Spec{Algorithm: bucket.Strict, Rate: 1})
	setup := func() *harness {
		h := &harness{t: t, f: New().withTemplatedKeyCap(3)}
		h.apply(mustEntry(AppendPutTemplate(nil, at(sec), PutTemplate{Prefix: "a", Config: cfg, IdleNanos: 10 * sec, MaxKeys: 2})))
		h.apply(mustEntry(AppendPutTemplate(nil, at(sec), PutTemplate{Prefix: "b", Config: cfg, IdleNanos: 10 * sec, MaxKeys: 5})))
		h.reserve1(2*sec, rsv("a:1", 1, 0, ""))
		h.reserve1(2*sec, rsv("a:2", 1, 0, ""))
		return h
	}
	for _, c := range []struct {
		r    Reserve
		want string
	}{
		{rsv("a:3", 1, 0, "id"), `template "a" holds 2 live keys (allowed: at most 2`},
		{Reserve{Limit: "b:1", Permits: 1, Track: true, Also: []Part{{Limit: "b:2", Permits: 1}}}, "the register holds 2 templated keys (allowed: at most 3"},
		{Reserve{Limit: "a:1", Permits: 1, Track: true, Also: []Part{{Limit: "a:9", Permits: 1}}}, `template "a" holds 2`},
	} {
		h, twin := setup(), setup()
		r := h.reserve1(3*sec, c.r)
		twin.noop(3 * sec)
		if r.Status != KeysFull || !strings.Contains(r.Detail, c.want) || r.RetryAfterNanos != 9*sec {
			t.Fatalf("%+v: %+v, want KeysFull naming %q, retry after 9 s", c.r, r, c.want)
		}
		if h.f.StateHash() != twin.f.StateHash() {
			t.Fatalf("%+v: a refusal past a cap changed the state", c.r)
		}
		if again := h.reserve1(3*sec, c.r); again.Duplicate || again.Status != KeysFull {
			t.Fatalf("%+v retried: %+v (a refusal past a cap is not recorded)", c.r, again)
		}
	}
	// Once a key is dropped there is room again.
	h := setup()
	h.noop(13 * sec)
	if r := h.reserve1(13*sec, rsv("a:3", 1, 0, "")); r.Status != Granted {
		t.Fatalf("after the idle keys went: %+v", r)
	}
}

// TestTemplateBounds: the edge's Validate accepts exactly the documented
// ranges (prefix length and characters, key names, idle time, max keys,
// configs that rest), Append and Decode agree, and keys at the ends of the
// ranges work (idle time at its maximum near the end of the timeline).
func TestTemplateBounds(t *testing.T) {
	cfg := compile(t, bucket.Spec{Algorithm: bucket.Strict, Rate: 1})
	ok := PutTemplate{Prefix: "p", Config: cfg, IdleNanos: MinTemplateIdleNanos, MaxKeys: 1}
	for _, c := range []struct {
		mod  func(*PutTemplate)
		want string // "" accepted
	}{
		{func(p *PutTemplate) {}, ""},
		{func(p *PutTemplate) { p.Prefix = strings.Repeat("a", MaxTemplatePrefixLen) }, ""},
		{func(p *PutTemplate) { p.Prefix = strings.Repeat("a", MaxTemplatePrefixLen+1) }, "allowed: 1-64 characters"},
		{func(p *PutTemplate) { p.Prefix = "" }, "allowed: 1-64"},
		{func(p *PutTemplate) { p.Prefix = "a:b" }, "has byte ':'"},
		{func(p *PutTemplate) { p.Prefix = "a b" }, "has byte ' '"},
		{func(p *PutTemplate) { p.IdleNanos = MaxTemplateIdleNanos }, ""},
		{func(p *PutTemplate) { p.IdleNanos = MinTemplateIdleNanos - 1 }, "idle time"},
		{func(p *PutTemplate) { p.IdleNanos = MaxTemplateIdleNanos + 1 }, "idle time"},
		{func(p *PutTemplate) { p.MaxKeys = MaxTemplatedKeys }, ""},
		{func(p *PutTemplate) { p.MaxKeys = 0 }, "max keys 0 (allowed: 1 to 2097152)"},
		{func(p *PutTemplate) { p.MaxKeys = MaxTemplatedKeys + 1 }, "max keys"},
		{func(p *PutTemplate) {
			p.Config = compile(t, bucket.Spec{Algorithm: bucket.Hybrid, Rate: 1})
		}, "never comes to rest"},
	} {
		p := ok
		c.mod(&p)
		b, err := AppendPutTemplate(nil, at(1), p)
		switch {
		case c.want == "" && err != nil:
			t.Fatalf("%+v rejected: %v", p, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Fatalf("%+v: error %v, want %q", p, err, c.want)
		case err == nil:
			e, err := Decode(b)
			if err != nil || !reflect.DeepEqual(e.PutTemplate, p) {
				t.Fatalf("%+v decodes to %+v, %v", p, e.PutTemplate, err)
			}
		}
	}
	// The longest prefix with the longest key; idle at its maximum near
	// the end of the timeline.
	h := newHarness(t)
	prefix := strings.Repeat("p", MaxTemplatePrefixLen)
	name := prefix + ":" + strings.Repeat("k", MaxNameLen-MaxTemplatePrefixLen-1)
	end := int64(math.MaxInt64 - 1)
	h.apply(mustEntry(AppendPutTemplate(nil, at(1), PutTemplate{Prefix: prefix, Config: cfg, IdleNanos: MaxTemplateIdleNanos, MaxKeys: MaxTemplatedKeys})))
	if r := h.reserve1(end-MaxTemplateIdleNanos/2, rsv(name, 1, 0, "")); r.Status != Granted {
		t.Fatalf("longest key: %+v", r)
	}
	h.noop(end)
	if _, ok := h.f.Limit(name); !ok {
		t.Fatalf("dropped before its idle time")
	}
	twin := restoredTwin(t, h)
	twin.noop(end)
	if _, err := AppendDeleteTemplate(nil, at(1), DeleteTemplate{Prefix: "a:b"}); err == nil {
		t.Fatalf("a delete of an invalid prefix was accepted")
	}
	for prefix, want := range map[string]string{"tenant": "", "a:b": "has byte ':'", "": "allowed: 1-64", strings.Repeat("p", 65): "65 bytes long"} {
		if err := ValidateTemplatePrefix(prefix); (err == nil) != (want == "") || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Fatalf("ValidateTemplatePrefix(%q): %v, want %q", prefix, err, want)
		}
	}
}

// TestTemplateSnapshotsAreByteIdentical: replicas fed one log with
// templates, keys queued for their drop, deleted templates that keep live
// keys and explicit overrides have byte-identical snapshots, and a
// snapshot restores to the same bytes.
func TestTemplateSnapshotsAreByteIdentical(t *testing.T) {
	for seed := range uint64(20) {
		log := templateLog(t, rand.New(rand.NewPCG(seed, 43)), 300, true)
		a, b := newHarness(t), newHarness(t)
		for _, e := range log {
			a.apply(e)
			b.apply(e)
		}
		sa, sb := snapshotBytes(t, a.f), snapshotBytes(t, b.f)
		if !bytes.Equal(sa, sb) {
			t.Fatalf("seed %d: replicas' snapshots differ", seed)
		}
		c := New()
		if err := c.Restore(nopCloser{bytes.NewReader(sa)}); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !bytes.Equal(snapshotBytes(t, c), sa) {
			t.Fatalf("seed %d: restored snapshot re-encodes otherwise", seed)
		}
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// TestPinnedKeyIsKeptForItsSettlement: a key idle and at rest whose
// reservation may still be settled is kept (the refund needs the pacer
// that granted it): its settlement refunds exactly as in a register that
// keeps every key.
func TestPinnedKeyIsKeptForItsSettlement(t *testing.T) {
	sec := int64(time.Second)
	cfg := compile(t, bucket.Spec{Algorithm: bucket.Bursty, Rate: 1, MaxBurstSeconds: 2})
	run := func(h *harness) SettleResult {
		h.apply(mustEntry(AppendPutTemplate(nil, at(sec), PutTemplate{Prefix: "k", Config: cfg, IdleNanos: sec, MaxKeys: 10})))
		r := h.reserve1(2*sec, Reserve{Limit: "k:a", Permits: 2, Track: true, SettleWithinNanos: 60 * sec})
		if r.Status != Granted {
			t.Fatalf("reserve: %+v", r)
		}
		h.noop(30 * sec) // idle, at rest, pinned
		res, ok := h.apply(mustEntry(AppendSettle(nil, at(31*sec), Settle{Reservation: r.ReservationID, Actual: []Part{{Limit: "k:a", Permits: 0}}}))).(SettleResult)
		if !ok {
			t.Fatal("settle: not a SettleResult")
		}
		return res
	}
	dropping, keeping := run(newHarness(t)), run(&harness{t: t, f: New().keepingIdleKeys()})
	if !reflect.DeepEqual(dropping, keeping) || dropping.Parts[0].Refunded != 2 {
		t.Fatalf("settlement of a pinned key: %+v, in a register that keeps every key %+v (refunded 2)", dropping, keeping)
	}
}
