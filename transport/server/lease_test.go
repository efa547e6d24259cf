package server

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
)

// TestLeaseLifecycle drives the lease endpoints against the fake store:
// policy, lease, refusal, replay, renew, fencing, return, the pool view,
// reserves rejected on the leased limit, and leasing turned off again.
func TestLeaseLifecycle(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	e.mustPut(t, "a", `{"algorithm":"strict","rate":1000,"per":"1s"}`)

	w := e.do(t, "PUT", "/v1/limits/a/lease-policy", `{"leased":true,"burst_permits":100}`)
	if m := decode(t, w); w.Code != 200 || m["leased"] != true || m["burst_permits"] != 100.0 || m["max_outstanding_permits"] != 1000.0 || m["name"] != "a" {
		t.Fatalf("policy: %d %s", w.Code, w.Body)
	}
	w = e.do(t, "POST", "/v1/limits/a/reserve", `{}`)
	if m := decode(t, w); w.Code != 400 || !strings.Contains(m["error"].(string), `limit "a" is leased`) {
		t.Fatalf("reserve on a leased limit: %d %s", w.Code, w.Body)
	}

	// The pool mints from the policy on: 100 ms fill its burst of 100.
	e.store.Advance(100e6)
	lease := `{"holder":"h1","group":"g1","demand_milli_per_sec":10000,"ttl":"2s","request_id":"l1"}`
	w = e.do(t, "POST", "/v1/limits/a/lease", lease)
	want := `{"status":"granted","lease_id":1,"epoch":1,"permits":10,"expires_in_ns":2000000000,"share_milli_per_sec":10000,"credited_permits":0,"duplicate":false}`
	if got := strings.TrimSpace(w.Body.String()); w.Code != 200 || got != want {
		t.Fatalf("lease:\n got %d %s\nwant 200 %s", w.Code, got, want)
	}
	// The same request id replays the decision.
	w = e.do(t, "POST", "/v1/limits/a/lease", lease)
	if m := decode(t, w); w.Code != 200 || m["duplicate"] != true || m["lease_id"] != 1.0 {
		t.Fatalf("replayed lease: %d %s", w.Code, w.Body)
	}
	// A second lease of the holder is refused (429, Retry-After).
	w = e.do(t, "POST", "/v1/limits/a/lease", `{"holder":"h1","group":"g1","weight":2,"demand_per_sec":0.0004,"ttl":"100ms"}`)
	if m := decode(t, w); w.Code != 429 || m["status"] != "refused" || m["lease_id"] != 1.0 || m["retry_after_ns"] != 2e9 ||
		!strings.Contains(m["error"].(string), "already holds lease 1") {
		t.Fatalf("second lease: %d %s", w.Code, w.Body)
	}
	if ra := w.Header().Get("Retry-After"); ra != "2" {
		t.Errorf("Retry-After %q, want 2", ra)
	}

	w = e.do(t, "POST", "/v1/limits/a/leases/1/renew", `{"epoch":1,"spent":5,"stolen_out":1,"stolen_in":3,"kept":2,"demand_milli_per_sec":1500,"ttl":"4s","request_id":"r1"}`)
	// 10 permits: 5 spent, 1 stolen out, 2 kept, 2 credited; the new grant
	// would hold 1 without the kept ones, so it holds them: 2.
	if m := decode(t, w); w.Code != 200 || m["status"] != "granted" || m["epoch"] != 2.0 || m["credited_permits"] != 2.0 || m["permits"] != 2.0 ||
		m["share_milli_per_sec"] != 1500.0 {
		t.Fatalf("renew: %d %s", w.Code, w.Body)
	}
	// The superseded epoch is fenced (409).
	w = e.do(t, "POST", "/v1/limits/a/leases/1/renew", `{"epoch":1,"demand_milli_per_sec":1000,"ttl":"1s"}`)
	if m := decode(t, w); w.Code != 409 || m["status"] != "fenced" || !strings.Contains(m["error"].(string), "epoch 2, not 1") {
		t.Fatalf("stale renew: %d %s", w.Code, w.Body)
	}
	// An over-report is invalid (400).
	w = e.do(t, "POST", "/v1/limits/a/leases/1/return", `{"epoch":2,"spent":7}`)
	if m := decode(t, w); w.Code != 400 || !strings.Contains(m["error"].(string), "7 spent") {
		t.Fatalf("over-report: %d %s", w.Code, w.Body)
	}
	w = e.do(t, "GET", "/v1/limits/a/leases", "")
	m := decode(t, w)
	if w.Code != 200 || m["minted_permits"] != 100.0 || m["outstanding_permits"] != 3.0 || m["leases_opened"] != 1.0 || m["fenced"] != 1.0 || m["interval_ns"] != 1e6 {
		t.Fatalf("pool: %d %s", w.Code, w.Body)
	}
	if ls := m["leases"].([]any); len(ls) != 1 || ls[0].(map[string]any)["holder"] != "h1" || ls[0].(map[string]any)["demand_milli_per_sec"] != 1500.0 ||
		ls[0].(map[string]any)["share_per_sec"] != nil || ls[0].(map[string]any)["stolen_in_permits"] != 3.0 {
		t.Fatalf("leases: %s", w.Body)
	}
	// Leasing stays on while a lease holds permits.
	w = e.do(t, "PUT", "/v1/limits/a/lease-policy", `{"leased":false}`)
	if m := decode(t, w); w.Code != 400 || !strings.Contains(m["error"].(string), "stays leased") {
		t.Fatalf("policy off with a lease: %d %s", w.Code, w.Body)
	}
	w = e.do(t, "POST", "/v1/limits/a/leases/1/return", `{"epoch":2,"spent":1,"request_id":"ret1"}`)
	if m := decode(t, w); w.Code != 200 || m["status"] != "returned" || m["credited_permits"] != 1.0 || m["lease_id"] != 1.0 {
		t.Fatalf("return: %d %s", w.Code, w.Body)
	}
	w = e.do(t, "POST", "/v1/limits/a/leases/1/return", `{"epoch":2}`)
	if decode(t, w); w.Code != 409 {
		t.Fatalf("second return: %d %s", w.Code, w.Body)
	}
	// The superseded epoch's permits linger until its grant expires.
	e.store.Advance(5e9)
	w = e.do(t, "GET", "/v1/limits/a/leases", "")
	if got := decode(t, w)["leases"]; fmt.Sprint(got) != "[]" {
		t.Errorf("leases after return: %s", w.Body)
	}
	w = e.do(t, "PUT", "/v1/limits/a/lease-policy", `{"leased":false}`)
	if m := decode(t, w); w.Code != 200 || m["leased"] != false {
		t.Fatalf("policy off: %d %s", w.Code, w.Body)
	}
	if w := e.do(t, "GET", "/v1/limits/a/leases", ""); w.Code != 400 {
		t.Errorf("leases of a linearized limit: %d %s", w.Code, w.Body)
	}
	if w := e.do(t, "POST", "/v1/limits/a/reserve", `{}`); w.Code != 200 {
		t.Errorf("reserve after leasing off: %d %s", w.Code, w.Body)
	}

	// What reached the store, exactly.
	got := e.store.LeaseCommands()
	wantCmds := []any{
		fsm.Lease{Limit: "a", Holder: "h1", Group: "g1", Weight: 1, DemandMilliPermitsPerSec: 10000, TTLNanos: 2e9, RequestID: "l1"},
		fsm.Lease{Limit: "a", Holder: "h1", Group: "g1", Weight: 1, DemandMilliPermitsPerSec: 10000, TTLNanos: 2e9, RequestID: "l1"},
		fsm.Lease{Limit: "a", Holder: "h1", Group: "g1", Weight: 2, DemandMilliPermitsPerSec: 1, TTLNanos: 1e8},
		fsm.Renew{Report: fsm.Report{Limit: "a", LeaseID: 1, Epoch: 1, SpentPermits: 5, StolenOutPermits: 1, StolenInPermits: 3}, KeptPermits: 2, DemandMilliPermitsPerSec: 1500, TTLNanos: 4e9, RequestID: "r1"},
		fsm.Renew{Report: fsm.Report{Limit: "a", LeaseID: 1, Epoch: 1}, DemandMilliPermitsPerSec: 1000, TTLNanos: 1e9},
		fsm.Return{Report: fsm.Report{Limit: "a", LeaseID: 1, Epoch: 2, SpentPermits: 7}},
		fsm.Return{Report: fsm.Report{Limit: "a", LeaseID: 1, Epoch: 2, SpentPermits: 1}, RequestID: "ret1"},
		fsm.Return{Report: fsm.Report{Limit: "a", LeaseID: 1, Epoch: 2}},
	}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", wantCmds) {
		t.Errorf("commands reaching the store:\n got %+v\nwant %+v", got, wantCmds)
	}
	mt := e.metrics
	for o, want := range map[leaseOutcome]float64{leaseGranted: 3, leaseRefused: 1, leaseFenced: 2, leaseReturned: 1, leaseInvalid: 1} {
		if got := testutil.ToFloat64(mt.proto[protoHTTP].leases[o]); got != want {
			t.Errorf("lease_requests_total{outcome=%q} = %v, want %v", leaseOutcomeLabels[o], got, want)
		}
	}
}

func TestLeaseStoreOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		res      fsm.LeaseResult
		err      error
		wantCode int
		wantMsg  string
		outcome  leaseOutcome
	}{
		{"granted", fsm.LeaseResult{Status: fsm.LeaseGranted, LeaseID: 4, Epoch: 2, Permits: 3, ExpiresInNanos: 9}, nil, 200, "", leaseGranted},
		{"returned", fsm.LeaseResult{Status: fsm.LeaseReturned, LeaseID: 4, CreditedPermits: 1}, nil, 200, "", leaseReturned},
		{"refused", fsm.LeaseResult{Status: fsm.LeaseRefused, RetryAfterNanos: 1, Detail: "too many leases"}, nil, 429, "too many leases", leaseRefused},
		{"fenced", fsm.LeaseResult{Status: fsm.LeaseFenced}, nil, 409, "stop using", leaseFenced},
		{"unknown limit status", fsm.LeaseResult{Status: fsm.LeaseUnknownLimit}, nil, 404, "not found", leaseUnknown},
		{"invalid status", fsm.LeaseResult{Status: fsm.LeaseInvalid, Detail: "used by a reserve"}, nil, 400, "used by a reserve", leaseInvalid},
		{"bogus status", fsm.LeaseResult{Status: 77}, nil, 503, "unexpected", leaseError},
		{"not found error", fsm.LeaseResult{}, fmt.Errorf("x: %w", node.ErrNotFound), 404, "not found", leaseUnknown},
		{"invalid error", fsm.LeaseResult{}, fmt.Errorf("%w: not leased", node.ErrInvalid), 400, "not leased", leaseInvalid},
		{"no leader", fsm.LeaseResult{}, node.ErrNoLeader, 503, "no leader", leaseError},
		{"deadline", fsm.LeaseResult{}, context.DeadlineExceeded, 503, "timed out", leaseError},
	}
	reqs := []struct{ path, body string }{
		{"/v1/limits/a/lease", `{"holder":"h","group":"g","demand_milli_per_sec":1000,"ttl":"1s"}`},
		{"/v1/limits/a/leases/4/renew", `{"epoch":1,"demand_milli_per_sec":1000,"ttl":"1s"}`},
		{"/v1/limits/a/leases/4/return", `{"epoch":1}`},
	}
	for _, tt := range tests {
		for _, rq := range reqs {
			t.Run(tt.name+rq.path, func(t *testing.T) {
				e := newEnv(t, HandlerOptions{})
				e.store.SetLeaseFunc(func(context.Context, any) (fsm.LeaseResult, error) { return tt.res, tt.err })
				w := e.do(t, "POST", rq.path, rq.body)
				m := decode(t, w)
				if w.Code != tt.wantCode {
					t.Fatalf("code %d, want %d: %s", w.Code, tt.wantCode, w.Body)
				}
				if msg, _ := m["error"].(string); !strings.Contains(msg, tt.wantMsg) {
					t.Errorf("error %q does not mention %q", msg, tt.wantMsg)
				}
				if tt.wantCode == 503 && w.Header().Get("Retry-After") == "" {
					t.Errorf("503 without Retry-After")
				}
				if tt.wantCode == 429 && w.Header().Get("Retry-After") != "1" {
					t.Errorf("429 with Retry-After %q", w.Header().Get("Retry-After"))
				}
				if got := testutil.ToFloat64(e.metrics.proto[protoHTTP].leases[tt.outcome]); got != 1 {
					t.Errorf("outcome %s counted %v times", leaseOutcomeLabels[tt.outcome], got)
				}
			})
		}
	}
}

func TestLeaseViewAndPolicyStoreErrors(t *testing.T) {
	for _, tt := range []struct {
		err  error
		code int
	}{
		{node.ErrNoLeader, 503},
		{fmt.Errorf("%w: nope", node.ErrInvalid), 400},
		{fmt.Errorf("%w: x", node.ErrNotFound), 404},
		{errors.New("disk on fire"), 503},
	} {
		e := newEnv(t, HandlerOptions{})
		e.store.SetErr(tt.err)
		for _, r := range []struct{ method, path, body string }{
			{"PUT", "/v1/limits/a/lease-policy", `{"leased":true}`},
			{"GET", "/v1/limits/a/leases", ""},
			{"POST", "/v1/limits/a/lease", `{"holder":"h","group":"g","demand_milli_per_sec":1000,"ttl":"1s"}`},
			{"POST", "/v1/limits/a/leases/1/renew", `{"epoch":1,"demand_milli_per_sec":1000,"ttl":"1s"}`},
			{"POST", "/v1/limits/a/leases/1/return", `{"epoch":1}`},
		} {
			w := e.do(t, r.method, r.path, r.body)
			decode(t, w)
			if w.Code != tt.code {
				t.Errorf("%v: %s %s: %d, want %d: %s", tt.err, r.method, r.path, w.Code, tt.code, w.Body)
			}
		}
	}
	// A policy on an unknown limit, and one the register cannot apply.
	e := newEnv(t, HandlerOptions{})
	if w := e.do(t, "PUT", "/v1/limits/zz/lease-policy", `{"leased":true}`); w.Code != 404 {
		t.Errorf("policy of an unknown limit: %d %s", w.Code, w.Body)
	}
	e.mustPut(t, "slow", `{"algorithm":"strict","rate":1,"per":"2m"}`)
	w := e.do(t, "PUT", "/v1/limits/slow/lease-policy", `{"leased":true}`)
	if m := decode(t, w); w.Code != 400 || !strings.Contains(m["error"].(string), "slower than one per lease TTL") {
		t.Errorf("policy of a slow limit: %d %s", w.Code, w.Body)
	}
}

func leaseBadInputs() []badInput {
	pol := func(name, body, mention string) badInput {
		return badInput{"policy " + name, "PUT", "/v1/limits/a/lease-policy", body, 400, mention}
	}
	lease := func(name, body, mention string) badInput {
		return badInput{"lease " + name, "POST", "/v1/limits/a/lease", body, 400, mention}
	}
	renew := func(name, body, mention string) badInput {
		return badInput{"renew " + name, "POST", "/v1/limits/a/leases/7/renew", body, 400, mention}
	}
	ret := func(name, body, mention string) badInput {
		return badInput{"return " + name, "POST", "/v1/limits/a/leases/7/return", body, 400, mention}
	}
	const hg = `"holder":"h","group":"g"`
	const ok = hg + `,"demand_milli_per_sec":1000,"ttl":"1s"`
	return []badInput{
		pol("empty", ``, "empty"),
		pol("leased missing", `{"burst_permits":3}`, `"leased" is required`),
		pol("leased string", `{"leased":"true"}`, `"leased"`),
		pol("leased null", `{"leased":null}`, `"leased"`),
		pol("burst negative", `{"leased":true,"burst_permits":-1}`, `"burst_permits"`),
		pol("burst too big", `{"leased":true,"burst_permits":1152921504606846977}`, `"burst_permits"`),
		pol("burst fraction", `{"leased":true,"burst_permits":1.5}`, `"burst_permits"`),
		pol("max outstanding with leasing off", `{"leased":false,"max_outstanding_permits":3}`, `leased false`),
		pol("unknown field", `{"leased":true,"ttl":"1s"}`, `unknown field "ttl"`),
		pol("trailing", `{"leased":true}[]`, "after the JSON object"),
		{"policy bad name", "PUT", "/v1/limits/a%20b/lease-policy", `{"leased":true}`, 400, "not allowed"},

		lease("empty", ``, "empty"),
		lease("array", `[]`, "JSON object"),
		lease("holder missing", `{"group":"g","demand_milli_per_sec":1000,"ttl":"1s"}`, `"holder" is required`),
		lease("group missing", `{"holder":"h","demand_milli_per_sec":1000,"ttl":"1s"}`, `"group" is required`),
		lease("holder bad char", `{"holder":"h h","group":"g","demand_milli_per_sec":1000,"ttl":"1s"}`, "not allowed"),
		lease("holder empty", `{"holder":"","group":"g","demand_milli_per_sec":1000,"ttl":"1s"}`, "empty"),
		lease("group too long", `{"holder":"h","group":"`+longName+`","demand_milli_per_sec":1000,"ttl":"1s"}`, "129 bytes"),
		lease("holder number", `{"holder":1,"group":"g","demand_milli_per_sec":1000,"ttl":"1s"}`, `"holder"`),
		lease("weight zero", `{`+ok+`,"weight":0}`, `"weight"`),
		lease("weight too big", `{`+ok+`,"weight":1000001}`, `"weight"`),
		lease("weight fraction", `{`+ok+`,"weight":1.5}`, `"weight"`),
		lease("demand missing", `{`+hg+`,"ttl":"1s"}`, `"demand_milli_per_sec" is required`),
		lease("demand milli negative", `{`+hg+`,"demand_milli_per_sec":-1,"ttl":"1s"}`, `"demand_milli_per_sec": -1`),
		lease("demand milli too big", `{`+hg+`,"demand_milli_per_sec":1000000000001,"ttl":"1s"}`, `"demand_milli_per_sec": 1000000000001`),
		lease("demand milli fraction", `{`+hg+`,"demand_milli_per_sec":1.5,"ttl":"1s"}`, `"demand_milli_per_sec"`),
		lease("demand milli string", `{`+hg+`,"demand_milli_per_sec":"1","ttl":"1s"}`, `"demand_milli_per_sec": got JSON string`),
		lease("demand in both spellings", `{`+hg+`,"demand_milli_per_sec":1000,"demand_per_sec":1,"ttl":"1s"}`, `both given`),
		lease("demand string", `{`+hg+`,"demand_per_sec":"1","ttl":"1s"}`, `"demand_per_sec": got JSON string`),
		lease("demand null", `{`+hg+`,"demand_per_sec":null,"ttl":"1s"}`, `"demand_per_sec"`),
		lease("demand bool", `{`+hg+`,"demand_per_sec":true,"ttl":"1s"}`, `"demand_per_sec"`),
		lease("demand negative", `{`+hg+`,"demand_per_sec":-0.5,"ttl":"1s"}`, `"demand_per_sec"`),
		lease("demand too big", `{`+hg+`,"demand_per_sec":1000000000.0001,"ttl":"1s"}`, `"demand_per_sec"`),
		lease("demand huge exponent", `{`+hg+`,"demand_per_sec":1e999999999999,"ttl":"1s"}`, `"demand_per_sec"`),
		lease("ttl missing", `{`+hg+`,"demand_milli_per_sec":1000}`, `"ttl" is required`),
		lease("ttl too short", `{`+hg+`,"demand_milli_per_sec":1000,"ttl":"99ms"}`, `"ttl"`),
		lease("ttl too long", `{`+hg+`,"demand_milli_per_sec":1000,"ttl":"1m0.000000001s"}`, `"ttl"`),
		lease("ttl number", `{`+hg+`,"demand_milli_per_sec":1000,"ttl":1}`, `"ttl"`),
		lease("ttl unparsable", `{`+hg+`,"demand_milli_per_sec":1000,"ttl":"soon"}`, "not a duration"),
		lease("request_id bad", `{`+ok+`,"request_id":"a b"}`, "not allowed"),
		lease("request_id too long", `{`+ok+`,"request_id":"`+strings.Repeat("r", 65)+`"}`, "65 bytes"),
		lease("unknown field", `{`+ok+`,"epoch":1}`, `unknown field "epoch"`),
		lease("truncated", `{`+hg, "truncated"),
		{"lease bad name", "POST", "/v1/limits/" + longName + "/lease", `{` + ok + `}`, 400, "129 bytes"},

		renew("epoch missing", `{"demand_milli_per_sec":1000,"ttl":"1s"}`, `"epoch" is required`),
		renew("epoch zero", `{"epoch":0,"demand_milli_per_sec":1000,"ttl":"1s"}`, `"epoch"`),
		renew("epoch negative", `{"epoch":-1,"demand_milli_per_sec":1000,"ttl":"1s"}`, `"epoch"`),
		renew("epoch overflow", `{"epoch":18446744073709551616,"demand_milli_per_sec":1000,"ttl":"1s"}`, `"epoch"`),
		renew("spent negative", `{"epoch":1,"spent":-1,"demand_milli_per_sec":1000,"ttl":"1s"}`, `"spent"`),
		renew("stolen_out fraction", `{"epoch":1,"stolen_out":0.5,"demand_milli_per_sec":1000,"ttl":"1s"}`, `"stolen_out"`),
		renew("stolen_in negative", `{"epoch":1,"stolen_in":-4,"demand_milli_per_sec":1000,"ttl":"1s"}`, `"stolen_in"`),
		renew("kept negative", `{"epoch":1,"kept":-2,"demand_milli_per_sec":1000,"ttl":"1s"}`, `"kept": -2`),
		renew("demand missing", `{"epoch":1,"ttl":"1s"}`, `"demand_milli_per_sec" is required`),
		renew("ttl missing", `{"epoch":1,"demand_milli_per_sec":1000}`, `"ttl" is required`),
		renew("unknown field", `{"epoch":1,"demand_milli_per_sec":1000,"ttl":"1s","holder":"h"}`, `unknown field "holder"`),
		{"renew id zero", "POST", "/v1/limits/a/leases/0/renew", `{"epoch":1,"demand_milli_per_sec":1000,"ttl":"1s"}`, 400, "lease id"},
		{"renew id leading zero", "POST", "/v1/limits/a/leases/07/renew", `{"epoch":1,"demand_milli_per_sec":1000,"ttl":"1s"}`, 400, "lease id"},
		{"renew id negative", "POST", "/v1/limits/a/leases/-7/renew", `{"epoch":1,"demand_milli_per_sec":1000,"ttl":"1s"}`, 400, "lease id"},
		{"renew id letters", "POST", "/v1/limits/a/leases/x/renew", `{"epoch":1,"demand_milli_per_sec":1000,"ttl":"1s"}`, 400, "lease id"},
		{"renew id empty", "POST", "/v1/limits/a/leases//renew", `{"epoch":1,"demand_milli_per_sec":1000,"ttl":"1s"}`, 400, "lease id"},
		{"renew id overflow", "POST", "/v1/limits/a/leases/18446744073709551616/renew", `{"epoch":1,"demand_milli_per_sec":1000,"ttl":"1s"}`, 400, "lease id"},
		{"renew bad name", "POST", "/v1/limits/a%2Fb/leases/1/renew", `{"epoch":1,"demand_milli_per_sec":1000,"ttl":"1s"}`, 400, "not allowed"},

		ret("empty", ``, "empty"),
		ret("epoch missing", `{"spent":1}`, `"epoch" is required`),
		ret("ttl not allowed", `{"epoch":1,"ttl":"1s"}`, `unknown field "ttl"`),
		ret("demand not allowed", `{"epoch":1,"demand_per_sec":1}`, `unknown field "demand_per_sec"`),
		ret("spent string", `{"epoch":1,"spent":"1"}`, `"spent"`),
		ret("request_id number", `{"epoch":1,"request_id":5}`, `"request_id"`),
		{"return id big", "POST", "/v1/limits/a/leases/123456789012345678901/return", `{"epoch":1}`, 400, "lease id"},
	}
}

func TestLeaseBadInput(t *testing.T) {
	for _, tt := range leaseBadInputs() {
		t.Run(tt.name, func(t *testing.T) { tt.check(t) })
	}
}

func TestLeaseBodyTooLarge(t *testing.T) {
	big := `{"holder":"h","group":"g","request_id":"` + strings.Repeat("x", MaxBodyBytes) + `"}`
	for _, known := range []bool{true, false} {
		for _, r := range []struct{ method, path string }{
			{"PUT", "/v1/limits/a/lease-policy"},
			{"POST", "/v1/limits/a/lease"},
			{"POST", "/v1/limits/a/leases/1/renew"},
			{"POST", "/v1/limits/a/leases/1/return"},
		} {
			e, w := serveOversized(t, r.method, r.path, big, known)
			if w.Code != http.StatusRequestEntityTooLarge || e.store.Calls() != 0 {
				t.Errorf("%s known length %v: %d %s (%d store calls)", r.path, known, w.Code, w.Body, e.store.Calls())
			}
		}
	}
}

func TestLeaseMethodsAndPaths(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	expectNotAllowed(t, e, []methodCase{
		{"POST", "/v1/limits/a/lease-policy", "PUT"},
		{"GET", "/v1/limits/a/lease-policy", "PUT"},
		{"POST", "/v1/limits/a/leases", "GET, HEAD"},
		{"GET", "/v1/limits/a/lease", "POST"},
		{"PUT", "/v1/limits/a/leases/1/renew", "POST"},
		{"DELETE", "/v1/limits/a/leases/1/return", "POST"},
	})
	for _, p := range []string{"/v1/limits/a/leases/1", "/v1/limits/a/leases/1/extend", "/v1/limits/a/leases/1/renew/x",
		"/v1/limits/a/leases/", "/v1/limits/a/lease/1", "/v1/limits/a/lease-policy/x"} {
		w := e.do(t, "POST", p, "{}")
		decode(t, w)
		if w.Code != http.StatusNotFound {
			t.Errorf("POST %s: %d %s", p, w.Code, w.Body)
		}
	}
	if e.store.Calls() != 0 {
		t.Errorf("405s and unknown paths reached the store")
	}
}

func TestDecimalMilli(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"-0", 0, true}, {"0.000", 0, true}, {"0e5", 0, true}, {"-0.0e-7", 0, true},
		{"1", 1000, true}, {"1.5", 1500, true}, {"0.001", 1, true}, {"0.0004", 1, true}, {"0.0015", 2, true},
		{"2.0001", 2001, true}, {"1.5000", 1500, true}, {"1.50001", 1501, true}, {"12000", 12_000_000, true},
		{"1e3", 1_000_000, true}, {"1E+3", 1_000_000, true}, {"1.25e-1", 125, true}, {"1e-4", 1, true},
		{"1e-1000000000", 1, true}, {"1e9", 1e12, true}, {"1000000000", 1e12, true}, {"999999999.9999", 1e12, true},
		{"1000000000.0001", 0, false}, {"1e10", 0, false}, {"1e1000000000", 0, false}, {"1e99999999999999999999", 0, false},
		{"123456789012345678901234567890e-30", 124, true}, {"-1", 0, false}, {"-0.001", 0, false},
		{"", 0, false}, {"-", 0, false}, {"1e", 0, false}, {"e5", 0, false}, {"1.2.3", 0, false}, {"0x10", 0, false},
	} {
		got, ok := decimalMilli(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("decimalMilli(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzDecimalMilli compares decimalMilli with exact rational arithmetic on
// JSON numbers with moderate exponents.
func FuzzDecimalMilli(f *testing.F) {
	for _, s := range []string{"0", "1.5", "0.0004", "1e9", "-2", "123.456e-2", "999999999.9991", "7E+2", "1000000000.001"} {
		f.Add(s)
	}
	limit := new(big.Rat).SetInt64(fsm.MaxDemandMilliPermitsPerSec)
	f.Fuzz(func(t *testing.T, s string) {
		if !jsonNumber(s) {
			return
		}
		got, ok := decimalMilli(s)
		if i := strings.IndexAny(s, "eE"); i >= 0 && len(s)-i > 5 {
			return // keep big.Rat away from huge exponents
		}
		r, rok := new(big.Rat).SetString(s)
		if !rok {
			t.Fatalf("big.Rat rejects JSON number %q", s)
		}
		r.Mul(r, big.NewRat(1000, 1))
		if r.Sign() < 0 {
			if ok {
				t.Fatalf("%q is negative, got %d", s, got)
			}
			return
		}
		// ceil(r)
		q := new(big.Int).Quo(r.Num(), r.Denom())
		if new(big.Rat).SetInt(q).Cmp(r) != 0 {
			q.Add(q, big.NewInt(1))
		}
		want := new(big.Rat).SetInt(q)
		if want.Cmp(limit) > 0 {
			if ok {
				t.Fatalf("%q is out of range, got %d", s, got)
			}
			return
		}
		if !ok || got != q.Int64() {
			t.Fatalf("decimalMilli(%q) = %d, %v; want %v", s, got, ok, q)
		}
	})
}

// jsonNumber reports whether s is a JSON number literal.
func jsonNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i - j
	}
	start := i
	n := digits()
	if n == 0 || (n > 1 && s[start] == '0') {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}
