package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/permitd/permitd/fsm"
)

// TestSessionOpenRefusedWhenFull: when other clients hold every session
// the register may (fsm.MaxSessions, filled through the store as their
// opens would), POST /v1/sessions is answered 503 with Retry-After and
// retry_after_ns saying when the least recently used session expires;
// the refused open changed nothing, and the first client's live session
// still answers its retry from the register.
func TestSessionOpenRefusedWhenFull(t *testing.T) {
	e := newEnv(t, HandlerOptions{})
	e.mustPut(t, "a", `{"algorithm":"bursty","rate":1,"per":"1m"}`) // a replay is usable for a minute
	w := e.do(t, "POST", "/v1/sessions", "")
	m := decode(t, w)
	sid, _ := m["session"].(float64)
	if w.Code != http.StatusCreated || sid < 1 {
		t.Fatalf("open session: %d %s", w.Code, w.Body)
	}
	first := fmt.Sprintf(`{"session":%d,"seq":1}`, int(sid))
	if w := e.do(t, "POST", "/v1/limits/a/reserve", first); w.Code != 200 {
		t.Fatalf("the first client's reserve: %d %s", w.Code, w.Body)
	}
	for i := range fsm.MaxSessions - 1 {
		if res, err := e.store.OpenSession(context.Background(), fsm.OpenSession{}); err != nil || res.ID == 0 {
			t.Fatalf("another client's open %d: %+v, %v", i, res, err)
		}
	}
	e.store.Advance(2e9)
	sessions, outcomes := e.store.SessionCount()

	w = e.do(t, "POST", "/v1/sessions", "{}")
	m = decode(t, w)
	const retry = fsm.SessionIdleNanos - 2e9 // the first client's session, active 2 s ago
	if w.Code != http.StatusServiceUnavailable || m["retry_after_ns"] != float64(retry) || m["session"] != nil ||
		!strings.Contains(m["error"].(string), "65536 open sessions") {
		t.Fatalf("open at a full table: %d %s, want 503 with retry_after_ns %d", w.Code, w.Body, int64(retry))
	}
	if ra := w.Header().Get("Retry-After"); ra != strconv.FormatInt(retry/1e9, 10) {
		t.Errorf("Retry-After %q, want %d", ra, retry/1e9)
	}
	if s, o := e.store.SessionCount(); s != sessions || o != outcomes {
		t.Fatalf("the refused open changed the sessions: %d keeping %d, before %d keeping %d", s, o, sessions, outcomes)
	}
	w = e.do(t, "POST", "/v1/limits/a/reserve", first)
	if m := decode(t, w); w.Code != 200 || m["duplicate"] != true {
		t.Fatalf("the first client's retry: %d %s, want its recorded grant", w.Code, w.Body)
	}
}

// TestSessionsPerToken: with tokens, a token holds at most
// SessionsPerToken sessions; its next open is answered 503 with
// Retry-After naming the quota, while another token still opens, and a
// session's reserves past the token's share of the answers are answered
// 503 without being decided.
func TestSessionsPerToken(t *testing.T) {
	e := newEnv(t, HandlerOptions{SessionsPerToken: 2})
	tokens, secrets := tokenSet(t)
	h := RequireTokens(e.h, tokens)
	as := func(token, method, target, body string) (int, map[string]any, http.Header) {
		t.Helper()
		req, _ := http.NewRequest(method, target, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secrets[token])
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code, decode(t, w), w.Header()
	}
	if code, m, _ := as("root", "PUT", "/v1/limits/api", `{"algorithm":"bursty","rate":1000000}`); code != http.StatusCreated {
		t.Fatalf("put: %d %v", code, m)
	}
	var ids []int
	for range 2 {
		code, m, _ := as("app", "POST", "/v1/sessions", "")
		if code != http.StatusCreated {
			t.Fatalf("app's open: %d %v", code, m)
		}
		ids = append(ids, int(m["session"].(float64)))
	}
	e.store.Advance(1e9)
	code, m, hdr := as("app", "POST", "/v1/sessions", "")
	if code != http.StatusServiceUnavailable || m["retry_after_ns"] != float64(fsm.SessionIdleNanos-1e9) ||
		!strings.Contains(m["error"].(string), `owner "app" holds 2 open sessions, its most (2 sessions per token)`) || hdr.Get("Retry-After") != "599" {
		t.Fatalf("app's third open: %d %v (Retry-After %q), want 503 naming the quota", code, m, hdr.Get("Retry-After"))
	}
	if code, m, _ := as("narrow", "POST", "/v1/sessions", ""); code != http.StatusCreated {
		t.Fatalf("another token's open while app is at its quota: %d %v", code, m)
	}
	// app's share of the answers: 2 × fsm.SessionResultsPerSession.
	for seq := 1; seq <= 2*fsm.SessionResultsPerSession; seq++ {
		if code, m, _ := as("app", "POST", "/v1/limits/api/reserve", fmt.Sprintf(`{"session":%d,"seq":%d}`, ids[0], seq)); code != 200 {
			t.Fatalf("app's reserve %d: %d %v", seq, code, m)
		}
	}
	info, _ := e.store.Limit(context.Background(), "api")
	code, m, hdr = as("app", "POST", "/v1/limits/api/reserve", fmt.Sprintf(`{"session":%d,"seq":1}`, ids[1]))
	if code != http.StatusServiceUnavailable || m["granted"] != false || hdr.Get("Retry-After") == "" || !strings.Contains(m["error"].(string), `owner "app"`) {
		t.Fatalf("app's reserve past its share of the answers: %d %v, want 503 naming the owner", code, m)
	}
	if after, _ := e.store.Limit(context.Background(), "api"); after.GrantedRequests != info.GrantedRequests || after.RefusedRequests != info.RefusedRequests {
		t.Fatalf("a reserve that could not be recorded was decided: %+v, before %+v", after, info)
	}
}
