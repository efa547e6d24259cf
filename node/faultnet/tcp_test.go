package faultnet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// loopbackAddr returns a free "ip:port" on the loopback IP ip, skipping the
// test when the IP cannot be bound (not Linux's 127/8 on lo).
func loopbackAddr(t *testing.T, ip string) string {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Skipf("cannot bind %s: %v", ip, err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// server listens with f on addr and echoes what each accepted connection
// sends; accepted counts the connections handed out by Accept.
type server struct {
	ln       net.Listener
	accepted chan net.Conn
}

func serve(t *testing.T, f *TCPFaults, addr string) *server {
	t.Helper()
	ln, err := f.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ln: ln, accepted: make(chan net.Conn, 64)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted <- c
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}

// roundTrip writes msg on c and reads it back within timeout.
func roundTrip(c net.Conn, msg string, timeout time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		return fmt.Errorf("echo %q, want %q", buf, msg)
	}
	return nil
}

// dial dials to over f within a second, failing the test if it cannot,
// and closes the connection when the test ends.
func dial(t *testing.T, f *TCPFaults, to string) net.Conn {
	t.Helper()
	c, err := f.Dial(to, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// mustRoundTrip is roundTrip within 5 s, failing the test if it fails.
func mustRoundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if err := roundTrip(c, msg, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// waitBroken reads from c until it fails (EOF or reset) or the deadline.
func waitBroken(c net.Conn, timeout time.Duration) error {
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 64)
	for {
		if _, err := c.Read(buf); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fmt.Errorf("connection still open after %v", timeout)
			}
			return nil
		}
	}
}

func TestTCPBlockBothWays(t *testing.T) {
	aAddr, bAddr := loopbackAddr(t, "127.0.0.21"), loopbackAddr(t, "127.0.0.22")
	a, b := NewTCP(aAddr), NewTCP(bAddr)
	serve(t, a, aAddr)
	sb := serve(t, b, bAddr)

	c := dial(t, a, bAddr)
	mustRoundTrip(t, c, "hello")
	in := <-sb.accepted
	if h, _, _ := net.SplitHostPort(in.RemoteAddr().String()); h != "127.0.0.21" {
		t.Fatalf("inbound connection from %s: dials are not bound to the node's IP", in.RemoteAddr())
	}

	// b blocks a: b closes the connection it accepted from a (recognised by
	// its IP), and refuses a's new connections even though a was not told.
	if err := b.Block([]string{aAddr}); err != nil {
		t.Fatal(err)
	}
	if err := waitBroken(c, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	c2, err := a.Dial(bAddr, time.Second)
	if err != nil {
		t.Fatal(err) // the TCP handshake completes; b closes at once
	}
	defer c2.Close()
	if err := waitBroken(c2, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// b's own dials to a fail.
	if _, err := b.Dial(aAddr, time.Second); !errors.Is(err, ErrBlocked) {
		t.Fatalf("dial across a block: %v, want ErrBlocked", err)
	}
	if got := b.Faults().Block; len(got) != 1 || got[0] != aAddr {
		t.Fatalf("Faults().Block = %v", got)
	}

	b.Heal()
	c3 := dial(t, a, bAddr)
	mustRoundTrip(t, c3, "again")
}

func TestTCPBlockDialIsOneWay(t *testing.T) {
	aAddr, bAddr := loopbackAddr(t, "127.0.0.23"), loopbackAddr(t, "127.0.0.24")
	a, b := NewTCP(aAddr), NewTCP(bAddr)
	serve(t, a, aAddr)
	serve(t, b, bAddr)
	out := dial(t, a, bAddr)
	if err := a.BlockDial([]string{bAddr}); err != nil {
		t.Fatal(err)
	}
	if err := waitBroken(out, 5*time.Second); err != nil {
		t.Fatalf("a's open connection to b: %v", err)
	}
	if _, err := a.Dial(bAddr, time.Second); !errors.Is(err, ErrBlocked) {
		t.Fatalf("a dials b: %v, want ErrBlocked", err)
	}
	c, err := b.Dial(aAddr, time.Second)
	if err != nil {
		t.Fatalf("b dials a: %v", err)
	}
	defer c.Close()
	if err := roundTrip(c, "b to a", 5*time.Second); err != nil {
		t.Fatalf("b's connection to a (answered by a): %v", err)
	}
}

func TestTCPSharedIPBlocksByDialOnly(t *testing.T) {
	aAddr, bAddr := loopbackAddr(t, "127.0.0.1"), loopbackAddr(t, "127.0.0.1")
	a, b := NewTCP(aAddr), NewTCP(bAddr)
	serve(t, a, aAddr)
	serve(t, b, bAddr)
	if err := b.Block([]string{aAddr}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Dial(aAddr, time.Second); !errors.Is(err, ErrBlocked) {
		t.Fatalf("b dials a: %v, want ErrBlocked", err)
	}
	// a shares b's IP: b cannot recognise a's connections, so they pass.
	c := dial(t, a, bAddr)
	mustRoundTrip(t, c, "same ip")
}

func TestTCPLoss(t *testing.T) {
	aAddr, bAddr := loopbackAddr(t, "127.0.0.1"), loopbackAddr(t, "127.0.0.1")
	a, b := NewTCP(aAddr), NewTCP(bAddr)
	serve(t, b, bAddr)
	c := dial(t, a, bAddr)
	if err := a.SetLoss(1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, ErrBlocked) {
		t.Fatalf("write with loss 1: %v, want ErrBlocked", err)
	}
	if _, err := c.Write([]byte("x")); err == nil {
		t.Fatal("write on a connection broken by loss succeeded")
	}
	if err := a.SetLoss(0); err != nil {
		t.Fatal(err)
	}
	c2 := dial(t, a, bAddr)
	mustRoundTrip(t, c2, "ok")
	for _, bad := range []float64{-0.1, 1.1} {
		if err := a.SetLoss(bad); err == nil {
			t.Errorf("SetLoss(%v) accepted", bad)
		}
	}
	if err := a.SetDelay(-time.Millisecond, 0); err == nil {
		t.Error("negative delay accepted")
	}
	if err := a.Block([]string{"no-port"}); err == nil {
		t.Error("Block accepted an address without a port")
	}
}

func TestTCPDelayKeepsOrder(t *testing.T) {
	aAddr, bAddr := loopbackAddr(t, "127.0.0.1"), loopbackAddr(t, "127.0.0.1")
	a, b := NewTCP(aAddr), NewTCP(bAddr)
	serve(t, b, bAddr)
	c := dial(t, a, bAddr)
	const delay = 30 * time.Millisecond
	if err := a.SetDelay(delay, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	start := time.Now()
	for i := range 200 {
		msg := fmt.Sprintf("%04d;", i)
		want.WriteString(msg)
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, want.Len())
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed < delay {
		t.Fatalf("echo after %v, before the delay %v", elapsed, delay)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("stream reordered or corrupted: %q...", got[:40])
	}
	// Back to no delay: writes go straight through again, in order after
	// whatever is still queued.
	if err := a.SetDelay(0, 0); err != nil {
		t.Fatal(err)
	}
	mustRoundTrip(t, c, "done")
}
