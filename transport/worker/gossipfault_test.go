package worker

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// memberlistUserMsg is the first byte of a memberlist stream that carries
// a user message (memberlist's userMsg, part of its wire protocol), when
// compression and encryption are off.
const memberlistUserMsg = 8

// stealFaultFunc decides the fate of one steal message from one worker to
// another (reply: an answer, else a request): dropped, or delayed.
type stealFaultFunc func(from, to string, reply bool) (drop bool, delay time.Duration)

// faultTransport is memberlist's own NetTransport on loopback with a
// fault layer on the streams it dials: a stream that carries a user
// message (a steal request or answer: memberlist's SendReliable) is
// delayed or dropped by fault; every other stream (push/pull, fallback
// probes) and every packet passes. A dropped message is swallowed after
// the sender wrote it: SendReliable succeeds and the receiver never hears
// of it, as when the network loses it after the send.
//
// Use it with EnableCompression off, so that the message type is the
// stream's first byte.
type faultTransport struct {
	*memberlist.NetTransport
	self  string
	fault stealFaultFunc
	stats *transportFaultStats
}

// transportFaultStats counts what the fault layers of a fleet did.
type transportFaultStats struct {
	sent, dropped, droppedReplies atomic.Int64
}

var _ memberlist.NodeAwareTransport = (*faultTransport)(nil)

// newFaultTransport binds a NetTransport to a free loopback port (TCP and
// UDP on the same port, retried as memberlist does when they race) and
// wraps it.
func newFaultTransport(t *testing.T, self string, fault stealFaultFunc, stats *transportFaultStats) *faultTransport {
	t.Helper()
	var err error
	for try := 0; try < 10; try++ {
		var nt *memberlist.NetTransport
		nt, err = memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{"127.0.0.1"}, BindPort: 0})
		if err == nil {
			return &faultTransport{NetTransport: nt, self: self, fault: fault, stats: stats}
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	t.Fatalf("gossip transport for %s: %v", self, err)
	return nil
}

// DialAddressTimeout implements memberlist.NodeAwareTransport: the
// stream to a.Name goes through the fault layer.
func (ft *faultTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	c, err := ft.NetTransport.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, err
	}
	return &faultConn{Conn: c, ft: ft, to: a.Name}, nil
}

// faultConn decides on its first write whether the stream carries a steal
// message, and if so its fate.
type faultConn struct {
	net.Conn
	ft *faultTransport
	to string

	once    sync.Once
	swallow bool
}

func (c *faultConn) Write(b []byte) (int, error) {
	c.once.Do(func() {
		if len(b) == 0 || b[0] != memberlistUserMsg {
			return
		}
		// The user message follows a small msgpack header that holds
		// no 'p' (wireMagic); the worker's message starts with
		// wireMagic, wireVersion, kind.
		i := bytes.Index(b[1:], []byte{wireMagic, wireVersion})
		if i < 0 || 1+i+2 >= len(b) {
			return
		}
		reply := b[1+i+2] == kindGive
		c.ft.stats.sent.Add(1)
		drop, delay := c.ft.fault(c.ft.self, c.to, reply)
		if delay > 0 {
			time.Sleep(delay) // test fault: a slow network (SendReliable runs in its own goroutine)
		}
		if drop {
			c.swallow = true
			c.ft.stats.dropped.Add(1)
			if reply {
				c.ft.stats.droppedReplies.Add(1)
			}
		}
	})
	if c.swallow {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

// isolatingTransport is memberlist's NetTransport on loopback that can be
// cut off from everyone, as a crashed or partitioned host is: while cut,
// it sends no packet, drops every packet it receives, refuses to dial and
// closes every stream it accepts. No leave message goes out: the others
// find it dead by their probes.
type isolatingTransport struct {
	*memberlist.NetTransport
	cut     atomic.Bool
	packets chan *memberlist.Packet
	streams chan net.Conn
	done    chan struct{}
	once    sync.Once
}

var _ memberlist.NodeAwareTransport = (*isolatingTransport)(nil)

func newIsolatingTransport(t *testing.T, port int) *isolatingTransport {
	t.Helper()
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{"127.0.0.1"}, BindPort: port})
	if err != nil {
		t.Fatal(err)
	}
	it := &isolatingTransport{NetTransport: nt, packets: make(chan *memberlist.Packet), streams: make(chan net.Conn), done: make(chan struct{})}
	go func() {
		for {
			select {
			case p := <-nt.PacketCh():
				if it.cut.Load() {
					continue
				}
				select {
				case it.packets <- p:
				case <-it.done:
					return
				}
			case c := <-nt.StreamCh():
				if it.cut.Load() {
					_ = c.Close()
					continue
				}
				select {
				case it.streams <- c:
				case <-it.done:
					_ = c.Close()
					return
				}
			case <-it.done:
				return
			}
		}
	}()
	return it
}

func (it *isolatingTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if it.cut.Load() {
		return time.Now(), nil
	}
	return it.NetTransport.WriteTo(b, addr)
}

func (it *isolatingTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if it.cut.Load() {
		return time.Now(), nil
	}
	return it.NetTransport.WriteToAddress(b, a)
}

func (it *isolatingTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return it.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (it *isolatingTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if it.cut.Load() {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errTestCutOff}
	}
	return it.NetTransport.DialAddressTimeout(a, timeout)
}

func (it *isolatingTransport) PacketCh() <-chan *memberlist.Packet { return it.packets }

func (it *isolatingTransport) StreamCh() <-chan net.Conn { return it.streams }

// Shutdown stops forwarding, then shuts the NetTransport down, closing
// what it still hands over meanwhile (its listeners block handing over,
// and its Shutdown waits for them).
func (it *isolatingTransport) Shutdown() error {
	it.once.Do(func() { close(it.done) })
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-it.NetTransport.PacketCh():
			case c := <-it.NetTransport.StreamCh():
				_ = c.Close()
			case <-stop:
				return
			}
		}
	}()
	err := it.NetTransport.Shutdown()
	close(stop)
	return err
}

var errTestCutOff = errors.New("test: host cut off")
