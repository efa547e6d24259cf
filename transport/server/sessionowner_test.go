package server

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/auth"
	"github.com/permitd/permitd/transport/wire"
)

// sessionowner_test.go: a session is its token's. Through a real register
// (three nodes in the process, so that most calls are forwarded by a
// follower) with API tokens, over HTTP and over the binary protocol.

// asToken returns bn as token secret reaches it: an HTTP server whose
// every request carries the token, through RequireTokens, and a binary
// connection authenticated with it (AuthenticatedBinary, as the agent
// serves it).
func asToken(t *testing.T, bn *boundsNode, tokens *auth.TokenStore, secret string) *boundsNode {
	t.Helper()
	h := RequireTokens(NewHandler(bn.n, HandlerOptions{SessionsPerToken: 8}), tokens)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+secret)
		h.ServeHTTP(w, r)
	}))
	server, client := net.Pipe()
	go AuthenticatedBinary(tokens, 8, NewBinary(bn.n).ServeAs)(server)
	conn := wire.NewConn(client)
	t.Cleanup(func() {
		conn.Close()
		srv.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if code, p, err := conn.Call(ctx, wire.OpAuth, []byte(secret)); err != nil || code != wire.CodeOK {
		t.Fatalf("binary auth on %s: code %d %s %v", bn.id, code, p, err)
	}
	return &boundsNode{id: bn.id, n: bn.n, srv: srv, conn: conn}
}

// sessionAnswer is a session reserve's answer over either protocol.
type sessionAnswer struct {
	status    string // "granted", "refused", "session-expired"
	duplicate bool
	detail    string
}

// sessionCaller opens sessions and reserves in them through one node as
// one token, over HTTP or the binary protocol.
type sessionCaller struct {
	c      *boundsCheck
	bn     *boundsNode
	binary bool
}

func (s sessionCaller) String() string {
	return map[bool]string{false: "HTTP", true: "binary"}[s.binary] + " via " + s.bn.id
}

// call makes one binary call, again after waiting for a ready leader
// when there was none (twice at most).
func (s sessionCaller) call(op byte, payload []byte, what string) []byte {
	s.c.t.Helper()
	for attempt := 0; ; attempt++ {
		code, p, err := s.bn.conn.Call(s.c.ctx, op, payload)
		if err != nil {
			s.c.t.Fatalf("%s over %s: %v", what, s, err)
		}
		if code == wire.CodeNoLeader && attempt < 2 {
			boundsLeader(s.c.t, s.c.nodes)
			continue
		}
		if code != wire.CodeOK {
			s.c.t.Fatalf("%s over %s: code %d %s", what, s, code, p)
		}
		return p
	}
}

// open opens a session.
func (s sessionCaller) open() uint64 {
	s.c.t.Helper()
	if s.binary {
		res, err := wire.DecodeSessionResult(s.call(wire.OpOpenSession, nil, "open session"))
		if err != nil || res.ID == 0 {
			s.c.t.Fatalf("open session over %s: %+v %v", s, res, err)
		}
		return res.ID
	}
	code, obj := s.c.httpDo(s.bn, "POST", "/v1/sessions", "", "open session")
	id, _ := obj["session"].(float64)
	if code != http.StatusCreated || id < 1 {
		s.c.t.Fatalf("open session over %s: %d %v", s, code, obj)
	}
	return uint64(id)
}

// reserve reserves 1 permit of limit as request seq of session id,
// acknowledging below acked.
func (s sessionCaller) reserve(limit string, id, seq, acked uint64) sessionAnswer {
	s.c.t.Helper()
	ref := wire.SessionRef{ID: id, Seq: seq, AckedBelow: acked}
	if s.binary {
		res, err := wire.DecodeReserveResult(s.call(wire.OpReserve, wire.EncodeReserve(wire.Reserve{Limit: limit, Permits: 1, Session: ref}), "reserve"))
		if err != nil {
			s.c.t.Fatalf("reserve over %s: %v", s, err)
		}
		status := map[wire.ReserveStatus]string{wire.Granted: "granted", wire.Refused: "refused", wire.SessionExpired: "session-expired"}[res.Status]
		if status == "" {
			s.c.t.Fatalf("reserve %+v over %s: %+v", ref, s, res)
		}
		return sessionAnswer{status: status, duplicate: res.Duplicate, detail: res.Detail}
	}
	body := `{"session":` + strconv.FormatUint(id, 10) + `,"seq":` + strconv.FormatUint(seq, 10) + `,"acked_below":` + strconv.FormatUint(acked, 10) + `}`
	code, obj := s.c.httpDo(s.bn, "POST", "/v1/limits/"+limit+"/reserve", body, "reserve "+body)
	a := sessionAnswer{duplicate: obj["duplicate"] == true}
	switch {
	case code == http.StatusOK:
		a.status = "granted"
	case code == http.StatusTooManyRequests:
		a.status = "refused"
	case code == http.StatusGone && obj["session_expired"] == true && obj["granted"] == false:
		a.status, a.detail = "session-expired", obj["error"].(string)
	default:
		s.c.t.Fatalf("reserve %s over %s: %d %v", body, s, code, obj)
	}
	return a
}

// TestSessionOfAnotherToken: with API tokens, a session opened by token
// app (over HTTP or the binary protocol) answers only app. Token narrow,
// which may reserve the same limit, sending reserves of app's session
// (over both protocols, through every node) is answered 410
// session_expired (binary: SessionExpired) with exactly the answer to a
// session never opened, so it learns nothing; it cannot read app's answer
// (no replay), plant one under app's next number, nor drop app's answers
// by acknowledging them: app's retry still replays its answer, its next
// request is decided afresh, and the register decided only app's
// requests. app's own session is its own over the other protocol too.
func TestSessionOfAnotherToken(t *testing.T) {
	nodes := startBoundsRegister(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := &boundsCheck{t: t, nodes: nodes, ctx: ctx}
	if !c.put("api-s", `{"algorithm":"bursty","rate":1000,"per":"1h"}`) {
		t.Fatal("put api-s: rejected")
	}
	tokens, secrets := tokenSet(t)
	var app, narrow []*boundsNode
	for _, bn := range nodes {
		app = append(app, asToken(t, bn, tokens, secrets["app"]))
		narrow = append(narrow, asToken(t, bn, tokens, secrets["narrow"]))
	}
	decisions := func() uint64 {
		leader, _ := boundsLeader(t, nodes)
		info, err := leader.n.Limit(ctx, "api-s")
		if err != nil {
			t.Fatal(err)
		}
		return info.GrantedRequests + info.RefusedRequests
	}

	for i, binary := range []bool{false, true} {
		victim := sessionCaller{c: c, bn: app[(i+1)%len(app)], binary: binary}
		id := victim.open()
		if a := victim.reserve("api-s", id, 1, 1); a.status == "session-expired" || a.duplicate {
			t.Fatalf("app's request 1 over %s: %+v, want decided", victim, a)
		}
		before := decisions()
		for k, bn := range narrow {
			for _, bin := range []bool{false, true} {
				attacker := sessionCaller{c: c, bn: bn, binary: bin}
				never := id + 1<<40 + uint64(10*k)
				notOpen := attacker.reserve("api-s", never, 1, 1)
				want := strings.ReplaceAll(notOpen.detail, strconv.FormatUint(never, 10), strconv.FormatUint(id, 10))
				if notOpen.status != "session-expired" || !strings.Contains(want, strconv.FormatUint(id, 10)) {
					t.Fatalf("narrow's reserve of a session never opened over %s: %+v", attacker, notOpen)
				}
				for _, tc := range []struct {
					what       string
					seq, acked uint64
				}{
					{"replays app's request 1", 1, 1},
					{"plants app's request 2 and acknowledges app's answers", 2, 2},
					{"acknowledges far past app's requests", 1 << 20, 1 << 20},
				} {
					if a := attacker.reserve("api-s", id, tc.seq, tc.acked); a.status != "session-expired" || a.duplicate || a.detail != want {
						t.Fatalf("narrow %s of app's session %d over %s: %+v; want the answer to a session never opened (%q)", tc.what, id, attacker, a, want)
					}
				}
			}
		}
		if d := decisions(); d != before {
			t.Fatalf("narrow's reserves of app's session were decided: %d decisions, %d before", d, before)
		}
		if a := victim.reserve("api-s", id, 1, 1); !a.duplicate || a.status == "session-expired" {
			t.Fatalf("app's retry of request 1 over %s: %+v, want its answer replayed", victim, a)
		}
		if a := victim.reserve("api-s", id, 2, 1); a.duplicate || a.status == "session-expired" {
			t.Fatalf("app's request 2 over %s: %+v, want decided afresh", victim, a)
		}
		other := sessionCaller{c: c, bn: victim.bn, binary: !binary}
		if a := other.reserve("api-s", id, 3, 3); a.duplicate || a.status == "session-expired" {
			t.Fatalf("app's request 3 over %s, in the session it opened over %s: %+v, want decided", other, victim, a)
		}
		if d := decisions(); d != before+2 {
			t.Fatalf("%d decisions after app's requests 2 and 3, want %d", d, before+2)
		}
	}
}
