package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// session.go: exactly-once reserves through a client session.
//
// The register remembers a request ID for ten minutes at most, and only as
// many IDs as it can keep for that long (about 1 750 new IDs per second;
// beyond that it answers 503 rather than forget a younger one). A session
// has no such limit: the client opens one (POST /v1/sessions, or the binary
// protocol's open-session call), numbers its reserves 1, 2, 3, ..., sends
// the same number again when it retries, and tells the register the lowest
// number whose answer it is still waiting for, below which the register
// forgets the answers. So the register keeps, per client, only the answers
// in flight, and recognises a retry for as long as the session lives (ten
// minutes after its last reserve).
//
// If the session expired (idle for ten minutes), the register answers
// SessionExpired and decides nothing. The client never received an answer
// to the request it retried (else it would not retry), so it opens a new
// session and sends the request again as a new one: at most one of the
// two can be granted to a caller that acts only on answers it received.
//
// A session is its token's: with API tokens, the register answers a
// reserve of a session opened with another token (by name) exactly as
// one of a session not open, so that no client can use, or learn of,
// another's. A client only sends its own session, so it meets this only
// when a reload renamed its token (or the servers disagree on tokens):
// it then opens a session for the new name, as for an expired one.
//
// The register never closes a live session to make room: when it holds as
// many sessions as it may (65 536 in all, or its quota for the client's
// token), it refuses the open with the time the least recently used
// session expires (SessionRefusedError). Reserve then carries a request
// ID instead, exactly-once as well, and does not ask for a session again
// until that time has passed; OpenSession returns the error.

// sessionState is the client's current session: its ID and the sequence
// numbers in flight. A zero ID means none is open yet.
type sessionState struct {
	mu   sync.Mutex
	id   uint64
	next uint64 // the next seq to hand out
	// inFlight holds the seqs handed out and not finished; lowest is at
	// most the smallest of them (advanced lazily).
	inFlight map[uint64]struct{}
	lowest   uint64
	// refusedUntil (client clock): an open was refused; none is asked
	// for before this time.
	refusedUntil time.Time
}

// errNoSession: the register refused the client's last open, whose retry
// time has not come; the reserve carries a request ID instead.
var errNoSession = errors.New("client: the register refused to open a session")

// sessionRef is one request's place in a session.
type sessionRef struct {
	id, seq uint64
}

// begin hands out the next seq of the open session, opening one first if
// none is (open is called without the lock held by another begin: opens
// are serialised by the lock, and a second caller reuses the first's). A
// refused open (SessionRefusedError) is remembered until its retry time
// by now's clock, and until then begin fails with errNoSession at once.
func (s *sessionState) begin(ctx context.Context, open func(context.Context) (uint64, error), now func() time.Time) (sessionRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id == 0 {
		if now().Before(s.refusedUntil) {
			return sessionRef{}, errNoSession
		}
		id, err := open(ctx)
		if refused := (*SessionRefusedError)(nil); errors.As(err, &refused) {
			s.refusedUntil = now().Add(refused.RetryAfter)
		}
		if err != nil {
			return sessionRef{}, err
		}
		s.id, s.next, s.lowest, s.inFlight = id, 1, 1, make(map[uint64]struct{})
	}
	seq := s.next
	s.next++
	s.inFlight[seq] = struct{}{}
	return sessionRef{id: s.id, seq: seq}, nil
}

// ackedBelow returns the acknowledgement to send with ref: the lowest seq
// still in flight in ref's session (ref itself is, so this is <= ref.seq).
func (s *sessionState) ackedBelow(ref sessionRef) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id != ref.id {
		return ref.seq // the session was replaced: acknowledge nothing new
	}
	for s.lowest < s.next {
		if _, ok := s.inFlight[s.lowest]; ok {
			break
		}
		s.lowest++
	}
	return min(s.lowest, ref.seq)
}

// finish records that ref has its final answer (or will never be retried).
func (s *sessionState) finish(ref sessionRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id == ref.id {
		delete(s.inFlight, ref.seq)
	}
}

// expired forgets session id if it is still the current one, so that the
// next begin opens a new session.
func (s *sessionState) expired(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id == id {
		s.id, s.inFlight = 0, nil
	}
}

// requestKey names a session reserve the way Grant.RequestID reports it.
func (r sessionRef) requestKey() string { return fmt.Sprintf("session:%d:%d", r.id, r.seq) }

// wireRef is the session reference a reserve carries.
func (s *sessionState) wireRef(ref sessionRef) wire.SessionRef {
	return wire.SessionRef{ID: ref.id, Seq: ref.seq, AckedBelow: s.ackedBelow(ref)}
}

// OpenSession opens a new client session on the cluster and returns its
// ID. The client opens and renews its own session as needed; this is for
// programs that manage sessions themselves.
//
// When the register holds as many sessions as it may (in all, or for the
// client's token), it opens none and the error is a *SessionRefusedError
// with the time after which to try again.
func (c *Client) OpenSession(ctx context.Context) (uint64, error) {
	if c.bin != nil && c.bin.reserves {
		return c.openSessionBinary(ctx)
	}
	resp, err := c.sendDecided(ctx, http.MethodPost, "/v1/sessions", nil, func(r *response) bool { return sessionRefusal(r) != nil }, 0)
	if err != nil {
		return 0, err
	}
	if refused := sessionRefusal(resp); refused != nil {
		return 0, refused
	}
	if resp.code < 200 || resp.code > 299 {
		return 0, resp.apiError()
	}
	var out struct {
		Session uint64 `json:"session"`
	}
	if err := jsonUnmarshal(resp.body, &out); err != nil {
		return 0, fmt.Errorf("client: cannot decode the answer of %s to POST /v1/sessions: %w", resp.server, err)
	}
	if out.Session == 0 {
		return 0, fmt.Errorf("client: the server answered session 0 to POST /v1/sessions")
	}
	return out.Session, nil
}

// sessionRefusal is the refusal r carries, or nil: a 503 to POST
// /v1/sessions whose body has retry_after_ns (the register's decision; a
// 503 without it is a node that could not reach the register).
func sessionRefusal(r *response) *SessionRefusedError {
	if r.code != http.StatusServiceUnavailable {
		return nil
	}
	var a struct {
		RetryAfterNanos *int64 `json:"retry_after_ns"`
	}
	if jsonUnmarshal(r.body, &a) != nil || a.RetryAfterNanos == nil {
		return nil
	}
	return &SessionRefusedError{RetryAfter: time.Duration(max(0, *a.RetryAfterNanos)), APIError: r.apiError()}
}

// openSessionBinary opens a session over the binary protocol.
func (c *Client) openSessionBinary(ctx context.Context) (uint64, error) {
	var id uint64
	err := c.failover(ctx, "open session", func(server string) (attemptOutcome, error) {
		resp, err := c.callBinary(ctx, server, wire.OpOpenSession, nil)
		if err != nil {
			return binaryOutcome(err), err
		}
		res, err := wire.DecodeSessionResult(resp.payload)
		if err != nil {
			return attemptDone, fmt.Errorf("client: cannot decode the open-session answer of %s: %w", server, err)
		}
		if res.ID == 0 {
			return attemptDone, &SessionRefusedError{RetryAfter: time.Duration(max(0, res.RetryAfterNanos)),
				APIError: &APIError{Server: server, StatusCode: http.StatusServiceUnavailable, Message: res.Detail}}
		}
		id = res.ID
		return attemptDone, nil
	})
	return id, err
}
