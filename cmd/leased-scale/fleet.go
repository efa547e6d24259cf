package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/worker"
)

// cutRegister is a worker's register: the shared client, unless the
// worker's group is cut off, in which case every call fails at once as not
// delivered (the request never leaves the process, as when the register
// is unreachable).
type cutRegister struct {
	c   *client.Client
	cut *atomic.Bool
}

var errCut = fmt.Errorf("leased-scale: group cut off from the register: %w", client.ErrNotDelivered)

func (r cutRegister) Lease(ctx context.Context, limit string, q client.LeaseRequest) (client.LeaseGrant, error) {
	if r.cut.Load() {
		return client.LeaseGrant{}, errCut
	}
	return r.c.Lease(ctx, limit, q)
}

func (r cutRegister) Renew(ctx context.Context, limit string, id, epoch uint64, rep client.LeaseReport) (client.LeaseGrant, error) {
	if r.cut.Load() {
		return client.LeaseGrant{}, errCut
	}
	return r.c.Renew(ctx, limit, id, epoch, rep)
}

func (r cutRegister) Return(ctx context.Context, limit string, id, epoch uint64, rep client.LeaseReport) (client.LeaseGrant, error) {
	if r.cut.Load() {
		return client.LeaseGrant{}, errCut
	}
	return r.c.Return(ctx, limit, id, epoch, rep)
}

// countingTransport is memberlist's own NetTransport (UDP and TCP on
// loopback) counting every byte a member sends: UDP packets and writes on
// TCP streams it dialed or accepted (push/pull, reliable user messages:
// the steal traffic). Payload bytes; IP, UDP and TCP headers are not
// counted. Summed over members it is the fleet's gossip traffic.
type countingTransport struct {
	inner   *memberlist.NetTransport
	sent    *atomic.Int64
	streams chan net.Conn
	done    chan struct{}
	once    sync.Once
}

var _ memberlist.NodeAwareTransport = (*countingTransport)(nil)

func newCountingTransport(sent *atomic.Int64) (*countingTransport, int, error) {
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{"127.0.0.1"}, BindPort: 0})
	if err != nil {
		return nil, 0, err
	}
	t := &countingTransport{inner: nt, sent: sent, streams: make(chan net.Conn), done: make(chan struct{})}
	go func() {
		for {
			select {
			case c := <-nt.StreamCh():
				select {
				case t.streams <- &countingConn{Conn: c, sent: sent}:
				case <-t.done:
					_ = c.Close()
					return
				}
			case <-t.done:
				return
			}
		}
	}()
	return t, nt.GetAutoBindPort(), nil
}

func (t *countingTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	return t.inner.FinalAdvertiseAddr(ip, port)
}

func (t *countingTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	t.sent.Add(int64(len(b)))
	return t.inner.WriteTo(b, addr)
}

func (t *countingTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	t.sent.Add(int64(len(b)))
	return t.inner.WriteToAddress(b, a)
}

func (t *countingTransport) PacketCh() <-chan *memberlist.Packet { return t.inner.PacketCh() }

func (t *countingTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := t.inner.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, sent: t.sent}, nil
}

func (t *countingTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	c, err := t.inner.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, sent: t.sent}, nil
}

func (t *countingTransport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown stops forwarding and shuts the NetTransport down, closing the
// streams it still accepts meanwhile (its listener blocks handing them
// over, and its Shutdown waits for the listener).
func (t *countingTransport) Shutdown() error {
	t.once.Do(func() { close(t.done) })
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case c := <-t.inner.StreamCh():
				_ = c.Close()
			case <-stop:
				return
			}
		}
	}()
	err := t.inner.Shutdown()
	close(stop)
	return err
}

type countingConn struct {
	net.Conn
	sent *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.sent.Add(int64(n))
	return n, err
}

// member is one worker of the fleet and its load driver.
type member struct {
	name, group string
	demand      float64 // permits per second it is offered
	cut         *atomic.Bool
	own         *client.Client // the member's own client, or nil if shared
	w           *worker.Worker
	addr        string
	stop        chan struct{}
	done        chan struct{}
}

// fleet is the in-process workers of one configuration.
type fleet struct {
	limit     string
	reg       *register
	ttl       time.Duration
	gossipOut atomic.Int64
	mu        sync.Mutex
	members   []*member // live ones
	seeds     []string
	asks      atomic.Int64
	granted   atomic.Int64
	// mem, if not nil, is the in-memory network the members gossip on
	// (-gossip mem); nil: memberlist's NetTransport on loopback.
	mem *memNetwork
	// relays, if not nil, are the lease relays the members talk to first
	// (-relays): member i to relay i mod N.
	relays *relayProcs
	// rejoinEvery is the workers' RejoinEvery (0: their default).
	rejoinEvery time.Duration
	// opts picks the members' register clients (-via, -protocol,
	// -clients); shared holds the clients they share when opts.clients > 0,
	// otherwise each member has a client of its own.
	opts    options
	shared  []*client.Client
	started atomic.Int64
}

// maxAsksPerSec bounds the asks a driver makes per second: a worker
// offered more asks for ceil(demand/maxAsksPerSec) permits at a time.
const maxAsksPerSec = 50

// startMember creates, starts and drives one worker.
func (f *fleet) startMember(ctx context.Context, name, group string, demand float64) (*member, error) {
	cut := &atomic.Bool{}
	var tr memberlist.NodeAwareTransport
	var port int
	var err error
	if f.mem != nil {
		tr, port, err = f.mem.newTransport(&f.gossipOut)
	} else {
		tr, port, err = newCountingTransport(&f.gossipOut)
	}
	if err != nil {
		return nil, fmt.Errorf("gossip transport: %w", err)
	}
	// memberlist's LAN defaults, as a worker without a Gossip config
	// uses (gossip every 200 ms, probe every 1 s, push/pull every 30 s).
	mlc := memberlist.DefaultLANConfig()
	mlc.Transport = tr
	mlc.EnableCompression = !f.opts.gossipUncompressed
	if k := time.Duration(f.opts.gossipSlowdown); k > 1 {
		mlc.ProbeInterval *= k
		mlc.ProbeTimeout *= k
		mlc.GossipInterval *= k
		mlc.PushPullInterval *= k
	}
	mlc.AdvertiseAddr, mlc.AdvertisePort = "127.0.0.1", port
	f.mu.Lock()
	join := append([]string(nil), f.seeds...)
	f.mu.Unlock()
	i := int(f.started.Add(1) - 1)
	var cl, own *client.Client
	if len(f.shared) > 0 {
		cl = f.shared[i%len(f.shared)]
	} else {
		servers, copts := serverOrder(f.reg, f.opts.via, i), holderOptions(f.opts.protocol)
		if r := f.relays.first(i); r != "" {
			servers, copts = append([]string{r}, servers...), append(copts, relayReturn)
		}
		own, err = client.New(servers, copts...)
		if err != nil {
			_ = tr.Shutdown()
			return nil, err
		}
		cl = own
	}
	fail := func(err error) (*member, error) {
		_ = tr.Shutdown()
		if own != nil {
			own.Close()
		}
		return nil, err
	}
	w, err := worker.New(worker.Config{
		Name: name, Group: group, Limit: f.limit,
		Register: cutRegister{c: cl, cut: cut},
		Gossip:   mlc, Join: join, TTL: f.ttl, RejoinEvery: f.rejoinEvery,
	})
	if err != nil {
		return fail(err)
	}
	if err := w.Start(ctx); err != nil {
		return fail(err)
	}
	m := &member{name: name, group: group, demand: demand, cut: cut, own: own, w: w, addr: fmt.Sprintf("127.0.0.1:%d", port),
		stop: make(chan struct{}), done: make(chan struct{})}
	go f.drive(m)
	f.mu.Lock()
	f.members = append(f.members, m)
	if len(f.seeds) < 3 {
		f.seeds = append(f.seeds, m.addr)
	}
	f.mu.Unlock()
	return m, nil
}

// drive offers the member's demand open-loop: asks of c permits every
// c/demand seconds, each TryAcquire(c, 0) (spend now or not at all: a
// refusal does not hold the driver back, and the worker counts the ask in
// its demand either way), until stopped. Missed ask times (the driver was
// descheduled) are skipped, not caught up.
func (f *fleet) drive(m *member) {
	defer close(m.done)
	if m.demand <= 0 {
		<-m.stop
		return
	}
	c := int64(math.Ceil(m.demand / maxAsksPerSec))
	every := time.Duration(float64(c) / m.demand * float64(time.Second))
	next := time.Now()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		ok, _ := m.w.TryAcquire(c, 0)
		f.asks.Add(c)
		if ok {
			f.granted.Add(c)
		}
		next = next.Add(every)
		if now := time.Now(); next.Before(now) {
			next = now
		}
		t.Reset(time.Until(next))
	}
}

// stopMember stops the driver and the worker (returning its lease).
func (f *fleet) stopMember(m *member) {
	close(m.stop)
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.w.Stop(ctx)
	if m.own != nil {
		m.own.Close()
	}
	f.mu.Lock()
	for i, x := range f.members {
		if x == m {
			f.members = append(f.members[:i], f.members[i+1:]...)
			break
		}
	}
	f.mu.Unlock()
}

// parallel runs fn for every item with at most n at once and returns the
// first error.
func parallel[T any](items []T, n int, fn func(T) error) error {
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, it := range items {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := fn(it); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// live returns a snapshot of the live members.
func (f *fleet) live() []*member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*member(nil), f.members...)
}

// dropNote is ", N gossip packets dropped" on the in-memory network, or
// nothing.
func (f *fleet) dropNote() string {
	if f.mem == nil {
		return ""
	}
	return fmt.Sprintf(", %d gossip packets dropped, %d bytes in packets, %d streams", f.mem.dropped.Load(), f.mem.packetBytes.Load(), f.mem.streams.Load())
}
