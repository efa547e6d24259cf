package transport

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/permitd/permitd/node"
)

// maxQuoted is the longest piece of client input echoed in an error.
const maxQuoted = 200

// strconvQuote quotes s for an error message, truncated to maxQuoted bytes.
func strconvQuote(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + "..."
	}
	return strconv.Quote(s)
}

// storeError answers an error returned by the Store:
// ErrNotFound → 404, ErrInvalid → 400, everything else → 503 (with a
// Retry-After of one second). It returns the code written.
func (h *handler) storeError(w http.ResponseWriter, op string, err error) int {
	switch {
	case errors.Is(err, node.ErrNotFound):
		writeError(w, http.StatusNotFound, node.Message(err))
		return http.StatusNotFound
	case errors.Is(err, node.ErrInvalid):
		writeError(w, http.StatusBadRequest, node.Message(err))
		return http.StatusBadRequest
	case errors.Is(err, node.ErrConflict):
		writeError(w, http.StatusConflict, node.Message(err))
		return http.StatusConflict
	}
	msg := node.Message(err)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		msg = op + ": timed out (" + msg + "); retry, possibly on another server"
	case errors.Is(err, context.Canceled):
		msg = op + ": canceled (" + msg + ")"
	case errors.Is(err, node.ErrRemoved):
		msg = op + ": this node was removed from the cluster and serves nothing; use another node"
	case errors.Is(err, node.ErrNoLeader), errors.Is(err, node.ErrShutdown):
		msg = op + ": no leader reachable (" + msg + "); retry, possibly on another server"
	default:
		h.log.Error("store failed", "op", op, "error", err)
		msg = op + ": unavailable: " + msg
	}
	h.log.Debug("request unavailable", "op", op, "error", err)
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, msg)
	return http.StatusServiceUnavailable
}
