package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
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

// TestSniffListenerTLSAnswersPlainHTTP: behind a TLS listener, a plain
// HTTP request (curl http:// at a TLS port) is answered 400 with a body
// that says the port speaks TLS, instead of an empty reply; HTTPS and the
// binary protocol inside TLS still work, and other plaintext (random
// bytes, a truncated request line) is closed without an answer and
// without harm to the listener.
func TestSniffListenerTLSAnswersPlainHTTP(t *testing.T) {
	ts := httptest.NewUnstartedServer(nil) // for its certificate
	ts.StartTLS()
	conf := ts.TLS.Clone()
	roots := ts.Client().Transport.(*http.Transport).TLSClientConfig
	ts.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl := NewSniffListener(tls.NewListener(ln, conf), fakeBinary)
	srv := &http.Server{
		Handler:  http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.URL.Path) }),
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go srv.Serve(sl)
	defer srv.Close()
	addr := ln.Addr().String()

	for _, method := range []string{"GET", "POST", "PUT", "DELETE", "HEAD"} {
		req, _ := http.NewRequest(method, "http://"+addr+"/v1/limits", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("plain %s to the TLS port: %v, want a 400", method, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || (method != "HEAD" && string(body) != "this port speaks TLS: use https:// (curl --cacert CA)\n") {
			t.Fatalf("plain %s to the TLS port: %d %q, want 400", method, resp.StatusCode, body)
		}
	}
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	raw, _ := io.ReadAll(nc)
	nc.Close()
	if !strings.HasPrefix(string(raw), "HTTP/1.1 400 Bad Request\r\n") || !strings.HasSuffix(string(raw), "use https:// (curl --cacert CA)\n") {
		t.Fatalf("raw plain request: %q", raw)
	}
	for _, junk := range []string{"\x00\x01\x02\x03\x04\x05", "GET", "GETX /", "\x16\x03\x01\x00\x00", "\xff\xff\xff\xff\xff\xff\xff", "OPTIO"} {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(nc, junk)
		if cw, ok := nc.(*net.TCPConn); ok {
			cw.CloseWrite()
		}
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		raw, _ := io.ReadAll(nc)
		nc.Close()
		if strings.Contains(string(raw), "HTTP/1.1 200") {
			t.Fatalf("junk %q answered %q", junk, raw)
		}
	}

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: roots}}
	resp, err := hc.Get("https://" + addr + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello /x" {
		t.Fatalf("HTTPS body = %q, want %q", body, "hello /x")
	}
	tc, err := tls.Dial("tcp", addr, roots)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Write([]byte{wire.ClientPreface}); err != nil {
		t.Fatal(err)
	}
	bc := wire.NewConn(tc)
	defer bc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if code, p, err := bc.Call(ctx, wire.OpReserve, wire.EncodeReserve(wire.Reserve{Limit: "api", Permits: 3})); err != nil || code != wire.CodeOK {
		t.Fatalf("binary call inside TLS = %d %q %v", code, p, err)
	}
}
