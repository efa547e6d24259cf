package fsm

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

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
