package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"time"

	"github.com/permitd/permitd/cmd/internal/httplite"
	"github.com/permitd/permitd/transport/wire"
)

// benchconn.go: how bench sends one reserve: over a keep-alive HTTP/1.1
// connection, or as a frame on a shared, pipelined connection of the
// binary protocol. Both answer with the HTTP status the decision stands
// for, so the run loop counts them alike.

// benchConn sends one reserve and answers with the HTTP status it stands
// for (200 granted, 429 refused).
type benchConn interface {
	reserve(buf *bytes.Buffer, requestID string) (int, error)
	Close()
}

// httpBenchConn is one keep-alive HTTP/1.1 connection.
type httpBenchConn struct {
	c       *httplite.Conn
	path    string
	permits int64
	maxWait time.Duration
}

func (h httpBenchConn) reserve(buf *bytes.Buffer, requestID string) (int, error) {
	buf.Reset()
	if requestID != "" {
		fmt.Fprintf(buf, `{"permits":%d,"max_wait":%q,"request_id":%q}`, h.permits, h.maxWait.String(), requestID)
	} else {
		fmt.Fprintf(buf, `{"permits":%d,"max_wait":%q}`, h.permits, h.maxWait.String())
	}
	code, _, err := h.c.Do("POST", h.path, buf.Bytes())
	return code, err
}

func (h httpBenchConn) Close() { h.c.Close() }

// binaryBenchConn is a share of a pipelined binary connection.
type binaryBenchConn struct {
	c *wire.Conn
	r wire.Reserve
}

func (bc binaryBenchConn) reserve(_ *bytes.Buffer, requestID string) (int, error) {
	r := bc.r
	r.RequestID = requestID
	code, resp, err := bc.c.Call(context.Background(), wire.OpReserve, wire.EncodeReserve(r))
	if err != nil {
		return 0, err
	}
	if code != wire.CodeOK {
		return 0, fmt.Errorf("binary answer code %d: %s", code, resp)
	}
	res, err := wire.DecodeReserveResult(resp)
	if err != nil {
		return 0, err
	}
	switch res.Status {
	case wire.Granted:
		return 200, nil
	case wire.Refused:
		return 429, nil
	}
	return 0, fmt.Errorf("reserve status %d: %s", res.Status, res.Detail)
}

// Close is a no-op: the connection is shared and closed by bench.
func (bc binaryBenchConn) Close() {}

// dialBinary opens one binary connection to each server.
func dialBinary(servers []string) ([]*wire.Conn, error) {
	out := make([]*wire.Conn, 0, len(servers))
	for _, s := range servers {
		nc, err := net.DialTimeout("tcp", s, 5*time.Second)
		if err == nil {
			_, err = nc.Write([]byte{wire.ClientPreface})
		}
		if err != nil {
			for _, c := range out {
				c.Close()
			}
			return nil, fmt.Errorf("bench: binary connection to %s: %w", s, err)
		}
		out = append(out, wire.NewConn(nc))
	}
	return out, nil
}
