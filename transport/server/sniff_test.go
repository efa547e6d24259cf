package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/wire"
)

// fakeBinary answers every reserve of limit "api" with a grant of WaitNanos
// equal to its permits, and anything else as not found.
func fakeBinary(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	w := wire.NewWriter(c)
	defer w.Close()
	for {
		f, err := wire.ReadFrame(br)
		if err != nil {
			return
		}
		q, err := wire.DecodeReserve(f.Payload)
		switch {
		case err != nil:
			w.Send(wire.Frame{ID: f.ID, Kind: wire.CodeInvalid, Payload: []byte(err.Error())})
		case q.Limit != "api":
			w.Send(wire.Frame{ID: f.ID, Kind: wire.CodeNotFound, Payload: []byte("no such limit")})
		default:
			w.Send(wire.Frame{ID: f.ID, Kind: wire.CodeOK, Payload: wire.EncodeReserveResult(wire.ReserveResult{Status: wire.Granted, WaitNanos: q.Permits})})
		}
	}
}

func TestSniffListenerServesHTTPAndBinaryOnOnePort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl := NewSniffListener(ln, fakeBinary)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.URL.Path) })}
	go srv.Serve(sl)
	defer srv.Close()
	addr := ln.Addr().String()

	resp, err := http.Get("http://" + addr + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello /x" {
		t.Fatalf("HTTP body = %q, want %q (the sniffed byte must reach the HTTP server)", body, "hello /x")
	}

	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Write([]byte{wire.ClientPreface}); err != nil {
		t.Fatal(err)
	}
	bc := wire.NewConn(nc)
	defer bc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code, p, err := bc.Call(ctx, wire.OpReserve, wire.EncodeReserve(wire.Reserve{Limit: "api", Permits: 7}))
	if err != nil || code != wire.CodeOK {
		t.Fatalf("binary call = %d %q %v", code, p, err)
	}
	if res, err := wire.DecodeReserveResult(p); err != nil || res.Status != wire.Granted || res.WaitNanos != 7 {
		t.Fatalf("binary answer = %+v, %v", res, err)
	}
}

func TestSniffListenerCloseEndsAccept(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl := NewSniffListener(ln, fakeBinary)
	errc := make(chan error, 1)
	go func() {
		_, err := sl.Accept()
		errc <- err
	}()
	sl.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept did not return after Close")
	}
}

// A connection that sends nothing is closed after the sniff timeout and
// never reaches either server; here it is simply closed by the client,
// which must not disturb the listener.
func TestSniffListenerSurvivesEmptyConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl := NewSniffListener(ln, fakeBinary)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(sl)
	defer srv.Close()
	for range 20 {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		nc.Close()
	}
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
}
