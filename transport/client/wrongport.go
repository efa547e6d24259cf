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

// plainTLSAnswer is what a permitd agent's TLS port answers a plain HTTP
// request with (400; transport/server's sniffer).
const plainTLSAnswer = "this port speaks TLS: use https://"

// tlsHint is the fix for plain HTTP sent to a server that speaks TLS.
const tlsHint = "give the cluster's CA (permitd: --tls-ca FILE; Go: client.WithTLS) or use https:// addresses"

// PlainHTTPHint is the fix for TLS sent to a server that speaks plain
// HTTP; the errors of such calls contain it (the CLI adds where its
// --tls-ca came from).
const PlainHTTPHint = "speaks plain HTTP, not TLS: drop the CA (permitd: --tls-ca; Go: client.WithTLS) or give http:// addresses"

// raftHint is the fix for a call that reached a node's raft port.
const raftHint = "give the nodes' HTTP API addresses (their --http-addr), not their --raft-addr"

// wrongPortHint says what the server is when the last failure of a
// plain-HTTP call to it shows that it does not serve permitd's API over
// plain HTTP, or "":
//   - the connection closed without an answer (EOF) and the server
//     completes a TLS handshake: it speaks TLS (a permitd agent run with
//     --tls-cert closes a plain connection that way);
//   - the connection was reset without an answer: a node's raft port
//     reads the request's first byte, finds no raft command and closes
//     the connection with the rest unread.
//
// For an https server it says so when the server answered in plain HTTP,
// or asked for a client certificate the client has none for (as a node's
// raft port, mutual TLS, does), or reset the connection after the
// handshake (a raft port whose CA signed the client's certificate).
func wrongPortHint(ctx context.Context, server string, err error) string {
	u, perr := url.Parse(server)
	if perr != nil || err == nil {
		return ""
	}
	if u.Scheme == "https" {
		return wrongTLSPortHint(u.Host, err)
	}
	if u.Scheme != "http" {
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
		return fmt.Sprintf("%s reset the connection without an HTTP answer, as a node's raft port does: %s", u.Host, raftHint)
	}
	return ""
}

// wrongTLSPortHint is wrongPortHint for an https server at host.
func wrongTLSPortHint(host string, err error) string {
	// A remote alert is a *net.OpError around crypto/tls's unexported
	// alert type: only its text tells which it is.
	switch msg := err.Error(); {
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return fmt.Sprintf("%s %s", host, PlainHTTPHint)
	case strings.Contains(msg, "remote error: tls: certificate required"):
		return fmt.Sprintf("%s asks for a client certificate, as a node's raft port (mutual TLS) does: %s; if it is the API port of an agent run with --client-cert-auth, give a client certificate (--tls-cert, --tls-key)", host, raftHint)
	case errors.Is(err, syscall.ECONNRESET):
		return fmt.Sprintf("%s reset the connection without an HTTP answer, as a node's raft port does: %s", host, raftHint)
	}
	return ""
}

// PortHint returns the hint a call's error carries when the address it
// went to is not a permitd API port of the client's kind (plain HTTP or
// TLS), such as "127.0.0.1:7001 reset the connection without an HTTP
// answer, as a node's raft port does: ...", or "".
func PortHint(err error) string {
	var h *hintedError
	if errors.As(err, &h) {
		return h.hint
	}
	return ""
}

// hintedError is a failed call with what wrongPortHint says of the
// server it failed at last.
type hintedError struct {
	msg  string // the whole message, hint included
	hint string
	err  error
}

// Error implements error.
func (e *hintedError) Error() string { return e.msg }

// Unwrap returns the failure.
func (e *hintedError) Unwrap() error { return e.err }

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
// TLS port (net/http's, or a permitd agent's, whose text it replaces).
func httpsAnswerHint(msg string) string {
	if strings.Contains(msg, plainTLSAnswer) {
		return "this port speaks TLS, not plain HTTP: " + tlsHint + ", with a client certificate (--tls-cert, --tls-key) if the agents run with --client-cert-auth"
	}
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
