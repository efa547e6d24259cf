package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/permitd/permitd/transport/client"
	"github.com/permitd/permitd/transport/tlsfiles"
)

// TestTLSCluster: three agents with `permitd certs create` certificates,
// --tls-* and --client-cert-auth. Raft runs over mutual TLS (a leader is
// elected and every member reports healthy), the CLI reaches the API over
// https with a client certificate, and the Go client's binary reserves go
// through TLS on the same port. A client without a certificate, one that
// does not trust the CA, and one that speaks plain HTTP are all refused.
func TestTLSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := permitdUnderTest(t)
	dir := t.TempDir()
	wantCode(t, runCLI(t, bin, nil, "certs", "create", "--out", dir, "--nodes", "n1,n2,n3", "--clients", "alice"), exitOK)
	file := func(name string) string { return filepath.Join(dir, name) }
	agents := newTestAgents(t, 3)
	var addrs []string
	for _, a := range agents {
		a.start(t, bin, nil, "agent", "--id", a.id, "--data-dir", a.dataDir, "--raft-addr", a.raftAddr,
			"--http-addr", a.httpAddr, "--initial-cluster", initialCluster(agents),
			"--tls-cert", file("node-"+a.id+".crt"), "--tls-key", file("node-"+a.id+".key"), "--tls-ca", file("ca.crt"), "--client-cert-auth")
		addrs = append(addrs, a.httpAddr)
	}
	all := strings.Join(addrs, ",")
	creds := []string{"--tls-ca", file("ca.crt"), "--tls-cert", file("client-alice.crt"), "--tls-key", file("client-alice.key")}
	cli := func(args ...string) cliResult { return runCLI(t, bin, nil, append(args, creds...)...) }

	wantCode(t, cli("status", "--servers", all, "--wait", "30s"), exitOK)
	// The nodes tell each other their HTTP addresses over the mutual TLS
	// of the raft port: status given one node asks all three over https.
	if r := cli("status", "--servers", agents[2].httpAddr, "--wait", "10s"); r.code != exitOK || strings.Count(r.stdout, " follower ")+strings.Count(r.stdout, " leader ") != 3 {
		t.Fatalf("status over TLS given n3 alone: want the 3 nodes, healthy: %v", r)
	}
	wantCode(t, cli("limits", "put", "api", "--algorithm", "strict", "--rate", "10", "--per", "1s", "--servers", all), exitOK)
	if r := cli("reserve", "api", "--servers", all); r.code != exitOK || !strings.Contains(r.stdout, `"granted":true`) {
		t.Fatalf("reserve over TLS: exit %d, stdout %s, stderr %s", r.code, r.stdout, r.stderr)
	}

	// The binary protocol inside TLS, on the API port.
	conf, err := tlsfiles.Client(file("ca.crt"), file("client-alice.crt"), file("client-alice.key"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(addrs, client.WithTLS(conf), client.WithBinaryReserves(1), client.WithoutSessions())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := c.Reserve(ctx, "api", 1, time.Second)
	if err != nil { // granted or refused (the CLI's reserve just took the slot): an answer either way
		t.Fatalf("binary reserve over TLS: %+v, %v", g, err)
	}

	// Refused: no client certificate, a CA the client does not have, plain
	// HTTP, and binary calls without TLS.
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no client certificate", []string{"--tls-ca", file("ca.crt")}},
		{"no CA: the system's roots do not know the cluster's", []string{"--tls-cert", file("client-alice.crt"), "--tls-key", file("client-alice.key")}},
		{"plain HTTP", nil},
	} {
		r := runCLI(t, bin, nil, append([]string{"status", "--servers", agents[0].httpAddr, "--timeout", "3s"}, tc.args...)...)
		if r.code == exitOK {
			t.Errorf("%s: status answered (exit 0): %s", tc.name, r.stdout)
		}
	}
	plain, err := client.New(addrs[:1], client.WithBinaryReserves(1), client.WithoutSessions(), client.WithRounds(1), client.WithAttemptTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if g, err := plain.Reserve(ctx, "api", 1, 0); err == nil {
		t.Errorf("a binary reserve without TLS was answered: %+v", g)
	}
}
