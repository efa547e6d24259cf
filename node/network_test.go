package node

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/permitd/permitd/fsm"
	"github.com/permitd/permitd/transport/devcerts"
)

// strangerLayer is a raft.StreamLayer that only dials (a process that is
// not a member, talking raft to one).
type strangerLayer struct{ network Network }

func (s strangerLayer) Accept() (net.Conn, error) { return nil, io.EOF }
func (s strangerLayer) Close() error              { return nil }
func (s strangerLayer) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (s strangerLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return dialKind(s.network, string(addr), timeout, connRaft)
}

// certsIn makes node certificates for ids (valid for every test host) in
// a new folder and returns it with its CA pool.
func certsIn(t *testing.T, ids ...string) (string, *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	hosts := []string{"n1", "n2", "n3", "n4", "n8", "n9"}
	if _, err := devcerts.Create(devcerts.Request{Dir: dir, Nodes: ids, Hosts: hosts, Validity: time.Hour, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(filepath.Join(dir, devcerts.CACert))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	return dir, roots
}

func nodePair(t *testing.T, dir, id string) tls.Certificate {
	t.Helper()
	c, k := devcerts.NodeFiles(id)
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, c), filepath.Join(dir, k))
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// TestTLSNetworkKeepsStrangersOut: a 3-node cluster over mutual TLS
// elects a leader and commits; a stranger, with a node certificate of
// another CA, with an API client certificate of the cluster's CA, or
// with no TLS at all, sends the leader a raft RequestVote
// of a far higher term: the call fails (a plain-TCP cluster answers it:
// the test fails with the cluster's TLS removed), and the leader, its
// term and the state are unchanged.
func TestTLSNetworkKeepsStrangersOut(t *testing.T) {
	dir, roots := certsIn(t, "n1", "n2", "n3")
	foreign, _ := certsIn(t, "n9")
	// The same CA's API client certificate: client authentication only.
	if _, err := devcerts.Create(devcerts.Request{Dir: dir, Clients: []string{"app"}, Validity: time.Hour, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	cc, ck := devcerts.ClientFiles("app")
	client, err := tls.LoadX509KeyPair(filepath.Join(dir, cc), filepath.Join(dir, ck))
	if err != nil {
		t.Fatal(err)
	}
	c := newTestClusterWithConfig(t, 3, func(cfg *Config) {
		cfg.Network = NewTLSNetwork(cfg.Network, nodePair(t, dir, cfg.ID), roots)
	})
	l := c.leader()
	ctx := ctxTimeout(t, 30*time.Second)
	retryNoLeader(t, func() error {
		_, err := l.PutLimit(ctx, fsm.PutLimit{Name: "api", Config: strictConfig(t, time.Second, 1)})
		return err
	})
	term := l.raft.CurrentTerm()
	// The strangers trust the cluster's CA: what refuses them is the
	// node's check of their certificate.
	for name, network := range map[string]Network{
		"another CA's node certificate":   NewTLSNetwork(c.sw.Host("n9:7000"), nodePair(t, foreign, "n9"), roots),
		"the cluster CA's API client one": NewTLSNetwork(c.sw.Host("n9:7000"), client, roots),
		"no TLS":                          c.sw.Host("n9:7000"),
	} {
		start := time.Now()
		trans := raft.NewNetworkTransport(strangerLayer{network}, 1, 500*time.Millisecond, io.Discard)
		var resp raft.RequestVoteResponse
		err := trans.RequestVote(raft.ServerID(l.ID()), raft.ServerAddress(addrOf(l.ID())), &raft.RequestVoteRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n9"), Addr: []byte("n9:7000")},
			Term:      term + 100, LastLogIndex: 1 << 40, LastLogTerm: term + 99,
		}, &resp)
		trans.Close()
		t.Logf("%s: %v after %v", name, err, time.Since(start).Round(time.Millisecond))
		if err == nil {
			t.Errorf("%s: the leader answered a stranger's RequestVote: %+v", name, resp)
		}
	}
	if got := l.raft.CurrentTerm(); got != term || l.raft.State() != raft.Leader {
		t.Errorf("after the strangers' RequestVotes the leader is %v at term %d, was leader at term %d", l.raft.State(), got, term)
	}
	if _, ok := l.fsm.Limit("api"); !ok {
		t.Errorf("the limit committed over TLS is gone")
	}
}
