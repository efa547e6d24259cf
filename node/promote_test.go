package node

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/api"
)

// serverOf returns the server id of n's status (and whether it is there).
func serverOf(n *Node, id string) (api.Server, bool) {
	for _, s := range n.Status().Servers {
		if s.ID == id {
			return s, true
		}
	}
	return api.Server{}, false
}

// startExtra starts node id, outside the cluster's initial members, on an
// empty data directory (it waits to be joined).
func (c *testCluster) startExtra(id string) *Node {
	c.t.Helper()
	c.mu.Lock()
	c.dirs[id] = c.t.TempDir()
	c.mu.Unlock()
	return c.start(id, nil)
}

// TestBogusJoinsNeverVoteAndTheQuorumHolds: the attack on a
// three-node cluster over mutual TLS. Strangers holding a leaked admin
// token join: n8 with a node certificate of another CA (trusting the
// cluster's CA), n9 with another CA altogether, n7 at an address where
// nothing listens. They are added as non-voters, a fourth join is refused
// at the cap, and however long the leader watches them they never vote:
// its status lists each with why. Then a real follower dies and the
// cluster still commits (with the strangers as voters, 3 of 6, it could
// not). An operator removes n7; a real node, n4, joins and is promoted
// once the leader has seen it caught up over mutual TLS; the cluster
// commits with it. Fails when joins add voters.
func TestBogusJoinsNeverVoteAndTheQuorumHolds(t *testing.T) {
	dir, roots := certsIn(t, "n1", "n2", "n3", "n4")
	foreign, foreignRoots := certsIn(t, "n8", "n9")
	const promoteAfter = 300 * time.Millisecond
	c := newTestClusterWithConfig(t, 3, func(cfg *Config) {
		cfg.PromoteAfter, cfg.MaxPendingJoins = promoteAfter, 3
		switch cfg.ID {
		case "n8": // another CA's certificate; it trusts the cluster's CA
			cfg.Network = NewTLSNetwork(cfg.Network, nodePair(t, foreign, cfg.ID), roots)
		case "n9":
			cfg.Network = NewTLSNetwork(cfg.Network, nodePair(t, foreign, cfg.ID), foreignRoots)
		default:
			cfg.Network = NewTLSNetwork(cfg.Network, nodePair(t, dir, cfg.ID), roots)
		}
	})
	l := c.leader()
	ctx := ctxTimeout(t, 60*time.Second)
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: "api", Config: longExpiry(t)}); return err })
	c.startExtra("n8")
	c.startExtra("n9")
	via := c.followers(l)[0] // joins go through a follower, as an HTTP join to any node does
	for _, id := range []string{"n7", "n8", "n9"} {
		var voter bool
		retryNoLeader(t, func() error { var err error; voter, err = via.Join(ctx, id, addrOf(id)); return err })
		if s, ok := serverOf(l, id); voter || !ok || s.Voter {
			t.Fatalf("join of %s: answered voter=%t, the leader lists it as %+v (listed: %t); want a non-voter", id, voter, s, ok)
		}
	}
	if _, err := via.Join(ctx, "n6", addrOf("n6")); !errors.Is(err, ErrConflict) || !strings.Contains(Message(err), "3 joined servers are not voters yet (n7, n8, n9)") {
		t.Fatalf("a join beyond the cap: %v, want ErrConflict naming the pending joins", err)
	}

	// The leader has watched them for several promotion periods: none
	// votes, and its status says why.
	waitFor(t, 20*time.Second, "the leader to watch every stranger for 4 promotion periods", func() bool {
		for _, id := range []string{"n7", "n8", "n9"} {
			s, ok := serverOf(l, id)
			if !ok || s.Voter || s.Promotion == nil || s.Promotion.WatchedNs < int64(4*promoteAfter) {
				return false
			}
		}
		return true
	})
	for _, id := range []string{"n7", "n8", "n9"} {
		s, _ := serverOf(l, id)
		t.Logf("%s: %+v", id, *s.Promotion)
		if s.Voter || s.Promotion.State != api.PromotionUnreachable || s.Promotion.CaughtUpNs != 0 {
			t.Errorf("stranger %s: %+v, want an unreachable non-voter", id, s)
		}
		if n := c.node(id); n != nil && n.fsm.AppliedIndex() != 0 {
			t.Errorf("stranger %s applied the log to %d", id, n.fsm.AppliedIndex())
		}
	}
	for _, id := range []string{"n8", "n9"} {
		if s, _ := serverOf(l, id); !strings.Contains(s.Promotion.Reason, "certificate") {
			t.Errorf("%s: the reason does not name the certificate: %q", id, s.Promotion.Reason)
		}
	}
	if v := l.voterCount(); v != 3 {
		t.Fatalf("%d voters, want 3", v)
	}

	// One real node fails: the two others are a quorum of three voters.
	c.kill(c.followers(l)[1].ID())
	retryNoLeader(t, func() error {
		_, err := l.PutLimit(ctx, fsm.PutLimit{Name: "after-kill", Config: longExpiry(t)})
		return err
	})

	// An operator removes a stranger; a real node joins and is promoted
	// once caught up.
	retryNoLeader(t, func() error { return l.Remove(ctx, "n7") })
	n4 := c.startExtra("n4")
	retryNoLeader(t, func() error { _, err := via.Join(ctx, "n4", addrOf("n4")); return err })
	waitFor(t, 20*time.Second, "n4 to be promoted", func() bool { s, ok := serverOf(l, "n4"); return ok && s.Voter })
	if _, ok := n4.fsm.Limit("after-kill"); !ok {
		t.Errorf("n4 was promoted without the limit committed before its join")
	}
	retryNoLeader(t, func() error {
		_, err := l.PutLimit(ctx, fsm.PutLimit{Name: "after-promotion", Config: longExpiry(t)})
		return err
	})
	for _, id := range []string{"n8", "n9"} {
		if s, _ := serverOf(l, id); s.Voter {
			t.Errorf("stranger %s became a voter", id)
		}
	}
	if v := l.voterCount(); v != 4 {
		t.Errorf("%d voters after n4's promotion, want 4 (n1-n4)", v)
	}
}

// TestPromotionNeedsCatchingUpAndANewLeaderObservesAfresh: n4 joins while
// cut off from the cluster and stays a non-voter however long it is
// watched; healed, it catches up. The leader hands over before promoting
// it: the new leader observes n4 from the start (its own watch begins
// after the transfer) and promotes it.
func TestPromotionNeedsCatchingUpAndANewLeaderObservesAfresh(t *testing.T) {
	const promoteAfter = 2 * time.Second
	c := newTestClusterWithConfig(t, 3, func(cfg *Config) { cfg.PromoteAfter = promoteAfter })
	l := c.leader()
	ctx := ctxTimeout(t, 60*time.Second)
	retryNoLeader(t, func() error { _, err := l.PutLimit(ctx, fsm.PutLimit{Name: "api", Config: longExpiry(t)}); return err })
	c.startExtra("n4")
	c.sw.Isolate(addrOf("n4"), []string{addrOf("n1"), addrOf("n2"), addrOf("n3")})
	retryNoLeader(t, func() error { _, err := l.Join(ctx, "n4", addrOf("n4")); return err })
	waitFor(t, 20*time.Second, "the leader to watch the cut-off n4 for longer than a promotion period", func() bool {
		s, ok := serverOf(l, "n4")
		return ok && s.Promotion != nil && s.Promotion.WatchedNs > int64(promoteAfter+promoteAfter/2)
	})
	if s, _ := serverOf(l, "n4"); s.Voter || s.Promotion.State != api.PromotionUnreachable {
		t.Fatalf("n4 cut off: %+v, want an unreachable non-voter", s)
	}
	c.sw.Heal()
	waitFor(t, 20*time.Second, "n4 to be seen caught up", func() bool {
		s, ok := serverOf(l, "n4")
		return ok && s.Promotion != nil && s.Promotion.State == api.PromotionCaughtUp
	})
	to := c.followers(l)[0]
	transferred := time.Now()
	retryNoLeader(t, func() error { return l.TransferLeadership(ctx, to.ID()) })
	// The old leader forgot what it saw, and the new one, if it has not
	// promoted n4 yet, has watched it only since it leads.
	if s, _ := serverOf(l, "n4"); s.Promotion != nil {
		t.Errorf("a former leader still reports a promotion view: %+v", s)
	}
	if s, _ := serverOf(to, "n4"); !s.Voter && s.Promotion != nil && s.Promotion.WatchedNs > int64(time.Since(transferred)) {
		t.Errorf("the new leader's watch of n4 began before it led: %+v", *s.Promotion)
	}
	waitFor(t, 20*time.Second, "the new leader to promote n4", func() bool { s, ok := serverOf(to, "n4"); return ok && s.Voter })
}

// TestProgressAndJoinAnswersDecode: the answers nodes exchange about
// membership round-trip, bytes from the network never panic (an error
// instead), and an empty join answer (a leader of a version that added
// joins as voters) means a voter.
func TestProgressAndJoinAnswersDecode(t *testing.T) {
	p := progress{id: "n4", leaderID: "n1", term: 7, applied: 1 << 40, lastLog: 1<<40 + 3}
	if got, err := decodeProgress(encodeProgress(p)); err != nil || got != p {
		t.Fatalf("progress round trip: %+v %v, want %+v", got, err, p)
	}
	for _, voter := range []bool{false, true} {
		if got, err := decodeJoined(encodeJoined(voter)); err != nil || got != voter {
			t.Fatalf("join answer %t: %t %v", voter, got, err)
		}
	}
	if got, err := decodeJoined(nil); err != nil || !got {
		t.Fatalf("an older leader's empty join answer: %t %v, want a voter", got, err)
	}
	whole := encodeProgress(p)
	for i := range len(whole) {
		if _, err := decodeProgress(whole[:i]); err == nil {
			t.Errorf("a progress answer cut to %d of %d bytes decoded", i, len(whole))
		}
	}
	for _, b := range [][]byte{{2}, {0, 0}, {1, 1}} {
		if _, err := decodeJoined(b); err == nil {
			t.Errorf("join answer %v decoded", b)
		}
	}
}
