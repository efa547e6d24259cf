package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/transport/api"
	"github.com/permitd/permitd/transport/wire"
)

// promote.go: a joining server votes only once it has caught up.
//
// A join (cluster.go) adds the server as a raft non-voter: it receives the
// log but neither votes nor counts towards any quorum, so a server that
// never catches up (one that is down, a mistyped address, or a stranger
// whose certificate the cluster's mutual TLS refuses) cannot dilute the
// quorum: three voters still survive the failure of one, whatever joins
// are pending. As etcd does with its learners, it becomes a voter only
// once it has caught up; unlike etcd the leader promotes it by itself.
//
// Every probeEvery the leader asks each non-voter, over the cluster's own
// network (the raft port, inside the cluster's mutual TLS when it is on: a
// probe's connection passes the handshake raft's do, both ways), how far
// it has come (wire.OpProgress): its ID, its term, the leader it follows
// and its applied index. A server answers only over a connection of a
// node; a stranger cannot answer at all. The leader promotes it (raft
// AddVoter) once its answers, for Config.PromoteAfter without a break,
// have said that it is the server that joined, follows this leader in
// this term and has applied the log to within promoteMaxLagEntries of the
// leader's commit index (Consul's autopilot likewise waits for a server
// to be stable for a while before it votes).
//
// What the leader has observed lives in its memory only: a new leader
// observes the non-voters from the start (a promotion the old leader had
// appended either commits, and the new leader sees a voter, or is lost,
// and it sees a non-voter to observe). Membership changes on the leader
// take changeMu, so a promotion never re-adds a server an operator removed
// meanwhile. A non-voter that never catches up stays one, with the
// leader's reason in its status (api.Server.Promotion), until an operator
// removes it; at most Config.MaxPendingJoins are pending at once (a join
// beyond is refused), so that joins made with a leaked admin token cannot
// make the leader replicate to and probe ever more strangers.

// promoteMaxLagEntries is how far behind the leader's commit index a
// non-voter's applied index may be and still count as caught up (the
// entries a healthy follower has in flight under load).
const promoteMaxLagEntries = 256

// progress is a server's answer to wire.OpProgress.
type progress struct {
	id, leaderID string
	term         uint64
	applied      uint64
	lastLog      uint64
}

func encodeProgress(p progress) []byte {
	var w wire.Enc
	w.Str(p.id)
	w.Uvar(p.term)
	w.Str(p.leaderID)
	w.Uvar(p.applied)
	w.Uvar(p.lastLog)
	return w.B
}

func decodeProgress(b []byte) (progress, error) {
	r := wire.Dec{B: b}
	p := progress{id: r.Str(), term: r.Uvar(), leaderID: r.Str(), applied: r.Uvar(), lastLog: r.Uvar()}
	return p, r.Done()
}

// progressAnswer answers a wire.OpProgress from the leader, or from any
// node asking for this one's HTTP address too (payload progressWithHTTP,
// httpaddrs.go); on the raft port: only nodes of the cluster reach it.
func (n *Node) progressAnswer(payload []byte) ([]byte, error) {
	withHTTP := len(payload) == 1 && payload[0] == progressWithHTTP
	if len(payload) != 0 && !withHTTP {
		return nil, fmt.Errorf("%w: progress takes no payload or the byte %d (got %d bytes)", ErrInvalid, progressWithHTTP, len(payload))
	}
	_, lid := n.raft.LeaderWithID()
	p := progress{id: n.cfg.ID, term: n.raft.CurrentTerm(), leaderID: string(lid),
		applied: n.raft.AppliedIndex(), lastLog: n.raft.LastIndex()}
	if withHTTP {
		return encodeProgressWithHTTP(p, n.ownHTTPAddr()), nil
	}
	return encodeProgress(p), nil
}

// watched is what the leader observed of one non-voter.
type watched struct {
	addr raft.ServerAddress
	// since: when this leader began observing it; caughtUpFrom: the
	// first probe of the current unbroken run of caught-up answers (zero
	// if the last one was not).
	since, caughtUpFrom time.Time
	state, reason       string
	applied, commit     uint64
	conn                *fwdConn
}

// promoter is the leader's observation of the non-voters.
type promoter struct {
	mu    sync.Mutex
	term  uint64 // the term the observations were made in
	watch map[raft.ServerID]*watched
}

// reset forgets every observation (leadership lost, or a new term).
func (p *promoter) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.watch {
		if w.conn != nil {
			w.conn.Close()
		}
	}
	p.watch, p.term = nil, 0
}

// sync makes the observed set the configuration's non-voters in term,
// starting over for a new term or a server that moved.
func (p *promoter) sync(term uint64, nonvoters []raft.Server, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.term != term {
		for _, w := range p.watch {
			if w.conn != nil {
				w.conn.Close()
			}
		}
		p.watch, p.term = nil, term
	}
	keep := make(map[raft.ServerID]*watched, len(nonvoters))
	for _, s := range nonvoters {
		w := p.watch[s.ID]
		if w == nil || w.addr != s.Address {
			if w != nil && w.conn != nil {
				w.conn.Close()
			}
			w = &watched{addr: s.Address, since: now, state: api.PromotionUnreachable, reason: "not probed yet"}
		}
		keep[s.ID] = w
	}
	for id, w := range p.watch {
		if keep[id] == nil && w.conn != nil {
			w.conn.Close()
		}
	}
	p.watch = keep
}

// view returns the observation of id as of now (nil if none).
func (p *promoter) view(id raft.ServerID, now time.Time) *api.Promotion {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.watch[id]
	if w == nil {
		return nil
	}
	v := &api.Promotion{State: w.state, Reason: w.reason, AppliedIndex: w.applied, LeaderCommitIndex: w.commit,
		WatchedNs: int64(now.Sub(w.since))}
	if !w.caughtUpFrom.IsZero() {
		v.CaughtUpNs = int64(now.Sub(w.caughtUpFrom))
	}
	return v
}

// probeEvery is how often the leader probes each non-voter.
func (c *Config) probeEvery() time.Duration { return max(c.HeartbeatTimeout/2, 50*time.Millisecond) }

// probeTimeout bounds one probe, dial and handshake included.
func (c *Config) probeTimeout() time.Duration { return max(c.ElectionTimeout, time.Second) }

// promoteLoop probes the non-voters and promotes them while this node
// leads.
func (n *Node) promoteLoop() {
	t := time.NewTicker(n.cfg.probeEvery())
	defer t.Stop()
	defer n.promotion.reset()
	for {
		select {
		case <-n.stopCh:
			return
		case <-t.C:
			n.promoteRound(n.stopped) // a probe in flight ends when the node stops
		}
	}
}

// promoteRound probes every non-voter once and promotes those caught up
// for PromoteAfter.
func (n *Node) promoteRound(ctx context.Context) {
	term := n.raft.CurrentTerm()
	if n.raft.State() != raft.Leader || n.members.isRemoved() {
		n.promotion.reset()
		return
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	var nonvoters []raft.Server
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Nonvoter {
			nonvoters = append(nonvoters, s)
		}
	}
	n.promotion.sync(term, nonvoters, time.Now())
	if len(nonvoters) == 0 {
		return
	}
	commit := n.raft.CommitIndex()
	type outcome struct {
		s   raft.Server
		p   progress
		err error
	}
	out := make([]outcome, len(nonvoters))
	var wg sync.WaitGroup
	for i, s := range nonvoters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := n.probe(ctx, s)
			out[i] = outcome{s, p, err}
		}()
	}
	wg.Wait()
	now := time.Now()
	var ready []raft.Server
	n.promotion.mu.Lock()
	for _, o := range out {
		w := n.promotion.watch[o.s.ID]
		if w == nil || n.promotion.term != term {
			continue
		}
		w.commit = commit
		w.state, w.reason = judgeProgress(o.s.ID, n.cfg.ID, term, commit, o.p, o.err)
		if o.err == nil {
			w.applied = o.p.applied
		}
		if w.state != api.PromotionCaughtUp {
			w.caughtUpFrom = time.Time{}
			continue
		}
		if w.caughtUpFrom.IsZero() {
			w.caughtUpFrom = now
		}
		if now.Sub(w.caughtUpFrom) >= n.cfg.PromoteAfter {
			ready = append(ready, o.s)
		}
	}
	n.promotion.mu.Unlock()
	for _, s := range ready {
		if err := n.promote(s, term); err != nil {
			n.log.Warn("promotion of a caught-up non-voter failed; trying again", "id", s.ID, "error", err)
		}
	}
}

// judgeProgress decides a non-voter's state from its answer p (or the
// probe's failure err): caught up when it is the server id, follows
// leader in term and has applied to within promoteMaxLagEntries of
// commit.
func judgeProgress(id raft.ServerID, leader string, term, commit uint64, p progress, err error) (state, reason string) {
	switch {
	case err != nil:
		return api.PromotionUnreachable, err.Error()
	case p.id != string(id):
		return api.PromotionNotFollowing, fmt.Sprintf("the server at its address answers as %q", p.id)
	case p.term != term || p.leaderID != leader:
		return api.PromotionNotFollowing, fmt.Sprintf("it follows leader %q in term %d, not %q in term %d", p.leaderID, p.term, leader, term)
	case p.applied+promoteMaxLagEntries < commit:
		return api.PromotionBehind, fmt.Sprintf("applied %d of the leader's %d entries", p.applied, commit)
	}
	return api.PromotionCaughtUp, ""
}

// probe asks non-voter s for its progress over the cluster's network,
// on a connection kept for the next probes.
func (n *Node) probe(ctx context.Context, s raft.Server) (progress, error) {
	n.promotion.mu.Lock()
	w := n.promotion.watch[s.ID]
	var c *fwdConn
	if w != nil {
		c = w.conn
	}
	n.promotion.mu.Unlock()
	if w == nil {
		return progress{}, errors.New("no longer observed")
	}
	timeout := n.cfg.probeTimeout()
	if c == nil || c.Broken() {
		var err error
		if c, err = newFwdConn(n.cfg.Network, string(s.Address), timeout); err != nil {
			return progress{}, fmt.Errorf("no connection over the cluster's network: %v", err)
		}
		n.promotion.mu.Lock()
		if n.promotion.watch[s.ID] == w {
			if w.conn != nil {
				w.conn.Close()
			}
			w.conn = c
		} else {
			defer c.Close() // forgotten meanwhile: this probe is the last
		}
		n.promotion.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	code, resp, err := c.Call(ctx, wire.OpProgress, nil)
	if err != nil {
		c.Close()
		return progress{}, fmt.Errorf("no answer over the cluster's network (a server that refuses this node's certificate closes the connection): %v", err)
	}
	if code != wire.CodeOK {
		return progress{}, fmt.Errorf("it answered code %d: %s", code, resp)
	}
	p, err := decodeProgress(resp)
	if err != nil {
		return progress{}, fmt.Errorf("undecodable answer: %v", err)
	}
	return p, nil
}

// promote makes non-voter s a voter, if this node still leads in term and
// s is still a non-voter at the same address.
func (n *Node) promote(s raft.Server, term uint64) error {
	n.changeMu.Lock()
	defer n.changeMu.Unlock()
	if n.raft.State() != raft.Leader || n.raft.CurrentTerm() != term {
		return fmt.Errorf("%w: leadership lost", ErrNoLeader)
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return mapRaftErr(err)
	}
	if !slices.ContainsFunc(f.Configuration().Servers, func(c raft.Server) bool {
		return c.ID == s.ID && c.Address == s.Address && c.Suffrage == raft.Nonvoter
	}) {
		return nil // removed, moved or promoted meanwhile
	}
	v := n.promotion.view(s.ID, time.Now())
	if err := n.awaitFuture(n.raft.AddVoter(s.ID, s.Address, 0, n.cfg.ApplyTimeout)); err != nil {
		return mapRaftErr(err)
	}
	kv := []any{"id", s.ID, "raft_addr", s.Address}
	if v != nil {
		kv = append(kv, "applied_index", v.AppliedIndex, "leader_commit_index", v.LeaderCommitIndex, "caught_up_for", time.Duration(v.CaughtUpNs))
	}
	n.log.Info("non-voter caught up: promoted to voter", kv...)
	return nil
}
