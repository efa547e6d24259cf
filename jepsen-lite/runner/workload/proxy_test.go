package workload

import (
	"bufio"
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// echoServer answers every line it reads with the same line, until the
// test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends line on c and reads the answer, within d.
func roundTrip(c net.Conn, r *bufio.Reader, line string, d time.Duration) (string, error) {
	if err := c.SetDeadline(time.Now().Add(d)); err != nil {
		return "", err
	}
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	got, err := r.ReadString('\n')
	return strings.TrimSuffix(got, "\n"), err
}

// TestCutProxy: it forwards; a drop resets open connections and closes
// new ones at once; a blackhole holds bytes both ways and delivers them
// when lifted; Close ends everything.
func TestCutProxy(t *testing.T) {
	p, err := newCutProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	p.serve()
	defer p.Close()
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	c, r := dial()
	if got, err := roundTrip(c, r, "one", 5*time.Second); err != nil || got != "one" {
		t.Fatalf("forward: %q, %v", got, err)
	}

	p.Cut(CutDrop)
	if _, err := roundTrip(c, r, "two", 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an open connection survived a drop: %v", err)
	}
	if c2, err := net.Dial("tcp", p.Addr()); err == nil { // else reset while connecting: dropped too
		defer c2.Close()
		if _, err := roundTrip(c2, bufio.NewReader(c2), "three", 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a new connection got through a drop: %v", err)
		}
	}

	p.Cut("")
	c3, r3 := dial()
	if got, err := roundTrip(c3, r3, "four", 5*time.Second); err != nil || got != "four" {
		t.Fatalf("after the drop was lifted: %q, %v", got, err)
	}
	p.Cut(CutBlackhole)
	if got, err := roundTrip(c3, r3, "five", 200*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an open connection got an answer through a blackhole: %q, %v", got, err)
	}
	c4, r4 := dial()
	if got, err := roundTrip(c4, r4, "six", 200*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a new connection got an answer through a blackhole: %q, %v", got, err)
	}
	p.Cut("") // the held bytes go through, as TCP would deliver them
	for _, x := range []struct {
		c    net.Conn
		r    *bufio.Reader
		want string
	}{{c3, r3, "five"}, {c4, r4, "six"}} {
		if err := x.c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if got, err := x.r.ReadString('\n'); err != nil || got != x.want+"\n" {
			t.Fatalf("after the blackhole was lifted: %q, %v; want %q", got, err, x.want)
		}
	}

	p.Close()
	if _, err := roundTrip(c3, r3, "seven", 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection survived Close: %v", err)
	}
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		c.Close()
		t.Fatal("the proxy still accepts after Close")
	}
}

// TestRelayLayout: the default relay count, and some sidecars through
// each relay while every (relays+1)-th goes direct.
func TestRelayLayout(t *testing.T) {
	for _, tt := range []struct{ relays, workers, want int }{
		{0, 1, 0}, {0, 2, 1}, {0, 3, 2}, {0, 8, 2}, {-1, 8, 0}, {5, 3, 3}, {1, 6, 1},
	} {
		if got := RelayCount(tt.relays, tt.workers); got != tt.want {
			t.Errorf("RelayCount(%d, %d) = %d, want %d", tt.relays, tt.workers, got, tt.want)
		}
	}
	var got []int
	for i := range 6 {
		got = append(got, RelayOf(i, 2))
	}
	if want := []int{0, 1, -1, 0, 1, -1}; !slices.Equal(got, want) {
		t.Errorf("RelayOf(0..5, 2) = %v, want %v", got, want)
	}
	if RelayOf(3, 0) != -1 {
		t.Error("a sidecar went through a relay when there is none")
	}
}

func TestParseRelayMetrics(t *testing.T) {
	text := `# HELP permitd_relay_commands_total Lease commands received.
# TYPE permitd_relay_commands_total counter
permitd_relay_commands_total 76
permitd_relay_batches_total 75
permitd_relay_batched_commands_total 76
permitd_relay_failed_batches_total 1
permitd_relay_refused_total 0
permitd_relay_connections 2
go_goroutines 12
`
	st, err := parseRelayMetrics(text)
	if want := (RelayStats{Commands: 76, Batches: 75, BatchedCommands: 76, FailedBatches: 1}); err != nil || st != want {
		t.Fatalf("parse: %+v, %v; want %+v", st, err, want)
	}
	if _, err := parseRelayMetrics("permitd_relay_commands_total 1\n"); err == nil {
		t.Fatal("metrics without every counter were accepted")
	}
}
