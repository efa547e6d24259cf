package server

import (
	"net/http"
	"strconv"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/api"
	"github.com/permitd/permitd/transport/auth"
)

// sessions.go: POST /v1/sessions, and whose sessions are whose.
//
// With API tokens, a session belongs to the token that opened it (its
// name is the session's owner in the register), and a token may hold at
// most HandlerOptions.SessionsPerToken sessions: the quota travels in the
// open command, so the register counts it exactly, against the sessions
// still alive at that point of its log, whichever node each was opened
// at (an edge count per node could neither see the others' opens nor
// when a session expires). Without tokens nobody owns a session and only
// the register's own bounds apply.
//
// A session's reserves carry the token's name too (over HTTP and over
// the binary protocol: reserveFromWire), and the register answers a
// reserve of a session another token opened as one of a session that is
// not open: 410 with session_expired, the same body as for a session that
// expired or never existed, deciding, recording and touching nothing.
// Session IDs are raft indexes, easy to guess: another token can
// therefore neither read a session's answers, plant an answer under a
// number its owner will use next, drop its answers by acknowledging
// them, nor learn whether it is open. (A 403 would tell which indexes are
// other tokens' live sessions; a 404 is an unknown limit on this path.
// 410 is what a client already handles: it opens a session of its own
// and asks again, which is also right for a client whose token was
// renamed under it.)

// DefaultSessionsPerToken is the agent's default for
// HandlerOptions.SessionsPerToken: one sixteenth of the register's
// sessions (4 096 of 65 536), and the same share of the answers they keep
// (65 536 of 2^20), so that no fewer than sixteen tokens can fill the
// table.
const DefaultSessionsPerToken = fsm.MaxSessions / 16

// sessionOwner is what a session opened by a request of token t (ok:
// tokens are on) carries: t's name and the quota perToken, or nothing.
func sessionOwner(t auth.Token, ok bool, perToken int) fsm.OpenSession {
	if !ok {
		return fsm.OpenSession{}
	}
	return fsm.OpenSession{Owner: t.Name, PerOwner: perToken}
}

// openSession serves POST /v1/sessions: a new client session for
// exactly-once reserves (see fsm.SessionResult), owned by the request's
// token. A refusal (the register holds as many sessions as it may, in
// all or for the token) is answered 503 with Retry-After and
// retry_after_ns: it opened nothing.
func (h *handler) openSession(w http.ResponseWriter, r *http.Request) {
	if !readNoFields(w, r, "POST /v1/sessions") {
		return
	}
	t, ok := auth.TokenFrom(r.Context())
	ctx, cancel := h.context(r)
	res, err := h.store.OpenSession(ctx, sessionOwner(t, ok, h.sessionsPerToken))
	cancel()
	if err != nil {
		h.storeError(w, "open session", err)
		return
	}
	buf := api.GetBuf()
	defer api.PutBuf(buf)
	b := buf.AvailableBuffer()
	if res.ID == 0 {
		w.Header()["Retry-After"] = []string{strconv.FormatInt(api.RetryAfterSeconds(res.RetryAfterNanos), 10)}
		b = append(b, `{"retry_after_ns":`...)
		b = strconv.AppendInt(b, res.RetryAfterNanos, 10)
		b = append(b, `,"error":`...)
		b = api.AppendJSONString(b, "open session: "+res.Detail)
		b = append(b, "}\n"...)
		api.WriteRaw(w, http.StatusServiceUnavailable, b)
		return
	}
	b = append(b, `{"session":`...)
	b = strconv.AppendUint(b, res.ID, 10)
	b = append(b, `,"idle_ttl_ns":`...)
	b = strconv.AppendInt(b, res.IdleNanos, 10)
	b = append(b, "}\n"...)
	api.WriteRaw(w, http.StatusCreated, b)
}
