package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/transport/wire"
)

// httpaddrs.go: every node learns the other members' HTTP addresses.
//
// raft's configuration holds each member's ID and raft address only, yet
// an operator's tools reach the nodes at their HTTP addresses (permitd
// status asks every member). So each node asks every other member of the
// configuration, over the cluster's own network (the raft port, inside
// the cluster's mutual TLS when it is on, as the leader's promotion
// probes), for the HTTP address it advertises (SetHTTPAddr): a
// wire.OpProgress whose payload is progressWithHTTP, answered with the
// progress and the address after it. An answer counts only if it comes
// from the member asked (its ID): a raft address now served by another
// node tells nothing.
//
// What a node learned lives in its memory only, so it is right after
// restarts and leader changes alike: every node asks by itself, at start
// and then every httpAddrRefresh (a member restarted with another address
// is seen within that). A member that does not answer keeps the address
// it last gave, if any, and is asked again after a growing pause (at most
// httpAddrMaxBackoff); Status reads what is known and never waits for an
// answer: a member never heard from has no address (api.Server.HTTPAddr
// empty). A node of an older version refuses the payload: its address
// stays unknown.

// progressWithHTTP is the payload of a wire.OpProgress that asks for the
// HTTP address too (an empty payload asks for the progress only, as the
// leader's promotion probes do).
const progressWithHTTP byte = 1

// httpAddrRefresh is how often a node asks a member that answered again;
// httpAddrMaxBackoff bounds the pause before asking one that did not.
const (
	httpAddrRefresh    = 10 * time.Second
	httpAddrMaxBackoff = 5 * time.Second
)

// SetHTTPAddr sets the address ("host:port") at which clients reach this
// node's HTTP API, which the other nodes learn and report in their
// status (api.Server.HTTPAddr). Until it is set they report none.
func (n *Node) SetHTTPAddr(addr string) { n.httpAddr.Store(&addr) }

// ownHTTPAddr is what SetHTTPAddr set ("" before).
func (n *Node) ownHTTPAddr() string {
	if p := n.httpAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// encodeProgressWithHTTP is a progress answer followed by the HTTP address.
func encodeProgressWithHTTP(p progress, httpAddr string) []byte {
	w := wire.Enc{B: encodeProgress(p)}
	w.Str(httpAddr)
	return w.B
}

func decodeProgressWithHTTP(b []byte) (progress, string, error) {
	r := wire.Dec{B: b}
	p := progress{id: r.Str(), term: r.Uvar(), leaderID: r.Str(), applied: r.Uvar(), lastLog: r.Uvar()}
	addr := r.Str()
	return p, addr, r.Done()
}

// memberAddr is what a node knows of another member's HTTP address.
type memberAddr struct {
	raftAddr raft.ServerAddress
	http     string
	// next is when to ask again; fails counts the failed asks in a row.
	next  time.Time
	fails int
}

// httpAddrs are the members' HTTP addresses a node learned.
type httpAddrs struct {
	mu      sync.Mutex
	members map[raft.ServerID]*memberAddr
	// testRefresh, set only by tests, replaces httpAddrRefresh
	// (nanoseconds).
	testRefresh atomic.Int64
}

// get returns member id's HTTP address ("" if unknown).
func (h *httpAddrs) get(id raft.ServerID) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.members[id]; m != nil {
		return m.http
	}
	return ""
}

// due makes the known members those of servers (but self), forgetting
// those removed and those whose raft address changed, and returns the
// ones to ask now.
func (h *httpAddrs) due(self raft.ServerID, servers []raft.Server, now time.Time) []raft.Server {
	h.mu.Lock()
	defer h.mu.Unlock()
	keep := make(map[raft.ServerID]*memberAddr, len(servers))
	var out []raft.Server
	for _, s := range servers {
		if s.ID == self {
			continue
		}
		m := h.members[s.ID]
		if m == nil || m.raftAddr != s.Address {
			m = &memberAddr{raftAddr: s.Address}
		}
		keep[s.ID] = m
		if !now.Before(m.next) {
			out = append(out, s)
		}
	}
	h.members = keep
	return out
}

// record records the outcome of asking s at now: its address, or err (the
// next ask then waits step, doubled for each failure in a row, at most
// httpAddrMaxBackoff).
func (h *httpAddrs) record(s raft.Server, addr string, err error, now time.Time, step time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.members[s.ID]
	if m == nil || m.raftAddr != s.Address {
		return // removed or moved meanwhile
	}
	if err == nil {
		refresh := httpAddrRefresh
		if d := h.testRefresh.Load(); d > 0 {
			refresh = time.Duration(d)
		}
		m.http, m.fails, m.next = addr, 0, now.Add(refresh)
		return
	}
	m.fails++
	wait := httpAddrMaxBackoff
	if m.fails < 16 {
		wait = min(step<<m.fails, httpAddrMaxBackoff)
	}
	m.next = now.Add(wait)
}

// httpAddrLoop asks the members for their HTTP addresses until the node
// stops.
func (n *Node) httpAddrLoop() {
	step := n.cfg.probeEvery()
	t := time.NewTicker(step)
	defer t.Stop()
	for {
		n.httpAddrRound(n.stopped, step)
		select {
		case <-n.stopCh:
			return
		case <-t.C:
		}
	}
}

// httpAddrRound asks every member that is due, at once, and waits for
// their answers (each bounded by the probe timeout).
func (n *Node) httpAddrRound(ctx context.Context, step time.Duration) {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	due := n.httpAddrs.due(raft.ServerID(n.cfg.ID), f.Configuration().Servers, time.Now())
	var wg sync.WaitGroup
	for _, s := range due {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr, err := n.askHTTPAddr(ctx, s)
			n.httpAddrs.record(s, addr, err, time.Now(), step)
		}()
	}
	wg.Wait()
}

// askHTTPAddr asks member s for its HTTP address over the cluster's
// network, on a connection of its own.
func (n *Node) askHTTPAddr(ctx context.Context, s raft.Server) (string, error) {
	timeout := n.cfg.probeTimeout()
	c, err := newFwdConn(n.cfg.Network, string(s.Address), timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	code, resp, err := c.Call(ctx, wire.OpProgress, []byte{progressWithHTTP})
	switch {
	case err != nil:
		return "", err
	case code != wire.CodeOK:
		return "", fmt.Errorf("it answered code %d: %s", code, resp) // an older version, which takes no payload
	}
	p, addr, err := decodeProgressWithHTTP(resp)
	switch {
	case err != nil:
		return "", err
	case p.id != string(s.ID):
		return "", fmt.Errorf("the server at %s answers as %q, not %q", s.Address, p.id, s.ID)
	case addr == "":
		return "", errors.New("it has no HTTP address yet")
	}
	return addr, nil
}
