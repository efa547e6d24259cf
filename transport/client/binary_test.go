package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// binServer is a fake node speaking the binary protocol: answer decides
// each reserve's answer code and payload; it records the request IDs.
type binServer struct {
	addr   string
	answer func(q wire.Reserve) (byte, []byte)
	// lease, if set, answers the lease commands (op and payload).
	lease func(op byte, p []byte) (byte, []byte)
	// session, if set, answers an open (else session 1).
	session func() wire.SessionResult

	mu  sync.Mutex
	ids []string
}

func serveBinary(t *testing.T, answer func(q wire.Reserve) (byte, []byte)) *binServer {
	return serveBinaryWith(t, &binServer{answer: answer})
}

// serveBinaryWith serves s (its answer functions set) on a fresh port.
func serveBinaryWith(t *testing.T, s *binServer) *binServer {
	t.Helper()
	s.addr = listenFunc(t, func(c net.Conn) { s.serve(t, c) })
	return s
}

func (s *binServer) serve(t *testing.T, c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	if b, err := br.ReadByte(); err != nil || b != wire.ClientPreface {
		t.Errorf("preface = %x, %v; want %x", b, err, wire.ClientPreface)
		return
	}
	w := wire.NewWriter(c)
	defer w.Close()
	for {
		f, err := wire.ReadFrame(br)
		if err != nil {
			return
		}
		if s.lease != nil && (f.Kind == wire.OpLease || f.Kind == wire.OpRenew || f.Kind == wire.OpReturn) {
			code, p := s.lease(f.Kind, f.Payload)
			w.Send(wire.Frame{ID: f.ID, Kind: code, Payload: p})
			continue
		}
		if f.Kind == wire.OpOpenSession {
			res := wire.SessionResult{ID: 1, IdleNanos: int64(10 * time.Minute)}
			if s.session != nil {
				res = s.session()
			}
			w.Send(wire.Frame{ID: f.ID, Kind: wire.CodeOK, Payload: wire.EncodeSessionResult(res)})
			continue
		}
		q, err := wire.DecodeReserve(f.Payload)
		if err != nil || f.Kind != wire.OpReserve {
			t.Errorf("frame kind %d payload %x: %v", f.Kind, f.Payload, err)
			return
		}
		s.mu.Lock()
		s.ids = append(s.ids, keyOf(q))
		s.mu.Unlock()
		code, p := s.answer(q)
		w.Send(wire.Frame{ID: f.ID, Kind: code, Payload: p})
	}
}

// keyOf is the idempotency key of a reserve as Grant.RequestID names it.
func keyOf(q wire.Reserve) string {
	if q.Session.ID != 0 {
		return fmt.Sprintf("session:%d:%d", q.Session.ID, q.Session.Seq)
	}
	return q.RequestID
}

func (s *binServer) requestIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

func grantAfter(q wire.Reserve) (byte, []byte) {
	return wire.CodeOK, wire.EncodeReserveResult(wire.ReserveResult{Status: wire.Granted, WaitNanos: q.Permits * 1000, ExpiresInNanos: 5e6})
}

func TestBinaryReserveGrantAndRefusal(t *testing.T) {
	s := serveBinary(t, func(q wire.Reserve) (byte, []byte) {
		if q.Permits > 5 {
			return wire.CodeOK, wire.EncodeReserveResult(wire.ReserveResult{Status: wire.Refused, RetryAfterNanos: 42})
		}
		return grantAfter(q)
	})
	c, err := New([]string{s.addr}, WithBinaryReserves(2))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	g, err := c.Reserve(ctx, "api", 3, time.Second)
	if err != nil || !g.Granted || g.Delay != 3*time.Microsecond || g.ExpiresIn != 5*time.Millisecond || g.RequestID == "" {
		t.Fatalf("Reserve(3) = %+v, %v", g, err)
	}
	g, err = c.Reserve(ctx, "api", 9, time.Second)
	if err != nil || g.Granted || g.RetryAfter != 42 {
		t.Fatalf("Reserve(9) = %+v, %v; want a refusal with RetryAfter 42ns", g, err)
	}
	if _, err := c.TryAcquire(ctx, "api", 9, time.Second); !errors.Is(err, ErrThrottled) {
		t.Fatalf("TryAcquire(9) err = %v, want ErrThrottled", err)
	}
	// Many concurrent callers share the pipelined connections.
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if g, err := c.Reserve(ctx, "api", 1, time.Second); err != nil || !g.Granted {
					t.Errorf("concurrent Reserve = %+v, %v", g, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestBinaryReserveFailsOverWithTheSameRequestID(t *testing.T) {
	noLeader := serveBinary(t, func(wire.Reserve) (byte, []byte) { return wire.CodeNoLeader, []byte("no leader") })
	good := serveBinary(t, grantAfter)
	c, err := New([]string{noLeader.addr, good.addr}, WithBinaryReserves(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := c.Reserve(context.Background(), "api", 1, time.Second)
	if err != nil || !g.Granted {
		t.Fatalf("Reserve = %+v, %v", g, err)
	}
	a, b := noLeader.requestIDs(), good.requestIDs()
	if len(a) != 1 || len(b) != 1 || a[0] != b[0] || a[0] != g.RequestID {
		t.Fatalf("request IDs: first server %v, second %v, grant %q; want one and the same", a, b, g.RequestID)
	}
}

func TestBinaryReserveErrors(t *testing.T) {
	invalid := serveBinary(t, func(wire.Reserve) (byte, []byte) { return wire.CodeInvalid, []byte("bad name") })
	missing := serveBinary(t, func(wire.Reserve) (byte, []byte) { return wire.CodeNotFound, []byte("no such limit") })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		name   string
		server string
		want   error
	}{
		{"invalid is not retried", invalid.addr, ErrInvalid},
		{"not found", missing.addr, ErrNotFound},
		{"nothing listening", closed, ErrNotDelivered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New([]string{tc.server}, WithBinaryReserves(1), WithRounds(1))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Reserve(context.Background(), "api", 1, time.Second); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if n := len(invalid.requestIDs()); n != 1 {
		t.Errorf("invalid request sent %d times, want 1", n)
	}
}

func TestBinaryReservesOptionIsChecked(t *testing.T) {
	if _, err := New([]string{"127.0.0.1:1"}, WithBinaryReserves(0)); !errors.Is(err, ErrInvalid) {
		t.Errorf("0 connections: err = %v, want ErrInvalid", err)
	}
	if _, err := New([]string{"https://127.0.0.1:1"}, WithBinaryReserves(1)); !errors.Is(err, ErrInvalid) {
		t.Errorf("https server: err = %v, want ErrInvalid", err)
	}
}
