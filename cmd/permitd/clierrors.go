package main

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/permitd/permitd/transport/client"
)

// describeError words an error of the Go client for a terminal: a server's
// answer as its message, status and server; anything else without the
// client's package prefixes.
func describeError(err error) string {
	var api *client.APIError
	if errors.As(err, &api) {
		return fmt.Sprintf("%s (%d %s from %s)", api.Message, api.StatusCode, http.StatusText(api.StatusCode),
			strings.TrimPrefix(api.Server, "http://"))
	}
	return strings.ReplaceAll(err.Error(), "client: ", "")
}

// exitCodeOf is the exit status for a failed request: 2 when the server
// (or the client, before sending) rejected it as invalid, 4 when it
// refused the credentials (401, 403), so that nothing changed, else 1.
func exitCodeOf(err error) int {
	if errors.Is(err, client.ErrInvalid) {
		return exitUsage
	}
	if errors.Is(err, client.ErrUnauthorized) || errors.Is(err, client.ErrForbidden) {
		return exitDenied
	}
	return exitFailure
}

// cliHints words the Go client's hints in msg for the command line: a
// TLS call that reached a plain HTTP port is told to drop --tls-ca, and
// where that came from when the environment set it; a deadline that came
// after a 503 is --timeout's; a missing token is --token's or
// $PERMITD_TOKEN's.
func (c *cmdLine) cliHints(msg string) string {
	// The client's error when the context ended after a 503 (see
	// Client.failover): the context is --timeout's.
	msg = strings.ReplaceAll(msg, "; then context deadline exceeded", "; then --timeout ran out")
	// The server's 401 for a request without a token (transport/auth).
	msg = strings.ReplaceAll(msg, `missing token: send "Authorization: Bearer TOKEN"`,
		`missing token: give --token or $PERMITD_TOKEN (sent as "Authorization: Bearer TOKEN")`)
	if !strings.Contains(msg, client.PlainHTTPHint) {
		return msg
	}
	fix := "speaks plain HTTP, not TLS: drop --tls-ca"
	if c.envSet["tls-ca"] {
		fix += fmt.Sprintf(" (it came from $%s: unset it)", c.env["tls-ca"])
	}
	return strings.ReplaceAll(msg, client.PlainHTTPHint, fix)
}
