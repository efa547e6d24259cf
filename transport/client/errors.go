package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/permitd/permitd/transport/api"
)

// Sentinel errors. Use errors.Is; the errors returned carry details.
var (
	// ErrThrottled: no permit was available within the allowed wait. The
	// error is a *RefusedError carrying RetryAfter.
	ErrThrottled = errors.New("client: throttled")
	// ErrNotFound: the limit (or path) does not exist (HTTP 404).
	ErrNotFound = errors.New("client: not found")
	// ErrInvalid: the server rejected the request as invalid (HTTP 400,
	// 405, 413), or the client refused to send it.
	ErrInvalid = errors.New("client: invalid request")
	// ErrUnavailable: no server answered within the bounded attempts
	// (connection errors, timeouts, 503 no leader).
	ErrUnavailable = errors.New("client: no server available")
	// ErrExpired: a granted permit expired before it could be used.
	ErrExpired = errors.New("client: permit expired before use")
	// ErrSpacedGrant: the permits of a grant must be used one by one, at
	// their own times (a strict limit's grant of several permits), and
	// were asked to be used together. See Grant.WaitPermit and
	// Client.AcquireEach.
	ErrSpacedGrant = errors.New("client: the permits of this grant must be used one by one")
	// ErrNotDelivered: the request certainly never reached a server: every
	// attempt failed to open a connection (connection refused, dial
	// timeout), or none was made before the context ended. It is wrapped
	// together with ErrUnavailable or the context's error. Any other
	// failure is ambiguous: the server may have applied the request.
	ErrNotDelivered = errors.New("client: request not delivered to any server")
	// ErrUnauthorized: the server requires an API token and the client
	// sent none, or one it does not know (HTTP 401; see WithToken).
	ErrUnauthorized = errors.New("client: unauthorized")
	// ErrForbidden: the client's token does not allow the request (its
	// role, or a limit outside its patterns; HTTP 403).
	ErrForbidden = errors.New("client: forbidden")
)

// errSessionExpired marks a reserve whose session was not open: nothing was
// decided; Reserve sends it again in a new session.
var errSessionExpired = errors.New("client: session expired")

// SessionRefusedError is a refused OpenSession: the register holds as many
// sessions as it may, in all or for the client's token (HTTP 503 with
// Retry-After; the binary protocol's session 0). Nothing was opened, and
// no live session is ever closed to make room. It matches ErrUnavailable,
// and errors.As finds its *APIError.
type SessionRefusedError struct {
	// RetryAfter is when a session can be opened at the earliest (when
	// the least recently used session expires, if no reserve keeps it
	// alive), measured from when the answer was received.
	RetryAfter time.Duration
	// APIError is the server's answer.
	*APIError
}

// Error implements error.
func (e *SessionRefusedError) Error() string {
	return fmt.Sprintf("client: server %s refused to open a session: %s; retry after %s", e.Server, e.Message, api.DurationText(e.RetryAfter))
}

// Unwrap returns the server's answer, a 503.
func (e *SessionRefusedError) Unwrap() error { return e.APIError }

// APIError is an error answer from a server.
type APIError struct {
	// Server is the base URL of the server that answered.
	Server string
	// StatusCode is the HTTP status code.
	StatusCode int
	// Message is the server's "error" text.
	Message string
}

// Error implements error.
func (e *APIError) Error() string {
	return fmt.Sprintf("client: server %s answered %d %s: %s", e.Server, e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// Is maps status codes to the sentinels: 404 → ErrNotFound, 400/405/413 →
// ErrInvalid, 503 → ErrUnavailable, 401 → ErrUnauthorized, 403 →
// ErrForbidden.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrInvalid:
		return e.StatusCode == http.StatusBadRequest || e.StatusCode == http.StatusMethodNotAllowed ||
			e.StatusCode == http.StatusRequestEntityTooLarge
	case ErrUnavailable:
		return e.StatusCode == http.StatusServiceUnavailable
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized
	case ErrForbidden:
		return e.StatusCode == http.StatusForbidden
	}
	return false
}

// RefusedError is a refused reserve (HTTP 429). It matches ErrThrottled.
type RefusedError struct {
	// Limit is the limit's name.
	Limit string
	// RetryAfter is when, as known by the server, the same request could
	// be granted; measured from when the answer was received.
	RetryAfter time.Duration
	// Message is the server's explanation.
	Message string
	// KeysFull: the limit is a key a template would create, and its
	// template's max keys or the register's cap on templated keys is
	// reached (Message names it).
	KeysFull bool
}

// Error implements error: the server's explanation when it gave one.
func (e *RefusedError) Error() string {
	if e.Message != "" {
		return "client: throttled: " + e.Message
	}
	return fmt.Sprintf("client: limit %q throttled: no permit within the allowed wait; retry after %s", e.Limit, api.DurationText(e.RetryAfter))
}

// Unwrap makes errors.Is(err, ErrThrottled) true.
func (e *RefusedError) Unwrap() error { return ErrThrottled }
