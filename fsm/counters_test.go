package fsm

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestShadowGrantedCountsOnlyShadowGrants: a limit's shadow grants are
// the reserves it granted while in shadow mode, not every grant since it
// was created (issue: 5 enforced reserves, then shadow, then 1 read 6).
func TestShadowGrantedCountsOnlyShadowGrants(t *testing.T) {
	h := newHarness(t)
	h.put(0, "api", bursty(t, 1000))
	for range 5 {
		h.reserve1(0, rsv("api", 1, sec, ""))
	}
	h.putShadow(sec, "api", bursty(t, 1000))
	h.reserve1(sec, rsv("api", 1, sec, ""))
	info, _ := h.f.Limit("api")
	if info.ShadowGranted != 1 || info.GrantedRequests != 6 {
		t.Fatalf("after 5 enforced grants and 1 in shadow mode: %d shadow grants of %d, want 1 of 6", info.ShadowGranted, info.GrantedRequests)
	}
	h.put(2*sec, "api", bursty(t, 1000)) // enforced again: the count is kept
	h.reserve1(2*sec, rsv("api", 1, sec, ""))
	if info, _ := h.f.Limit("api"); info.ShadowGranted != 1 || info.GrantedRequests != 7 {
		t.Fatalf("enforced again: %d shadow grants of %d, want 1 of 7", info.ShadowGranted, info.GrantedRequests)
	}
}

// TestGrantedPermitsAreNotLoweredByRefunds: granted permits count what was
// granted; what a settlement gave back, or charged, is counted apart, and
// the net figure is what the limit's rate was charged (issue: a grant of
// 4 000 settled at 2 300 read 2 300 granted permits).
func TestGrantedPermitsAreNotLoweredByRefunds(t *testing.T) {
	h := newHarness(t)
	h.put(0, "tpm", bursty(t, 200000))
	h.put(0, "rpm", bursty(t, 500))
	r := h.reserve1(0, tracked(0, Part{"tpm", 4000}, Part{"rpm", 1}))
	if r.Status != Granted {
		t.Fatalf("reserve: %+v", r)
	}
	if s := h.settleCmd(0, Settle{Reservation: r.ReservationID, Actual: []Part{{"tpm", 2300}, {"rpm", 3}}}); s.Status != Settled {
		t.Fatalf("settle: %+v", s)
	}
	for _, c := range []struct {
		name                                 string
		granted, refunded, charged, netWants uint64
	}{{"tpm", 4000, 1700, 0, 2300}, {"rpm", 1, 0, 2, 3}} {
		info, _ := h.f.Limit(c.name)
		if info.GrantedPermits != c.granted || info.RefundedPermits != c.refunded || info.ChargedPermits != c.charged || info.NetPermits != c.netWants {
			t.Errorf("limit %q: %s; want %d granted, %d refunded, %d charged, %d net", c.name, counterString(info), c.granted, c.refunded, c.charged, c.netWants)
		}
	}
}

func (h *harness) expired(nowNanos int64, gs ...ExpiredGrant) ExpiredGrantsResult {
	h.t.Helper()
	b, err := AppendExpiredGrants(nil, at(nowNanos), gs)
	if err != nil {
		h.t.Fatalf("AppendExpiredGrants(%+v): %v", gs, err)
	}
	return h.apply(b).(ExpiredGrantsResult)
}

// TestExpiredGrantsAreCountedAsRefusals: a grant reported expired before
// its answer left (answered 429) is counted as a refusal, not a grant,
// on every limit of the reserve, once; reports that name no grant of the
// limit as it is now (decided before it was created again, or not decided
// yet) change nothing. The pacer keeps the slots.
func TestExpiredGrantsAreCountedAsRefusals(t *testing.T) {
	h := newHarness(t)
	h.put(0, "rps", strict(t, 1000, 10))
	h.put(0, "tpm", bursty(t, 1000))
	h.reserve1(0, rsv("rps", 1, 0, ""))
	decided := h.index + 1
	for range 3 {
		if r := h.reserve1(0, rsv("rps", 1, sec, "")); r.Status != Granted {
			t.Fatalf("reserve: %+v", r)
		}
	}
	multi := h.index + 1
	if r := h.reserve1(0, tracked(sec, Part{"rps", 1}, Part{"tpm", 5})); r.Status != Granted {
		t.Fatalf("tracked reserve: %+v", r)
	}
	state := pacerState(h, "rps")
	res := h.expired(0,
		ExpiredGrant{DecidedIndex: decided, Parts: []Part{{"rps", 1}}},
		ExpiredGrant{DecidedIndex: decided + 1, Parts: []Part{{"rps", 1}}},
		ExpiredGrant{DecidedIndex: decided + 2, Parts: []Part{{"rps", 1}}},
		ExpiredGrant{DecidedIndex: multi, Parts: []Part{{"rps", 1}, {"tpm", 5}}},
		ExpiredGrant{DecidedIndex: h.index + 1, Parts: []Part{{"tpm", 1}}}, // this very entry: no decision
		ExpiredGrant{DecidedIndex: multi, Parts: []Part{{"nope", 1}}},
	)
	if res.Counted != 5 {
		t.Errorf("counted %d parts, want 5", res.Counted)
	}
	rps, _ := h.f.Limit("rps")
	if rps.GrantedRequests != 1 || rps.GrantedPermits != 1 || rps.RefusedRequests != 4 || rps.ExpiredRequests != 4 || rps.ExpiredPermits != 4 || rps.NetPermits != 5 {
		t.Errorf("rps: %s; want 1 granted, 4 refused (all expired), 5 net", counterString(rps))
	}
	tpm, _ := h.f.Limit("tpm")
	if tpm.GrantedRequests != 0 || tpm.RefusedRequests != 1 || tpm.ExpiredPermits != 5 {
		t.Errorf("tpm: %s; want 0 granted, 1 refused (expired, 5 permits)", counterString(tpm))
	}
	if pacerState(h, "rps") != state {
		t.Errorf("a report changed the pacer: its slots were spent")
	}
	// More than the limit granted, or a limit created since: ignored.
	if res := h.expired(0, ExpiredGrant{DecidedIndex: decided, Parts: []Part{{"rps", 2}}}); res.Counted != 0 {
		t.Errorf("a report of more permits than the limit has left counted %d", res.Counted)
	}
	h.del(0, "rps")
	h.put(0, "rps", strict(t, 1000, 10))
	h.reserve1(0, rsv("rps", 1, 0, ""))
	if res := h.expired(0, ExpiredGrant{DecidedIndex: decided, Parts: []Part{{"rps", 1}}}); res.Counted != 0 {
		t.Errorf("a report of a grant of the deleted limit counted %d on the new one", res.Counted)
	}
	if info, _ := h.f.Limit("rps"); info.GrantedRequests != 1 || info.ExpiredRequests != 0 {
		t.Errorf("re-created rps: %s; want its own grant, nothing expired", counterString(info))
	}
}

// TestExpiredGrantsEncoding: a CmdExpiredGrants round-trips and the
// encoder and decoder reject what does not fit.
func TestExpiredGrantsEncoding(t *testing.T) {
	gs := []ExpiredGrant{{DecidedIndex: 7, Parts: []Part{{"a", 1}, {"b", 30}}}, {DecidedIndex: 1 << 40, Parts: []Part{{"a", 2}}}}
	b, err := AppendExpiredGrants(nil, Stamp{Nanos: 5, Term: 2}, gs)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Decode(b)
	if err != nil || e.Type != CmdExpiredGrants || !reflect.DeepEqual(e.ExpiredGrants, gs) {
		t.Fatalf("Decode = %+v, %v; want %+v", e, err, gs)
	}
	many := make([]ExpiredGrant, MaxExpiredGrants+1)
	for i := range many {
		many[i] = ExpiredGrant{DecidedIndex: 1, Parts: []Part{{"a", 1}}}
	}
	for _, tt := range []struct {
		name string
		gs   []ExpiredGrant
		want string
	}{
		{"none", nil, "0 expired grants"},
		{"too many", many, "257 expired grants"},
		{"index 0", []ExpiredGrant{{Parts: []Part{{"a", 1}}}}, "index 0"},
		{"no parts", []ExpiredGrant{{DecidedIndex: 1}}, "grant of 0 limits"},
		{"zero permits", []ExpiredGrant{{DecidedIndex: 1, Parts: []Part{{"a", 0}}}}, "0 permits"},
		{"twice", []ExpiredGrant{{DecidedIndex: 1, Parts: []Part{{"a", 1}, {"a", 1}}}}, "twice"},
		{"bad name", []ExpiredGrant{{DecidedIndex: 1, Parts: []Part{{"a b", 1}}}}, "limit name"},
	} {
		if _, err := AppendExpiredGrants(nil, Stamp{}, tt.gs); !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: AppendExpiredGrants error %v, want ErrInvalidCommand containing %q", tt.name, err, tt.want)
		}
	}
	// The decoder checks the same: a part of 0 permits, spliced in.
	bad := append([]byte(nil), b...)
	bad[len(bad)-1] = 0
	if _, err := Decode(bad); !errors.Is(err, ErrInvalidCommand) || !strings.Contains(err.Error(), "0 permits") {
		t.Errorf("Decode of a grant of 0 permits: %v", err)
	}
	if _, err := Decode(append(b, 0)); !errors.Is(err, ErrDecode) {
		t.Errorf("Decode with a trailing byte: %v, want ErrDecode", err)
	}
}
