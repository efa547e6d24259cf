package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestWrongPortHints: a plain-HTTP call that fails because the address is
// not a plain-HTTP API port says what the port is and how to fix the
// command line: a TLS port that closes plain connections (as a permitd
// agent run with --tls-cert does), a TLS port that answers 400 (Go's
// net/http), a raft port (reads the first byte, finds no raft command and
// resets the connection); a plain HTTP server that drops the connection
// gets no such hint. "1 server" is singular.
func TestWrongPortHints(t *testing.T) {
	tlsSrv, agentTLS, raftTLS, raftPlain := wrongPorts(t)
	drop := host(serve(t, &scripted{reply: func(_ int, w http.ResponseWriter, _ *http.Request) {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	}}))
	for _, tc := range []struct {
		name, server string
		mention      []string
		not          []string
	}{
		{"agent TLS port", agentTLS, []string{agentTLS + " speaks TLS, not plain HTTP", "--tls-ca", "https://", "on 1 attempt over 1 server:"}, []string{"client certificate"}},
		{"mutual TLS or raft TLS port", raftTLS, []string{raftTLS + " speaks TLS", "--tls-ca", "client certificate", "--http-addr"}, nil},
		{"net/http TLS port", host(tlsSrv), []string{"speaks TLS", "--tls-ca", "https://"}, nil},
		{"raft port", raftPlain, []string{raftPlain + " reset the connection", "raft port", "--http-addr"}, []string{"TLS"}},
		{"dropped by an HTTP server", drop, []string{"on 1 attempt over 1 server;"}, []string{"TLS", "raft"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, []string{tc.server}, WithClock(newFakeClock()), WithRounds(1))
			_, err := c.ListLimits(context.Background())
			if err == nil {
				t.Fatal("ListLimits succeeded, want an error")
			}
			for _, m := range tc.mention {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
			for _, m := range tc.not {
				if strings.Contains(err.Error(), m) {
					t.Errorf("error %q mentions %q", err, m)
				}
			}
			var api *APIError
			if errors.As(err, &api) != (tc.server == host(tlsSrv)) {
				t.Errorf("error %v: an APIError only for the 400 of net/http's TLS port", err)
			}
		})
	}
	c := newClient(t, []string{drop, drop}, WithClock(newFakeClock()), WithRounds(1))
	if _, err := c.ListLimits(context.Background()); err == nil || !strings.Contains(err.Error(), "on 2 attempts over 2 servers;") {
		t.Errorf("two servers: %v; want \"on 2 attempts over 2 servers;\"", err)
	}
}

// TestWrongPortHintsTLSAndStatus: a TLS client at a plain HTTP port is
// told the port speaks plain HTTP (and to drop the CA); at a mutual TLS
// port that wants a client certificate (a node's raft port), that it
// looks like a raft port and to give the nodes' --http-addr; and StatusOf
// (permitd status, no failover) carries the same hints as the other calls
// (PortHint returns them), for plain HTTP at a TLS port and at a raft
// port too. A permitd TLS port's 400 to plain HTTP gets the TLS hint.
func TestWrongPortHintsTLSAndStatus(t *testing.T) {
	tlsSrv, agentTLS, raftTLS, raftPlain := wrongPorts(t)
	roots := tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig
	plainSrv := host(serve(t, http.NotFoundHandler()))
	permitdTLS := host(serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "this port speaks TLS: use https:// (curl --cacert CA)", http.StatusBadRequest)
	})))
	for _, tc := range []struct {
		name, server string
		tls          bool
		mention      []string
	}{
		{"TLS client at a plain HTTP port", plainSrv, true, []string{plainSrv + " " + PlainHTTPHint}},
		{"TLS client at a mutual TLS raft port", raftTLS, true, []string{raftTLS + " asks for a client certificate", "raft port (mutual TLS)", "--http-addr"}},
		{"plain client at a TLS port", agentTLS, false, []string{agentTLS + " speaks TLS, not plain HTTP", "--tls-ca"}},
		{"plain client at a raft port", raftPlain, false, []string{raftPlain + " reset the connection", "raft port", "--http-addr"}},
		{"plain client at permitd's TLS port", permitdTLS, false, []string{"this port speaks TLS, not plain HTTP", "--tls-ca"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []Option
			if tc.tls {
				opts = append(opts, WithTLS(roots))
			}
			c := newClient(t, []string{tc.server}, append(opts, WithClock(newFakeClock()), WithRounds(1))...)
			_, err := c.ListLimits(context.Background())
			_, serr := c.StatusOf(context.Background(), tc.server)
			for what, err := range map[string]error{"ListLimits": err, "StatusOf": serr} {
				if err == nil {
					t.Fatalf("%s succeeded, want an error", what)
				}
				for _, m := range tc.mention {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("%s: error %q does not mention %q", what, err, m)
					}
				}
				var api *APIError
				if !errors.As(err, &api) && PortHint(err) == "" {
					t.Errorf("%s: PortHint(%v) is empty", what, err)
				}
			}
		})
	}
}

// TestDeadlineKeepsTheLast503: when the context ends during an attempt
// after a server answered 503 (no leader), the error names that answer's
// cause first, not only "context deadline exceeded", and still matches
// the context's error.
func TestDeadlineKeepsTheLast503(t *testing.T) {
	srv := serve(t, &scripted{reply: func(hit int, w http.ResponseWriter, r *http.Request) {
		if hit == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":"list limits: the cluster has no leader"}`)
			return
		}
		<-r.Context().Done() // the second attempt outlives the deadline
	}})
	c := newClient(t, []string{host(srv)}, WithRounds(5), WithBackoff(time.Millisecond, time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.ListLimits(ctx)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "GET /v1/limits?limit=10000&prefix=: list limits: the cluster has no leader (503 from ") {
		t.Fatalf("ListLimits: %v; want the last 503's cause, and context.DeadlineExceeded", err)
	}
	if errors.Is(err, ErrUnavailable) {
		t.Errorf("ListLimits: %v matches ErrUnavailable; want only the context's error", err)
	}
}

// TestExhaustedKeepsTheLast503: when the attempts run out and the last
// failed to connect (a node down) after another server answered 503 (no
// leader), the error carries that answer (errors.As finds it: the CLI
// prints its message) and still names the last failure.
func TestExhaustedKeepsTheLast503(t *testing.T) {
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":"list limits: the cluster has no leader"}`)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String() // closed: connections are refused
	ln.Close()
	c := newClient(t, []string{host(srv), refused}, WithClock(newFakeClock()), WithRounds(2))
	_, err = c.ListLimits(context.Background())
	var api *APIError
	if !errors.As(err, &api) || api.StatusCode != 503 || !strings.Contains(err.Error(), "connection refused") || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ListLimits: %v; want the 503 (errors.As), ErrUnavailable, and the refused connection named", err)
	}
}

// TestErrorDurationsRounded: the client's own messages print a time to
// wait with three significant digits, rounded up (the exact value is in
// the error's fields).
func TestErrorDurationsRounded(t *testing.T) {
	for _, err := range []error{
		&RefusedError{Limit: "a", RetryAfter: 58990199804},
		&SessionRefusedError{RetryAfter: 58990199804, APIError: &APIError{Server: "s", StatusCode: 503, Message: "full"}},
	} {
		if !strings.Contains(err.Error(), "retry after 59s") {
			t.Errorf("%q: want \"retry after 59s\"", err)
		}
	}
}

// wrongPorts starts the ports a client may be given by mistake: a
// net/http TLS server; agentTLS, how a permitd agent's API port
// (tls.NewListener under the binary sniffer) treated a plain connection
// before it answered 400: the sniffer's first read runs the handshake,
// which fails, and closes it; raftTLS, a TLS port that requires a client
// certificate (a node's raft port, mutual TLS); raftPlain, hashicorp/raft's
// NetworkTransport: it reads one byte, the RPC type, and closes the
// connection on an unknown one.
func wrongPorts(t *testing.T) (tlsSrv *httptest.Server, agentTLS, raftTLS, raftPlain string) {
	t.Helper()
	tlsSrv = httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the plain request's handshake error
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	serveTLS := func(conf *tls.Config) func(net.Conn) {
		return func(c net.Conn) {
			tc := tls.Server(c, conf)
			_, _ = tc.Read(make([]byte, 1))
			tc.Close()
		}
	}
	mutualTLS := tlsSrv.TLS.Clone()
	mutualTLS.ClientAuth = tls.RequireAnyClientCert
	agentTLS, raftTLS = listenFunc(t, serveTLS(tlsSrv.TLS)), listenFunc(t, serveTLS(mutualTLS))
	raftPlain = listenFunc(t, func(c net.Conn) {
		_, _ = c.Read(make([]byte, 1))
		c.Close()
	})
	return tlsSrv, agentTLS, raftTLS, raftPlain
}
