package fsm

import (
	"reflect"
	"strings"
	"testing"

	"github.com/permitd/permitd/bucket"
)

// templateHarness is a register at 1 s with template "t" (strict, 1 per
// second, 2 reserved ahead at most, so 3 permits per request at most),
// template "c" (an in-flight cap) and explicit limit "x" (strict, 1 per
// second).
func templateHarness(t testing.TB) *harness {
	h := newHarness(t)
	h.apply(mustEntry(AppendPutTemplate(nil, at(sec), PutTemplate{Prefix: "t", Config: strict(t, 1, 2), IdleNanos: 10 * sec, MaxKeys: 8})))
	h.apply(mustEntry(AppendPutTemplate(nil, at(sec), PutTemplate{Prefix: "c", Config: concurrency(t, 2, 5e9), IdleNanos: 10 * sec, MaxKeys: 8})))
	h.put(sec, "x", strict(t, 1, 0))
	h.reserve1(2*sec, rsv("t:old", 1, 0, "")) // a live key, touched at 2 s
	return h
}

// TestUndecidedReserveLeavesNoKey: a reserve that is answered without
// being decided on its limits (Invalid: more permits than a limit grants,
// a leased limit, an untracked reserve on a cap) creates no key and
// touches none: the state is exactly the one a no-op at its time leaves,
// single or in the reservation form, whichever part is invalid.
func TestUndecidedReserveLeavesNoKey(t *testing.T) {
	for _, c := range []struct {
		what string
		r    Reserve
		want string
	}{
		{"a new key asked too much", rsv("t:new", 4, 0, ""), "grants at most 3 permits"},
		{"an untracked reserve on a new cap key", rsv("c:new", 1, 0, ""), ""},
		{"a new key and an invalid later part", tracked(0, Part{Limit: "t:new", Permits: 1}, Part{Limit: "x", Permits: 1 << 40}), "grants at most"},
		{"a new key and an existing one, the new one invalid", tracked(0, Part{Limit: "t:old", Permits: 1}, Part{Limit: "t:new", Permits: 2}), "is strict"},
		{"two new keys and a leased limit", tracked(0, Part{Limit: "t:a", Permits: 1}, Part{Limit: "c:b", Permits: 1}, Part{Limit: "x", Permits: 1}), "is leased"},
	} {
		h, twin := templateHarness(t), templateHarness(t)
		if strings.Contains(c.want, "leased") {
			h.policy(2*sec, LeasePolicy{Limit: "x", Leased: true})
			twin.policy(2*sec, LeasePolicy{Limit: "x", Leased: true})
		}
		r := h.reserve1(5*sec, c.r)
		twin.noop(5 * sec)
		if r.Status != Invalid || !strings.Contains(r.Detail, c.want) {
			t.Fatalf("%s: %+v, want Invalid naming %q", c.what, r, c.want)
		}
		if changes := h.f.AppliedKeyChanges(); len(changes) != 0 {
			t.Errorf("%s: the entry reports key changes %+v", c.what, changes)
		}
		for _, name := range []string{"t:new", "c:new", "t:a", "c:b"} {
			if _, ok := h.f.Limit(name); ok {
				t.Errorf("%s: key %q was created by a reserve answered Invalid", c.what, name)
			}
		}
		if h.f.StateHash() != twin.f.StateHash() {
			t.Fatalf("%s: a reserve answered Invalid changed the state (a key created or touched)", c.what)
		}
		if msg := checkTemplates(&h.f.st); msg != "" {
			t.Fatalf("%s: %s", c.what, msg)
		}
	}
	// A decided reserve keeps the key it created: refused or granted.
	h := templateHarness(t)
	h.reserve1(5*sec, rsv("x", 1, 0, ""))
	if r := h.reserve1(5*sec, tracked(0, Part{Limit: "t:new", Permits: 1}, Part{Limit: "x", Permits: 1})); r.Status != Refused || r.Blocking != "x" {
		t.Fatalf("a reserve refused by x: %+v", r)
	}
	if info, ok := h.f.Limit("t:new"); !ok || info.RefusedRequests != 0 {
		t.Fatalf("a refused reserve's new key: %+v, %v; want it kept, at rest", info, ok)
	}
}

// foreignPacer is a pacer of no package bucket knows: Reconfigure fails
// on it (the only way a put of the same algorithm fails).
type foreignPacer struct{ bucket.Pacer }

// TestFailedPutLeavesKeyTemplated: a put on a busy templated key whose
// reconfiguration fails keeps the key a key of its template (counted,
// queued for its drop) and changes nothing.
func TestFailedPutLeavesKeyTemplated(t *testing.T) {
	setup := func() *harness {
		h := templateHarness(t)
		h.reserve1(3*sec, rsv("t:old", 3, 0, "")) // busy: slots reserved ahead
		l := h.f.st.limits["t:old"]
		l.pacer = foreignPacer{l.pacer}
		return h
	}
	h, twin := setup(), setup()
	res := h.put(4*sec, "t:old", strict(t, 2, 2))
	twin.noop(4 * sec)
	if !strings.Contains(res.Detail, "reconfiguring its pacer failed") {
		t.Fatalf("put on a key whose pacer cannot be reconfigured: %+v", res)
	}
	l := h.f.st.limits["t:old"]
	if !l.templated() || h.f.st.templates["t"].keys != 1 || len(h.f.AppliedKeyChanges()) != 0 {
		t.Fatalf("a failed put made the key explicit: templated %v, template counts %d keys, changes %+v",
			l.templated(), h.f.st.templates["t"].keys, h.f.AppliedKeyChanges())
	}
	if msg := checkTemplates(&h.f.st); msg != "" {
		t.Fatal(msg)
	}
	checkNameIndexes(t, h.f)
	// (StateHash snapshots: a foreign pacer's state is its wrapped one's.)
	if h.f.StateHash() != twin.f.StateHash() {
		t.Fatalf("a failed put changed the state")
	}
}

// TestDeletedTemplateIsListed: a deleted template whose keys still live
// is listed by AllTemplates (Deleted, its live keys counted) and by no
// other view, and goes with its last key.
func TestDeletedTemplateIsListed(t *testing.T) {
	h := templateHarness(t)
	if res := h.apply(mustEntry(AppendDeleteTemplate(nil, at(3*sec), DeleteTemplate{Prefix: "t"}))); res != (DeleteTemplateResult{Existed: true, LiveKeys: 1}) {
		t.Fatalf("delete template: %+v", res)
	}
	if _, ok := h.f.Template("t"); ok {
		t.Fatalf("Template lists a deleted template")
	}
	for _, ti := range h.f.Templates() {
		if ti.Prefix == "t" || ti.Deleted {
			t.Fatalf("Templates lists %+v", ti)
		}
	}
	all := h.f.AllTemplates()
	want := []TemplateInfo{
		{Prefix: "c", Config: concurrency(t, 2, 5e9), IdleNanos: 10 * sec, MaxKeys: 8},
		{Prefix: "t", Config: strict(t, 1, 2), IdleNanos: 10 * sec, MaxKeys: 8, LiveKeys: 1, Deleted: true},
	}
	if !reflect.DeepEqual(all, want) {
		t.Fatalf("AllTemplates = %+v, want %+v", all, want)
	}
	h.noop(20 * sec) // the last key is idle and at rest: dropped
	if all := h.f.AllTemplates(); len(all) != 1 || all[0].Prefix != "c" {
		t.Fatalf("AllTemplates after the last key went: %+v", all)
	}
}

// TestExpiredFirstGrantOfKeyIsCounted: a report that the first grant of
// a key (decided by the entry that created the key) expired before its
// answer left counts on the key, as on any limit.
func TestExpiredFirstGrantOfKeyIsCounted(t *testing.T) {
	h := templateHarness(t)
	if r := h.reserve1(3*sec, rsv("t:new", 1, 0, "")); r.Status != Granted {
		t.Fatalf("first reserve: %+v", r)
	}
	decided := h.index
	res := h.apply(mustEntry(AppendExpiredGrants(nil, at(3*sec), []ExpiredGrant{{DecidedIndex: decided, Parts: []Part{{Limit: "t:new", Permits: 1}}}})))
	info, _ := h.f.Limit("t:new")
	if res.(ExpiredGrantsResult).Counted != 1 || info.ExpiredRequests != 1 || info.GrantedRequests != 0 {
		t.Fatalf("report of the first grant of a key: %+v; the key counts %s", res, counterString(info))
	}
}

// TestBusyReserveLeavesNoKey: a multi-limit reserve answered Busy (its
// in-flight cap's wait queue is full) creates no key, as one answered
// Invalid does.
func TestBusyReserveLeavesNoKey(t *testing.T) {
	setup := func() *harness {
		h := templateHarness(t)
		h.f.st.waits.maxPerLimit = 1
		h.put(sec, "cap", concurrency(t, 1, 5e9))
		h.reserve1(3*sec, tracked(0, Part{Limit: "cap", Permits: 1}))     // granted: the cap is full
		h.reserve1(3*sec, tracked(4*sec, Part{Limit: "cap", Permits: 1})) // queued: the queue is full
		return h
	}
	h, twin := setup(), setup()
	r := h.reserve1(4*sec, tracked(4*sec, Part{Limit: "t:new", Permits: 1}, Part{Limit: "cap", Permits: 1}))
	twin.noop(4 * sec)
	if r.Status != Busy {
		t.Fatalf("a reserve behind a full wait queue: %+v, want Busy", r)
	}
	if _, ok := h.f.Limit("t:new"); ok || len(h.f.AppliedKeyChanges()) != 0 {
		t.Fatalf("a reserve answered Busy created key t:new (changes %+v)", h.f.AppliedKeyChanges())
	}
	if h.f.StateHash() != twin.f.StateHash() {
		t.Fatal("a reserve answered Busy changed the state")
	}
	checkNameIndexes(t, h.f)
}
