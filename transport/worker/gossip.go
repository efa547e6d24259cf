package worker

import (
	"bytes"
	"hash/fnv"
	"log"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
)

// Gossip carries discovery only: each worker's node meta says its group
// and name, and memberlist's join, leave and update events keep a table
// of the live members. Nothing about permits travels by gossip (no
// broadcasts, no state exchange): the register is the only source of
// truth, and steal requests are point-to-point messages.

// members is the table of live members known through gossip.
type members struct {
	self string
	mu   sync.Mutex
	// byName holds, for every live member with a worker meta (self
	// included), its meta and a copy of its node.
	byName map[string]member
}

type member struct {
	meta meta
	node memberlist.Node
}

func newMembers(self string) *members {
	return &members{self: self, byName: make(map[string]member)}
}

// set records a member from a join or update event; a node without a
// valid worker meta (or whose meta names another node) is forgotten.
func (m *members) set(n *memberlist.Node) {
	md, err := decodeMeta(n.Meta)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil || md.Name != n.Name {
		delete(m.byName, n.Name)
		return
	}
	node := *n
	node.Addr = slices.Clone(n.Addr)
	node.Meta = slices.Clone(n.Meta)
	m.byName[n.Name] = member{meta: md, node: node}
}

// remove forgets a member that left or died.
func (m *members) remove(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byName, name)
}

// node returns the node of a member.
func (m *members) node(name string) (memberlist.Node, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.byName[name]
	return e.node, ok
}

// candidates returns up to limit peers to ask for permits: the members of
// group first, then the others, each part in random order (so that askers
// spread over donors), self excluded.
func (m *members) candidates(group string, limit int) []string {
	m.mu.Lock()
	var own, other []string
	for name, e := range m.byName {
		switch {
		case name == m.self:
		case e.meta.Group == group:
			own = append(own, name)
		default:
			other = append(other, name)
		}
	}
	m.mu.Unlock()
	rand.Shuffle(len(own), func(i, j int) { own[i], own[j] = own[j], own[i] })
	rand.Shuffle(len(other), func(i, j int) { other[i], other[j] = other[j], other[i] })
	all := append(own, other...)
	return all[:min(len(all), limit)]
}

// byGroup returns the member names by group, sorted.
func (m *members) byGroup() map[string][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]string)
	for name, e := range m.byName {
		out[e.meta.Group] = append(out[e.meta.Group], name)
	}
	for _, names := range out {
		slices.Sort(names)
	}
	return out
}

// delegate is the worker's memberlist.Delegate: meta out, steal messages
// in, nothing else.
type delegate struct{ w *Worker }

// NodeMeta implements memberlist.Delegate.
func (d delegate) NodeMeta(limit int) []byte {
	b := d.w.self.append(nil)
	if len(b) > limit {
		return nil // cannot happen: New checked the size against MetaMaxSize
	}
	return b
}

// NotifyMsg implements memberlist.Delegate: a steal message is copied
// (memberlist reuses the buffer) and queued for the inbox goroutine, or
// dropped when the queue is full.
func (d delegate) NotifyMsg(b []byte) {
	select {
	case d.w.run.inbox <- bytes.Clone(b):
	default:
		d.w.log.Debug("steal message dropped: inbox full")
	}
}

// GetBroadcasts implements memberlist.Delegate: nothing is broadcast.
func (d delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState implements memberlist.Delegate: no state is exchanged.
func (d delegate) LocalState(join bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate: no state is exchanged.
func (d delegate) MergeRemoteState(buf []byte, join bool) {}

// events is the worker's memberlist.EventDelegate. memberlist calls it
// with its own locks held: it only updates the members table.
type events struct{ m *members }

// NotifyJoin implements memberlist.EventDelegate.
func (e events) NotifyJoin(n *memberlist.Node) { e.m.set(n) }

// NotifyLeave implements memberlist.EventDelegate.
func (e events) NotifyLeave(n *memberlist.Node) { e.m.remove(n.Name) }

// NotifyUpdate implements memberlist.EventDelegate.
func (e events) NotifyUpdate(n *memberlist.Node) { e.m.set(n) }

// gossipConfig returns a copy of the configured memberlist config with the
// worker's name, delegates and logger.
func (w *Worker) gossipConfig() *memberlist.Config {
	var c memberlist.Config
	if w.cfg.Gossip != nil {
		c = *w.cfg.Gossip
	} else {
		c = *memberlist.DefaultLANConfig()
	}
	c.Name = w.cfg.Name
	c.Delegate = delegate{w: w}
	c.Events = events{m: w.members}
	c.LogOutput = nil
	out := gossipLog{next: w.log.Named("memberlist").StandardWriter(&hclog.StandardLoggerOptions{InferLevels: true}), rejected: &w.gossipRejected}
	c.Logger = log.New(out, "", 0)
	if w.cfg.GossipKeys != nil {
		c.Keyring = w.cfg.GossipKeys
		c.GossipVerifyIncoming, c.GossipVerifyOutgoing = true, true
	}
	return &c
}

// seeds returns the seed list without the worker's own address.
func (w *Worker) seeds() []string {
	self := w.ml.LocalNode().Address()
	var out []string
	for _, s := range w.cfg.Join {
		if s != self {
			out = append(out, s)
		}
	}
	return out
}

// joinSeeds joins the seed list and reports whether a seed answered;
// failures are logged (the rejoin loop tries again).
func (w *Worker) joinSeeds() bool {
	seeds := w.seeds()
	if len(seeds) == 0 {
		return false
	}
	n, err := w.ml.Join(seeds)
	if err != nil {
		w.log.Debug("gossip join failed", "seeds", seeds, "joined", n, "error", err)
	}
	return n > 0
}

// rejoinersPerDrop is how many of the members that see the member count
// drop join the seed list again (the ones whose names hash lowest among
// the live members). The others only note the new count: one departure
// seen by a thousand members was a thousand push/pulls of the whole
// member list with the seeds, all within one RejoinEvery.
const rejoinersPerDrop = 3

// rejoinLoop joins the seed list again every RejoinEvery while the worker
// is alone; and when it sees fewer members than it once did, if it is one
// of the rejoinersPerDrop members chosen to (rejoinsAfterDrop), every
// RejoinEvery until a seed answers or the count is back. (A join tries
// the seeds one after another, each for up to memberlist's TCPTimeout,
// so a round against dead seeds can outlast RejoinEvery, and Stop waits
// for it.) So a half split off from every seed
// for longer than memberlist gossips to the dead (which then forget each
// other) merges again when the network heals: its chosen members keep
// dialing the seeds. Halves that each keep a seed are not merged by this
// loop (their joins succeed on their own side). If every seed is gone for
// good, the chosen members keep dialing them: three members' failed dials
// of each seed every round across the fleet, until the seed list is fixed.
func (w *Worker) rejoinLoop() {
	defer w.run.wg.Done()
	if len(w.seeds()) == 0 {
		return
	}
	t := time.NewTicker(time.Duration(w.cfg.rejoinNanos))
	defer t.Stop()
	most := w.ml.NumMembers()
	for {
		select {
		case <-w.run.done:
			return
		case <-t.C:
		}
		w.rejoinChecks.Add(1)
		n := w.ml.NumMembers()
		most = max(most, n)
		if n > 1 && n >= most {
			continue
		}
		if n <= 1 || rejoinsAfterDrop(w.cfg.Name, w.ml.Members()) {
			w.gossipRejoins.Add(1)
			if !w.joinSeeds() {
				continue // no seed answered: again next period
			}
		}
		// Start again from what is seen now: members that left for good
		// do not keep the worker rejoining forever.
		most = w.ml.NumMembers()
	}
}

// rejoinsAfterDrop reports whether the member named self is one of the
// rejoinersPerDrop members of live whose names hash lowest (FNV-1a, ties
// by name), so that members with the same view agree on who rejoins. A
// member without a rejoin loop (no seed but itself) still takes a place,
// so with a single seed at most rejoinersPerDrop-1 others may rejoin.
func rejoinsAfterDrop(self string, live []*memberlist.Node) bool {
	key := func(name string) uint64 {
		h := fnv.New64a()
		_, _ = h.Write([]byte(name))
		return h.Sum64()
	}
	mine := key(self)
	below := 0
	for _, n := range live {
		if n.Name == self {
			continue
		}
		if k := key(n.Name); k < mine || (k == mine && n.Name < self) {
			below++
		}
	}
	return below < rejoinersPerDrop
}

// inboxLoop handles the steal messages NotifyMsg queued, until Stop.
func (w *Worker) inboxLoop() {
	defer w.run.wg.Done()
	for {
		select {
		case <-w.run.done:
			return
		case b := <-w.run.inbox:
			w.handleMessage(b)
		}
	}
}

// handleMessage decodes and dispatches one steal message; a malformed one
// is logged and dropped.
func (w *Worker) handleMessage(b []byte) {
	switch messageKind(b) {
	case kindSteal:
		q, err := decodeStealRequest(b)
		if err != nil {
			w.log.Debug("bad steal request dropped", "error", err)
			return
		}
		w.handleStealRequest(q)
	case kindGive:
		r, err := decodeStealReply(b)
		if err != nil {
			w.log.Debug("bad steal reply dropped", "error", err)
			return
		}
		w.handleStealReply(r)
	default:
		w.log.Debug("unknown message dropped", "bytes", len(b))
	}
}
