package worker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// TestStealOverMockNetwork runs two workers of different groups on
// memberlist's in-memory MockNetwork: the donor's callers go quiet, the
// taker is cut off from the register, and the taker lives on what the
// donor gives it ((1 - StealBias) of its spare, debited before sending).
func TestStealOverMockNetwork(t *testing.T) {
	reg := newFakeRegister(t, time.Now())
	reg.putLeased(testLimit, 1000, 300, 300)
	mock := &memberlist.MockNetwork{}
	names := []string{"donor", "taker"}
	transports := []*memberlist.MockTransport{mock.NewTransport(names[0]), mock.NewTransport(names[1])}
	ip, port, err := transports[0].FinalAdvertiseAddr("", 0)
	if err != nil {
		t.Fatal(err)
	}
	seed := net.JoinHostPort(ip.String(), strconv.Itoa(port))
	links := []*link{{r: reg}, {r: reg}}
	var ws []*Worker
	for i, name := range names {
		mlc := memberlist.DefaultLocalConfig()
		mlc.Transport = transports[i]
		w, err := New(Config{Name: name, Group: name, Limit: testLimit, Register: links[i], Gossip: mlc, Join: []string{seed},
			TTL: 300 * time.Millisecond, RenewEvery: 150 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	defer func() {
		for _, w := range ws {
			_ = w.Stop(context.Background())
		}
	}()
	donor, taker := ws[0], ws[1]
	waitFor(t, 2*time.Second, "the two see each other", func() bool { return len(taker.Status().Members) == 2 })

	// Both busy until the taker has a share; then the taker is cut off
	// and the donor's callers go quiet.
	waitFor(t, 2*time.Second, "both granted", func() bool {
		_, _ = donor.TryAcquire(1, time.Millisecond)
		_, _ = taker.TryAcquire(1, time.Millisecond)
		return donor.Stats().Renewals >= 2 && taker.Stats().Renewals >= 2 && donor.Status().GrantPermitsLeft > 10
	})
	links[1].cut.Store(true)
	waitFor(t, 2*time.Second, "the taker spends stolen permits", func() bool {
		_, _ = taker.TryAcquire(1, 5*time.Millisecond)
		return taker.Stats().SpentStolenPermits > 0
	})
	d, tk := donor.Stats(), taker.Stats()
	t.Logf("donor gave %d in %d answers, taker received %d and spent %d of them", d.StolenOutPermits, d.StealsServed, tk.StolenInPermits, tk.SpentStolenPermits)
	if tk.StolenInPermits > d.StolenOutPermits {
		t.Errorf("taker received %d, donor gave %d", tk.StolenInPermits, d.StolenOutPermits)
	}
}

// TestRejoinMergesWhenTheSeedComesBack: a worker whose seed is down at
// Start is alone; when the seed comes up, the periodic rejoin merges them.
func TestRejoinMergesWhenTheSeedComesBack(t *testing.T) {
	// Reserve a port for the seed (TCP and UDP), free it, and start the
	// seed on it only after the other worker.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	seed := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	reg := newFakeRegister(t, time.Now())
	reg.putLeased(testLimit, 1000, 300, 300)
	start := func(name string, bindPort int, join []string) *Worker {
		mlc := memberlist.DefaultLocalConfig()
		mlc.BindAddr, mlc.BindPort = "127.0.0.1", bindPort
		return startGossiper(t, reg, name, mlc, join, 100*time.Millisecond)
	}
	late := start("late", 0, []string{seed})
	if n := len(late.Status().Members["g"]); n != 1 {
		t.Fatalf("with its seed down the worker sees %d members, want itself alone", n)
	}
	first := start("seed", port, nil)
	waitFor(t, 3*time.Second, "the two merge", func() bool {
		return len(late.Status().Members["g"]) == 2 && len(first.Status().Members["g"]) == 2
	})
}

// TestOnlyAFewMembersRejoinAfterADeparture: when a member of twelve
// leaves, the others see the count drop, and only rejoinersPerDrop of
// them join the seed list again (every one did: a thousand push/pulls of
// the whole member list with the seeds for one departure in a fleet of a
// thousand).
func TestOnlyAFewMembersRejoinAfterADeparture(t *testing.T) {
	reg := newFakeRegister(t, time.Now())
	reg.putLeased(testLimit, 1000, 300, 300)
	const n = 12
	var ws []*Worker
	var seed []string
	for i := range n {
		mlc := memberlist.DefaultLocalConfig()
		mlc.BindAddr, mlc.BindPort = "127.0.0.1", 0
		// A member that missed a join's few gossip retransmissions learns
		// of it at the next push/pull (see doc.go, Membership).
		mlc.PushPullInterval = 100 * time.Millisecond
		w := startGossiper(t, reg, fmt.Sprintf("w%02d", i), mlc, seed, 20*time.Millisecond)
		ws = append(ws, w)
		if i == 0 {
			seed = []string{w.ml.LocalNode().Address()}
		}
	}
	stay := ws[:n-1]
	sees := func(k int) func() bool {
		return func() bool {
			for _, w := range stay {
				if w.ml.NumMembers() != k {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, 20*time.Second, "all twelve see each other", sees(n))
	var before uint64
	for _, w := range stay {
		before += w.Stats().GossipRejoins
	}
	if err := ws[n-1].Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the other eleven see it gone (by its leave message, or by failed probes if that was lost)", sees(n-1))
	// Every rejoin loop has ticked twice since: a member that was to
	// rejoin has. (The seed, w00, has no seed list and no rejoin loop.)
	checks := make([]uint64, len(stay))
	for i, w := range stay {
		checks[i] = w.rejoinChecks.Load()
	}
	waitFor(t, 5*time.Second, "every rejoin loop ticked twice", func() bool {
		for i := 1; i < len(stay); i++ {
			if stay[i].rejoinChecks.Load() < checks[i]+2 {
				return false
			}
		}
		return true
	})
	var rejoins uint64
	for _, w := range stay {
		rejoins += w.Stats().GossipRejoins
	}
	if got := rejoins - before; got < 1 || got > rejoinersPerDrop {
		t.Fatalf("%d of %d members joined the seed list again after one left; want 1..%d", got, len(stay), rejoinersPerDrop)
	}
}

// TestRejoinersAfterADropAreAFewAgreedOnes: members with the same view
// agree on who rejoins: exactly rejoinersPerDrop of them, or all when
// there are no more.
func TestRejoinersAfterADropAreAFewAgreedOnes(t *testing.T) {
	for _, size := range []int{1, 2, 3, 4, 12, 1000} {
		var live []*memberlist.Node
		for i := range size {
			live = append(live, &memberlist.Node{Name: fmt.Sprintf("worker-%d", i)})
		}
		chosen := 0
		for _, n := range live {
			if rejoinsAfterDrop(n.Name, live) {
				chosen++
			}
		}
		if want := min(size, rejoinersPerDrop); chosen != want {
			t.Errorf("%d live members: %d rejoin, want %d", size, chosen, want)
		}
	}
}

// TestChosenRejoinersRetryUntilASeedAnswers: when the seed is cut off
// (no leave message: the others find it dead), the members that saw the
// count drop (all are chosen in a fleet of three) dial the seed list every
// RejoinEvery until it answers, and merge with it when it is back. (That
// they then stop is not shown here: once merged the count is back and the
// loop skips the join either way.)
func TestChosenRejoinersRetryUntilASeedAnswers(t *testing.T) {
	reg := newFakeRegister(t, time.Now())
	reg.putLeased(testLimit, 1000, 300, 300)
	start := func(name string, tr memberlist.NodeAwareTransport, join []string) *Worker {
		mlc := memberlist.DefaultLocalConfig()
		if tr != nil {
			mlc.Transport = tr
		} else {
			mlc.BindAddr, mlc.BindPort = "127.0.0.1", 0
		}
		return startGossiper(t, reg, name, mlc, join, 20*time.Millisecond)
	}
	seedTr := newIsolatingTransport(t, 0)
	seed := []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(seedTr.GetAutoBindPort()))}
	first := start("seed", seedTr, nil)
	a, b := start("a", nil, seed), start("b", nil, seed)
	all := func(k int) func() bool {
		return func() bool { return first.ml.NumMembers() == k && a.ml.NumMembers() == k && b.ml.NumMembers() == k }
	}
	waitFor(t, 20*time.Second, "the three see each other", all(3))
	seedTr.cut.Store(true)
	waitFor(t, 20*time.Second, "a and b find the seed dead", func() bool {
		return a.ml.NumMembers() == 2 && b.ml.NumMembers() == 2
	})
	// Each keeps dialing the seed list while nobody answers there (one
	// attempt and then giving up left a half without seeds alone for good).
	ra, rb := a.Stats().GossipRejoins, b.Stats().GossipRejoins
	waitFor(t, 5*time.Second, "a and b dial the seed list again and again", func() bool {
		return a.Stats().GossipRejoins >= ra+3 && b.Stats().GossipRejoins >= rb+3
	})
	seedTr.cut.Store(false)
	waitFor(t, 20*time.Second, "the three merge again", all(3))
}

// startGossiper starts a worker of group "g" gossiping on mlc, joining
// join and checking its membership every rejoinEvery; it stops with the
// test.
func startGossiper(t *testing.T, reg Register, name string, mlc *memberlist.Config, join []string, rejoinEvery time.Duration) *Worker {
	t.Helper()
	w, err := New(Config{Name: name, Group: "g", Limit: testLimit, Register: reg, Gossip: mlc, Join: join,
		TTL: 300 * time.Millisecond, RenewEvery: 150 * time.Millisecond, RejoinEvery: rejoinEvery})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return w
}

// TestStealCandidatesAreOwnGroupFirst: a worker asks the members of its
// own group for idle permits before any other group's (README: "its own
// group first"), each part in random order, itself never.
func TestStealCandidatesAreOwnGroupFirst(t *testing.T) {
	m := newMembers("self")
	for _, n := range []struct{ name, group string }{{"self", "A"}, {"a1", "A"}, {"a2", "A"}, {"b1", "B"}, {"b2", "B"}, {"b3", "B"}} {
		m.set(&memberlist.Node{Name: n.name, Meta: meta{Group: n.group, Name: n.name}.append(nil)})
	}
	seenFirst := map[string]bool{}
	for range 50 {
		c := m.candidates("A", 4)
		if len(c) != 4 || !strings.HasPrefix(c[0], "a") || !strings.HasPrefix(c[1], "a") ||
			!strings.HasPrefix(c[2], "b") || !strings.HasPrefix(c[3], "b") {
			t.Fatalf("candidates %v: want a1 and a2 (in either order), then two of group B, and never self", c)
		}
		seenFirst[c[0]] = true
	}
	if len(seenFirst) != 2 {
		t.Errorf("over 50 rounds only %v came first: the own group's order is not shuffled", seenFirst)
	}
}
