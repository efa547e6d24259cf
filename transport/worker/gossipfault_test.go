package worker

import (
	"bytes"
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
