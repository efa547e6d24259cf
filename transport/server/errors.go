package server

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/permitd/permitd/node"
	"github.com/permitd/permitd/transport/api"
)

// storeError answers an error returned by the Store:
// ErrNotFound → 404, ErrInvalid → 400, everything else → 503 (with a
// Retry-After of one second). It returns the code written.
func (h *handler) storeError(w http.ResponseWriter, op string, err error) int {
	switch {
	case errors.Is(err, node.ErrNotFound):
		api.WriteError(w, http.StatusNotFound, node.Message(err))
		return http.StatusNotFound
	case errors.Is(err, node.ErrInvalid):
		api.WriteError(w, http.StatusBadRequest, node.Message(err))
		return http.StatusBadRequest
	case errors.Is(err, node.ErrConflict):
		api.WriteError(w, http.StatusConflict, node.Message(err))
		return http.StatusConflict
	case errors.Is(err, node.ErrForbidden):
		api.WriteError(w, http.StatusForbidden, node.Message(err))
		return http.StatusForbidden
	}
	msg := node.Message(err)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		msg = op + ": timed out (" + msg + "); retry, possibly on another server"
	case errors.Is(err, context.Canceled):
		msg = op + ": canceled (" + msg + ")"
	case errors.Is(err, node.ErrRemoved):
		msg = op + ": this node was removed from the cluster and serves nothing; use another node"
	case errors.Is(err, node.ErrNoLeader) && strings.HasPrefix(msg, noLeaderKnown):
		msg = op + ": " + noLeaderAnswer
	case errors.Is(err, node.ErrNoLeader), errors.Is(err, node.ErrShutdown):
		msg = op + ": no leader reachable (" + msg + "); retry, possibly on another server"
	case errors.Is(err, node.ErrOverloaded):
		// Refused at once, nothing changed; not worth an error log line
		// per request.
		msg = op + ": overloaded: " + msg
		w.Header().Set("Retry-After", "1")
		api.WriteError(w, http.StatusServiceUnavailable, msg)
		return http.StatusServiceUnavailable
	default:
		h.log.Error("store failed", "op", op, "error", err)
		msg = op + ": unavailable: " + msg
	}
	h.log.Debug("request unavailable", "op", op, "error", err)
	w.Header().Set("Retry-After", "1")
	api.WriteError(w, http.StatusServiceUnavailable, msg)
	return http.StatusServiceUnavailable
}

// noLeaderKnown starts the message of a node that waited for a leader in
// vain (node.Message of its ErrNoLeader).
const noLeaderKnown = "no leader known"

// noLeaderAnswer is the 503's text (after the operation) when this node
// knows no leader after waiting for one: the cluster has none, most
// likely because fewer than a majority of its voters are up.
const noLeaderAnswer = "the cluster has no leader (no quorum? `permitd status` shows which nodes answer): this node waited for one in vain; retry, possibly on another server"
