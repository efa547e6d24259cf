package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// WithTLS makes the client speak TLS with conf (its roots, and a client
// certificate if the servers require one): servers given as "host:port"
// are reached as "https://host:port", and binary connections are TLS
// connections too. A server given as "http://" is refused. Without
// WithTLS, "https://" servers use the system's roots over HTTP and
// binary calls to them are refused.
func WithTLS(conf *tls.Config) Option {
	return func(c *Client) { c.tls = conf.Clone() }
}

// WithToken makes the client present an API token (a secret from
// `permitd tokens create`): "Authorization: Bearer TOKEN" on every HTTP
// request, and an auth call first on every binary connection. Send it
// over TLS only: on a plain connection anyone on the path can read it.
func WithToken(secret string) Option { return func(c *Client) { c.token = secret } }

// authorize adds the token to req.
func (c *Client) authorize(req *http.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}

// binaryAuth runs the auth call on a fresh binary connection (after the
// preface): it sends the secret and waits for the answer before anything
// else is sent, as the server requires.
func binaryAuth(ctx context.Context, nc net.Conn, secret string) error {
	if len(secret) == 0 || len(secret) > wire.MaxAuthSecret {
		return fmt.Errorf("%w: token of %d bytes; allowed: 1 to %d", ErrInvalid, len(secret), wire.MaxAuthSecret)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
		defer nc.SetDeadline(time.Time{})
	}
	bw := bufio.NewWriter(nc)
	if err := wire.WriteFrame(bw, wire.Frame{ID: 1, Kind: wire.OpAuth, Payload: []byte(secret)}); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	f, err := wire.ReadFrameLimit(nc, wire.MaxClientFrame) // unbuffered: nothing else is in flight
	if err != nil {
		return fmt.Errorf("client: auth: %w", err)
	}
	switch f.Kind {
	case wire.CodeOK:
		return nil
	case wire.CodeUnauthenticated:
		return &APIError{Server: nc.RemoteAddr().String(), StatusCode: http.StatusUnauthorized, Message: string(f.Payload)}
	}
	return &APIError{Server: nc.RemoteAddr().String(), StatusCode: http.StatusServiceUnavailable, Message: string(f.Payload)}
}

// tlsHandshake runs the client side of a TLS handshake over nc for addr
// ("host:port"), bounded by ctx.
func tlsHandshake(ctx context.Context, nc net.Conn, addr string, conf *tls.Config) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("client: tls to %s: %w", addr, err)
	}
	conf = conf.Clone()
	if conf.ServerName == "" {
		conf.ServerName = host
	}
	tc := tls.Client(nc, conf)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("client: tls handshake with %s: %w", addr, err)
	}
	return tc, nil
}
