package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// tlsProbeTimeout bounds the TLS handshake wrongPortHint tries.
const tlsProbeTimeout = time.Second

// httpsAnswer is what Go's net/http server answers a plain HTTP request
// on a TLS port with (400).
const httpsAnswer = "Client sent an HTTP request to an HTTPS server"

// tlsHint is the fix for plain HTTP sent to a server that speaks TLS.
const tlsHint = "give the cluster's CA (permitd: --tls-ca FILE; Go: client.WithTLS) or use https:// addresses"

// wrongPortHint says what the server is when the last failure of a
// plain-HTTP call to it shows that it does not serve permitd's API over
// plain HTTP, or "":
//   - the connection closed without an answer (EOF) and the server
//     completes a TLS handshake: it speaks TLS (a permitd agent run with
//     --tls-cert closes a plain connection that way);
//   - the connection was reset without an answer: a node's raft port
//     reads the request's first byte, finds no raft command and closes
//     the connection with the rest unread.
func wrongPortHint(ctx context.Context, server string, err error) string {
	u, perr := url.Parse(server)
	if perr != nil || u.Scheme != "http" || err == nil {
		return ""
	}
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		if tls, wantsCert := speaksTLS(ctx, u.Host); tls && wantsCert {
			return fmt.Sprintf("%s speaks TLS, not plain HTTP, and asks for a client certificate: %s, with a client certificate (--tls-cert, --tls-key); or, if it is a node's raft port, give its --http-addr", u.Host, tlsHint)
		} else if tls {
			return fmt.Sprintf("%s speaks TLS, not plain HTTP: %s", u.Host, tlsHint)
		}
	case errors.Is(err, syscall.ECONNRESET):
		return fmt.Sprintf("%s reset the connection without an HTTP answer, as a node's raft port does: give the nodes' HTTP API addresses (their --http-addr), not their --raft-addr", u.Host)
	}
	return ""
}

// speaksTLS reports whether a TLS handshake with host succeeds (or fails
// on a TLS alert, such as a required client certificate), and whether the
// server asked for a client certificate (as a node's raft port and an
// agent run with --client-cert-auth do). It only detects TLS: it
// verifies nothing and sends no request.
func speaksTLS(ctx context.Context, host string) (speaks, wantsCert bool) {
	ctx, cancel := context.WithTimeout(ctx, tlsProbeTimeout)
	defer cancel()
	conf := &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // a probe: nothing is sent
		MinVersion:         tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			wantsCert = true
			return &tls.Certificate{}, nil
		},
	}
	conn, err := (&tls.Dialer{Config: conf}).DialContext(ctx, "tcp", host)
	if err == nil {
		conn.Close()
		return true, wantsCert
	}
	var alert tls.AlertError
	return errors.As(err, &alert), wantsCert
}

// httpsAnswerHint adds tlsHint to a 400 that says plain HTTP reached a
// TLS port.
func httpsAnswerHint(msg string) string {
	if strings.Contains(msg, httpsAnswer) {
		return strings.TrimSuffix(msg, ".") + ": the server speaks TLS: " + tlsHint
	}
	return msg
}

// plural is "1 server", "3 servers".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
