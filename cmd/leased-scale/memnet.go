package main

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// memnet.go: an in-memory network for the workers' memberlist (-gossip
// mem), so that a thousand workers fit one process. memberlist's own
// MockNetwork is made for tests that wire a fixed set of members before
// starting them: its maps are not safe to add to while members run, its
// packet channels are unbuffered (a sender blocks until the receiver
// reads, forever once the receiver has shut down) and Shutdown does
// nothing. Here a packet goes at once into the receiver's queue, and is
// dropped if that queue is full or the receiver is gone; a stream is a net.Pipe handed to the
// receiver within the dial timeout. Every byte a member sends is counted,
// as countingTransport counts it on real sockets (payload bytes: memberlist
// messages after its compression, without IP, UDP or TCP headers).

// memPacketQueue is each member's queue of received packets (memberlist
// reads its packets on one goroutine). A loopback UDP socket's default
// receive buffer (208 KiB) also charges each datagram's bookkeeping, so it
// holds a few hundred small packets: this queue drops less than a real
// socket would in a storm.
const memPacketQueue = 1024

// memNetwork is a set of in-memory transports that can reach each other.
type memNetwork struct {
	mu       sync.RWMutex
	byAddr   map[string]*memTransport
	nextPort int
	// dropped counts packets dropped at a full queue or a gone receiver.
	dropped atomic.Int64
	// packetBytes and streams count what went as packets and the streams
	// dialed (push/pulls and reliable messages: steal requests and replies).
	packetBytes, streams atomic.Int64
}

func newMemNetwork() *memNetwork {
	return &memNetwork{byAddr: map[string]*memTransport{}, nextPort: 1}
}

// newTransport returns a transport at a fresh address 127.0.0.1:PORT (no
// socket is opened; the port is only a name) whose sent bytes are added
// to sent.
func (n *memNetwork) newTransport(sent *atomic.Int64) (*memTransport, int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.nextPort > 65535 {
		return nil, 0, fmt.Errorf("leased-scale: in-memory gossip network: no port left (65535 transports made)")
	}
	port := n.nextPort
	n.nextPort++
	t := &memTransport{
		net:     n,
		addr:    &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port},
		sent:    sent,
		packets: make(chan *memberlist.Packet, memPacketQueue),
		streams: make(chan net.Conn),
		done:    make(chan struct{}),
	}
	n.byAddr[t.addr.String()] = t
	return t, port, nil
}

func (n *memNetwork) peer(addr string) (*memTransport, error) {
	n.mu.RLock()
	t, ok := n.byAddr[addr]
	n.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("leased-scale: in-memory gossip network: no member at %s", addr)
	}
	return t, nil
}

// memTransport is one member's memberlist.NodeAwareTransport on a
// memNetwork.
type memTransport struct {
	net     *memNetwork
	addr    *net.UDPAddr
	sent    *atomic.Int64
	packets chan *memberlist.Packet
	streams chan net.Conn
	done    chan struct{}
	once    sync.Once
}

var _ memberlist.NodeAwareTransport = (*memTransport)(nil)

// FinalAdvertiseAddr returns the transport's own address.
func (t *memTransport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	return t.addr.IP, t.addr.Port, nil
}

// WriteTo sends one packet to addr.
func (t *memTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

// WriteToAddress sends one packet, counted whether or not it arrives (a
// datagram to a full or closed socket is sent all the same). memberlist
// may reuse b once this returns, so the receiver gets a copy.
func (t *memTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	now := time.Now()
	t.sent.Add(int64(len(b)))
	t.net.packetBytes.Add(int64(len(b)))
	dest, err := t.net.peer(a.Addr)
	if err != nil {
		t.net.dropped.Add(1)
		return now, nil // a datagram to nobody is lost, not refused
	}
	p := &memberlist.Packet{Buf: append([]byte(nil), b...), From: t.addr, Timestamp: now}
	select {
	case <-dest.done:
		t.net.dropped.Add(1)
	default:
		select {
		case dest.packets <- p:
		default:
			t.net.dropped.Add(1)
		}
	}
	return now, nil
}

// PacketCh delivers the packets sent to this transport.
func (t *memTransport) PacketCh() <-chan *memberlist.Packet { return t.packets }

// IngestPacket is not used (no packet arrives over a stream here).
func (t *memTransport) IngestPacket(net.Conn, net.Addr, time.Time, bool) error {
	return fmt.Errorf("leased-scale: in-memory gossip network: IngestPacket is not supported")
}

// IngestStream is not used.
func (t *memTransport) IngestStream(net.Conn) error {
	return fmt.Errorf("leased-scale: in-memory gossip network: IngestStream is not supported")
}

// DialTimeout opens a stream to addr.
func (t *memTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout opens a stream: one end of a net.Pipe goes to the
// receiver's StreamCh within timeout, the other is returned. Writes on
// both ends are counted.
func (t *memTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	dest, err := t.net.peer(a.Addr)
	if err != nil {
		return nil, err
	}
	t.net.streams.Add(1)
	mine, theirs := net.Pipe()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case dest.streams <- &countingConn{Conn: memConn{Conn: theirs, local: dest.addr, remote: t.addr}, sent: dest.sent}:
		return &countingConn{Conn: memConn{Conn: mine, local: t.addr, remote: dest.addr}, sent: t.sent}, nil
	case <-dest.done:
		err = fmt.Errorf("leased-scale: in-memory gossip network: %s has shut down", a.Addr)
	case <-t.done:
		err = fmt.Errorf("leased-scale: in-memory gossip network: dialing from a shut-down transport")
	case <-timer.C:
		err = fmt.Errorf("leased-scale: in-memory gossip network: %s accepted no stream within %v", a.Addr, timeout)
	}
	_ = mine.Close()
	_ = theirs.Close()
	return nil, err
}

// StreamCh delivers the streams dialed to this transport.
func (t *memTransport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown removes the transport from its network: later packets to it
// are dropped and dials fail.
func (t *memTransport) Shutdown() error {
	t.once.Do(func() {
		t.net.mu.Lock()
		delete(t.net.byAddr, t.addr.String())
		t.net.mu.Unlock()
		close(t.done)
	})
	return nil
}

// memConn is a net.Pipe end with the members' addresses (net.Pipe's are
// "pipe", which memberlist would log as the peer).
type memConn struct {
	net.Conn
	local, remote net.Addr
}

func (c memConn) LocalAddr() net.Addr  { return c.local }
func (c memConn) RemoteAddr() net.Addr { return c.remote }
