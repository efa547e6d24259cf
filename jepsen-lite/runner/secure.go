package runner

import (
	"bufio"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/permitd/permitd/jepsen-lite/checker"
	"github.com/permitd/permitd/jepsen-lite/runner/cluster"
	"github.com/permitd/permitd/jepsen-lite/runner/internal/secure"
	"github.com/permitd/permitd/jepsen-lite/runner/workload"
	"github.com/permitd/permitd/transport/client"
)

// A secure run (Config.Secure): before the agents start, the runner makes
// with the permitd binary, in the report's secure/ directory, a CA and a
// certificate per node (`permitd certs create`; subject alternative names:
// every node address, 127.0.0.1 and localhost; the CA's key is removed
// once they are signed), an admin token and, for the leased workload, a
// worker token (`permitd tokens create`), and the token file (hashes
// only). Every agent gets --tls-cert, --tls-key, --tls-ca and
// --token-file: the API (HTTP and binary) over TLS 1.3, raft over mutual
// TLS, a token on every request but /healthz and /readyz. The runner's Go
// clients (the limit's puts, the workers, the nemesis's puts, the probes)
// and its raw requests (status, test hooks, final state) use TLS with the
// CA and the admin token; the worker sidecars get --tls-ca and the worker
// token in PERMITD_TOKEN (their own HTTP API stays plain, on loopback).
// The secrets live only in the runner's memory and the sidecars'
// environment. After the run, every agent's log must show each of its
// listeners with tls=true and tokens=true, or the run is incomplete.

// secureDir is the credentials' directory in the report.
const secureDir = "secure"

// SecurityReport is a secure run's part of the summary.
type SecurityReport struct {
	// Dir holds ca.crt, the node certificates and keys and the token
	// file, relative to the report directory.
	Dir string `json:"dir"`
	// CertHosts are the node certificates' subject alternative names.
	CertHosts []string `json:"node_cert_hosts"`
	// Tokens are the token file's tokens (names and roles, no secrets).
	Tokens []secure.Token `json:"tokens"`
	// AgentListeners counts, per agent, the starts whose log line
	// "listening" said tls=true and tokens=true.
	AgentListeners map[string]int `json:"agent_secure_listeners"`
}

// secureCluster makes a secure run's credentials for cl's agents (at their
// final addresses) and makes cl start them with TLS and tokens. A plain
// run gets nil and no error.
func (r *run) secureCluster(ctx context.Context, bin string, cl *cluster.Cluster, sum *Summary) (*secure.Creds, error) {
	if !r.cfg.Secure {
		return nil, nil
	}
	creds, err := secure.Create(ctx, secure.Request{
		Bin: bin, Dir: filepath.Join(r.cfg.OutDir, secureDir), Nodes: cluster.IDs(cl.Nodes), Addrs: cl.Addrs(),
		Worker: r.cfg.Workload == WorkloadLeased,
	})
	if err != nil {
		return nil, err
	}
	cl.Secure(creds)
	r.creds = creds
	sum.Security = &SecurityReport{Dir: secureDir, CertHosts: creds.CertHosts(), Tokens: creds.Tokens(), AgentListeners: map[string]int{}}
	var names []string
	for _, t := range creds.Tokens() {
		names = append(names, t.Name+" ("+t.Role+")")
	}
	r.logf("secure: TLS with a CA and node certificates for %s, tokens %s, in %s", strings.Join(creds.CertHosts(), ","), strings.Join(names, ", "), creds.Dir())
	return creds, nil
}

// client returns a Go client of the runner's own (the limit's puts, the
// nemesis's puts, the probes) for servers: 2 s attempts; in a secure run
// TLS and the admin token.
func (r *run) client(servers []string) (*client.Client, error) {
	return client.New(servers, append([]client.Option{client.WithAttemptTimeout(2 * time.Second)}, r.creds.ClientOptions()...)...)
}

// workloadConfig is what package workload needs of the run, a secure
// run's credentials included.
func (r *run) workloadConfig() workload.Config {
	wc := r.cfg.workloadConfig()
	wc.Creds = r.creds
	return wc
}

// checkSecureListeners checks, in a secure run, that every agent logged
// at least one listener and each with tls=true and tokens=true (the
// agents' own word that the run was secure), counting them into sec; it
// returns the problems.
func checkSecureListeners(logs []checker.Log, sec *SecurityReport) []string {
	if sec == nil {
		return nil
	}
	var errs []string
	for _, l := range logs {
		node := strings.TrimSuffix(l.Name, ".log")
		n := 0
		sc := bufio.NewScanner(strings.NewReader(l.Text))
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.Contains(line, "listening:") {
				continue
			}
			if !strings.Contains(line, " tls=true") || !strings.Contains(line, " tokens=true") {
				errs = append(errs, fmt.Sprintf("secure: agent %s listened without TLS or tokens: %s", node, line))
				continue
			}
			n++
		}
		sec.AgentListeners[node] = n
		if n == 0 {
			errs = append(errs, fmt.Sprintf("secure: agent %s never logged a listener with tls=true tokens=true", node))
		}
	}
	return errs
}
