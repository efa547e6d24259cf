package main

import (
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// newMemMember starts a memberlist on n whose sent bytes add to sent.
func newMemMember(t *testing.T, n *memNetwork, name string, sent *atomic.Int64) (*memberlist.Memberlist, string) {
	t.Helper()
	tr, port, err := n.newTransport(sent)
	if err != nil {
		t.Fatal(err)
	}
	c := memberlist.DefaultLANConfig()
	c.Name = name
	c.Transport = tr
	c.AdvertiseAddr, c.AdvertisePort = "127.0.0.1", port
	c.LogOutput = io.Discard
	m, err := memberlist.Create(c)
	if err != nil {
		t.Fatal(err)
	}
	return m, tr.addr.String()
}

func mustTransport(t *testing.T, n *memNetwork, sent *atomic.Int64) *memTransport {
	t.Helper()
	tr, _, err := n.newTransport(sent)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestMemNetworkCarriesGossipAndCountsIt(t *testing.T) {
	n := newMemNetwork()
	var sentA, sentB atomic.Int64
	a, addrA := newMemMember(t, n, "a", &sentA)
	defer a.Shutdown()
	b, _ := newMemMember(t, n, "b", &sentB)
	defer b.Shutdown()
	// Join is a push/pull over a stream: both ends' writes count.
	if k, err := b.Join([]string{addrA}); err != nil || k != 1 {
		t.Fatalf("join = %d, %v; want 1 and no error", k, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for a.NumMembers() != 2 || b.NumMembers() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("members: a sees %d, b sees %d; want 2 each", a.NumMembers(), b.NumMembers())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if sentA.Load() == 0 || sentB.Load() == 0 {
		t.Fatalf("bytes counted: a %d, b %d; want both above 0", sentA.Load(), sentB.Load())
	}
	// Probes are packets: a's count keeps growing while b answers.
	before := sentA.Load()
	for sentA.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("a sent nothing more after the join (probes are packets)")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMemNetworkDropsWhatNobodyReceives(t *testing.T) {
	n := newMemNetwork()
	var sent atomic.Int64
	a := mustTransport(t, n, &sent)
	b := mustTransport(t, n, &sent)
	to := memberlist.Address{Addr: b.addr.String()}
	// A full queue drops, as a full socket buffer does.
	for range memPacketQueue + 5 {
		if _, err := a.WriteToAddress([]byte("x"), to); err != nil {
			t.Fatal(err)
		}
	}
	if got := n.dropped.Load(); got != 5 {
		t.Fatalf("dropped %d at a full queue, want 5", got)
	}
	if got := sent.Load(); got != memPacketQueue+5 {
		t.Fatalf("counted %d bytes, want %d (a datagram counts as sent whether or not it arrives)", got, memPacketQueue+5)
	}
	// The receiver gets a copy: the sender may reuse its buffer.
	buf := []byte("y")
	c := mustTransport(t, n, &sent)
	if _, err := a.WriteToAddress(buf, memberlist.Address{Addr: c.addr.String()}); err != nil {
		t.Fatal(err)
	}
	buf[0] = 'z'
	if p := <-c.PacketCh(); string(p.Buf) != "y" || p.From.String() != a.addr.String() {
		t.Fatalf("packet %q from %v, want \"y\" from %v", p.Buf, p.From, a.addr)
	}
	// A shut-down receiver is gone: packets drop, dials fail at once.
	_ = b.Shutdown()
	_ = b.Shutdown() // twice is harmless
	if _, err := a.WriteToAddress([]byte("x"), to); err != nil {
		t.Fatal(err)
	}
	if got := n.dropped.Load(); got != 6 {
		t.Fatalf("dropped %d after the receiver shut down, want 6", got)
	}
	if _, err := a.DialAddressTimeout(to, time.Minute); err == nil || !strings.Contains(err.Error(), "no member at") {
		t.Fatalf("dial to a shut-down member: %v, want \"no member at\"", err)
	}
	// A member that never accepts lets the dial time out.
	if _, err := a.DialAddressTimeout(memberlist.Address{Addr: c.addr.String()}, 20*time.Millisecond); err == nil || !strings.Contains(err.Error(), "accepted no stream") {
		t.Fatalf("dial to a member that does not accept: %v, want a timeout", err)
	}
}
