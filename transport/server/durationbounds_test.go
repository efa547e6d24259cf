package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/node/faultnet"
	"github.com/permitd/permitd/transport/wire"
)

// durationbounds_test.go: every duration the edge accepts, over its whole
// accepted range, through a real register (three nodes in the process on
// an in-memory network), on the leader and on a follower, over HTTP and
// over the binary protocol, gets a decision: a grant or a refusal, never
// a 503 (a follower that had forwarded a reserve with a max wait near
// math.MaxInt64 gave up on the leader's answer at once, its deadline
// wrapped into the past: 503 "no leader" after the leader had decided),
// and the register counts exactly the decisions answered.
//
// The values of each kind are its bounds, the values next to the sums the
// path makes (max wait plus the node's LeaderWait), and random ones spread
// over the range's orders of magnitude.

// boundsLeaderWait is the nodes' LeaderWait (the default): a max wait of
// math.MaxInt64 - boundsLeaderWait + 1 is the first whose sum with it
// wraps.
const boundsLeaderWait = time.Second

// boundsNode is one node of the register, served over HTTP and binary.
type boundsNode struct {
	id   string
	n    *node.Node
	srv  *httptest.Server
	conn *wire.Conn
}

// startBoundsRegister starts three nodes and waits for a ready leader.
func startBoundsRegister(t *testing.T) []*boundsNode {
	t.Helper()
	sw := faultnet.New()
	logger := hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Off, Output: io.Discard})
	var servers []raft.Server
	ids := []string{"n1", "n2", "n3"}
	for _, id := range ids {
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":7000"), Suffrage: raft.Voter})
	}
	var nodes []*boundsNode
	for _, id := range ids {
		n, err := node.New(node.Config{
			ID: id, DataDir: t.TempDir(), RaftAddr: id + ":7000", InitialCluster: servers,
			Network: sw.Host(id + ":7000"), Logger: logger,
			// Generous for a loaded 2-core machine under -race: a spurious
			// election only slows the test down.
			HeartbeatTimeout: time.Second, ElectionTimeout: time.Second,
			LeaderLeaseTimeout: 500 * time.Millisecond, ApplyTimeout: 3 * time.Second,
			LeaderWait: boundsLeaderWait,
		})
		if err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
		bn := &boundsNode{id: id, n: n, srv: httptest.NewServer(NewHandler(n, HandlerOptions{}))}
		server, client := net.Pipe()
		go NewBinary(n).Serve(server)
		bn.conn = wire.NewConn(client)
		t.Cleanup(func() {
			bn.conn.Close()
			bn.srv.Close()
			n.Kill()
		})
		nodes = append(nodes, bn)
	}
	boundsLeader(t, nodes)
	return nodes
}

// boundsLeader waits for a ready leader and returns it and a follower.
func boundsLeader(t *testing.T, nodes []*boundsNode) (leader, follower *boundsNode) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		leader, follower = nil, nil
		for _, bn := range nodes {
			switch st := bn.n.Status(); {
			case st.State == "leader" && st.Ready:
				leader = bn
			case st.State == "follower" && st.Ready:
				follower = bn
			}
		}
		if leader != nil && follower != nil {
			return leader, follower
		}
		if time.Now().After(deadline) {
			t.Fatal("no ready leader with a ready follower within 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// durationsOver returns the values of a duration the edge accepts from lo
// to hi: both bounds, the values next to the sum with boundsLeaderWait
// when in range, and k random ones, uniform in log2 over [lo, hi].
func durationsOver(rng *rand.Rand, lo, hi time.Duration, k int) []time.Duration {
	out := []time.Duration{lo, hi}
	for _, v := range []time.Duration{1, time.Millisecond, time.Second, time.Hour, 24 * time.Hour, 1 << 62,
		math.MaxInt64 - boundsLeaderWait - 1, math.MaxInt64 - boundsLeaderWait, math.MaxInt64 - boundsLeaderWait + 1, math.MaxInt64 - 1} {
		if v > lo && v < hi {
			out = append(out, v)
		}
	}
	span := math.Log2(float64(hi)+1) - math.Log2(float64(lo)+1)
	for range k {
		v := time.Duration(math.Exp2(math.Log2(float64(lo)+1)+rng.Float64()*span) - 1)
		out = append(out, min(max(v, lo), hi))
	}
	return out
}

// boundsCheck sends requests and counts the decisions they got.
type boundsCheck struct {
	t     *testing.T
	nodes []*boundsNode
	ctx   context.Context
	seq   int
}

// httpDo sends one request to bn and returns the status and the JSON
// answer. A 503 is sent again (same body, so the same request ID) after
// waiting for a ready leader, twice: an election under a loaded run is
// not what this test is about, and a retried reserve is answered with its
// first decision; a 503 the third time fails the test.
func (c *boundsCheck) httpDo(bn *boundsNode, method, path, body, what string) (int, map[string]any) {
	c.t.Helper()
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(c.ctx, method, bn.srv.URL+path, strings.NewReader(body))
		if err != nil {
			c.t.Fatal(err)
		}
		resp, err := bn.srv.Client().Do(req)
		if err != nil {
			c.t.Fatalf("%s: %v", what, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var obj map[string]any
		_ = json.Unmarshal(b, &obj)
		if resp.StatusCode == http.StatusServiceUnavailable && attempt < 2 {
			boundsLeader(c.t, c.nodes)
			continue
		}
		if resp.StatusCode >= 500 {
			c.t.Fatalf("%s via %s (%s %s %s): %d %s; want a decision", what, bn.id, method, path, body, resp.StatusCode, bytes.TrimSpace(b))
		}
		return resp.StatusCode, obj
	}
}

// requestID returns a new request ID.
func (c *boundsCheck) requestID() string {
	c.seq++
	return fmt.Sprintf("bounds-%d", c.seq)
}

// put creates or replaces a limit; false when the edge rejected its
// configuration with a 400 (a clear rejection is an answer too).
func (c *boundsCheck) put(name, body string) bool {
	c.t.Helper()
	leader, _ := boundsLeader(c.t, c.nodes)
	code, obj := c.httpDo(leader, "PUT", "/v1/limits/"+name, body, "put "+body)
	switch code {
	case http.StatusOK, http.StatusCreated:
		return true
	case http.StatusBadRequest:
		if msg, _ := obj["error"].(string); msg == "" {
			c.t.Fatalf("put %s: 400 without an error message", body)
		}
		return false
	}
	c.t.Fatalf("put %s: %d %v", body, code, obj)
	return false
}

// reserve sends one single-limit reserve with maxWait through bn over HTTP
// (binary false) or the binary protocol, and fails the test unless the
// answer is a grant or a refusal. It returns whether it was a grant.
func (c *boundsCheck) reserve(bn *boundsNode, binary bool, limit string, maxWait time.Duration) bool {
	c.t.Helper()
	id := c.requestID()
	what := fmt.Sprintf("reserve %s max_wait %v (%d ns) over %s", limit, maxWait, int64(maxWait), map[bool]string{false: "HTTP", true: "binary"}[binary])
	if !binary {
		code, obj := c.httpDo(bn, "POST", "/v1/limits/"+limit+"/reserve",
			fmt.Sprintf(`{"max_wait":%q,"request_id":%q}`, maxWait.String(), id), what)
		switch {
		case code == http.StatusOK && obj["granted"] == true:
			if w, _ := obj["wait_ns"].(float64); w < 0 || w > float64(maxWait) {
				c.t.Errorf("%s via %s: granted with wait_ns %v", what, bn.id, obj["wait_ns"])
			}
			return true
		case code == http.StatusTooManyRequests && obj["granted"] == false:
			if r, _ := obj["retry_after_ns"].(float64); r < 1 {
				c.t.Errorf("%s via %s: refused with retry_after_ns %v", what, bn.id, obj["retry_after_ns"])
			}
			return false
		}
		c.t.Fatalf("%s via %s: %d %v; want a grant (200) or a refusal (429)", what, bn.id, code, obj)
	}
	payload := wire.EncodeReserve(wire.Reserve{Limit: limit, Permits: 1, MaxWaitNanos: int64(maxWait), RequestID: id})
	for attempt := 0; ; attempt++ {
		code, p, err := bn.conn.Call(c.ctx, wire.OpReserve, payload)
		if err != nil {
			c.t.Fatalf("%s via %s: %v", what, bn.id, err)
		}
		if code == wire.CodeNoLeader && attempt < 2 {
			boundsLeader(c.t, c.nodes)
			continue
		}
		if code != wire.CodeOK {
			c.t.Fatalf("%s via %s: code %d %s; want a decision", what, bn.id, code, p)
		}
		res, err := wire.DecodeReserveResult(p)
		if err != nil {
			c.t.Fatalf("%s via %s: %v", what, bn.id, err)
		}
		switch {
		case res.Status == wire.Granted && res.WaitNanos >= 0 && res.WaitNanos <= int64(maxWait):
			return true
		case res.Status == wire.Refused && res.RetryAfterNanos >= 1:
			return false
		}
		c.t.Fatalf("%s via %s: %+v; want a grant or a refusal", what, bn.id, res)
	}
}

// reserveEverywhere reserves limit with each max wait on the leader and a
// follower, over HTTP and binary, and checks the register counted exactly
// the decisions answered (a 503 after a decision would leave one more).
func (c *boundsCheck) reserveEverywhere(limit string, maxWaits []time.Duration) {
	c.t.Helper()
	answered := 0
	for _, mw := range maxWaits {
		leader, follower := boundsLeader(c.t, c.nodes)
		for _, bn := range []*boundsNode{leader, follower} {
			for _, binary := range []bool{false, true} {
				c.reserve(bn, binary, limit, mw)
				answered++
			}
		}
	}
	c.wantDecisions(limit, answered)
}

// wantDecisions checks that the register decided exactly n requests on
// limit.
func (c *boundsCheck) wantDecisions(limit string, n int) {
	c.t.Helper()
	leader, _ := boundsLeader(c.t, c.nodes)
	info, err := leader.n.Limit(c.ctx, limit)
	if err != nil {
		c.t.Fatalf("limit %s: %v", limit, err)
	}
	if got := info.GrantedRequests + info.RefusedRequests; got != uint64(n) {
		c.t.Errorf("limit %s: the register decided %d requests (%d granted), %d were answered", limit, got, info.GrantedRequests, n)
	}
}

// TestEveryAcceptedDurationGetsADecision drives each duration the edge
// accepts over its whole range: a reserve's max_wait ([0, math.MaxInt64],
// on each algorithm that takes single reserves), a strict limit's expiry
// and per ([0 or 1ns, math.MaxInt64]), a warm-up, a reservation's max_wait
// and settle_within ([1ns, 10m]) on a rate limit and on an in-flight cap
// of every hold ttl ([1ns, 24h]), and a lease's ttl ([100ms, 60s]).
func TestEveryAcceptedDurationGetsADecision(t *testing.T) {
	nodes := startBoundsRegister(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := &boundsCheck{t: t, nodes: nodes, ctx: ctx}
	rng := rand.New(rand.NewPCG(36, 1))
	const maxD = time.Duration(math.MaxInt64)
	maxWaits := durationsOver(rng, 0, maxD, 4)

	t.Run("max_wait", func(t *testing.T) {
		c.t = t
		// An hour apart with a million reserved ahead: the waits granted
		// span hours, a max wait below them is refused.
		for name, body := range map[string]string{
			"mw-strict":  `{"algorithm":"strict","rate":1,"per":"1h","max_reserved":1000000}`,
			"mw-bursty":  `{"algorithm":"bursty","rate":1,"per":"1h"}`,
			"mw-warmup":  `{"algorithm":"warmup","rate":1,"per":"1h","warmup":"10h"}`,
			"mw-hybrid":  `{"algorithm":"hybrid","rate":1,"per":"1h"}`,
			"mw-nowait":  `{"algorithm":"strict","rate":1,"per":"1h"}`,
			"mw-shadow":  `{"algorithm":"strict","rate":1,"per":"1h","shadow":true}`,
			"mw-fast":    `{"algorithm":"strict","rate":1000000,"max_reserved":1000000,"expiry":"1h"}`,
			"mw-longexp": `{"algorithm":"strict","rate":1,"per":"1h","max_reserved":10,"expiry":"2562047h47m16.854775807s"}`,
		} {
			if !c.put(name, body) {
				t.Fatalf("put %s %s: rejected", name, body)
			}
			c.reserveEverywhere(name, maxWaits)
		}
	})

	t.Run("expiry", func(t *testing.T) {
		c.t = t
		for i, e := range durationsOver(rng, 0, maxD, 3) {
			name := fmt.Sprintf("exp-%d", i)
			if c.put(name, fmt.Sprintf(`{"algorithm":"strict","rate":1,"per":"1h","max_reserved":3,"expiry":%q}`, e.String())) {
				c.reserveEverywhere(name, []time.Duration{0, time.Hour, maxD})
			}
		}
	})

	t.Run("per", func(t *testing.T) {
		c.t = t
		for i, per := range durationsOver(rng, 1, maxD, 3) {
			for _, alg := range []string{"strict", "bursty"} {
				name := fmt.Sprintf("per-%s-%d", alg, i)
				if c.put(name, fmt.Sprintf(`{"algorithm":%q,"rate":1,"per":%q}`, alg, per.String())) {
					c.reserveEverywhere(name, []time.Duration{0, maxD})
				}
			}
		}
	})

	t.Run("warmup", func(t *testing.T) {
		c.t = t
		for i, w := range durationsOver(rng, 1, maxD, 3) {
			name := fmt.Sprintf("warm-%d", i)
			if c.put(name, fmt.Sprintf(`{"algorithm":"warmup","rate":10,"warmup":%q}`, w.String())) {
				c.reserveEverywhere(name, []time.Duration{0, maxD})
			}
		}
	})

	t.Run("reservation", func(t *testing.T) {
		c.t = t
		if !c.put("res-rate", `{"algorithm":"strict","rate":1,"per":"1h","max_reserved":1000000}`) {
			t.Fatal("put res-rate: rejected")
		}
		settles := durationsOver(rng, 1, time.Duration(fsm.MaxSettleWindowNanos), 3)
		ttls := durationsOver(rng, 1, 24*time.Hour, 3)
		answered := 0
		for i, ttl := range ttls {
			cap := fmt.Sprintf("res-cap-%d", i)
			if !c.put(cap, fmt.Sprintf(`{"algorithm":"concurrency","max_in_flight":2,"ttl":%q}`, ttl.String())) {
				t.Fatalf("put %s with ttl %v: rejected", cap, ttl)
			}
			for j, mw := range maxWaits {
				leader, follower := boundsLeader(t, nodes)
				bn := []*boundsNode{leader, follower}[j%2]
				body := fmt.Sprintf(`{"limits":[{"name":"res-rate"},{"name":%q}],"max_wait":%q,"settle_within":%q,"request_id":%q}`,
					cap, mw.String(), settles[j%len(settles)].String(), c.requestID())
				what := fmt.Sprintf("reserve res-rate and %s (ttl %v) max_wait %v", cap, ttl, mw)
				code, obj := c.httpDo(bn, "POST", "/v1/reserve", body, what)
				answered++
				switch {
				case code == http.StatusOK && obj["granted"] == true:
					id, _ := obj["reservation_id"].(string)
					if rc, robj := c.httpDo(bn, "POST", "/v1/reservations/"+id+"/release", "", "release "+id); rc != http.StatusOK && rc != http.StatusNotFound {
						t.Fatalf("release %s: %d %v", id, rc, robj)
					}
				case code == http.StatusTooManyRequests && obj["granted"] == false:
				default:
					t.Fatalf("%s via %s: %d %v; want a grant or a refusal", what, bn.id, code, obj)
				}
			}
		}
		c.wantDecisions("res-rate", answered)
	})

	t.Run("lease ttl", func(t *testing.T) {
		c.t = t
		if !c.put("leased", `{"algorithm":"strict","rate":1000}`) {
			t.Fatal("put leased: rejected")
		}
		leader, _ := boundsLeader(t, nodes)
		if code, obj := c.httpDo(leader, "PUT", "/v1/limits/leased/lease-policy", `{"leased":true}`, "lease policy"); code != http.StatusOK {
			t.Fatalf("lease policy: %d %v", code, obj)
		}
		for i, ttl := range durationsOver(rng, 100*time.Millisecond, time.Minute, 3) {
			leader, follower := boundsLeader(t, nodes)
			for k, bn := range []*boundsNode{leader, follower} {
				holder := fmt.Sprintf("h-%d-%d", i, k)
				what := fmt.Sprintf("lease with ttl %v", ttl)
				code, obj := c.httpDo(bn, "POST", "/v1/limits/leased/lease",
					fmt.Sprintf(`{"holder":%q,"group":"g","demand_milli_per_sec":1000,"ttl":%q,"request_id":%q}`, holder, ttl.String(), c.requestID()), what)
				if (code != http.StatusOK || obj["status"] != "granted") && code != http.StatusTooManyRequests {
					t.Fatalf("%s via %s over HTTP: %d %v; want a grant or a refusal", what, bn.id, code, obj)
				}
				open := wire.LeaseOpen{Limit: "leased", Holder: holder + "-bin", Group: "g", DemandMilli: 1000, TTLNanos: int64(ttl), RequestID: c.requestID()}
				bcode, p, err := bn.conn.Call(ctx, wire.OpLease, wire.EncodeLeaseOpen(open))
				if err != nil {
					t.Fatal(err)
				}
				if bcode != wire.CodeOK {
					t.Fatalf("%s via %s over binary: code %d %s; want a decision", what, bn.id, bcode, p)
				}
				if res, err := wire.DecodeLeaseResult(p); err != nil || (res.Status != wire.LeaseGranted && res.Status != wire.LeaseRefused) {
					t.Fatalf("%s via %s over binary: %+v %v; want a grant or a refusal", what, bn.id, res, err)
				}
			}
		}
	})
}
