package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/api"
	"github.com/permitd/permitd/transport/server/fakestore"
)

// env is a handler over a fake store with metrics on a private registry.
type env struct {
	store   *fakestore.Store
	h       http.Handler
	reg     *prometheus.Registry
	metrics *Metrics
}

func newEnv(t testing.TB, opts HandlerOptions) *env {
	t.Helper()
	e := &env{store: fakestore.New(), reg: prometheus.NewRegistry()}
	e.metrics = NewMetrics(e.reg, e.store.Status)
	opts.Metrics = e.metrics
	e.h = NewHandler(e.store, opts)
	return e
}

// do sends one request and returns the recorded response.
func (e *env) do(t testing.TB, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, r)
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, req)
	return w
}

// mustPut creates a limit through the API.
func (e *env) mustPut(t testing.TB, name, body string) {
	t.Helper()
	if w := e.do(t, "PUT", "/v1/limits/"+name, body); w.Code != http.StatusCreated && w.Code != http.StatusOK {
		t.Fatalf("PUT %s: %d %s", name, w.Code, w.Body)
	}
}

// decode parses a JSON object response and checks the error convention:
// every non-2xx answer is {"error": "..."} with a non-empty message.
func decode(t testing.TB, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json (body %s)", ct, w.Body)
	}
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("response is not a JSON object: %v: %q", err, w.Body)
	}
	if w.Code >= 300 {
		if msg, _ := m["error"].(string); msg == "" {
			t.Fatalf("status %d without an error message: %s", w.Code, w.Body)
		}
	}
	return m
}

func TestLimitLifecycle(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	w := e.do(t, "PUT", "/v1/limits/api.token:1", `{"algorithm":"strict","rate":1,"per":"6s","max_reserved":2,"expiry":"500ms"}`)
	if w.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	m := decode(t, w)
	want := map[string]any{
		"name": "api.token:1", "algorithm": "strict", "rate": 1.0, "per": "6s", "version": 1.0,
		"max_reserved": 2.0, "expiry": "500ms", "interval_ns": 6e9, "created": true,
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("create: %s = %v, want %v (body %s)", k, m[k], v, w.Body)
		}
	}
	if _, ok := m["warmup"]; ok {
		t.Errorf("create: options of another algorithm present: %s", w.Body)
	}

	if w := e.do(t, "PUT", "/v1/limits/api.token:1", `{"algorithm":"strict","rate":2,"per":"6s"}`); w.Code != http.StatusOK {
		t.Fatalf("replace: %d %s", w.Code, w.Body)
	}
	e.mustPut(t, "b", `{"algorithm":"bursty","rate":10,"max_burst_seconds":2}`)
	e.mustPut(t, "c", `{"algorithm":"warmup","rate":10,"warmup":"10s","cold_factor":3}`)
	e.mustPut(t, "d", `{"algorithm":"hybrid","rate":10,"burst_ratio":1.5,"strictness":0.5}`)

	w = e.do(t, "GET", "/v1/limits/api.token:1", "")
	m = decode(t, w)
	for k, v := range map[string]any{"name": "api.token:1", "rate": 2.0, "version": 2.0, "granted_requests": 0.0,
		"granted_permits": 0.0, "refused_requests": 0.0, "interval_ns": 3e9, "per": "6s"} {
		if m[k] != v {
			t.Errorf("get: %s = %v, want %v (body %s)", k, m[k], v, w.Body)
		}
	}

	w = e.do(t, "GET", "/v1/limits", "")
	var list struct {
		Limits []map[string]any `json:"limits"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil || w.Code != 200 {
		t.Fatalf("list: %d %v %s", w.Code, err, w.Body)
	}
	var names []string
	for _, l := range list.Limits {
		names = append(names, l["name"].(string))
	}
	if got := strings.Join(names, ","); got != "api.token:1,b,c,d" {
		t.Errorf("list names %q", got)
	}
	if list.Limits[1]["max_burst_seconds"] != 2.0 || list.Limits[2]["warmup"] != "10s" || list.Limits[3]["burst_ratio"] != 1.5 {
		t.Errorf("list options: %s", w.Body)
	}

	w = e.do(t, "DELETE", "/v1/limits/b", "")
	if m := decode(t, w); w.Code != 200 || m["existed"] != true {
		t.Errorf("delete: %d %s", w.Code, w.Body)
	}
	// A second delete finds nothing: 404, as the node answers it.
	w = e.do(t, "DELETE", "/v1/limits/b", "")
	if m := decode(t, w); w.Code != http.StatusNotFound || !strings.Contains(m["error"].(string), `limit "b" not found`) {
		t.Errorf("second delete: %d %s", w.Code, w.Body)
	}
	if w := e.do(t, "GET", "/v1/limits/b", ""); w.Code != http.StatusNotFound {
		t.Errorf("get deleted: %d %s", w.Code, w.Body)
	} else {
		decode(t, w)
	}
}

func TestEmptyListIsArray(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	w := e.do(t, "GET", "/v1/limits", "")
	if got := strings.TrimSpace(w.Body.String()); got != `{"limits":[]}` {
		t.Errorf("empty list: %s", got)
	}
}

func TestReserve(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	e.mustPut(t, "a", `{"algorithm":"strict","rate":1,"per":"1500ms","max_reserved":3}`)

	// Empty body: one permit, no waiting.
	w := e.do(t, "POST", "/v1/limits/a/reserve", "")
	if got := strings.TrimSpace(w.Body.String()); w.Code != 200 || got != `{"granted":true,"wait_ns":0,"expires_in_ns":750000000,"spacing_ns":1500000000,"duplicate":false}` {
		t.Fatalf("first reserve: %d %s", w.Code, got)
	}
	// The next permit is 1.5s away; max_wait 0 refuses.
	w = e.do(t, "POST", "/v1/limits/a/reserve", `{"permits":1}`)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("refused reserve: %d %s", w.Code, w.Body)
	}
	m := decode(t, w)
	if m["granted"] != false || m["retry_after_ns"] != 1.5e9 {
		t.Errorf("refused body: %s", w.Body)
	}
	if ra := w.Header().Get("Retry-After"); ra != "2" {
		t.Errorf("Retry-After %q, want 2 (1.5s rounded up)", ra)
	}
	// Waiting up to 2s is granted with wait 1.5s.
	w = e.do(t, "POST", "/v1/limits/a/reserve", `{"permits":1,"max_wait":"2s","request_id":"abc-1"}`)
	if m := decode(t, w); w.Code != 200 || m["wait_ns"] != 1.5e9 || m["duplicate"] != false {
		t.Fatalf("waiting reserve: %d %s", w.Code, w.Body)
	}
	// The same request id is answered from the register, nothing reserved.
	w = e.do(t, "POST", "/v1/limits/a/reserve", `{"max_wait":"2s","request_id":"abc-1","permits":1}`)
	if m := decode(t, w); w.Code != 200 || m["duplicate"] != true {
		t.Fatalf("duplicate reserve: %d %s", w.Code, w.Body)
	}
	// A session: POST /v1/sessions, then reserves numbered by seq; a retry
	// of a seq is answered from the register.
	// (The register numbers a session by its log index.)
	w = e.do(t, "POST", "/v1/sessions", "")
	m = decode(t, w)
	sid, _ := m["session"].(float64)
	if w.Code != http.StatusCreated || sid < 1 || m["idle_ttl_ns"] != float64(fsm.SessionIdleNanos) {
		t.Fatalf("open session: %d %s", w.Code, w.Body)
	}
	w = e.do(t, "POST", "/v1/limits/a/reserve", fmt.Sprintf(`{"max_wait":"5s","session":%d,"seq":1}`, int(sid)))
	if m := decode(t, w); w.Code != 200 || m["duplicate"] != false {
		t.Fatalf("session reserve: %d %s", w.Code, w.Body)
	}
	w = e.do(t, "POST", "/v1/limits/a/reserve", fmt.Sprintf(`{"max_wait":"5s","session":%d,"seq":1,"acked_below":1}`, int(sid)))
	if m := decode(t, w); w.Code != 200 || m["duplicate"] != true {
		t.Fatalf("session retry: %d %s", w.Code, w.Body)
	}
	w = e.do(t, "POST", "/v1/limits/a/reserve", `{"session":7,"seq":1}`)
	if m := decode(t, w); w.Code != http.StatusGone || m["session_expired"] != true {
		t.Fatalf("reserve of an unknown session: %d %s", w.Code, w.Body)
	}
	got := e.store.Reserves()
	want := []fsm.Reserve{
		{Limit: "a", Permits: 1},
		{Limit: "a", Permits: 1},
		{Limit: "a", Permits: 1, MaxWaitNanos: 2e9, RequestID: "abc-1"},
		{Limit: "a", Permits: 1, MaxWaitNanos: 2e9, RequestID: "abc-1"},
		{Limit: "a", Permits: 1, MaxWaitNanos: 5e9, Session: fsm.SessionRef{ID: uint64(sid), Seq: 1, AckedBelow: 1}},
		{Limit: "a", Permits: 1, MaxWaitNanos: 5e9, Session: fsm.SessionRef{ID: uint64(sid), Seq: 1, AckedBelow: 1}},
		{Limit: "a", Permits: 1, Session: fsm.SessionRef{ID: 7, Seq: 1, AckedBelow: 1}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reserves reaching the store:\n got %v\nwant %v", got, want)
	}
}

func TestReserveStoreOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		res      fsm.ReserveResult
		err      error
		wantCode int
		wantMsg  string
		// wantRetryAfter: the exact Retry-After, if the case promises one.
		wantRetryAfter string
	}{
		{"not found error", fsm.ReserveResult{}, fmt.Errorf("x: %w", node.ErrNotFound), 404, "not found", ""},
		{"invalid error", fsm.ReserveResult{}, fmt.Errorf("%w: 9 permits exceed 5", node.ErrInvalid), 400, "9 permits exceed 5", ""},
		{"no leader", fsm.ReserveResult{}, node.ErrNoLeader, 503, "no leader", ""},
		{"shutdown", fsm.ReserveResult{}, node.ErrShutdown, 503, "shut down", ""},
		{"deadline", fsm.ReserveResult{}, context.DeadlineExceeded, 503, "timed out", ""},
		{"unexpected error", fsm.ReserveResult{}, errors.New("disk on fire"), 503, "disk on fire", ""},
		{"unknown limit status", fsm.ReserveResult{Status: fsm.UnknownLimit}, nil, 404, "not found", ""},
		{"invalid status", fsm.ReserveResult{Status: fsm.Invalid, Detail: "more than MaxPermits"}, nil, 400, "more than MaxPermits", ""},
		{"bogus status", fsm.ReserveResult{Status: 99}, nil, 503, "unexpected", ""},
		{"granted with expiry", fsm.ReserveResult{Status: fsm.Granted, WaitNanos: 7, ExpiresInNanos: 9, Duplicate: true}, nil, 200, "", ""},
		// The text rounds the retry up to 3 significant digits (the exact
		// value is retry_after_ns).
		{"refused", fsm.ReserveResult{Status: fsm.Refused, RetryAfterNanos: 58990199804}, nil, 429, "; retry after 59s", ""},
		{"busy", fsm.ReserveResult{Status: fsm.Busy, RetryAfterNanos: 1991837074}, nil, 503, "retry after 2s, or use a session", ""},
		// README: a node at its bound answers 503 with Retry-After: 1 and
		// "overloaded" in its error (permitd bench counts sheds by it).
		{"overloaded", fsm.ReserveResult{}, fmt.Errorf("node: x: %w", node.ErrOverloaded), 503, "overloaded", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, HandlerOptions{})
			e.store.SetReserveFunc(func(context.Context, fsm.Reserve) (fsm.ReserveResult, error) { return tt.res, tt.err })
			w := e.do(t, "POST", "/v1/limits/a/reserve", `{"permits":9}`)
			m := decode(t, w)
			if w.Code != tt.wantCode {
				t.Fatalf("code %d, want %d: %s", w.Code, tt.wantCode, w.Body)
			}
			if msg, _ := m["error"].(string); !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("error %q does not mention %q", msg, tt.wantMsg)
			}
			if tt.wantCode == 200 && (m["wait_ns"] != 7.0 || m["expires_in_ns"] != 9.0 || m["duplicate"] != true) {
				t.Errorf("granted body %s", w.Body)
			}
			if tt.wantCode == 503 && w.Header().Get("Retry-After") == "" {
				t.Errorf("503 without Retry-After")
			}
			if tt.wantRetryAfter != "" && w.Header().Get("Retry-After") != tt.wantRetryAfter {
				t.Errorf("Retry-After %q, want %s", w.Header().Get("Retry-After"), tt.wantRetryAfter)
			}
		})
	}
}

// TestRequestTimeout: a store that blocks until the request's context ends
// is answered 503 once RequestTimeout passes.
func TestRequestTimeout(t *testing.T) {
	e := newEnv(t, HandlerOptions{RequestTimeout: time.Millisecond})
	e.store.SetReserveFunc(func(ctx context.Context, _ fsm.Reserve) (fsm.ReserveResult, error) {
		<-ctx.Done()
		return fsm.ReserveResult{}, ctx.Err()
	})
	w := e.do(t, "POST", "/v1/limits/a/reserve", "")
	if m := decode(t, w); w.Code != 503 || !strings.Contains(m["error"].(string), "timed out") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

func TestStoreErrorsOnOtherEndpoints(t *testing.T) {
	for _, tt := range []struct {
		err  error
		code int
	}{
		{node.ErrNoLeader, 503},
		{fmt.Errorf("%w: nope", node.ErrInvalid), 400},
		{fmt.Errorf("%w: x", node.ErrNotFound), 404},
	} {
		e := newEnv(t, HandlerOptions{})
		e.store.SetErr(tt.err)
		for _, r := range []struct{ method, path, body string }{
			{"PUT", "/v1/limits/a", `{"algorithm":"strict","rate":1}`},
			{"GET", "/v1/limits/a", ""},
			{"GET", "/v1/limits", ""},
			{"DELETE", "/v1/limits/a", ""},
			{"POST", "/v1/cluster/join", `{"id":"n2","raft_addr":"10.0.0.2:7000"}`},
			{"DELETE", "/v1/cluster/servers/n2", ""},
		} {
			w := e.do(t, r.method, r.path, r.body)
			decode(t, w)
			if w.Code != tt.code {
				t.Errorf("%v: %s %s: %d, want %d: %s", tt.err, r.method, r.path, w.Code, tt.code, w.Body)
			}
		}
	}
}

// TestNoLeaderKnownNamesTheCause: a node that waited for a leader in vain
// (node.leaderAddr's error) answers 503 saying the cluster has no leader,
// suggesting a lost quorum and permitd status, without the raw context
// error; another no-leader failure keeps its own text.
func TestNoLeaderKnownNamesTheCause(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	e.store.SetErr(fmt.Errorf("%w: no leader known: %v", node.ErrNoLeader, context.DeadlineExceeded))
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/limits", ""},
		{"POST", "/v1/limits/a/reserve", ""},
	} {
		w := e.do(t, r.method, r.path, r.body)
		msg, _ := decode(t, w)["error"].(string)
		if w.Code != 503 || !strings.Contains(msg, "the cluster has no leader (no quorum? `permitd status`") || strings.Contains(msg, "deadline") {
			t.Errorf("%s %s: %d %q, want 503 naming the missing leader and permitd status", r.method, r.path, w.Code, msg)
		}
	}
	e.store.SetErr(fmt.Errorf("%w: this node is not the leader", node.ErrNoLeader))
	w := e.do(t, "GET", "/v1/limits", "")
	if msg, _ := decode(t, w)["error"].(string); !strings.Contains(msg, "no leader reachable (this node is not the leader)") {
		t.Errorf("another no-leader failure: %q", msg)
	}
}

// badInput is one request that must be rejected before reaching the store.
type badInput struct {
	name, method, path, body string
	code                     int
	mention                  string // the error must contain this
}

var longName = strings.Repeat("x", 129)

func badInputs() []badInput {
	const strict = `"algorithm":"strict","rate":1`
	put := func(name, body, mention string) badInput {
		return badInput{name, "PUT", "/v1/limits/a", body, 400, mention}
	}
	res := func(name, body, mention string) badInput {
		return badInput{"reserve " + name, "POST", "/v1/limits/a/reserve", body, 400, mention}
	}
	return []badInput{
		put("malformed", `{"algorithm" "strict"}`, "malformed JSON"),
		put("truncated", `{"algorithm":"strict","rate":`, "truncated"),
		put("truncated string", `{"algorithm":"str`, "truncated"),
		put("unknown field", `{`+strict+`,"burst":1}`, `unknown field "burst"`),
		put("wrong type rate", `{"algorithm":"strict","rate":"1"}`, `"rate"`),
		put("rate NaN string", `{"algorithm":"strict","rate":"NaN"}`, `"rate"`),
		put("rate Inf string", `{"algorithm":"strict","rate":"+Inf"}`, `"rate"`),
		put("rate overflow", `{"algorithm":"strict","rate":1e400}`, `"rate"`),
		put("rate zero", `{"algorithm":"strict","rate":0}`, `"rate"`),
		put("rate negative", `{"algorithm":"strict","rate":-2}`, `"rate"`),
		put("rate missing", `{"algorithm":"strict"}`, `"rate" is required`),
		put("algorithm missing", `{"rate":1}`, `"algorithm" is required`),
		put("algorithm unknown", `{"algorithm":"leaky","rate":1}`, "strict, bursty, warmup, hybrid"),
		put("algorithm wrong type", `{"algorithm":1,"rate":1}`, `"algorithm"`),
		put("trailing object", `{`+strict+`} {}`, "after the JSON object"),
		put("trailing garbage", `{`+strict+`}x`, "after the JSON object"),
		put("array", `[1]`, "JSON object"),
		put("null body", `null`, "JSON object"),
		put("string body", `"strict"`, "JSON object"),
		put("empty body", ``, "empty"),
		put("per unparsable", `{`+strict+`,"per":"soon"}`, "not a duration"),
		put("per negative", `{`+strict+`,"per":"-1s"}`, `"per"`),
		put("per zero", `{`+strict+`,"per":"0s"}`, `"per"`),
		put("per number", `{`+strict+`,"per":1}`, `"per"`),
		put("expiry negative", `{`+strict+`,"expiry":"-5ms"}`, `"expiry"`),
		put("max_reserved negative", `{`+strict+`,"max_reserved":-1}`, `"max_reserved"`),
		put("max_reserved fraction", `{`+strict+`,"max_reserved":1.5}`, `"max_reserved"`),
		put("null option", `{`+strict+`,"expiry":null}`, `"expiry"`),
		put("strict with warmup zero", `{`+strict+`,"warmup":"0s"}`, `belongs to algorithm "warmup"`),
		put("strict with burst_ratio", `{`+strict+`,"burst_ratio":0}`, `belongs to algorithm "hybrid"`),
		put("bursty with max_reserved", `{"algorithm":"bursty","rate":1,"max_reserved":0}`, `belongs to algorithm "strict"`),
		put("warmup with max_burst_seconds", `{"algorithm":"warmup","rate":1,"warmup":"1s","max_burst_seconds":0}`, `belongs to algorithm "bursty"`),
		put("hybrid with cold_factor", `{"algorithm":"hybrid","rate":1,"cold_factor":3}`, `belongs to algorithm "warmup"`),
		put("warmup negative", `{"algorithm":"warmup","rate":1,"warmup":"-1s"}`, `"warmup"`),
		put("warmup missing (compile)", `{"algorithm":"warmup","rate":1}`, "warmup"),
		put("warmup too long to compute", `{"algorithm":"warmup","rate":1,"warmup":"2000000h"}`, "194 years"),
		put("rate too low for an int64 interval", `{"algorithm":"strict","rate":1e-10}`, "must be at most"),
		put("max_burst_seconds negative", `{"algorithm":"bursty","rate":1,"max_burst_seconds":-1}`, `"max_burst_seconds"`),
		{"name with space", "PUT", "/v1/limits/a%20b", `{` + strict + `}`, 400, "not allowed"},
		{"name with slash", "PUT", "/v1/limits/a%2Fb", `{` + strict + `}`, 400, "not allowed"},
		{"name unicode", "PUT", "/v1/limits/%C3%A9", `{` + strict + `}`, 400, "not allowed"},
		{"name too long", "PUT", "/v1/limits/" + longName, `{` + strict + `}`, 400, "129 bytes"},
		{"name empty", "PUT", "/v1/limits/", `{` + strict + `}`, 400, "empty"},
		{"get bad name", "GET", "/v1/limits/a*b", "", 400, "not allowed"},
		{"delete bad name", "DELETE", "/v1/limits/" + longName, "", 400, "129 bytes"},
		{"delete with body", "DELETE", "/v1/limits/a", `{"force":true}`, 400, "unknown field"},
		{"delete with an unknown query", "DELETE", "/v1/limits/a?purge=1", "", 400, `query parameter "purge"`},
		{"delete with a bad force", "DELETE", "/v1/limits/a?force=yes", "", 400, "force="},

		res("permits zero", `{"permits":0}`, `"permits"`),
		res("permits negative", `{"permits":-3}`, `"permits"`),
		res("permits fraction", `{"permits":1.5}`, `"permits"`),
		res("permits exponent", `{"permits":1e3}`, `"permits"`),
		res("permits string", `{"permits":"1"}`, `"permits"`),
		res("permits overflow", `{"permits":99999999999999999999}`, `"permits"`),
		res("permits null", `{"permits":null}`, `"permits"`),
		res("max_wait unparsable", `{"max_wait":"forever"}`, "not a duration"),
		res("max_wait negative", `{"max_wait":"-1s"}`, `"max_wait"`),
		res("max_wait number", `{"max_wait":5}`, `"max_wait"`),
		res("max_wait empty", `{"max_wait":""}`, `"max_wait"`),
		res("request_id too long", `{"request_id":"`+strings.Repeat("r", 65)+`"}`, "65 bytes"),
		res("request_id bad char", `{"request_id":"a b"}`, "not allowed"),
		res("request_id empty", `{"request_id":""}`, "empty"),
		res("request_id number", `{"request_id":7}`, `"request_id"`),
		res("session without seq", `{"session":3}`, `"seq"`),
		res("session zero", `{"session":0,"seq":1}`, `"session"`),
		res("session negative", `{"session":-1,"seq":1}`, `"session"`),
		res("session with request_id", `{"session":3,"seq":1,"request_id":"x"}`, `"request_id"`),
		res("seq without session", `{"seq":1}`, `"session"`),
		res("acked_below above seq", `{"session":3,"seq":2,"acked_below":3}`, `"acked_below"`),
		res("acked_below zero", `{"session":3,"seq":2,"acked_below":0}`, `"acked_below"`),
		res("session string", `{"session":"3","seq":1}`, `"session"`),
		{"sessions with a field", "POST", "/v1/sessions", `{"ttl":"1h"}`, 400, "no fields"},
		res("unknown field", `{"permits":1,"limit":"a"}`, `unknown field "limit"`),
		res("duplicate-ish unknown case", `{"Permits":1,"priority":2}`, `unknown field "priority"`),
		res("truncated", `{"permits":1`, "truncated"),
		res("malformed", `{"permits":1,}`, "malformed"),
		res("trailing", `{"permits":1}{"permits":1}`, "after the JSON object"),
		res("array", `[]`, "JSON object"),
		{"reserve bad name", "POST", "/v1/limits/a%3Bb/reserve", `{}`, 400, "not allowed"},

		{"join missing addr", "POST", "/v1/cluster/join", `{"id":"n2"}`, 400, "required"},
		{"join bad addr", "POST", "/v1/cluster/join", `{"id":"n2","raft_addr":"nohost"}`, 400, "raft_addr"},
		{"join port zero", "POST", "/v1/cluster/join", `{"id":"n2","raft_addr":"h:0"}`, 400, "raft_addr"},
		{"join port big", "POST", "/v1/cluster/join", `{"id":"n2","raft_addr":"h:70000"}`, 400, "raft_addr"},
		{"join empty host", "POST", "/v1/cluster/join", `{"id":"n2","raft_addr":":7000"}`, 400, "raft_addr"},
		{"join bad id", "POST", "/v1/cluster/join", `{"id":"n 2","raft_addr":"h:7000"}`, 400, "not allowed"},
		{"join unknown field", "POST", "/v1/cluster/join", `{"id":"n2","raft_addr":"h:7000","voter":false}`, 400, "unknown field"},
		{"remove bad id", "DELETE", "/v1/cluster/servers/" + longName, "", 400, "129 bytes"},
	}
}

func TestBadInput(t *testing.T) {
	for _, tt := range badInputs() {
		t.Run(tt.name, func(t *testing.T) {
			msg := tt.check(t)
			for _, pkg := range []string{"bucket: ", "fsm: ", "node: ", "transport: "} {
				if strings.Contains(msg, pkg) {
					t.Errorf("error %q names a Go package (%q)", msg, pkg)
				}
			}
		})
	}
}

// check serves tt to a new env and checks the answer: tt.code, an error
// that mentions tt.mention, and no call of the store; it returns the
// error.
func (tt badInput) check(t *testing.T) (msg string) {
	t.Helper()
	e := newEnv(t, HandlerOptions{})
	w := e.do(t, tt.method, tt.path, tt.body)
	m := decode(t, w)
	if w.Code != tt.code {
		t.Fatalf("code %d, want %d: %s", w.Code, tt.code, w.Body)
	}
	msg = m["error"].(string)
	if !strings.Contains(msg, tt.mention) {
		t.Errorf("error %q does not mention %q", msg, tt.mention)
	}
	if n := e.store.Calls(); n != 0 {
		t.Errorf("bad input reached the store (%d calls)", n)
	}
	return msg
}

func TestBodyTooLarge(t *testing.T) {
	big := `{"permits":1,"request_id":"` + strings.Repeat("x", MaxBodyBytes) + `"}`
	for _, known := range []bool{true, false} {
		for _, path := range []string{"/v1/limits/a/reserve", "/v1/limits/a", "/v1/cluster/join"} {
			method := "POST"
			if path == "/v1/limits/a" {
				method = "PUT"
			}
			e, w := serveOversized(t, method, path, big, known)
			if w.Code != http.StatusRequestEntityTooLarge {
				t.Errorf("%s known length %v: %d %s", path, known, w.Code, w.Body)
			}
			if e.store.Calls() != 0 {
				t.Errorf("oversized body reached the store")
			}
		}
	}
}

// serveOversized serves method path with the body big to a new env, its
// length known or not (then read until MaxBytesReader stops it), and
// decodes the answer's error body.
func serveOversized(t *testing.T, method, path, big string, known bool) (*env, *httptest.ResponseRecorder) {
	t.Helper()
	e := newEnv(t, HandlerOptions{})
	req := httptest.NewRequest(method, path, strings.NewReader(big))
	if !known {
		req.ContentLength = -1 // read until MaxBytesReader stops it
		req.Body = io.NopCloser(strings.NewReader(big))
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, req)
	decode(t, w)
	return e, w
}

func TestMethodNotAllowed(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	expectNotAllowed(t, e, []methodCase{
		{"POST", "/v1/limits/a", "GET, HEAD, PUT, DELETE"},
		{"PATCH", "/v1/limits/a", "GET, HEAD, PUT, DELETE"},
		{"GET", "/v1/limits/a/reserve", "POST"},
		{"PUT", "/v1/limits", "GET, HEAD"},
		{"DELETE", "/v1/status", "GET, HEAD"},
		{"GET", "/v1/cluster/join", "POST"},
		{"GET", "/v1/cluster/servers/n1", "DELETE"},
		{"POST", "/healthz", "GET, HEAD"},
		{"POST", "/readyz", "GET, HEAD"},
		{"POST", "/metrics", "GET, HEAD"},
		{"POST", "/v1/cluster", "GET, HEAD"},
	})
	if e.store.Calls() != 0 {
		t.Errorf("405s reached the store")
	}
}

// methodCase is a request whose path does not serve its method, and the
// Allow header its 405 must carry.
type methodCase struct{ method, path, allow string }

// expectNotAllowed sends each case and checks that it is answered 405
// with its Allow header and an error body.
func expectNotAllowed(t *testing.T, e *env, cases []methodCase) {
	t.Helper()
	for _, tt := range cases {
		w := e.do(t, tt.method, tt.path, "")
		decode(t, w)
		if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != tt.allow {
			t.Errorf("%s %s: %d Allow %q, want 405 Allow %q", tt.method, tt.path, w.Code, w.Header().Get("Allow"), tt.allow)
		}
	}
}

func TestUnknownPath(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	for _, p := range []string{"/", "/v2/limits", "/v1/limits/a/release", "/v1/limits/a/reserve/x", "/v1/cluster/servers/a/b", "/metricsx", "/v1"} {
		w := e.do(t, "GET", p, "")
		decode(t, w)
		if w.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d %s", p, w.Code, w.Body)
		}
	}
}

func TestStatusHealthReady(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	st := api.Status{ID: "n2", State: "follower", LeaderID: "n1", Term: 7, AppliedIndex: 40, CommitIndex: 41, Ready: true,
		Servers: []api.Server{{ID: "n1", RaftAddr: "h1:7000", Voter: true, Leader: true}, {ID: "n2", RaftAddr: "h2:7000", Voter: true}}}
	e.store.SetStatus(st)

	w := e.do(t, "GET", "/v1/status", "")
	var got api.Status
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 200 {
		t.Fatalf("status: %d %v %s", w.Code, err, w.Body)
	}
	if fmt.Sprint(got) != fmt.Sprint(st) {
		t.Errorf("status %+v, want %+v", got, st)
	}
	m := decode(t, w)
	for _, k := range []string{"id", "state", "leader_id", "term", "applied_index"} {
		if _, ok := m[k]; !ok {
			t.Errorf("status lacks %q: %s", k, w.Body)
		}
	}

	w = e.do(t, "GET", "/v1/cluster", "")
	var cl struct {
		LeaderID string       `json:"leader_id"`
		Servers  []api.Server `json:"servers"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &cl); err != nil || cl.LeaderID != "n1" || len(cl.Servers) != 2 {
		t.Errorf("cluster: %v %s", err, w.Body)
	}

	if w := e.do(t, "GET", "/healthz", ""); w.Code != 200 {
		t.Errorf("healthz %d", w.Code)
	}
	if w := e.do(t, "GET", "/readyz", ""); w.Code != 200 {
		t.Errorf("readyz when ready: %d", w.Code)
	}
	st.Ready, st.LeaderID = false, ""
	e.store.SetStatus(st)
	w = e.do(t, "GET", "/readyz", "")
	if m := decode(t, w); w.Code != 503 || !strings.Contains(m["error"].(string), "no leader") {
		t.Errorf("readyz without leader: %d %s", w.Code, w.Body)
	}
	if w := e.do(t, "GET", "/healthz", ""); w.Code != 200 {
		t.Errorf("healthz without leader %d", w.Code)
	}
}

func TestJoinRemove(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	w := e.do(t, "POST", "/v1/cluster/join", `{"id":"n2","raft_addr":"[::1]:7001"}`)
	if m := decode(t, w); w.Code != 200 || m["joined"] != true {
		t.Fatalf("join: %d %s", w.Code, w.Body)
	}
	if n := len(e.store.Status().Servers); n != 2 {
		t.Fatalf("servers after join: %d", n)
	}
	w = e.do(t, "POST", "/v1/cluster/join", `{"id":"n2","raft_addr":"other:7001"}`)
	if decode(t, w); w.Code != 400 {
		t.Errorf("conflicting join: %d %s", w.Code, w.Body)
	}
	w = e.do(t, "DELETE", "/v1/cluster/servers/n2", "")
	if m := decode(t, w); w.Code != 200 || m["removed"] != true {
		t.Fatalf("remove: %d %s", w.Code, w.Body)
	}
	if n := len(e.store.Status().Servers); n != 1 {
		t.Fatalf("servers after remove: %d", n)
	}
}

func TestNoMetrics(t *testing.T) {
	h := NewHandler(fakestore.New(), HandlerOptions{})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != 404 {
		t.Errorf("/metrics without metrics: %d", w.Code)
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", "/v1/limits/a/reserve", nil))
	if w.Code != 404 {
		t.Errorf("reserve on unknown limit without metrics: %d %s", w.Code, w.Body)
	}
}

func TestNewServerTimeouts(t *testing.T) {
	s := NewHTTPServer(":0", http.NotFoundHandler())
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 || s.MaxHeaderBytes <= 0 {
		t.Errorf("server without timeouts: %+v", s)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for _, tt := range []struct{ nanos, want int64 }{
		{-5, 0}, {0, 0}, {1, 1}, {1e9, 1}, {1e9 + 1, 2}, {1.5e9, 2}, {60e9, 60},
	} {
		if got := api.RetryAfterSeconds(tt.nanos); got != tt.want {
			t.Errorf("api.RetryAfterSeconds(%d) = %d, want %d", tt.nanos, got, tt.want)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uo\te`, "ctl\x00\x1f\n", "bad\xffutf8", "é ✓ \u2028", "<a&b>"} {
		b := api.AppendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("%q encodes to invalid JSON %s: %v", s, b, err)
			continue
		}
		want := strings.ToValidUTF8(s, "\uFFFD")
		if got != want {
			t.Errorf("%q round-trips to %q", s, got)
		}
	}
}
