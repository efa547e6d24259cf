package faultnet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"
)

// TCPFaults is a node.Network over real TCP that injects faults: the
// in-permitd fault layer of jepsen-lite's fallback mode, where every node
// is a process on loopback and the kernel cannot be asked to partition
// them. The agent uses it only with --test-hooks, and jepsen-lite drives it
// through POST/DELETE /v1/debug/faults.
//
// # Who is the peer?
//
// Every node of a cluster runs its own TCPFaults, told its own raft
// address. Outbound connections know their peer: the address dialed.
// Inbound connections carry nothing extra on the wire (no handshake: a node
// with the fault layer talks to one without it); their peer is recognised
// by the source IP. Dials are bound to the node's own IP, so when each node
// has its own loopback IP (127.0.0.11, 127.0.0.12, ... all route to lo on
// Linux; jepsen-lite assigns them) the source IP names the peer. Nodes
// sharing one IP (all on 127.0.0.1) cannot be told apart inbound: then a
// block acts on the dialing side only, and a partition holds only if both
// sides are told (jepsen-lite always tells every node its block list).
//
// # Partitions
//
// Block(peers) cuts this node from peers both ways: its dials to them fail,
// it refuses (closes at once) connections from their IPs, and every open
// connection to or from them is closed. A symmetric partition is each
// node blocking the other side; blocking on one side is already enough
// when the nodes have distinct IPs, since that side refuses both
// directions.
//
// BlockDial(peers) is the one-way cut: this node cannot open connections to
// peers (open ones are closed), but still accepts theirs. raft's
// connections are unidirectional request/response streams (the sender of
// an RPC dials, the answer comes back on the same connection), so for raft
// this means "this node cannot send RPCs to peers, but answers theirs": a
// leader that cannot dial its followers stops sending heartbeats, they time
// out and elect a new leader, whose RPCs the old leader accepts (and steps
// down on seeing the higher term). Request forwarding behaves the same way
// (the follower dials the leader).
//
// # Loss and delay
//
// TCP cannot lose a packet: the kernel retransmits it, and an application
// only ever sees a lost segment as delay or, when the retransmissions give
// up, as a broken connection. SetLoss(p) models the latter: each Write on a
// connection of this node breaks the connection with probability p (it is
// closed, the write fails, the peer reads EOF). SetDelay(d, jitter) models
// the former and plain latency: every byte this node sends is delivered d
// plus a uniform [0, jitter] later, in order (a connection's bytes are
// queued, up to maxQueuedBytes, and written by a goroutine when due; Write
// returns at once, as it does when the kernel buffers). Both act on what
// this node sends; set them on every node for symmetric faults.
//
// Listen must be called once, with the node's listening address; Dial from
// any goroutine. All methods are safe for concurrent use.
type TCPFaults struct {
	self     string // the node's raft address (as advertised)
	selfHost string // its host part
	bindIP   net.IP // the IP dials are bound to, nil for none

	mu        sync.Mutex
	blocked   map[string]bool // raft addresses: no traffic either way
	dialBlock map[string]bool // raft addresses: no dials to them
	loss      float64
	delay     time.Duration
	jitter    time.Duration
	rng       *rand.Rand
	conns     map[*tcpConn]struct{}
}

// maxQueuedBytes bounds the bytes one connection holds back for delay; a
// Write past it blocks until the queue drains.
const maxQueuedBytes = 4 << 20

// ErrBlocked is returned by Dial to a blocked peer and by Write on a
// connection that a fault broke.
var ErrBlocked = errors.New("faultnet: blocked by an injected fault")

// NewTCP returns a TCPFaults for the node whose raft address (as other
// nodes dial it) is self, with no fault set. If self's host is an IP
// address other than an unspecified one (0.0.0.0, ::), dials are bound to
// it (when it and the peer's IP are both loopback, or both not) so that
// peers can recognise this node by its source IP.
func NewTCP(self string) *TCPFaults {
	f := &TCPFaults{
		self:      self,
		blocked:   map[string]bool{},
		dialBlock: map[string]bool{},
		rng:       rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		conns:     map[*tcpConn]struct{}{},
	}
	if h, _, err := net.SplitHostPort(self); err == nil {
		f.selfHost = h
		if ip := net.ParseIP(h); ip != nil && !ip.IsUnspecified() {
			f.bindIP = ip
		}
	}
	return f
}

// Faults is a snapshot of the faults set on a TCPFaults.
type Faults struct {
	// Block lists the peers (raft addresses) cut off both ways.
	Block []string
	// BlockDial lists the peers this node may not dial (one-way).
	BlockDial []string
	// Loss is the probability that a write breaks its connection.
	Loss float64
	// Delay and Jitter delay every byte sent by Delay + [0, Jitter].
	Delay  time.Duration
	Jitter time.Duration
}

// Faults returns the faults currently set, lists sorted.
func (f *TCPFaults) Faults() Faults {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Faults{Block: sortedKeys(f.blocked), BlockDial: sortedKeys(f.dialBlock), Loss: f.loss, Delay: f.delay, Jitter: f.jitter}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Block replaces the set of peers cut off both ways by peers (raft
// addresses "host:port"), and closes every open connection to or from
// them. An empty list removes the two-way blocks.
func (f *TCPFaults) Block(peers []string) error {
	set, err := addrSet(peers)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.blocked = set
	f.mu.Unlock()
	f.closeBlocked()
	return nil
}

// BlockDial replaces the set of peers this node may not dial (a one-way
// cut, see the type's doc) and closes the open connections it dialed to
// them.
func (f *TCPFaults) BlockDial(peers []string) error {
	set, err := addrSet(peers)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.dialBlock = set
	f.mu.Unlock()
	f.closeBlocked()
	return nil
}

func addrSet(peers []string) (map[string]bool, error) {
	set := make(map[string]bool, len(peers))
	for _, p := range peers {
		if _, _, err := net.SplitHostPort(p); err != nil {
			return nil, fmt.Errorf("faultnet: peer %q: %v; allowed: a raft address HOST:PORT", p, err)
		}
		set[p] = true
	}
	return set, nil
}

// SetLoss sets the probability, in [0, 1], that a write breaks its
// connection.
func (f *TCPFaults) SetLoss(p float64) error {
	if !(p >= 0 && p <= 1) {
		return fmt.Errorf("faultnet: loss %v; allowed: a probability in [0, 1]", p)
	}
	f.mu.Lock()
	f.loss = p
	f.mu.Unlock()
	return nil
}

// SetDelay delays every byte this node sends by d plus a uniform random
// [0, jitter]; zero for both sends at once. Both must be >= 0.
func (f *TCPFaults) SetDelay(d, jitter time.Duration) error {
	if d < 0 || jitter < 0 {
		return fmt.Errorf("faultnet: delay %v, jitter %v; allowed: >= 0", d, jitter)
	}
	f.mu.Lock()
	f.delay, f.jitter = d, jitter
	f.mu.Unlock()
	return nil
}

// Heal removes every fault (blocks, loss, delay). Bytes already queued
// for delay are still delivered when due.
func (f *TCPFaults) Heal() {
	f.mu.Lock()
	f.blocked = map[string]bool{}
	f.dialBlock = map[string]bool{}
	f.loss, f.delay, f.jitter = 0, 0, 0
	f.mu.Unlock()
}

// hostOf returns the host part of a "host:port" address, or addr itself.
func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// dialBlockedLocked reports whether dials to addr are blocked.
func (f *TCPFaults) dialBlockedLocked(addr string) bool {
	return f.blocked[addr] || f.dialBlock[addr]
}

// inboundBlockedLocked reports whether connections from host are refused:
// host is the IP of a two-way blocked peer, and not this node's own IP
// (nodes sharing an IP cannot be told apart; a peer sharing its IP with a
// blocked peer is refused too).
func (f *TCPFaults) inboundBlockedLocked(host string) bool {
	if host == "" || host == f.selfHost {
		return false
	}
	for b := range f.blocked {
		if hostOf(b) == host {
			return true
		}
	}
	return false
}

// closeBlocked closes every open connection the current blocks forbid.
func (f *TCPFaults) closeBlocked() {
	f.mu.Lock()
	var victims []*tcpConn
	for c := range f.conns {
		if (c.outbound && f.dialBlockedLocked(c.peer)) || (!c.outbound && f.inboundBlockedLocked(c.peerHost)) {
			victims = append(victims, c)
		}
	}
	f.mu.Unlock()
	for _, c := range victims {
		c.Close()
	}
}

// Listen implements node.Network: it listens on addr over TCP and refuses
// connections from blocked peers.
func (f *TCPFaults) Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &tcpListener{Listener: ln, f: f}, nil
}

// Dial implements node.Network: it connects to addr over TCP, from this
// node's IP, unless addr is blocked.
func (f *TCPFaults) Dial(addr string, timeout time.Duration) (net.Conn, error) {
	f.mu.Lock()
	blocked := f.dialBlockedLocked(addr)
	f.mu.Unlock()
	if blocked {
		return nil, fmt.Errorf("%w: %s → %s", ErrBlocked, f.self, addr)
	}
	d := net.Dialer{Timeout: timeout}
	if to := net.ParseIP(hostOf(addr)); f.bindIP != nil && to != nil && to.IsLoopback() == f.bindIP.IsLoopback() {
		d.LocalAddr = &net.TCPAddr{IP: f.bindIP}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return f.track(c, addr, hostOf(addr), true)
}

// track wraps c and registers it, unless a block set meanwhile forbids it.
func (f *TCPFaults) track(c net.Conn, peer, peerHost string, outbound bool) (net.Conn, error) {
	tc := &tcpConn{Conn: c, f: f, peer: peer, peerHost: peerHost, outbound: outbound}
	tc.cond = sync.NewCond(&tc.qmu)
	f.mu.Lock()
	if (outbound && f.dialBlockedLocked(peer)) || (!outbound && f.inboundBlockedLocked(peerHost)) {
		f.mu.Unlock()
		c.Close()
		return nil, fmt.Errorf("%w: %s ↔ %s", ErrBlocked, f.self, peer)
	}
	f.conns[tc] = struct{}{}
	f.mu.Unlock()
	return tc, nil
}

// writeFault draws this write's fate: whether it breaks the connection,
// and how long its bytes are held back.
func (f *TCPFaults) writeFault() (lost bool, hold time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loss > 0 && f.rng.Float64() < f.loss {
		return true, 0
	}
	hold = f.delay
	if f.jitter > 0 {
		hold += time.Duration(f.rng.Int64N(int64(f.jitter) + 1))
	}
	return false, hold
}
