package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/permitd/permitd/cmd/internal/httplite"
	"github.com/permitd/permitd/transport/wire"
)

// conn.go: how bench sends one reserve: over a keep-alive HTTP/1.1
// connection, or as a frame on a shared, pipelined connection of the
// binary protocol. Both answer with the HTTP status the decision stands
// for, so the run loop counts them alike.

// benchConn sends one reserve and answers with the HTTP status it stands
// for (200 granted, 429 refused, 503 with overloaded set when the node
// refused it at once as overloaded).
type benchConn interface {
	reserve(buf *bytes.Buffer, requestID string) (code int, overloaded bool, err error)
	Close()
}

// httpBenchConn is one keep-alive HTTP/1.1 connection.
type httpBenchConn struct {
	c       *httplite.Conn
	path    string
	permits int64
	maxWait time.Duration
	// multi, when not empty, is the start of a multi-limit reserve's body
	// (Config.multiPrefix).
	multi string
	// name, when not nil, gives each reserve's limit (a templated key):
	// its path is built per reserve.
	name func() string
}

func (h httpBenchConn) reserve(buf *bytes.Buffer, requestID string) (int, bool, error) {
	buf.Reset()
	switch {
	case h.multi != "" && requestID != "":
		fmt.Fprintf(buf, `%s,"max_wait":%q,"request_id":%q}`, h.multi, h.maxWait.String(), requestID)
	case h.multi != "":
		fmt.Fprintf(buf, `%s,"max_wait":%q}`, h.multi, h.maxWait.String())
	case requestID != "":
		fmt.Fprintf(buf, `{"permits":%d,"max_wait":%q,"request_id":%q}`, h.permits, h.maxWait.String(), requestID)
	default:
		fmt.Fprintf(buf, `{"permits":%d,"max_wait":%q}`, h.permits, h.maxWait.String())
	}
	path := h.path
	if h.name != nil {
		path = "/v1/limits/" + h.name() + "/reserve"
	}
	code, body, err := h.c.Do("POST", path, buf.Bytes())
	return code, code == 503 && bytes.Contains(body, []byte("overloaded")), err
}

func (h httpBenchConn) Close() { h.c.Close() }

// binaryBenchConn is a share of a pipelined binary connection.
type binaryBenchConn struct {
	c *wire.Conn
	r wire.Reserve
	// name, when not nil, gives each reserve's limit (a templated key).
	name func() string
}

func (bc binaryBenchConn) reserve(_ *bytes.Buffer, requestID string) (int, bool, error) {
	r := bc.r
	r.RequestID = requestID
	if bc.name != nil {
		r.Limit = bc.name()
	}
	code, resp, err := bc.c.Call(context.Background(), wire.OpReserve, wire.EncodeReserve(r))
	if err != nil {
		return 0, false, err
	}
	return binaryAnswer(code, resp)
}

// binaryAnswer is the HTTP status a binary reserve's answer stands for:
// 200 granted, 429 refused, 503 with overloaded set when the node refused
// it at once as overloaded; an error for any other answer.
func binaryAnswer(code byte, resp []byte) (int, bool, error) {
	if code == wire.CodeOverloaded {
		return 503, true, nil
	}
	if code != wire.CodeOK {
		return 0, false, fmt.Errorf("bench: binary answer code %d: %s", code, resp)
	}
	res, err := wire.DecodeReserveResult(resp)
	if err != nil {
		return 0, false, fmt.Errorf("bench: %w", err)
	}
	switch res.Status {
	case wire.Granted:
		return 200, false, nil
	case wire.Refused:
		return 429, false, nil
	}
	return 0, false, fmt.Errorf("bench: reserve status %d: %s", res.Status, res.Detail)
}

// Close is a no-op: the connection is shared and closed by bench.
func (bc binaryBenchConn) Close() {}

// dialBinary opens one pipelined binary connection to each server (over
// TLS with conf, authenticated with token when not empty).
func dialBinary(servers []string, conf *tls.Config, token string) ([]*wire.Conn, error) {
	ncs, err := dialBinaryRaw(servers, conf, token)
	if err != nil {
		return nil, err
	}
	out := make([]*wire.Conn, len(ncs))
	for i, nc := range ncs {
		out[i] = wire.NewConn(nc)
	}
	return out, nil
}

// dialBinaryRaw opens one binary connection to each server, its preface
// written and, with a token, authenticated.
func dialBinaryRaw(servers []string, conf *tls.Config, token string) ([]net.Conn, error) {
	out := make([]net.Conn, 0, len(servers))
	for _, s := range servers {
		nc, err := net.DialTimeout("tcp", s, 5*time.Second)
		if err == nil && conf != nil {
			c := conf.Clone()
			if c.ServerName == "" {
				c.ServerName, _, _ = net.SplitHostPort(s)
			}
			tc := tls.Client(nc, c)
			_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
			if err = tc.Handshake(); err == nil {
				_ = tc.SetDeadline(time.Time{})
				nc = tc
			}
		}
		if err == nil {
			_, err = nc.Write([]byte{wire.ClientPreface})
		}
		if err == nil && token != "" {
			err = benchAuth(nc, token)
		}
		if err != nil {
			if nc != nil {
				nc.Close()
			}
			for _, c := range out {
				c.Close()
			}
			return nil, fmt.Errorf("bench: binary connection to %s: %w", s, err)
		}
		out = append(out, nc)
	}
	return out, nil
}

// benchAuth runs the binary protocol's auth call (op 18) on nc.
func benchAuth(nc net.Conn, token string) error {
	bw := bufio.NewWriter(nc)
	if err := wire.WriteFrame(bw, wire.Frame{ID: 1, Kind: wire.OpAuth, Payload: []byte(token)}); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer nc.SetReadDeadline(time.Time{})
	f, err := wire.ReadFrameLimit(nc, wire.MaxClientFrame)
	if err != nil {
		return err
	}
	if f.Kind != wire.CodeOK {
		return fmt.Errorf("auth refused (code %d): %s", f.Kind, f.Payload)
	}
	return nil
}
