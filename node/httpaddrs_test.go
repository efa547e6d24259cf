package node

import (
	"testing"
	"time"
)

// TestMembersLearnHTTPAddrs: over the cluster's mutual TLS, every node's
// status lists every member's HTTP address (its own as SetHTTPAddr set
// it, the others' as they told it). A dead member keeps its last address
// and Status does not wait for it; restarted with another address, it is
// learned again; a member that never set one has none. Fails without the
// address exchange (httpaddrs.go).
func TestMembersLearnHTTPAddrs(t *testing.T) {
	dir, roots := certsIn(t, "n1", "n2", "n3")
	c := newTestClusterWithConfig(t, 3, func(cfg *Config) {
		cfg.Network = NewTLSNetwork(cfg.Network, nodePair(t, dir, cfg.ID), roots)
	})
	want := map[string]string{"n1": "10.0.0.1:8001", "n2": "10.0.0.2:8001", "n3": ""} // n3 sets none yet
	for _, id := range []string{"n1", "n2"} {
		c.node(id).SetHTTPAddr(want[id])
		c.node(id).httpAddrs.testRefresh.Store(int64(100 * time.Millisecond))
	}
	agree := func(ids ...string) func() bool {
		return func() bool {
			for _, id := range ids {
				for member, addr := range want {
					if s, ok := serverOf(c.node(id), member); !ok || s.HTTPAddr != addr {
						return false
					}
				}
			}
			return true
		}
	}
	waitFor(t, 10*time.Second, "n1 and n2 to know n1's and n2's HTTP addresses, and none of n3", agree("n1", "n2", "n3"))

	c.node("n3").SetHTTPAddr("10.0.0.3:8001")
	want["n3"] = "10.0.0.3:8001"
	waitFor(t, 10*time.Second, "every node to know n3's HTTP address", agree("n1", "n2", "n3"))

	c.kill("n3")
	start := time.Now()
	for range 10 {
		if s, _ := serverOf(c.node("n1"), "n3"); s.HTTPAddr != want["n3"] {
			t.Fatalf("n1 forgot dead n3's last address: %+v", s)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("10 status reads with n3 dead took %v", d)
	}

	n3 := c.start("n3", nil) // its data directory: it rejoins
	n3.SetHTTPAddr("10.0.0.3:9001")
	want["n3"] = "10.0.0.3:9001"
	waitFor(t, 15*time.Second, "every node to learn restarted n3's new HTTP address", agree("n1", "n2", "n3"))
}

// TestProgressAnswerForms: an empty payload gets the progress alone (what
// the leader's promotion probes, and older nodes, read); the byte
// progressWithHTTP gets the HTTP address after it; anything else is
// invalid.
func TestProgressAnswerForms(t *testing.T) {
	c := newTestCluster(t, 1)
	n := c.leader()
	n.SetHTTPAddr("127.0.0.1:8001")
	b, err := n.progressAnswer(nil)
	if p, derr := decodeProgress(b); err != nil || derr != nil || p.id != "n1" {
		t.Fatalf("progress alone: %+v %v %v", p, err, derr)
	}
	b, err = n.progressAnswer([]byte{progressWithHTTP})
	if p, addr, derr := decodeProgressWithHTTP(b); err != nil || derr != nil || p.id != "n1" || addr != "127.0.0.1:8001" {
		t.Fatalf("progress with the HTTP address: %+v %q %v %v", p, addr, err, derr)
	}
	for _, bad := range [][]byte{{2}, {1, 1}} {
		if _, err := n.progressAnswer(bad); err == nil {
			t.Errorf("payload %v accepted", bad)
		}
	}
}
