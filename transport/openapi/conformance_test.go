package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/node/faultnet"
	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/openapi"
	"github.com/permitd/permitd/transport/server"
	"github.com/permitd/permitd/transport/server/fakestore"
)

// conformance_test.go drives a real register, three raft nodes in the
// process on an in-memory network plus a fourth that belongs to no cluster
// (it never knows a leader, so everything it forwards is answered 503),
// each served by server.NewHandler behind server.RequireTokens over
// httptest, through every operation of the document, and validates every
// request and every answer against the document with kin-openapi.

// Tokens, one per role; the narrow client may use only limits "api*".
const (
	tokAdmin  = "root"
	tokClient = "app"
	tokNarrow = "narrow"
	tokWorker = "w1"
)

// roleToken is the least privileged token each x-permitd-role is
// documented to accept. The successes of the test use it, so that a role
// documented lower than the server requires fails with 403; the token
// checks compare the role each 401 and 403 names with the document's.
var roleToken = map[string]string{
	"any": tokNarrow, "read": tokWorker, "read-all": tokWorker, "client": tokClient,
	"client-any-limit": tokNarrow, "worker": tokWorker, "admin": tokAdmin,
}

// The status page's files are text: kin-openapi validates them as the
// strings the document says they are.
func init() {
	for _, ct := range []string{"text/html", "text/javascript", "text/css"} {
		openapi3filter.RegisterBodyDecoder(ct, openapi3filter.PlainBodyDecoder)
	}
}

// roleRefused is a token each role refuses (for the limit "other").
var roleRefused = map[string]string{
	"read": tokNarrow, "read-all": tokNarrow, "client": tokWorker, "client-any-limit": tokWorker,
	"worker": tokClient, "admin": tokClient,
}

type testNode struct {
	id  string
	n   *node.Node
	srv *httptest.Server
	reg *prometheus.Registry // nil: metrics off
}

// register is the cluster under test.
type register struct {
	sw     *faultnet.Switch
	nodes  []*testNode // n1..n3, the cluster
	lonely *testNode   // n4: no cluster until it is joined
}

func newTokens(t *testing.T) (*auth.TokenStore, map[string]string) {
	t.Helper()
	store, secrets, err := auth.NewTokenStoreOf(
		auth.Spec{Name: tokAdmin, Role: auth.RoleAdmin}, auth.Spec{Name: tokClient, Role: auth.RoleClient},
		auth.Spec{Name: tokNarrow, Role: auth.RoleClient, Limits: []string{"api*"}}, auth.Spec{Name: tokWorker, Role: auth.RoleWorker})
	if err != nil {
		t.Fatal(err)
	}
	return store, secrets
}

func startRegister(t *testing.T, tokens *auth.TokenStore) *register {
	t.Helper()
	r := &register{sw: faultnet.New()}
	logger := hclog.New(&hclog.LoggerOptions{Name: "register", Level: hclog.Off, Output: io.Discard})
	addr := func(id string) string { return id + ":7000" }
	var servers []raft.Server
	for _, id := range []string{"n1", "n2", "n3"} {
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(addr(id)), Suffrage: raft.Voter})
	}
	start := func(id string, initial []raft.Server, metrics bool, opts server.HandlerOptions, leaderWait time.Duration) *testNode {
		n, err := node.New(node.Config{
			ID: id, DataDir: t.TempDir(), RaftAddr: addr(id), InitialCluster: initial,
			Network: r.sw.Host(addr(id)), Logger: logger,
			// Generous for a loaded 2-core machine under -race: a
			// spurious election would only slow the test down.
			HeartbeatTimeout: time.Second, ElectionTimeout: time.Second,
			LeaderLeaseTimeout: 500 * time.Millisecond, ApplyTimeout: 3 * time.Second,
			LeaderWait: leaderWait,
		})
		if err != nil {
			t.Fatalf("start node %s: %v", id, err)
		}
		tn := &testNode{id: id, n: n}
		if metrics {
			tn.reg = prometheus.NewRegistry()
			opts.Metrics = server.NewMetrics(tn.reg, n.Status)
		}
		tn.srv = httptest.NewServer(server.RequireTokens(server.NewHandler(n, opts), tokens))
		n.SetHTTPAddr(strings.TrimPrefix(tn.srv.URL, "http://")) // every server of /v1/cluster and /v1/status then has its http_addr
		t.Cleanup(func() {
			tn.srv.Close()
			n.Kill()
		})
		return tn
	}
	for _, s := range servers {
		r.nodes = append(r.nodes, start(string(s.ID), servers, true, server.HandlerOptions{}, 0))
	}
	// n4 serves without metrics (/metrics answers 404) and gives up
	// quickly on the leader it will not find.
	r.lonely = start("n4", nil, false, server.HandlerOptions{RequestTimeout: 300 * time.Millisecond}, 100*time.Millisecond)
	r.waitReady(t)
	return r
}

// waitReady waits until the three nodes are ready under one leader.
func (r *register) waitReady(t *testing.T) {
	t.Helper()
	waitFor(t, 20*time.Second, "a ready 3-node cluster", func() bool {
		for _, tn := range r.nodes {
			if st := tn.n.Status(); !st.Ready || st.LeaderID == "" {
				return false
			}
		}
		return true
	})
}

// leader returns the leader and a follower.
func (r *register) leader(t *testing.T) (leader, follower *testNode) {
	t.Helper()
	waitFor(t, 10*time.Second, "a ready leader", func() bool {
		leader, follower = nil, nil
		for _, tn := range r.nodes {
			st := tn.n.Status()
			switch {
			case st.State == "leader" && st.Ready:
				leader = tn
			case st.State == "follower":
				follower = tn
			}
		}
		return leader != nil && follower != nil
	})
	return leader, follower
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checker sends requests and validates them and their answers against the
// document, recording which statuses of which operations were seen, and
// which of the schemas documented for each status each answer matched.
type checker struct {
	doc     *openapi3.T
	router  routers.Router
	secrets map[string]string
	api     *testNode // where requests go by default

	mu   sync.Mutex
	seen map[string]map[int]bool // "METHOD /path" → statuses answered
	// matched: "METHOD /path STATUS" → the answer schemas (see
	// answerSchemas) answers matched.
	matched map[string]map[string]bool
}

// answerSchemas returns the schemas an answer of op with status code may
// match, by name: each alternative of the JSON body's schema when it is a
// oneOf or anyOf (named by its $ref, such as ReserveBusy), else the
// schema itself; none for an answer without a JSON body. Every one of
// them must be matched by some answer of the test, so that an answer the
// document describes but the test never produces (a hand-written body,
// an algorithm's variant) cannot drift unseen.
func answerSchemas(op *openapi3.Operation, code int) map[string]*openapi3.Schema {
	r := op.Responses.Status(code)
	if r == nil || r.Value == nil {
		return nil
	}
	mt := r.Value.Content.Get("application/json")
	if mt == nil || mt.Schema == nil {
		return nil
	}
	name := func(s *openapi3.SchemaRef, fallback string) string {
		if i := strings.LastIndexByte(s.Ref, '/'); i >= 0 {
			return s.Ref[i+1:]
		}
		return fallback
	}
	alts := mt.Schema.Value.OneOf
	if len(alts) == 0 {
		alts = mt.Schema.Value.AnyOf
	}
	if len(alts) == 0 {
		return map[string]*openapi3.Schema{name(mt.Schema, "the body"): mt.Schema.Value}
	}
	out := map[string]*openapi3.Schema{}
	for i, a := range alts {
		out[name(a, "alternative "+strconv.Itoa(i))] = a.Value
	}
	return out
}

// call is one request and what it must get.
type call struct {
	to     *testNode // default: checker.api
	method string
	path   string // concrete, with any query
	body   string
	big    bool   // a body of MaxBodyBytes+1 bytes instead
	token  string // a token name; "": the least privileged one the operation's role accepts; "-": none
	auth   string // a raw Authorization header value instead
	want   int
	// invalid: the document must reject the request (otherwise it must
	// accept it: what the document rejects the server rejects too, and
	// the server may reject more, from its state or a rule the document
	// cannot express).
	invalid     bool
	wantInError string
}

var bearer = openapi3filter.Options{
	AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
		h := in.RequestValidationInput.Request.Header.Get("Authorization")
		if s, ok := strings.CutPrefix(h, "Bearer "); !ok || s == "" {
			return errors.New("no bearer token")
		}
		return nil
	},
	RejectWhenRequestBodyNotSpecified: true,
	SkipSettingDefaults:               true,
	MultiError:                        true,
}

// do sends c, checks its status and validates request and answer. It
// returns the answer's JSON object (nil for other bodies).
func (ck *checker) do(t *testing.T, c call) map[string]any {
	t.Helper()
	x := ck.exchange(t, c)
	switch {
	case c.invalid && x.reqErr == nil:
		t.Errorf("%s %s %.200s: the document accepts a request the server rejects (%d)", c.method, c.path, x.body, c.want)
	case !c.invalid && x.reqErr != nil:
		t.Errorf("%s %s %.200s: the document rejects the request: %v", c.method, c.path, x.body, x.reqErr)
	}
	if x.status != c.want {
		t.Fatalf("%s %s %.200s: %d %s, want %d", c.method, c.path, x.body, x.status, x.answer, c.want)
	}
	if c.wantInError != "" && x.obj != nil {
		if msg, _ := x.obj["error"].(string); !strings.Contains(msg, c.wantInError) {
			t.Errorf("%s %s: error %q does not mention %q", c.method, c.path, msg, c.wantInError)
		}
	}
	return x.obj
}

// exchanged is what exchange did: whether the document accepts the
// request, and the answer.
type exchanged struct {
	reqErr error  // the document's verdict on the request (nil: accepted)
	body   []byte // the request body sent
	status int
	answer []byte
	obj    map[string]any // the answer's JSON object (nil for other bodies)
}

// exchange validates c's request against the document, sends it whatever
// the verdict, records and validates the answer (which must conform,
// whatever the request), and returns both.
func (ck *checker) exchange(t *testing.T, c call) exchanged {
	t.Helper()
	to := c.to
	if to == nil {
		to = ck.api
	}
	body := []byte(c.body)
	if c.big {
		body = bytes.Repeat([]byte{' '}, server.MaxBodyBytes+1)
		body[0] = '{'
	}
	newReq := func() *http.Request {
		req, err := http.NewRequest(c.method, to.srv.URL+c.path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if len(body) == 0 {
			req.Body, req.ContentLength = http.NoBody, 0
		} else {
			req.Header.Set("Content-Type", "application/json")
		}
		return req
	}
	vreq := newReq()
	route, params, err := ck.router.FindRoute(vreq)
	if err != nil {
		t.Fatalf("%s %s: no operation of the document: %v", c.method, c.path, err)
	}
	key := c.method + " " + route.Path
	role := roleOf(route.Operation)
	switch {
	case c.auth != "":
		vreq.Header.Set("Authorization", c.auth)
	case c.token == "-" || (c.token == "" && role == "none"):
	case c.token == "":
		vreq.Header.Set("Authorization", "Bearer "+ck.secrets[roleToken[role]])
	default:
		vreq.Header.Set("Authorization", "Bearer "+ck.secrets[c.token])
	}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: &bearer}
	x := exchanged{reqErr: openapi3filter.ValidateRequest(context.Background(), in), body: body}

	req := newReq()
	req.Header = vreq.Header.Clone()
	resp, err := to.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", c.method, c.path, err)
	}
	x.status, x.answer = resp.StatusCode, got
	ck.mu.Lock()
	if ck.seen[key] == nil {
		ck.seen[key] = map[int]bool{}
	}
	ck.seen[key][resp.StatusCode] = true
	ck.mu.Unlock()

	if c.method == http.MethodHead {
		// kin-openapi does not validate HEAD answers: check the status
		// and the documented headers here.
		ck.checkHead(t, key, route.Operation, resp, got)
		return x
	}
	opts := openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}
	if err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(got)), Options: &opts,
	}); err != nil {
		t.Errorf("%s %s: the answer %d %.300s does not conform: %v", c.method, c.path, resp.StatusCode, got, err)
	} else {
		ck.match(t, key, route.Operation, resp.StatusCode, got)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return x
	}
	if err := json.Unmarshal(got, &x.obj); err != nil {
		t.Fatalf("%s %s: answer %q: %v", c.method, c.path, got, err)
	}
	return x
}

// match records which of the schemas documented for an answer (see
// answerSchemas) the conforming answer got matches.
func (ck *checker) match(t *testing.T, key string, op *openapi3.Operation, code int, got []byte) {
	t.Helper()
	schemas := answerSchemas(op, code)
	if len(schemas) == 0 {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(got))
	dec.UseNumber() // as kin-openapi decodes bodies
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Errorf("%s: answer %d %q: %v", key, code, got, err)
		return
	}
	var names []string
	for name, s := range schemas {
		if s.VisitJSON(v, openapi3.VisitAsResponse()) == nil {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		t.Errorf("%s: the answer %d %.300s conforms but matches none of %v", key, code, got, slices.Sorted(maps.Keys(schemas)))
		return
	}
	k := key + " " + strconv.Itoa(code)
	ck.mu.Lock()
	defer ck.mu.Unlock()
	if ck.matched[k] == nil {
		ck.matched[k] = map[string]bool{}
	}
	for _, n := range names {
		ck.matched[k][n] = true
	}
}

// checkHead checks a HEAD answer: no body, a documented status, and the
// documented headers.
func (ck *checker) checkHead(t *testing.T, key string, op *openapi3.Operation, resp *http.Response, body []byte) {
	t.Helper()
	if len(body) != 0 {
		t.Errorf("%s: a body of %d bytes", key, len(body))
	}
	r := op.Responses.Status(resp.StatusCode)
	if r == nil {
		t.Errorf("%s: status %d is not documented", key, resp.StatusCode)
		return
	}
	for name, h := range r.Value.Headers {
		if h.Value.Required && resp.Header.Get(name) == "" {
			t.Errorf("%s: %d without the header %s", key, resp.StatusCode, name)
		}
	}
}

// doOff sends a request that no operation documents (a method a path
// does not serve, a path the API does not serve) and validates its answer
// against the document's component response.
func (ck *checker) doOff(t *testing.T, method, path, component string, want int) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, ck.api.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+ck.secrets[tokAdmin])
	if _, _, err := ck.router.FindRoute(req); err == nil {
		t.Fatalf("%s %s: documented", method, path)
	}
	resp, err := ck.api.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, got, want)
	}
	ref := ck.doc.Components.Responses[component]
	if ref == nil {
		t.Fatalf("components/responses/%s: not in the document", component)
	}
	op := openapi3.NewOperation()
	op.Responses = openapi3.NewResponses(openapi3.WithStatus(want, ref))
	in := &openapi3filter.RequestValidationInput{Request: req, Route: &routers.Route{Spec: ck.doc, Path: path, PathItem: &openapi3.PathItem{}, Method: method, Operation: op}}
	opts := openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}
	if err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(got)), Options: &opts,
	}); err != nil {
		t.Errorf("%s %s: the answer %d %s does not conform to components/responses/%s: %v", method, path, resp.StatusCode, got, component, err)
	}
	return resp
}

// samplePath fills a documented path's parameters: limit "other" (which
// the narrow client token may not use), lease 1, server n9, reservation 1.
func samplePath(path string) string {
	return strings.NewReplacer("{asset}", "app.js", "{name}", "other", "{prefix}", "tpl", "/leases/{id}", "/leases/1", "/servers/{id}", "/servers/n9", "/reservations/{id}", "/reservations/1").Replace(path)
}

// sampleBody is a valid body of each operation that takes one.
var sampleBody = map[string]string{
	"putLimit":           `{"algorithm":"strict","rate":1}`,
	"reserve":            `{"permits":1}`,
	"openSession":        `{}`,
	"putLeasePolicy":     `{"leased":true}`,
	"openLease":          `{"holder":"h","group":"g","demand_milli_per_sec":1000,"ttl":"1s"}`,
	"renewLease":         `{"epoch":1,"demand_milli_per_sec":1000,"ttl":"1s"}`,
	"returnLease":        `{"epoch":1}`,
	"joinServer":         `{"id":"n9","raft_addr":"n9:7000"}`,
	"transferLeadership": `{"to":"n3"}`,
	"reserveLimits":      `{"limits":[{"name":"other"}]}`,
	"settleReservation":  `{"actual":[]}`,
	"releaseReservation": `{}`,
	"putTemplate":        `{"algorithm":"strict","rate":1,"idle":"1m","max_keys":1}`,
}

// eachOperation calls f for every operation of the document, in order.
func eachOperation(doc *openapi3.T, f func(method, path string, op *openapi3.Operation)) {
	for _, key := range operations(doc) {
		method, path, _ := strings.Cut(key, " ")
		f(method, path, doc.Paths.Value(path).GetOperation(method))
	}
}

// TestConformance drives the register through every operation of the
// document, its successes and its errors, and validates every request and
// answer against the document; then it checks that every operation and
// every documented status was exercised, and that the handler served
// every route.
func TestConformance(t *testing.T) {
	doc := loadDoc(t)
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	tokens, secrets := newTokens(t)
	reg := startRegister(t, tokens)
	ck := &checker{doc: doc, router: router, secrets: secrets, api: reg.nodes[0], seen: map[string]map[int]bool{}, matched: map[string]map[string]bool{}}
	lonely := reg.lonely

	t.Run("health, status and this document", func(t *testing.T) {
		for _, m := range []string{"GET", "HEAD"} {
			ck.do(t, call{method: m, path: "/healthz", want: 200})
			ck.do(t, call{method: m, path: "/readyz", want: 200})
			ck.do(t, call{method: m, path: "/v1/openapi.json", want: 200})
			ck.do(t, call{method: m, path: "/metrics", want: 200})
			ck.do(t, call{to: lonely, method: m, path: "/metrics", want: 404})
			ck.do(t, call{method: m, path: "/v1/status", want: 200})
			ck.do(t, call{method: m, path: "/v1/cluster", want: 200})
			ck.do(t, call{method: m, path: "/ui", want: 200})
			for _, f := range []string{"index.html", "app.js", "style.css"} {
				ck.do(t, call{method: m, path: "/ui/" + f, want: 200})
			}
			ck.do(t, call{method: m, path: "/ui/nope.png", want: 404})
		}
		resp, err := ck.api.srv.Client().Get(ck.api.srv.URL + "/v1/openapi.json")
		if err != nil {
			t.Fatal(err)
		}
		served, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Equal(served, openapi.JSON()) {
			t.Errorf("GET /v1/openapi.json: %d bytes that are not the embedded document", len(served))
		}
		st := ck.do(t, call{method: "GET", path: "/v1/status", want: 200})
		if st["ready"] != true || len(st["servers"].([]any)) != 3 {
			t.Errorf("status %v", st)
		}
		// A node that belongs to no cluster yet: no leader, no servers
		// ([] in its status and in its cluster view).
		if st := ck.do(t, call{to: lonely, method: "GET", path: "/v1/status", want: 200}); st["ready"] != false || st["servers"] == nil || len(st["servers"].([]any)) != 0 {
			t.Errorf("n4's status %v", st)
		}
		if c := ck.do(t, call{to: lonely, method: "GET", path: "/v1/cluster", want: 200}); c["leader_id"] != "" || len(c["servers"].([]any)) != 0 {
			t.Errorf("n4's cluster %v", c)
		}
	})

	t.Run("limits", func(t *testing.T) {
		m := ck.do(t, call{method: "PUT", path: "/v1/limits/api-strict", body: `{"algorithm":"strict","rate":1,"per":"1h","max_reserved":0,"expiry":"500ms"}`, want: 201})
		if m["created"] != true || m["interval_ns"] != 3.6e12 {
			t.Errorf("created %v", m)
		}
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-strict", body: `{"algorithm":"strict","rate":1,"per":"1h"}`, want: 200})
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-bursty", body: `{"algorithm":"bursty","rate":100,"max_burst_seconds":2}`, want: 201})
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-warm", body: `{"algorithm":"warmup","rate":100,"per":"1s","warmup":"10s","cold_factor":3}`, want: 201})
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-hybrid", body: `{"algorithm":"hybrid","rate":1000,"burst_ratio":1.5,"strictness":0.5}`, want: 201})
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-default", body: `{"algorithm":"hybrid","rate":5}`, want: 201})
		// A replaced limit answers 200, in its algorithm's schema.
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-bursty", body: `{"algorithm":"bursty","rate":100,"max_burst_seconds":2}`, want: 200})
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-warm", body: `{"algorithm":"warmup","rate":100,"per":"1s","warmup":"10s","cold_factor":3}`, want: 200})
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-default", body: `{"algorithm":"hybrid","rate":5}`, want: 200})
		for _, tc := range []struct {
			body    string
			invalid bool
			mention string
		}{
			{`{"algorithm":"strict","rate":1,"max_burst_seconds":2}`, true, `belongs to algorithm "bursty"`},
			{`{"algorithm":"fast","rate":1}`, true, "algorithm"},
			{`{"algorithm":"strict"}`, true, `"rate" is required`},
			{`{"rate":1}`, true, `"algorithm" is required`},
			{`{"algorithm":"strict","rate":0}`, true, `"rate"`},
			{`{"algorithm":"strict","rate":null}`, true, `"rate"`},
			{`{"algorithm":"strict","rate":"1"}`, true, `"rate"`},
			{`{"algorithm":"strict","rate":1,"per":"soon"}`, true, "not a duration"},
			{`{"algorithm":"strict","rate":1,"per":"-1s"}`, true, `"per"`},
			{`{"algorithm":"strict","rate":1,"max_reserved":-1}`, true, `"max_reserved"`},
			{`{"algorithm":"strict","rate":1,"burst":1}`, true, `unknown field "burst"`},
			{`{"algorithm":"warmup","rate":1}`, true, "Warmup"},
			{`{"algorithm":"hybrid","rate":1,"burst_ratio":0.5}`, false, "BurstRatio"},
			{`[1]`, true, "JSON object"},
			{``, true, "empty"},
			{`{"algorithm":"strict","rate":1}{}`, false, "unexpected data after the JSON object"},
			{`{"algorithm":"strict","rate":1`, true, "truncated"},
		} {
			ck.do(t, call{method: "PUT", path: "/v1/limits/api-x", body: tc.body, want: 400, invalid: tc.invalid, wantInError: tc.mention})
		}
		for _, name := range []string{"api-strict", "api-bursty", "api-warm", "api-hybrid", "api-default"} {
			ck.do(t, call{method: "GET", path: "/v1/limits/" + name, want: 200})
		}
		for _, m := range []string{"GET", "HEAD"} {
			ck.do(t, call{method: m, path: "/v1/limits/api-strikt", want: 404, wantInError: `did you mean "api-strict"?`})
			ck.do(t, call{method: m, path: "/v1/limits/api-strict", want: 200})
			ck.do(t, call{method: m, path: "/v1/limits", want: 200})
		}
		// A query parameter other than prefix, after and limit is a 400
		// (as is the unpaged list past 10 000 limits: transport/server).
		ck.do(t, call{method: "GET", path: "/v1/limits?page=2", want: 400, wantInError: "allowed: prefix=P"})
		list := ck.do(t, call{method: "GET", path: "/v1/limits", token: tokClient, want: 200})
		if n := len(list["limits"].([]any)); n != 5 {
			t.Errorf("%d limits listed, want 5", n)
		}
		// The readable limits: a client token restricted to api* reads
		// only those (GET /v1/limits is 403 for it), other tokens all.
		ck.do(t, call{method: "PUT", path: "/v1/limits/hidden", body: `{"algorithm":"bursty","rate":1}`, want: 201})
		names := func(m map[string]any) (out []string) {
			for _, l := range m["limits"].([]any) {
				out = append(out, l.(map[string]any)["name"].(string))
			}
			return out
		}
		ck.do(t, call{method: "GET", path: "/v1/limits", token: tokNarrow, want: 403})
		for _, m := range []string{"GET", "HEAD"} {
			ck.do(t, call{method: m, path: "/v1/readable-limits", token: tokNarrow, want: 200})
		}
		// The answer is this agent's replica (it may lag the put by the
		// apply delay): it shows the new limit once applied.
		waitFor(t, 10*time.Second, "the agent's replica to list the new limit", func() bool {
			return len(names(ck.do(t, call{method: "GET", path: "/v1/readable-limits", token: tokAdmin, want: 200}))) == 6
		})
		for tok, want := range map[string]int{tokNarrow: 5, tokClient: 6, tokWorker: 6, tokAdmin: 6} {
			got := names(ck.do(t, call{method: "GET", path: "/v1/readable-limits", token: tok, want: 200}))
			if len(got) != want || (tok == tokNarrow && slices.Contains(got, "hidden")) || !slices.IsSorted(got) {
				t.Errorf("token %s reads %v, want %d limits, sorted (and not \"hidden\" for %s)", tok, got, want, tokNarrow)
			}
		}
		ck.do(t, call{method: "DELETE", path: "/v1/limits/hidden", want: 200})
	})

	t.Run("reserve and sessions", func(t *testing.T) {
		const path = "/v1/limits/api-strict/reserve"
		g := ck.do(t, call{method: "POST", path: path, body: `{"request_id":"r1"}`, want: 200})
		if g["granted"] != true || g["duplicate"] != false {
			t.Errorf("reserve: %v", g)
		}
		if g := ck.do(t, call{method: "POST", path: path, body: `{"request_id":"r1"}`, want: 200}); g["duplicate"] != true {
			t.Errorf("retry: %v", g)
		}
		ck.do(t, call{method: "POST", path: path, body: `{"permits":1,"max_wait":"10ms","request_id":"r2"}`, want: 429, wantInError: "no permit within max_wait"})
		ck.do(t, call{method: "POST", path: "/v1/limits/api-bursty/reserve", want: 200}) // no body: one permit, no wait
		ck.do(t, call{method: "POST", path: "/v1/limits/api-warm/reserve", body: `{}`, want: 200})
		ck.do(t, call{method: "POST", path: "/v1/limits/api-hybrid/reserve", body: `{"max_wait":"1s"}`, want: 200})
		ck.do(t, call{method: "POST", path: "/v1/limits/api-bursty/reserve", body: `{"permits":3,"max_wait":"1s"}`, want: 200})
		ck.do(t, call{method: "POST", path: "/v1/limits/api-nope/reserve", body: `{"request_id":"r3"}`, want: 404})
		for _, tc := range []struct {
			body    string
			invalid bool
			mention string
		}{
			{`{"permits":0}`, true, `"permits"`},
			{`{"permits":1.5}`, true, `"permits"`},
			{`{"max_wait":"-1s"}`, true, `"max_wait"`},
			{`{"max_wait":"later"}`, true, `"max_wait"`},
			{`{"request_id":"has space"}`, true, `"request_id"`},
			{`{"seq":1}`, false, `need "session"`},
			{`{"session":1,"seq":1,"request_id":"x"}`, false, "together"},
			{`{"session":1,"seq":2,"acked_below":3}`, false, `"acked_below"`},
			{`{"session":1}`, false, `"seq"`},
			{`{"permits":2}`, false, "at most 1"},
			{`{"wait":"1s"}`, true, `unknown field "wait"`},
		} {
			ck.do(t, call{method: "POST", path: path, body: tc.body, want: 400, invalid: tc.invalid, wantInError: tc.mention})
		}

		// A session is its token's: opened with the client token, which
		// reserves in it; the narrow token (which may use api-bursty) is
		// answered 410 naming it, as a session that is not open.
		s := ck.do(t, call{method: "POST", path: "/v1/sessions", body: `{}`, token: tokClient, want: 201})
		ck.do(t, call{method: "POST", path: "/v1/sessions", want: 201}) // an empty body
		ck.do(t, call{method: "POST", path: "/v1/sessions", body: `{"ttl":"1m"}`, want: 400, invalid: true, wantInError: "takes no fields"})
		sid := strconv.FormatFloat(s["session"].(float64), 'f', -1, 64)
		ck.do(t, call{method: "POST", path: "/v1/limits/api-bursty/reserve", body: `{"session":` + sid + `,"seq":1,"max_wait":"1s"}`, want: 200})
		ck.do(t, call{method: "POST", path: "/v1/limits/api-bursty/reserve", body: `{"session":` + sid + `,"seq":2,"acked_below":2,"max_wait":"1s"}`, want: 200})
		ck.do(t, call{method: "POST", path: "/v1/limits/api-bursty/reserve", body: `{"session":` + sid + `,"seq":2}`, token: tokNarrow, want: 410, wantInError: "session " + sid + " is not open"})
		ck.do(t, call{method: "POST", path: "/v1/limits/api-bursty/reserve", body: `{"session":123456789,"seq":1}`, want: 410})

		// A full request-id table answers a reserve with a new id 503
		// with ReserveBusy, a body the handler writes by hand. Filling
		// the register's table (fsm.MaxDedupEntries ids within
		// fsm.DedupWindowNanos) would take too long here: the real
		// handler serves a register (fakestore) whose reserves answer
		// what a full table answers.
		full := fakestore.New()
		full.SetReserveFunc(func(context.Context, fsm.Reserve) (fsm.ReserveResult, error) {
			return fsm.ReserveResult{Status: fsm.Busy, RetryAfterNanos: int64(1500 * time.Millisecond)}, nil
		})
		busy := &testNode{id: "full", srv: httptest.NewServer(server.RequireTokens(server.NewHandler(full, server.HandlerOptions{}), tokens))}
		defer busy.srv.Close()
		if b := ck.do(t, call{to: busy, method: "POST", path: path, body: `{"request_id":"r9"}`, want: 503, wantInError: "request ids"}); b["granted"] != false || b["retry_after_ns"] != 1.5e9 {
			t.Errorf("busy: %v", b)
		}
		// A token at its quota of sessions is refused an open, 503 with
		// SessionRefused (a register's table of 65536 is too big to fill
		// here; the quota is the same answer).
		quota := &testNode{id: "quota", srv: httptest.NewServer(server.RequireTokens(server.NewHandler(fakestore.New(), server.HandlerOptions{SessionsPerToken: 1}), tokens))}
		defer quota.srv.Close()
		ck.do(t, call{to: quota, method: "POST", path: "/v1/sessions", token: tokClient, want: 201})
		if b := ck.do(t, call{to: quota, method: "POST", path: "/v1/sessions", token: tokClient, want: 503, wantInError: "sessions per token"}); b["retry_after_ns"] != float64(fsm.SessionIdleNanos) {
			t.Errorf("refused open: %v", b)
		}
	})

	t.Run("leases", func(t *testing.T) {
		ck.do(t, call{method: "PUT", path: "/v1/limits/fleet", body: `{"algorithm":"strict","rate":100}`, want: 201})
		ck.do(t, call{method: "PUT", path: "/v1/limits/fleet/lease-policy", body: `{"leased":true,"burst_permits":50,"max_outstanding_permits":100}`, want: 200})
		ck.do(t, call{method: "PUT", path: "/v1/limits/fleet/lease-policy", body: `{"leased":true}`, want: 200})
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-nope/lease-policy", body: `{"leased":true}`, want: 404})
		ck.do(t, call{method: "PUT", path: "/v1/limits/fleet/lease-policy", body: `{"burst_permits":5}`, want: 400, invalid: true, wantInError: `"leased" is required`})
		ck.do(t, call{method: "PUT", path: "/v1/limits/fleet/lease-policy", body: `{"leased":"yes"}`, want: 400, invalid: true})
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-strict/lease-policy", body: `{"leased":false,"burst_permits":5}`, want: 400, wantInError: "only with leased true"})
		for _, m := range []string{"GET", "HEAD"} {
			ck.do(t, call{method: m, path: "/v1/limits/fleet", want: 200})
			ck.do(t, call{method: m, path: "/v1/limits/fleet/leases", want: 200})
			ck.do(t, call{method: m, path: "/v1/limits/api-strict/leases", want: 400, wantInError: "not leased"})
			ck.do(t, call{method: m, path: "/v1/limits/api-nope/leases", want: 404})
		}
		if l := ck.do(t, call{method: "GET", path: "/v1/limits/fleet", want: 200}); l["leased"] != true || l["lease_policy"] == nil {
			t.Errorf("leased limit: %v", l)
		}

		g := ck.do(t, call{method: "POST", path: "/v1/limits/fleet/lease", body: `{"holder":"h1","group":"g1","weight":2,"demand_milli_per_sec":50000,"ttl":"10s","request_id":"l1"}`, want: 200})
		id := strconv.FormatFloat(g["lease_id"].(float64), 'f', -1, 64)
		ck.do(t, call{method: "POST", path: "/v1/limits/fleet/lease", body: `{"holder":"h1","group":"g1","demand_milli_per_sec":1,"ttl":"10s"}`, want: 429, wantInError: "already holds lease"})
		ck.do(t, call{method: "POST", path: "/v1/limits/fleet/lease", body: `{"holder":"h2","group":"g1","demand_per_sec":1.5,"ttl":"1m"}`, want: 200}) // the deprecated spelling
		for _, tc := range []struct {
			body    string
			invalid bool
			mention string
		}{
			{`{"holder":"h3","group":"g1","ttl":"1s"}`, false, `"demand_milli_per_sec" is required`},
			{`{"holder":"h3","group":"g1","demand_milli_per_sec":1,"demand_per_sec":1,"ttl":"1s"}`, false, "both given"},
			{`{"holder":"h3","group":"g1","demand_milli_per_sec":1,"ttl":"10ms"}`, false, `"ttl"`},
			{`{"holder":"h3","group":"g1","demand_milli_per_sec":-1,"ttl":"1s"}`, true, `"demand_milli_per_sec"`},
			{`{"holder":"h3","group":"g1","demand_per_sec":"1","ttl":"1s"}`, true, `"demand_per_sec"`},
			{`{"holder":"h3","group":"g1","demand_milli_per_sec":1,"ttl":"1s","weight":0}`, true, `"weight"`},
			{`{"holder":"h 3","group":"g1","demand_milli_per_sec":1,"ttl":"1s"}`, true, `"holder"`},
			{`{"group":"g1","demand_milli_per_sec":1,"ttl":"1s"}`, true, `"holder" is required`},
			{`{"holder":"h3","group":"g1","demand_milli_per_sec":1}`, true, `"ttl" is required`},
		} {
			ck.do(t, call{method: "POST", path: "/v1/limits/fleet/lease", body: tc.body, want: 400, invalid: tc.invalid, wantInError: tc.mention})
		}
		ck.do(t, call{method: "POST", path: "/v1/limits/api-strict/lease", body: sampleBody["openLease"], want: 400, wantInError: "not leased"})
		ck.do(t, call{method: "POST", path: "/v1/limits/api-nope/lease", body: sampleBody["openLease"], want: 404})

		renew := "/v1/limits/fleet/leases/" + id + "/renew"
		r := ck.do(t, call{method: "POST", path: renew, body: `{"epoch":1,"spent":0,"stolen_out":0,"stolen_in":0,"kept":0,"demand_milli_per_sec":50000,"ttl":"10s","request_id":"n1"}`, want: 200})
		if r["epoch"] != 2.0 {
			t.Errorf("renewal: %v", r)
		}
		ck.do(t, call{method: "POST", path: renew, body: `{"epoch":1,"demand_milli_per_sec":1,"ttl":"1s"}`, want: 409, wantInError: "not 1"})
		ck.do(t, call{method: "POST", path: renew, body: `{"demand_milli_per_sec":1,"ttl":"1s"}`, want: 400, invalid: true, wantInError: `"epoch" is required`})
		ck.do(t, call{method: "POST", path: renew, body: `{"epoch":2,"spent":-1,"demand_milli_per_sec":1,"ttl":"1s"}`, want: 400, invalid: true, wantInError: `"spent"`})
		ck.do(t, call{method: "POST", path: renew, body: `{"epoch":2,"spent":1000000,"demand_milli_per_sec":1,"ttl":"1s"}`, want: 400, wantInError: "spent"})
		ck.do(t, call{method: "POST", path: "/v1/limits/fleet/leases/007/renew", body: sampleBody["renewLease"], want: 400, wantInError: "leading zeros"})
		ck.do(t, call{method: "POST", path: "/v1/limits/fleet/leases/99999/renew", body: sampleBody["renewLease"], want: 409, wantInError: "not live"})
		ck.do(t, call{method: "POST", path: "/v1/limits/api-nope/leases/" + id + "/renew", body: sampleBody["renewLease"], want: 404})

		ret := "/v1/limits/fleet/leases/" + id + "/return"
		ck.do(t, call{method: "POST", path: ret, body: `{"epoch":2,"kept":1}`, want: 400, invalid: true, wantInError: `unknown field "kept"`})
		if r := ck.do(t, call{method: "POST", path: ret, body: `{"epoch":2,"spent":0,"stolen_out":0,"stolen_in":0,"request_id":"x1"}`, want: 200}); r["status"] != "returned" {
			t.Errorf("return: %v", r)
		}
		ck.do(t, call{method: "POST", path: ret, body: `{"epoch":2}`, want: 409, wantInError: "not live"})
		ck.do(t, call{method: "POST", path: "/v1/limits/api-nope/leases/" + id + "/return", body: `{"epoch":2}`, want: 404})

		// A granted lease whose retry comes after the grant expired is
		// fenced: retry the first request until it is.
		ck.do(t, call{method: "POST", path: "/v1/limits/fleet/lease", body: `{"holder":"h4","group":"g2","demand_milli_per_sec":1000,"ttl":"100ms","request_id":"late"}`, want: 200})
		waitFor(t, 10*time.Second, "a fenced retry", func() bool {
			req, _ := http.NewRequest("POST", ck.api.srv.URL+"/v1/limits/fleet/lease", strings.NewReader(`{"holder":"h4","group":"g2","demand_milli_per_sec":1000,"ttl":"100ms","request_id":"late"}`))
			req.Header.Set("Authorization", "Bearer "+secrets[tokWorker])
			resp, err := ck.api.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusConflict
		})
		if f := ck.do(t, call{method: "POST", path: "/v1/limits/fleet/lease", body: `{"holder":"h4","group":"g2","demand_milli_per_sec":1000,"ttl":"100ms","request_id":"late"}`, want: 409, wantInError: "expired before the retry"}); f["duplicate"] != true {
			t.Errorf("fenced retry: %v", f)
		}

		ck.do(t, call{method: "POST", path: "/v1/limits/fleet/reserve", body: `{}`, want: 400, wantInError: "leased"})
		ck.do(t, call{method: "DELETE", path: "/v1/limits/fleet", want: 409, wantInError: "force"})
		ck.do(t, call{method: "PUT", path: "/v1/limits/fleet/lease-policy", body: `{"leased":false}`, want: 400, wantInError: "1 lease still holds permits"})
		ck.do(t, call{method: "DELETE", path: "/v1/limits/fleet?force=true", want: 200})
		ck.do(t, call{method: "DELETE", path: "/v1/limits/fleet", want: 404})
		ck.do(t, call{method: "DELETE", path: "/v1/limits/api-default?force=maybe", want: 400, invalid: true, wantInError: "force"})
		ck.do(t, call{method: "DELETE", path: "/v1/limits/api-default?fast=1", want: 400, wantInError: `"fast"`})
		ck.do(t, call{method: "DELETE", path: "/v1/limits/api-default", body: `{"force":true}`, want: 400, invalid: true})
		ck.do(t, call{method: "DELETE", path: "/v1/limits/api-default?force=false", want: 200})
	})

	// Concurrency limits and shadow mode: the concurrency variants of
	// the configuration, the put answer and the view, and the shadow
	// fields of every view.
	t.Run("concurrency and shadow", func(t *testing.T) {
		// The shadow fields of a view are read from the leader: a view
		// a follower forwards loses them (node/resultcodec.go does not
		// carry them), which shadowOnFollower reports.
		leader, follower := reg.leader(t)
		if m := ck.do(t, call{method: "PUT", path: "/v1/limits/api-conc", body: `{"algorithm":"concurrency","max_in_flight":2,"ttl":"1m"}`, want: 201}); m["max_in_flight"] != 2.0 || m["ttl"] != "1m0s" || m["rate"] != 0.0 || m["interval_ns"] != 0.0 || m["shadow"] != false || m["per"] != nil {
			t.Errorf("concurrency limit: %v", m)
		}
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-conc", body: `{"algorithm":"concurrency","max_in_flight":2,"ttl":"1m","shadow":false}`, want: 200})
		if m := ck.do(t, call{method: "PUT", path: "/v1/limits/api-conc1", body: `{"algorithm":"concurrency","max_in_flight":1}`, want: 201}); m["ttl"] != "1m0s" {
			t.Errorf("default ttl: %v", m)
		}
		for _, tc := range []struct {
			body    string
			invalid bool
			mention string
		}{
			{`{"algorithm":"concurrency"}`, true, `"max_in_flight" is required`},
			{`{"algorithm":"concurrency","max_in_flight":1,"rate":1}`, true, `no "rate" or "per"`},
			{`{"algorithm":"concurrency","max_in_flight":1,"per":"1s"}`, true, `no "rate" or "per"`},
			{`{"algorithm":"concurrency","max_in_flight":0}`, true, "MaxInFlight"},
			{`{"algorithm":"concurrency","max_in_flight":1048577}`, true, "MaxInFlight"},
			{`{"algorithm":"concurrency","max_in_flight":1.5}`, true, `"max_in_flight"`},
			{`{"algorithm":"concurrency","max_in_flight":1,"ttl":"0s"}`, true, `"ttl"`},
			{`{"algorithm":"concurrency","max_in_flight":1,"ttl":"25h"}`, false, "HoldTTL"},
			{`{"algorithm":"concurrency","max_in_flight":1,"max_reserved":1}`, true, `belongs to algorithm "strict"`},
			{`{"algorithm":"strict","rate":1,"max_in_flight":1}`, true, `belongs to algorithm "concurrency"`},
			{`{"algorithm":"strict","rate":1,"ttl":"1s"}`, true, `belongs to algorithm "concurrency"`},
			{`{"algorithm":"strict","rate":1,"shadow":"yes"}`, true, `"shadow"`},
			{`{"algorithm":"strict","rate":1,"shadow":null}`, true, `"shadow"`},
		} {
			ck.do(t, call{method: "PUT", path: "/v1/limits/api-x", body: tc.body, want: 400, invalid: tc.invalid, wantInError: tc.mention})
		}
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-conc/lease-policy", body: `{"leased":true}`, want: 400, wantInError: "infinite rate"})
		for _, m := range []string{"GET", "HEAD"} {
			ck.do(t, call{method: m, path: "/v1/limits/api-conc", want: 200})
		}
		// The reserve of one limit cannot hold a concurrency permit: it
		// would leave no reservation to release it by.
		ck.do(t, call{method: "POST", path: "/v1/limits/api-conc1/reserve", body: `{"request_id":"c1"}`, want: 400, wantInError: "in-flight cap"})
		ck.do(t, call{method: "POST", path: "/v1/limits/api-conc1/reserve", body: `{"permits":2}`, want: 400, wantInError: "at most 1"})
		if l := ck.do(t, call{method: "GET", path: "/v1/limits/api-conc1", want: 200}); l["granted_requests"] != 0.0 || l["refused_requests"] != 0.0 || l["leased"] != false {
			t.Errorf("concurrency view: %v", l)
		}

		// Shadow mode: every reserve granted at once, what enforcement
		// would have done counted.
		if m := ck.do(t, call{method: "PUT", path: "/v1/limits/api-shadow", body: `{"algorithm":"strict","rate":1,"per":"1h","max_reserved":1,"shadow":true}`, want: 201}); m["shadow"] != true {
			t.Errorf("shadow put: %v", m)
		}
		ck.do(t, call{method: "POST", path: "/v1/limits/api-shadow/reserve", body: `{}`, want: 200})
		if g := ck.do(t, call{method: "POST", path: "/v1/limits/api-shadow/reserve", body: `{}`, want: 200}); g["wait_ns"] != 0.0 || g["expires_in_ns"] != 0.0 {
			t.Errorf("shadow grant: %v", g)
		}
		ck.do(t, call{method: "POST", path: "/v1/limits/api-shadow/reserve", body: `{"max_wait":"2h"}`, want: 200})
		if l := ck.do(t, call{to: leader, method: "GET", path: "/v1/limits/api-shadow", want: 200}); l["shadow"] != true || l["shadow_would_refuse"] != 1.0 || l["shadow_would_wait"] != 1.0 || l["granted_requests"] != 3.0 || l["refused_requests"] != 0.0 {
			t.Errorf("shadow view: %v", l)
		}
		// Enforced again: the pacer kept what the shadow grants took.
		if m := ck.do(t, call{method: "PUT", path: "/v1/limits/api-shadow", body: `{"algorithm":"strict","rate":1,"per":"1h","max_reserved":1}`, want: 200}); m["shadow"] != false {
			t.Errorf("shadow off: %v", m)
		}
		ck.do(t, call{method: "POST", path: "/v1/limits/api-shadow/reserve", body: `{}`, want: 429})
		if l := ck.do(t, call{to: leader, method: "GET", path: "/v1/limits/api-shadow", want: 200}); l["shadow"] != false || l["shadow_would_refuse"] != 1.0 || l["refused_requests"] != 1.0 {
			t.Errorf("shadow turned off: %v", l)
		}
		// The grants made in shadow mode are the shadow grants; those
		// made while enforced are not.
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-shadow2", body: `{"algorithm":"bursty","rate":1000}`, want: 201})
		for range 5 {
			ck.do(t, call{method: "POST", path: "/v1/limits/api-shadow2/reserve", body: `{"max_wait":"1s"}`, want: 200})
		}
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-shadow2", body: `{"algorithm":"bursty","rate":1000,"shadow":true}`, want: 200})
		ck.do(t, call{method: "POST", path: "/v1/limits/api-shadow2/reserve", body: `{"max_wait":"1s"}`, want: 200})
		if l := ck.do(t, call{to: leader, method: "GET", path: "/v1/limits/api-shadow2", want: 200}); l["shadow_granted"] != 1.0 || l["granted_requests"] != 6.0 {
			t.Errorf("shadow grants after 5 enforced and 1 in shadow mode: %v, want shadow_granted 1 of 6", l)
		}
		for _, body := range []string{
			`{"algorithm":"concurrency","max_in_flight":1,"shadow":true}`,
			`{"algorithm":"bursty","rate":1,"shadow":true}`,
			`{"algorithm":"warmup","rate":1,"warmup":"1s","shadow":true}`,
			`{"algorithm":"hybrid","rate":1,"shadow":true}`,
		} {
			ck.do(t, call{method: "PUT", path: "/v1/limits/api-shadow-x", body: body, want: 201})
			if l := ck.do(t, call{to: leader, method: "GET", path: "/v1/limits/api-shadow-x", want: 200}); l["shadow"] != true {
				t.Errorf("%s: %v", body, l)
			}
			shadowOnFollower(t, ck, follower, "api-shadow-x")
			ck.do(t, call{method: "DELETE", path: "/v1/limits/api-shadow-x", want: 200})
		}
		ck.do(t, call{method: "GET", path: "/v1/limits", want: 200})
	})

	// Reservations: reserves of several limits, all or nothing, and
	// their settlements and releases.
	t.Run("reservations", func(t *testing.T) {
		const multi = "/v1/reserve"
		settle := func(id string) string { return "/v1/reservations/" + id + "/settle" }
		release := func(id string) string { return "/v1/reservations/" + id + "/release" }
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-rpm", body: `{"algorithm":"strict","rate":1,"per":"1h","max_reserved":4}`, want: 201})
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-tpm", body: `{"algorithm":"bursty","rate":1000000,"max_burst_seconds":1}`, want: 201})
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-mconc", body: `{"algorithm":"concurrency","max_in_flight":2,"ttl":"1m"}`, want: 201})

		g := ck.do(t, call{method: "POST", path: multi, body: `{"limits":[{"name":"api-rpm"},{"name":"api-tpm","permits":4000}],"max_wait":"1s","request_id":"m1","settle_within":"1m"}`, want: 200})
		r1, _ := g["reservation_id"].(string)
		if g["granted"] != true || g["duplicate"] != false || r1 == "" || g["spacing_ns"] != 0.0 {
			t.Fatalf("reservation: %v", g)
		}
		if g := ck.do(t, call{method: "POST", path: multi, body: `{"limits":[{"name":"api-rpm"},{"name":"api-tpm","permits":4000}],"max_wait":"1s","request_id":"m1","settle_within":"1m"}`, want: 200}); g["duplicate"] != true || g["reservation_id"] != r1 {
			t.Errorf("retry: %v", g)
		}
		// api-rpm's next slot is an hour away: it sets t* and blocks.
		if r := ck.do(t, call{method: "POST", path: multi, body: `{"limits":[{"name":"api-tpm"},{"name":"api-rpm"}],"max_wait":"10ms","request_id":"m2"}`, want: 429, wantInError: `limit "api-rpm" blocks`}); r["blocking"] != "api-rpm" || r["duplicate"] != false {
			t.Errorf("refusal: %v", r)
		}
		if r := ck.do(t, call{method: "POST", path: multi, body: `{"limits":[{"name":"api-tpm"},{"name":"api-rpm"}],"max_wait":"10ms","request_id":"m2"}`, want: 429}); r["duplicate"] != true || r["blocking"] != "api-rpm" {
			t.Errorf("refusal retried: %v", r)
		}
		// Nothing touched api-tpm since r1's grant (the refusal changed
		// nothing): the unused permits are refunded.
		s := ck.do(t, call{method: "POST", path: settle(r1), body: `{"actual":[{"name":"api-tpm","permits":2300}],"request_id":"s1"}`, want: 200})
		want := `[map[actual:1 charged:0 name:api-rpm refunded:0 reserved:1] map[actual:2300 charged:0 name:api-tpm refunded:1700 reserved:4000]]`
		if got := fmt.Sprint(s["limits"]); s["settled"] != true || s["duplicate"] != false || got != want {
			t.Errorf("settlement: %v, want limits %s", s, want)
		}
		if s := ck.do(t, call{method: "POST", path: settle(r1), body: `{"actual":[{"name":"api-tpm","permits":2300}],"request_id":"s1"}`, want: 200}); s["duplicate"] != true || fmt.Sprint(s["limits"]) != want {
			t.Errorf("settlement retried: %v", s)
		}
		// The refund does not lower the permits granted: it is counted
		// apart, and the net figure is what the limit was charged.
		if l := ck.do(t, call{method: "GET", path: "/v1/limits/api-tpm", want: 200}); l["granted_permits"] != 4000.0 ||
			l["refunded_permits"] != 1700.0 || l["charged_permits"] != 0.0 || l["net_permits"] != 2300.0 || l["expired_requests"] != 0.0 {
			t.Errorf("counters after a refund: %v, want 4000 granted, 1700 refunded, 2300 net", l)
		}
		ck.do(t, call{method: "POST", path: settle(r1), body: `{"actual":[],"request_id":"s2"}`, want: 409, wantInError: "already settled"})
		ck.do(t, call{method: "POST", path: settle(r1), body: `{"actual":[]}`, want: 409, wantInError: `"s1"`})

		// Another grant touched api-tpm since r2's: a bursty limit gives
		// back what that grant's slack allows (0 to 3000: it depends on
		// how much of its store the idle time between the calls refilled),
		// the rest is lost.
		r2 := ck.do(t, call{method: "POST", path: multi, body: `{"limits":[{"name":"api-tpm","permits":4000}],"max_wait":"1s"}`, want: 200})["reservation_id"].(string)
		ck.do(t, call{method: "POST", path: "/v1/limits/api-tpm/reserve", body: `{"max_wait":"1s"}`, want: 200})
		s = ck.do(t, call{method: "POST", path: settle(r2), body: `{"actual":[{"name":"api-tpm","permits":1000}]}`, want: 200})
		if parts, _ := s["limits"].([]any); len(parts) != 1 {
			t.Errorf("late refund: %v", s)
		} else if p, _ := parts[0].(map[string]any); p["reserved"] != 4000.0 || p["actual"] != 1000.0 || p["charged"] != 0.0 ||
			!(p["refunded"].(float64) >= 0 && p["refunded"].(float64) <= 3000) {
			t.Errorf("late refund: %v, want 0 to 3000 refunded", s)
		}
		// An overrun is charged as debt.
		r3 := ck.do(t, call{method: "POST", path: multi, body: `{"limits":[{"name":"api-tpm","permits":10}],"max_wait":"1s"}`, want: 200})["reservation_id"].(string)
		ck.do(t, call{method: "POST", path: settle(r3), body: `{"actual":[{"name":"api-rpm","permits":1}]}`, want: 400, wantInError: `holds no permits of limit "api-rpm"`})
		ck.do(t, call{method: "POST", path: settle(r3), body: `{"actual":[{"name":"api-tpm","permits":1},{"name":"api-tpm","permits":2}]}`, want: 400, wantInError: "twice"})
		if s := ck.do(t, call{method: "POST", path: settle(r3), body: `{"actual":[{"name":"api-tpm","permits":50}],"request_id":"s3"}`, want: 200}); fmt.Sprint(s["limits"]) != `[map[actual:50 charged:40 name:api-tpm refunded:0 reserved:10]]` {
			t.Errorf("overrun: %v", s)
		}

		// A concurrency limit: held until released.
		g = ck.do(t, call{method: "POST", path: multi, body: `{"limits":[{"name":"api-mconc","permits":2},{"name":"api-tpm","permits":5}],"max_wait":"1s"}`, want: 200})
		r4 := g["reservation_id"].(string)
		if g["expires_in_ns"].(float64) <= 0 {
			t.Errorf("a hold without expiry: %v", g)
		}
		if r := ck.do(t, call{method: "POST", path: multi, body: `{"limits":[{"name":"api-tpm"},{"name":"api-mconc"}]}`, want: 429}); r["blocking"] != "api-mconc" {
			t.Errorf("in flight: %v", r)
		}
		ck.do(t, call{method: "POST", path: settle(r4), body: `{"actual":[{"name":"api-mconc","permits":3}]}`, want: 400, wantInError: "in-flight cap"})
		ck.do(t, call{method: "POST", path: release(r4), body: `{"x":1}`, want: 400, invalid: true, wantInError: "takes no fields"})
		if r := ck.do(t, call{method: "POST", path: release(r4), want: 200}); r["released"] != 2.0 || r["duplicate"] != false {
			t.Errorf("release: %v", r)
		}
		if r := ck.do(t, call{method: "POST", path: release(r4), body: `{}`, want: 200}); r["released"] != 0.0 || r["duplicate"] != true {
			t.Errorf("release again: %v", r)
		}
		r5 := ck.do(t, call{method: "POST", path: multi, body: `{"limits":[{"name":"api-mconc","permits":2}]}`, want: 200})["reservation_id"].(string)
		if s := ck.do(t, call{method: "POST", path: settle(r5), body: `{"actual":[{"name":"api-mconc","permits":1}]}`, want: 200}); fmt.Sprint(s["limits"]) != `[map[actual:1 charged:0 name:api-mconc refunded:1 reserved:2]]` {
			t.Errorf("concurrency settlement: %v", s)
		}
		// Only the reservation's owner (the token that reserved it).
		ck.do(t, call{method: "POST", path: settle(r5), body: `{"actual":[]}`, token: tokNarrow, want: 403, wantInError: `belongs to "app"`})
		ck.do(t, call{method: "POST", path: release(r5), token: tokNarrow, want: 403, wantInError: `belongs to "app"`})
		if r := ck.do(t, call{method: "POST", path: release(r5), want: 200}); r["released"] != 1.0 {
			t.Errorf("release after a settlement: %v", r)
		}
		ck.do(t, call{method: "POST", path: multi, body: `{"limits":[{"name":"api-tpm"},{"name":"other"}]}`, token: tokNarrow, want: 403, wantInError: `not "other"`})
		ck.do(t, call{method: "POST", path: multi, body: `{"limits":[{"name":"api-tpm"}]}`, token: tokNarrow, want: 200})

		ck.do(t, call{method: "POST", path: multi, body: `{"limits":[{"name":"api-tpm"},{"name":"api-nope"}]}`, want: 404, wantInError: `"api-nope"`})
		ck.do(t, call{method: "POST", path: settle("999999"), body: `{"actual":[]}`, want: 404, wantInError: "unknown or final"})
		ck.do(t, call{method: "POST", path: release("999999"), want: 404, wantInError: "unknown or final"})
		// Final after its settle window: forgotten.
		r6 := ck.do(t, call{method: "POST", path: multi, body: `{"limits":[{"name":"api-tpm"}],"max_wait":"1s","settle_within":"1ns"}`, want: 200})["reservation_id"].(string)
		time.Sleep(20 * time.Millisecond)
		ck.do(t, call{method: "POST", path: settle(r6), body: `{"actual":[]}`, want: 404, wantInError: "unknown or final"})
		ck.do(t, call{method: "POST", path: release(r6), want: 404})

		ck.do(t, call{method: "PUT", path: "/v1/limits/api-leased", body: `{"algorithm":"strict","rate":100}`, want: 201})
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-leased/lease-policy", body: `{"leased":true}`, want: 200})
		for _, tc := range []struct {
			body    string
			invalid bool
			mention string
		}{
			{`{}`, true, `"limits" is missing`},
			{``, true, "empty"},
			{`{"limits":[]}`, true, "1 to 8"},
			{`{"limits":null}`, true, `"limits"`},
			{`{"limits":[{"name":"a1"},{"name":"a2"},{"name":"a3"},{"name":"a4"},{"name":"a5"},{"name":"a6"},{"name":"a7"},{"name":"a8"},{"name":"a9"}]}`, true, "1 to 8"},
			{`{"limits":[{"permits":1}]}`, true, `no "name"`},
			{`{"limits":[{"name":"bad name"}]}`, true, "limit name"},
			{`{"limits":[{"name":"api-tpm","permits":0}]}`, true, "permits 0"},
			{`{"limits":[{"name":"api-tpm","permits":"1"}]}`, true, `"permits"`},
			{`{"limits":[{"name":"api-tpm"}],"session":1}`, true, `unknown field "session"`},
			{`{"limits":[{"name":"api-tpm"},{"name":"api-tpm"}]}`, false, "listed twice"},
			{`{"limits":[{"name":"api-tpm"}],"max_wait":"-1s"}`, true, `"max_wait"`},
			{`{"limits":[{"name":"api-tpm"}],"settle_within":"0s"}`, true, `"settle_within"`},
			{`{"limits":[{"name":"api-tpm"}],"settle_within":"11m"}`, false, `"settle_within"`},
			{`{"limits":[{"name":"api-tpm"}],"request_id":""}`, true, `"request_id"`},
			{`{"limits":[{"name":"api-rpm","permits":2},{"name":"api-tpm"}]}`, false, "is strict"},
			{`{"limits":[{"name":"api-mconc","permits":3}]}`, false, "at most 2"},
			{`{"limits":[{"name":"api-tpm"},{"name":"api-leased"}]}`, false, "leased"},
		} {
			ck.do(t, call{method: "POST", path: multi, body: tc.body, want: 400, invalid: tc.invalid, wantInError: tc.mention})
		}
		ck.do(t, call{method: "DELETE", path: "/v1/limits/api-leased?force=true", want: 200})
		for _, tc := range []struct {
			body    string
			invalid bool
			mention string
		}{
			{`{}`, true, `"actual" is missing`},
			{``, true, "empty"},
			{`{"actual":null}`, true, `"actual"`},
			{`{"actual":[{"name":"api-tpm"}]}`, true, `no "permits"`},
			{`{"actual":[{"permits":1}]}`, true, `no "name"`},
			{`{"actual":[{"name":"api-tpm","permits":-1}]}`, true, "permits -1"},
			{`{"actual":[{"name":"a1","permits":1},{"name":"a2","permits":1},{"name":"a3","permits":1},{"name":"a4","permits":1},{"name":"a5","permits":1},{"name":"a6","permits":1},{"name":"a7","permits":1},{"name":"a8","permits":1},{"name":"a9","permits":1}]}`, true, "9 limits"},
			{`{"actual":[],"request_id":"a b"}`, true, `"request_id"`},
			{`{"actual":[],"permits":1}`, true, `unknown field "permits"`},
		} {
			ck.do(t, call{method: "POST", path: settle(r3), body: tc.body, want: 400, invalid: tc.invalid, wantInError: tc.mention})
		}

		// A full table of reservations answers 503 ReserveBusy, through
		// the real handler (a register's table of 2^18 reservations is too
		// big to fill here).
		fs := fakestore.New()
		fs.SetReserveFunc(func(_ context.Context, r fsm.Reserve) (fsm.ReserveResult, error) {
			if !r.Track {
				t.Errorf("POST /v1/reserve made a reserve without Track: %+v", r)
			}
			return fsm.ReserveResult{Status: fsm.Busy, RetryAfterNanos: int64(2500 * time.Millisecond)}, nil
		})
		plain := &testNode{id: "plain", srv: httptest.NewServer(server.RequireTokens(server.NewHandler(fs, server.HandlerOptions{}), tokens))}
		defer plain.srv.Close()
		if b := ck.do(t, call{to: plain, method: "POST", path: multi, body: `{"limits":[{"name":"api-tpm"}],"request_id":"r9"}`, want: 503, wantInError: "reservations"}); b["granted"] != false || b["retry_after_ns"] != 2.5e9 {
			t.Errorf("busy: %v", b)
		}
		// The fake register is a whole store: shadow mode too.
		ck.do(t, call{to: plain, method: "PUT", path: "/v1/limits/api-x", body: `{"algorithm":"strict","rate":1,"shadow":true}`, want: 201})
		ck.do(t, call{to: plain, method: "PUT", path: "/v1/limits/api-x", body: `{"algorithm":"strict","rate":1,"shadow":false}`, want: 200})
	})

	// Templates: put, read, list and delete; a reserve on prefix:key
	// creates the key; past the template's max keys a reserve, single or
	// of several limits, is 429 keys_full; a deleted template is listed
	// while its key lives.
	t.Run("templates", func(t *testing.T) {
		m := ck.do(t, call{method: "PUT", path: "/v1/templates/cust", body: `{"algorithm":"bursty","rate":10,"max_burst_seconds":1,"idle":"1m","max_keys":1}`, want: 201})
		if m["created"] != true || m["idle"] != "1m0s" || m["live_keys"] != 0.0 {
			t.Errorf("created %v", m)
		}
		for _, body := range []string{
			`{"algorithm":"strict","rate":1,"per":"1h","max_reserved":1,"expiry":"1s","idle":"1h","max_keys":2,"shadow":false}`,
			`{"algorithm":"warmup","rate":5,"warmup":"10s","cold_factor":3,"idle":"1s","max_keys":2}`,
			`{"algorithm":"hybrid","rate":5,"burst_ratio":1,"strictness":1,"idle":"720h","max_keys":2097152}`,
			`{"algorithm":"concurrency","max_in_flight":3,"ttl":"30s","idle":"1m","max_keys":2}`,
			`{"algorithm":"bursty","rate":10,"max_burst_seconds":1,"idle":"1m","max_keys":1}`,
		} {
			ck.do(t, call{method: "PUT", path: "/v1/templates/tpl-x", body: body, want: 200 + map[bool]int{true: 1}[strings.Contains(body, `"strict"`)]})
		}
		for _, tc := range []struct {
			body, mention string
			invalid       bool
		}{
			{`{"algorithm":"strict","rate":1,"max_keys":1}`, `"idle" is required`, true},
			{`{"algorithm":"strict","rate":1,"idle":"1m"}`, `"max_keys" is required`, true},
			{`{"algorithm":"strict","rate":1,"idle":"1m","max_keys":0}`, "1 to 2097152", true},
			{`{"algorithm":"strict","rate":1,"idle":"1m","max_keys":2097153}`, "1 to 2097152", true},
			{`{"algorithm":"strict","rate":1,"idle":"0s","max_keys":1}`, `"idle"`, true},
			{`{"algorithm":"strict","rate":1,"idle":"999ms","max_keys":1}`, `from "1s" to "720h"`, false},
			{`{"algorithm":"strict","rate":1,"idle":"721h","max_keys":1}`, `from "1s" to "720h"`, false},
			{`{"algorithm":"strict","rate":1,"idle":"1m","max_keys":1,"shadow":true}`, `"shadow": true; allowed: false`, true},
			{`{"algorithm":"hybrid","rate":1,"strictness":0.5,"idle":"1m","max_keys":1}`, "never comes to rest", false},
			{`{"algorithm":"strict","idle":"1m","max_keys":1}`, `"rate" is required`, true},
		} {
			ck.do(t, call{method: "PUT", path: "/v1/templates/tpl-y", body: tc.body, want: 400, invalid: tc.invalid, wantInError: tc.mention})
		}
		ck.do(t, call{method: "POST", path: "/v1/limits/cust:a/reserve", body: `{"permits":1}`, want: 200})
		m = ck.do(t, call{method: "POST", path: "/v1/limits/cust:b/reserve", body: `{"permits":1}`, want: 429, wantInError: "its max keys"})
		if m["keys_full"] != true {
			t.Errorf("a reserve past the cap: %v", m)
		}
		ck.do(t, call{method: "POST", path: "/v1/reserve", body: `{"limits":[{"name":"cust:c"}]}`, want: 429, wantInError: "its max keys"})
		if l := ck.do(t, call{method: "GET", path: "/v1/limits?prefix=cust:", want: 200}); len(l["limits"].([]any)) != 1 {
			t.Errorf("keys of cust: %v", l)
		}
		for _, m := range []string{"GET", "HEAD"} {
			ck.do(t, call{method: m, path: "/v1/templates/cust", want: 200})
			ck.do(t, call{method: m, path: "/v1/templates/nope", want: 404})
			ck.do(t, call{method: m, path: "/v1/templates", want: 200})
			ck.do(t, call{method: m, path: "/v1/templates?prefix=c", want: 400})
		}
		if g := ck.do(t, call{method: "GET", path: "/v1/templates/cust", want: 200}); g["live_keys"] != 1.0 {
			t.Errorf("template cust: %v", g)
		}
		if d := ck.do(t, call{method: "DELETE", path: "/v1/templates/cust", want: 200}); d["existed"] != true || d["live_keys"] != 1.0 {
			t.Errorf("delete: %v", d)
		}
		ck.do(t, call{method: "DELETE", path: "/v1/templates/cust", want: 404})
		// Deleted, its key live: listed, "deleted":true.
		listed := false
		for _, v := range ck.do(t, call{method: "GET", path: "/v1/templates", want: 200})["templates"].([]any) {
			if tm := v.(map[string]any); tm["prefix"] == "cust" {
				listed = tm["deleted"] == true && tm["live_keys"] == 1.0
			}
		}
		if !listed {
			t.Errorf("GET /v1/templates does not list cust deleted with its live key")
		}
		ck.do(t, call{method: "DELETE", path: "/v1/templates/tpl-x", body: `{"force":true}`, want: 400, invalid: true})
		ck.do(t, call{method: "DELETE", path: "/v1/templates/tpl-x", want: 200})
	})

	// Inputs at the edges of what the document and the server accept
	// (durations, names of 128 and 129 characters, request ids of 64 and
	// 65, permit counts): on each the document and the server agree,
	// accepting it (any answer but 400) or rejecting it (400), but for
	// the residue the document describes, which must stay as described.
	t.Run("boundaries", func(t *testing.T) {
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-edge", body: `{"algorithm":"strict","rate":1000000,"max_reserved":4}`, want: 201}) // at most 5 permits
		const reserve = "/v1/limits/api-edge/reserve"
		n128, n129 := strings.Repeat("n", 128), strings.Repeat("n", 129)
		r64, r65 := strings.Repeat("r", 64), strings.Repeat("r", 65)
		type edge struct {
			c call
			// residue says why the document and the server disagree on
			// the input ("": they agree), and docAccepts which way.
			residue    string
			docAccepts bool
		}
		var edges []edge
		for _, d := range []string{
			"0", "+0", "-0", "-0s", "-0.000ms0s", "-.0h", "0.1ns", "1.5s", ".5s", "5.s", "1h30m", "1µs", "1μs", "1us", "0002s",
			"2562047h", "153722867m", "9223372036s", "9223372036854ms", "9223372036854775us", "9223372036854775807ns",
			"2562048h", "9999999999h", "153722868m", "9223372037s", "9223372036855ms", "9223372036854776us", "9223372036854775808ns",
			"-1ns", "-0.5s", "", "00", "1", ".s", "1d", "1S", " 1s",
		} {
			edges = append(edges, edge{c: call{method: "POST", path: reserve, body: `{"max_wait":"` + d + `"}`}})
		}
		for _, d := range []string{"1s", "+1s", "0", "0s", "-0s", "-1s"} {
			edges = append(edges, edge{c: call{method: "PUT", path: "/v1/limits/api-edge-per", body: `{"algorithm":"strict","rate":1,"per":"` + d + `"}`}})
		}
		edges = append(edges,
			edge{call{method: "POST", path: reserve, body: `{"max_wait":"2562047h1h"}`}, "two numbers overflow int64 nanoseconds together", true},
			edge{call{method: "POST", path: reserve, body: `{"max_wait":"-0.1ns"}`}, "negative, but 0 once rounded to whole nanoseconds", false},
			edge{call{method: "PUT", path: "/v1/limits/api-edge-per", body: `{"algorithm":"strict","rate":1,"per":"0.1ns"}`}, "0 once rounded to whole nanoseconds", true},

			edge{c: call{method: "GET", path: "/v1/limits/" + n128}},
			edge{c: call{method: "GET", path: "/v1/limits/" + n129}},
			edge{c: call{method: "POST", path: "/v1/limits/" + n128 + "/reserve", body: `{}`}},
			edge{c: call{method: "POST", path: "/v1/limits/" + n129 + "/reserve", body: `{}`}},
			edge{c: call{method: "POST", path: "/v1/limits/api-nope/lease", body: `{"holder":"` + n128 + `","group":"g","demand_milli_per_sec":1,"ttl":"1s"}`}},
			edge{c: call{method: "POST", path: "/v1/limits/api-nope/lease", body: `{"holder":"` + n129 + `","group":"g","demand_milli_per_sec":1,"ttl":"1s"}`}},
			edge{c: call{method: "POST", path: "/v1/cluster/transfer-leadership", body: `{"to":"` + n128 + `"}`}},
			edge{c: call{method: "POST", path: "/v1/cluster/transfer-leadership", body: `{"to":"` + n129 + `"}`}},
			edge{c: call{method: "DELETE", path: "/v1/cluster/servers/" + n128}},
			edge{c: call{method: "DELETE", path: "/v1/cluster/servers/" + n129}},

			edge{c: call{method: "POST", path: reserve, body: `{"request_id":"` + r64 + `"}`}},
			edge{c: call{method: "POST", path: reserve, body: `{"request_id":"` + r65 + `"}`}},
			edge{c: call{method: "POST", path: reserve, body: `{"request_id":""}`}},
			edge{c: call{method: "POST", path: "/v1/limits/api-nope/lease", body: `{"holder":"h","group":"g","demand_milli_per_sec":1,"ttl":"1s","request_id":"` + r64 + `"}`}},
			edge{c: call{method: "POST", path: "/v1/limits/api-nope/lease", body: `{"holder":"h","group":"g","demand_milli_per_sec":1,"ttl":"1s","request_id":"` + r65 + `"}`}},

			edge{c: call{method: "POST", path: reserve, body: `{"permits":0}`}},
			edge{c: call{method: "POST", path: reserve, body: `{"permits":-1}`}},
			edge{c: call{method: "POST", path: reserve, body: `{"permits":1}`}},
			edge{c: call{method: "POST", path: reserve, body: `{"permits":5}`}},
			edge{c: call{method: "POST", path: reserve, body: `{"permits":10000000000000000000}`}},
			edge{call{method: "POST", path: reserve, body: `{"permits":6}`}, "the limit grants at most 5 at once, which the document cannot know", true},
			edge{call{method: "POST", path: reserve, body: `{"permits":1.0}`}, "JSON Schema counts 1.0 as an integer", true},
			edge{call{method: "POST", path: reserve, body: `{"permits":9223372036854775808}`}, "2^63 and 2^63-1 are the same float64", true},
			edge{c: call{method: "POST", path: reserve, body: `{"session":10000000000000000000,"seq":1}`}},
		)
		// Reservations: the reserve of several limits, the settle window,
		// the reservation id in the path, and concurrency limits.
		const multi = "/v1/reserve"
		eight := `{"name":"api-edge"}`
		for i := 2; i <= 8; i++ {
			eight += `,{"name":"api-edge-n` + strconv.Itoa(i) + `"}`
		}
		ck.do(t, call{method: "PUT", path: "/v1/limits/api-edge-conc", body: `{"algorithm":"concurrency","max_in_flight":1}`, want: 201})
		for _, d := range []string{"1ns", "1s", "10m", "600s", "9m60s", "0s", "-0s", "0", "-1s", ""} {
			edges = append(edges, edge{c: call{method: "POST", path: multi, body: `{"limits":[{"name":"api-edge"}],"settle_within":"` + d + `"}`}})
		}
		for _, d := range []string{"1ns", "1s", "24h", "1439m", "0s", "-1s", "-0s"} {
			edges = append(edges, edge{c: call{method: "PUT", path: "/v1/limits/api-edge-conc", body: `{"algorithm":"concurrency","max_in_flight":1,"ttl":"` + d + `"}`}})
		}
		for _, n := range []string{"0", "1", "1048576", "1048577", "-1"} {
			edges = append(edges, edge{c: call{method: "PUT", path: "/v1/limits/api-edge-conc", body: `{"algorithm":"concurrency","max_in_flight":` + n + `}`}})
		}
		for _, id := range []string{"1", "007", "18446744073709551615", "018446744073709551615", "18446744073709551616", "99999999999999999999", "0", "000", "-1", "+1", "1e3", "0x1", " 1"} {
			edges = append(edges,
				edge{c: call{method: "POST", path: "/v1/reservations/" + strings.ReplaceAll(id, " ", "%20") + "/release"}},
				edge{c: call{method: "POST", path: "/v1/reservations/" + strings.ReplaceAll(id, " ", "%20") + "/settle", body: `{"actual":[]}`}})
		}
		edges = append(edges,
			edge{call{method: "POST", path: multi, body: `{"limits":[{"name":"api-edge"}],"settle_within":"10m0.000000001s"}`}, "over 10m, which a pattern cannot bound", true},
			edge{call{method: "POST", path: multi, body: `{"limits":[{"name":"api-edge"}],"settle_within":"601s"}`}, "over 10m, which a pattern cannot bound", true},
			edge{call{method: "PUT", path: "/v1/limits/api-edge-conc", body: `{"algorithm":"concurrency","max_in_flight":1,"ttl":"24h0m0.000000001s"}`}, "over 24h, which a pattern cannot bound", true},
			edge{call{method: "POST", path: multi, body: `{"limits":[{"name":"api-edge"},{"name":"api-edge"}]}`}, "a limit listed twice, which JSON Schema cannot forbid by name", true},
			edge{call{method: "POST", path: multi, body: `{"limits":[{"name":"api-edge","permits":6}]}`}, "the limit grants at most 5 at once, which the document cannot know", true},
			edge{call{method: "POST", path: multi, body: `{"limits":[{"name":"api-edge","permits":1.0}]}`}, "JSON Schema counts 1.0 as an integer", true},
			edge{c: call{method: "POST", path: "/v1/reservations/1/release", body: `{ }`}},
			edge{call{method: "POST", path: multi, body: `{"limits":[{"name":"api-edge"}],"settle_within":"0.5ns"}`}, "0 once rounded to whole nanoseconds", true},
			// Unknown fields inside the entries of "limits" and "actual"
			// are rejected, as everywhere else.
			edge{c: call{method: "POST", path: multi, body: `{"limits":[{"name":"api-edge","weight":1}]}`}},
			edge{c: call{method: "POST", path: "/v1/reservations/1/settle", body: `{"actual":[{"name":"api-edge","permits":1,"weight":1}]}`}},
			edge{c: call{method: "POST", path: multi, body: `{"limits":[` + eight + `]}`}},
			edge{c: call{method: "POST", path: multi, body: `{"limits":[` + eight + `,{"name":"api-edge-n9"}]}`}},
			edge{c: call{method: "POST", path: multi, body: `{"limits":[{"name":"` + n128 + `"}]}`}},
			edge{c: call{method: "POST", path: multi, body: `{"limits":[{"name":"` + n129 + `"}]}`}},
			edge{c: call{method: "POST", path: multi, body: `{"limits":[{"name":"api-edge"}],"request_id":"` + r64 + `"}`}},
			edge{c: call{method: "POST", path: multi, body: `{"limits":[{"name":"api-edge"}],"request_id":"` + r65 + `"}`}},
			edge{c: call{method: "POST", path: multi, body: `{"limits":[{"name":"api-edge","permits":5}]}`}},
			edge{c: call{method: "POST", path: multi, body: `{"limits":[{"name":"api-edge","permits":0}]}`}},
			edge{c: call{method: "POST", path: multi, body: `{"limits":[{"name":"api-edge","permits":10000000000000000000}]}`}},
			edge{c: call{method: "POST", path: multi, body: `{"limits":[{"name":"api-edge"}],"max_wait":"2562047h"}`}},
			edge{c: call{method: "POST", path: multi, body: `{"limits":[{"name":"api-edge"}],"max_wait":"2562048h"}`}},
			edge{c: call{method: "POST", path: "/v1/reservations/1/settle", body: `{"actual":[{"name":"api-edge","permits":0}]}`}},
			edge{c: call{method: "POST", path: "/v1/reservations/1/settle", body: `{"actual":[{"name":"api-edge","permits":-1}]}`}},
			edge{c: call{method: "POST", path: "/v1/reservations/1/settle", body: `{"actual":[{"name":"api-edge","permits":9223372036854775807}]}`}},
			edge{c: call{method: "POST", path: "/v1/reservations/1/settle", body: `{"actual":[{"name":"` + n129 + `","permits":1}]}`}},
			edge{c: call{method: "POST", path: "/v1/reservations/1/settle", body: `{"actual":[],"request_id":"` + r64 + `"}`}},
			edge{c: call{method: "POST", path: "/v1/reservations/1/settle", body: `{"actual":[],"request_id":"` + r65 + `"}`}},
		)
		residues := 0
		for _, e := range edges {
			if e.residue != "" {
				residues++
			}
			x := ck.exchange(t, e.c)
			doc, server := x.reqErr == nil, x.status != http.StatusBadRequest
			what := fmt.Sprintf("%s %.60s %.200s", e.c.method, e.c.path, x.body)
			switch {
			case e.residue == "" && doc != server:
				t.Errorf("%s: the document accepts it: %v (%v), the server: %v (%d %.200s)", what, doc, x.reqErr, server, x.status, x.answer)
			case e.residue != "" && (doc != e.docAccepts || server == e.docAccepts):
				t.Errorf("%s: a residue (%s) changed: the document accepts it: %v (want %v), the server: %v (%d %.200s)",
					what, e.residue, doc, e.docAccepts, server, x.status, x.answer)
			}
		}
		t.Logf("%d boundary inputs, %d of them a described residue", len(edges), residues)
		ck.do(t, call{method: "DELETE", path: "/v1/limits/api-edge", want: 200})
		ck.do(t, call{method: "DELETE", path: "/v1/limits/api-edge-per", want: 200})
		ck.do(t, call{method: "DELETE", path: "/v1/limits/api-edge-conc", want: 200})
	})

	t.Run("every path parameter is checked", func(t *testing.T) {
		eachOperation(doc, func(method, path string, op *openapi3.Operation) {
			var bad []string
			if strings.Contains(path, "{name}") {
				bad = append(bad, strings.Replace(samplePath(path), "/other", "/bad!name", 1))
			}
			if strings.Contains(path, "{prefix}") {
				bad = append(bad, strings.Replace(samplePath(path), "/tpl", "/a:b", 1), strings.Replace(samplePath(path), "/tpl", "/"+strings.Repeat("p", 65), 1))
			}
			if strings.Contains(path, "/leases/{id}") {
				bad = append(bad, strings.Replace(samplePath(path), "/leases/1", "/leases/x1", 1))
			}
			if strings.Contains(path, "/servers/{id}") {
				bad = append(bad, strings.Replace(samplePath(path), "/n9", "/bad!id", 1))
			}
			if strings.Contains(path, "/reservations/{id}") {
				for _, id := range []string{"x1", "0", "-1", "+1", "18446744073709551616"} {
					bad = append(bad, strings.Replace(samplePath(path), "/reservations/1/", "/reservations/"+id+"/", 1))
				}
			}
			for _, p := range bad {
				ck.do(t, call{method: method, path: p, body: sampleBody[op.OperationID], token: tokAdmin, want: 400, invalid: true})
			}
		})
	})

	t.Run("tokens", func(t *testing.T) {
		eachOperation(doc, func(method, path string, op *openapi3.Operation) {
			role := roleOf(op)
			if role == "none" {
				return
			}
			p := samplePath(path)
			body := sampleBody[op.OperationID]
			m := ck.do(t, call{method: method, path: p, body: body, token: "-", want: 401, invalid: true, wantInError: "missing token"})
			if method != http.MethodHead && m["required_role"] != roles[role] {
				t.Errorf("%s %s: 401 names role %v, the document %q (x-permitd-role %s)", method, path, m["required_role"], roles[role], role)
			}
			if refused := roleRefused[role]; refused != "" {
				m := ck.do(t, call{method: method, path: p, body: body, token: refused, want: 403})
				if method != http.MethodHead && m["required_role"] != roles[role] {
					t.Errorf("%s %s: 403 names role %v, the document %q (x-permitd-role %s)", method, path, m["required_role"], roles[role], role)
				}
			}
		})
		ck.do(t, call{method: "GET", path: "/v1/status", auth: "Bearer pmt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", want: 401, wantInError: "unknown or revoked"})
		ck.do(t, call{method: "GET", path: "/v1/status", auth: "Basic dXNlcjpwYXNz", want: 401, invalid: true, wantInError: "not Bearer"})
	})

	t.Run("bodies over 1 MiB", func(t *testing.T) {
		eachOperation(doc, func(method, path string, op *openapi3.Operation) {
			if op.Responses.Status(413) != nil {
				ck.do(t, call{method: method, path: samplePath(path), big: true, token: tokAdmin, want: 413, invalid: true, wantInError: "1 MiB"})
			}
		})
	})

	// n4 knows no leader: every operation that needs one answers 503
	// with Retry-After. They wait in parallel.
	t.Run("no leader", func(t *testing.T) {
		eachOperation(doc, func(method, path string, op *openapi3.Operation) {
			if op.Responses.Status(503) == nil {
				return
			}
			t.Run(op.OperationID, func(t *testing.T) {
				t.Parallel()
				ck.do(t, call{to: lonely, method: method, path: samplePath(path), body: sampleBody[op.OperationID], token: tokAdmin, want: 503})
			})
		})
	})

	t.Run("cluster", func(t *testing.T) {
		leader, follower := reg.leader(t)
		for _, m := range []string{"GET", "HEAD"} {
			ck.do(t, call{to: lonely, method: m, path: "/readyz", want: 503, wantInError: "no leader known"})
		}
		ck.do(t, call{method: "POST", path: "/v1/cluster/join", body: `{"id":"n4","raft_addr":"n4:7000"}`, want: 200})
		ck.do(t, call{method: "POST", path: "/v1/cluster/join", body: `{"id":"n4","raft_addr":"n4:7000"}`, want: 200}) // again: a no-op
		ck.do(t, call{method: "POST", path: "/v1/cluster/join", body: `{"id":"n5","raft_addr":"n1:7000"}`, want: 400, wantInError: "already the address"})
		ck.do(t, call{method: "POST", path: "/v1/cluster/join", body: `{"id":"n5"}`, want: 400, invalid: true, wantInError: "required"})
		ck.do(t, call{method: "POST", path: "/v1/cluster/join", body: `{"id":"n5","raft_addr":"nohost"}`, want: 400, invalid: true, wantInError: "not a valid address"})
		ck.do(t, call{method: "POST", path: "/v1/cluster/join", body: `{"id":"n5","raft_addr":"n5:0"}`, want: 400, wantInError: "not a valid address"})
		// Asked of the leader, which committed the join: a follower may
		// not have applied it yet.
		if c := ck.do(t, call{to: leader, method: "GET", path: "/v1/cluster", want: 200}); len(c["servers"].([]any)) != 4 {
			t.Errorf("after the join: %v", c)
		}
		// n4 (no node answers there) is not promoted: with two more
		// pending joins the cluster is at its cap, and a fourth is 409.
		ck.do(t, call{method: "POST", path: "/v1/cluster/join", body: `{"id":"n5","raft_addr":"n5:7000"}`, want: 200})
		ck.do(t, call{method: "POST", path: "/v1/cluster/join", body: `{"id":"n6","raft_addr":"n6:7000"}`, want: 200})
		ck.do(t, call{method: "POST", path: "/v1/cluster/join", body: `{"id":"n7","raft_addr":"n7:7000"}`, want: 409, wantInError: "not voters yet (n4, n5, n6)"})
		ck.do(t, call{method: "DELETE", path: "/v1/cluster/servers/n5", want: 200})
		ck.do(t, call{method: "DELETE", path: "/v1/cluster/servers/n6", want: 200})
		ck.do(t, call{method: "DELETE", path: "/v1/cluster/servers/n4", want: 200})
		ck.do(t, call{method: "DELETE", path: "/v1/cluster/servers/n4", want: 404})
		ck.do(t, call{method: "DELETE", path: "/v1/cluster/servers/n3", body: `{"now":true}`, want: 400, invalid: true})

		ck.do(t, call{to: leader, method: "GET", path: "/v1/snapshot", want: 200})
		ck.do(t, call{to: follower, method: "GET", path: "/v1/snapshot", want: 503, wantInError: "not the leader"})

		ck.do(t, call{method: "POST", path: "/v1/cluster/transfer-leadership", body: `{"to":"n9"}`, want: 404})
		ck.do(t, call{method: "POST", path: "/v1/cluster/transfer-leadership", body: `{"to":"` + leader.id + `"}`, want: 400, wantInError: "already leads"})
		ck.do(t, call{method: "POST", path: "/v1/cluster/transfer-leadership", body: `{"to":"a b"}`, want: 400, invalid: true})
		ck.do(t, call{method: "POST", path: "/v1/cluster/transfer-leadership", body: `{"to":"` + follower.id + `"}`, want: 200})
		waitFor(t, 10*time.Second, "the new leader", func() bool { return follower.n.Status().State == "leader" })
	})

	t.Run("the document's rejected bodies are the server's", func(t *testing.T) { checkBodies(t, ck, doc) })

	t.Run("methods and unknown paths", func(t *testing.T) {
		for path, item := range doc.Paths.Map() {
			var documented []string
			for m := range item.Operations() {
				documented = append(documented, m)
			}
			resp := ck.doOff(t, "PATCH", samplePath(path), "MethodNotAllowed", 405)
			allowed := strings.Split(resp.Header.Get("Allow"), ", ")
			slices.Sort(allowed)
			slices.Sort(documented)
			if !slices.Equal(allowed, documented) {
				t.Errorf("%s: the server allows %v, the document %v", path, allowed, documented)
			}
		}
		ck.doOff(t, "GET", "/v1/nowhere", "UnknownPath", 404)
	})

	// Every operation and every documented status was exercised.
	for _, key := range operations(doc) {
		method, path, _ := strings.Cut(key, " ")
		op := doc.Paths.Value(path).GetOperation(method)
		if ck.seen[key] == nil {
			t.Errorf("%s (%s): never exercised", key, op.OperationID)
			continue
		}
		for code := range op.Responses.Map() {
			n, err := strconv.Atoi(code)
			if err != nil || !ck.seen[key][n] {
				t.Errorf("%s (%s): documented status %s never answered", key, op.OperationID, code)
				continue
			}
			for name := range answerSchemas(op, n) {
				if !ck.matched[key+" "+code][name] {
					t.Errorf("%s (%s): documented answer %s %s never answered (its status was, with other bodies)", key, op.OperationID, code, name)
				}
			}
		}
	}

	// The handler served every route (its metrics count requests by
	// route label).
	served := map[string]bool{}
	for _, tn := range reg.nodes {
		mfs, err := tn.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "permitd_http_request_duration_seconds" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "route" {
						served[l.GetValue()] = true
					}
				}
			}
		}
	}
	for _, l := range routeLabels(t) {
		if !served[l] {
			t.Errorf("route %s was never served", l)
		}
	}
	if t.Failed() {
		return
	}
	var n, m int
	for _, s := range ck.seen {
		n += len(s)
	}
	for _, s := range ck.matched {
		m += len(s)
	}
	t.Logf("%d operations, %d (operation, status) pairs, %d (operation, status, answer schema) triples exercised", len(ck.seen), n, m)
}

// shadowOnFollower checks that a follower's view of a limit in shadow
// mode, read through the leader (node/resultcodec.go, encodeLimits), says
// so.
func shadowOnFollower(t *testing.T, ck *checker, follower *testNode, name string) {
	t.Helper()
	if l := ck.do(t, call{to: follower, method: "GET", path: "/v1/limits/" + name, want: 200}); l["shadow"] != true {
		t.Errorf("follower %s answers limit %q in shadow mode with shadow %v", follower.id, name, l["shadow"])
	}
}
